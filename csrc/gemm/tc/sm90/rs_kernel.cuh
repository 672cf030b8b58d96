// tc:ws_tf32_rs: the TF32 Hopper kernel that reads one MN-major operand through registers
// (wgmma's register A operand) instead of having it transposed first: tc:ws_persistent's producer,
// ring and tile order (mainloop.cuh, scheduler.cuh), its own fragment loads and epilogue.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "gemm/tc/sm90/config.cuh"
#include "gemm/tc/sm90/mainloop.cuh"
#include "gemm/tc/sm90/ptx.cuh"
#include "gemm/tc/sm90/scheduler.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// ---- tc:ws_tf32_rs: TF32 with one MN-major operand, read into registers ----
//
// TF32 wgmma reads shared-memory operands K-major only, so tc:ws_persistent takes mm's usual
// row-major B only after cudasteps::transpose has rewritten it: a pass over B that cost about a
// tenth of a 4096^3 TF32 product on an H100. But wgmma can take its A operand from registers, in
// whatever layout the threads load it. This kernel computes
//   D[r, s] = sum_k R[r, k] * S[s, k]
// with S, the K-major operand, read by wgmma from shared memory as in tc:ws_persistent, and R, the
// MN-major one, brought by TMA in BK-element MN blocks and loaded by each consumer thread into its
// wgmma fragment. kSwap picks the roles:
//   kSwap:  R = B (row-major, k-rows of n), S = A (row-major): D = C^T, stored as C[s, r]
//           (mm(a, b) of two row-major matrices);
//   !kSwap: R = A (column-major, e.g. x.t()), S = B (column-major, e.g. w.t()): D = C.
// The producer, the ring and the tile order are tc:ws_persistent's (no split-K, no clusters).
//
// Fragments: a warp's part of wgmma's tf32 A operand (m64 k8) is rows 16w + l/4 and 16w + l/4 + 8
// at columns l%4 and l%4 + 4 (lane l). The rows of the tile are renumbered so that lane l's two
// rows are neighbours in memory (one 8-byte load per k-row) and the 16 lanes of a half-warp, which
// read k-rows l%4 (or l%4 + 4) of the 128-byte swizzle (16-byte chunk c of k-row k stored at
// c ^ (k % 8)), hit 16 different 8-byte bank pairs: lane l of warp w takes rows
// rs_row(w, l/4) and rs_row(w, l/4) + 1 of the consumer warpgroup's 64 (rs_row below). The
// epilogue undoes the renumbering: the two neighbours are two adjacent outputs of C (one 8-byte
// store) when kSwap, two adjacent rows otherwise.
template <int BN>
using RsCfg = HopperCfg<TcType::kTF32, BN>;

// 16-byte chunk, within its 128-byte k-row, of the two rows warp w's lane group g (= lane / 4)
// loads; they are floats 2 (g % 2) and 2 (g % 2) + 1 of the chunk. The 8 groups of a warp take 4
// chunks; warps 2q and 2q + 1 share the 32-row MN block q.
__device__ __forceinline__ int rs_chunk(int warp, int g) {
  return 2 * (warp % 2) + g / 4 + 4 * ((g / 2) % 2);
}

// First of the two tile rows (of a consumer warpgroup's 64) that lane group g of warp w holds.
__device__ __forceinline__ int rs_row(int warp, int g) {
  return 32 * (warp / 2) + 4 * rs_chunk(warp, g) + 2 * (g % 2);
}

// 8 bytes of shared memory (a lane's two rows at one k) as two tf32 fragment registers.
__device__ __forceinline__ void lds_pair(uint32_t addr, uint32_t& lo, uint32_t& hi) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(lo), "=r"(hi) : "r"(addr) : "memory");
}

template <int BN, bool kSwap>
__global__ void __launch_bounds__(384, 1)
    wgmma_ws_rs_kernel(const __grid_constant__ CUtensorMap map_r,
                       const __grid_constant__ CUtensorMap map_s, const HopperParams p,
                       const Epilogue<TcType::kTF32> ep) {
  constexpr TcType T = TcType::kTF32;
  using Cfg = RsCfg<BN>;
  constexpr int S = Cfg::kStages;
  static_assert(Cfg::kKSteps == 4, "a k-tile is four k8 steps: 16 fragment registers");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + S * Cfg::kStageBytes);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);  // each consumer warp, once read
    }
    fence_barrier_init();
  }
  __syncthreads();
  const int units = p.raster.count();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<T, BN, false, true, 1>(&map_r, &map_s, p, ring, full, empty, 0,
                                           int(blockIdx.x), int(gridDim.x));
    }
    return;
  }
  consumer_registers();
  const int cwg = wg - 1;  // which 64 rows of R's 128-row tile
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // This lane's 8 bytes of k-rows t and t + 4 (then 8 and 12, ...: 1024 bytes per k8 step) in a
  // stage's R tile: MN block 2 cwg + warp / 2, chunk rs_chunk swizzled by the k-row.
  const int chunk = rs_chunk(warp, g);
  const uint32_t block = uint32_t(2 * cwg + warp / 2) * Cfg::kBlockBytes + 8 * (g % 2);
  const uint32_t frag_lo = block + t * 128 + ((chunk ^ t) * 16);
  const uint32_t frag_hi = block + (t + 4) * 128 + ((chunk ^ (t + 4)) * 16);
  const bool releaser = lane == 0;
  const bool plain = ep.addend == nullptr && reinterpret_cast<uintptr_t>(ep.out) % 8 == 0 &&
                     ep.ldo % 2 == 0;
  int stage = 0, phase = 0;
  float d[Cfg::kAccs];
  uint32_t f[16];  // four k8 steps' fragments, 4 registers each: step s of a k-tile in f[4s..4s+3]
  auto load_step = [&](uint32_t base, int s, uint32_t (&f4)[16]) {
    lds_pair(base + frag_lo + s * 1024, f4[4 * s], f4[4 * s + 1]);
    lds_pair(base + frag_hi + s * 1024, f4[4 * s + 2], f4[4 * s + 3]);
  };
  for (int unit = int(blockIdx.x); unit < units; unit += int(gridDim.x)) {
    int tr, ts;
    p.raster.coords(unit, tr, ts);
    zero(d);
    // One wgmma per commit group, at most three in flight (wgmma_wait<2>), as cuBLAS's TF32 nn
    // kernel runs: step j's fragments are loaded while steps j - 1 and j - 2 still run, into the
    // set step j - 4 used, which the wait has retired. A k-tile's stage goes back once its last
    // step has (at step 1 of the next). ptxas serializes nothing here (no C7513). Alone it measured
    // no faster than retiring each k-tile's four wgmmas before loading the next one's fragments,
    // nor did two fragment sets a k-tile apart (4096^3, H200: 419 us under ncu all three); the
    // epilogue below was the gap.
    mbar_wait(&full[stage], phase);
    load_step(smem_u32(ring + stage * Cfg::kStageBytes), 0, f);
    int prev = -1;  // the stage of the k-tile before, until released
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      const uint32_t base = smem_u32(ring + stage * Cfg::kStageBytes);
      const uint64_t desc = sw128_desc<true>(ring + stage * Cfg::kStageBytes + Cfg::kABytes, 0);
      int next = stage + 1, next_phase = phase;
      if (next == S) next = 0, next_phase ^= 1;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        keep_live(d);
        wgmma_fence();
#ifdef CUDASTEPS_SM90A_DEVICE
        const uint64_t ds = desc + s * desc_k_step<true, Cfg::kMmaK>();
        if constexpr (BN == 256) {
          wgmma_m64n256k8_tf32_rs(d, f[4 * s], f[4 * s + 1], f[4 * s + 2], f[4 * s + 3], ds);
        } else {
          wgmma_m64n128k8_tf32_rs(d, f[4 * s], f[4 * s + 1], f[4 * s + 2], f[4 * s + 3], ds);
        }
#endif
        wgmma_commit();
        wgmma_wait<2>();
        keep_live(d);
        if (s == 1 && prev >= 0 && releaser) mbar_arrive(&empty[prev]);
        if (s < 3) {
          load_step(base, s + 1, f);
        } else if (kt + 1 < p.k_tiles) {
          mbar_wait(&full[next], next_phase);
          load_step(smem_u32(ring + next * Cfg::kStageBytes), 0, f);
        }
      }
      prev = stage;
      stage = next, phase = next_phase;
    }
    wgmma_wait<0>();
    keep_live(d);
    if (releaser) mbar_arrive(&empty[prev]);
    // Accumulator d[4j + 2h + c]: row 16 warp + g + 8h of the warpgroup's 64 (renumbered: tile row
    // r0 + h), column 8j + 2t + c of S's BN.
    const int64_t r0 = int64_t(tr) * Cfg::BM + cwg * 64 + rs_row(warp, g);
    const int64_t s0 = int64_t(ts) * BN + 2 * t;
    // A tile wholly inside the output, with no addend and 8-byte aligned rows, stores its pairs
    // with no checks: alpha * acc, what store_pair writes there. The checked form (edge tiles,
    // addmm's beta * C) unrolls to some 17k instructions per kernel; run for every tile it drew a
    // quarter of the warps' stall samples and the kernel took 419 us, against 338 with this path
    // (ncu, 4096^3, H200; tc:ws_persistent 332 on K-major operands).
    const int64_t rows_r = kSwap ? ep.N : ep.M, rows_s = kSwap ? ep.M : ep.N;
    if (plain && (int64_t(tr) + 1) * Cfg::BM <= rows_r && (int64_t(ts) + 1) * BN <= rows_s) {
      const float alpha = ep.alpha;
      // kSwap: C[s, r], C[s, r + 1] for the two neighbours r0, r0 + 1; else C[r, s], C[r, s + 1].
      float* o = kSwap ? ep.out + s0 * ep.ldo + r0 : ep.out + r0 * ep.ldo + s0;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        if constexpr (kSwap) {
          float* row = o + int64_t(8 * j) * ep.ldo;
          *reinterpret_cast<float2*>(row) = make_float2(alpha * d[4 * j], alpha * d[4 * j + 2]);
          *reinterpret_cast<float2*>(row + ep.ldo) =
              make_float2(alpha * d[4 * j + 1], alpha * d[4 * j + 3]);
        } else {
          *reinterpret_cast<float2*>(o + 8 * j) =
              make_float2(alpha * d[4 * j], alpha * d[4 * j + 1]);
          *reinterpret_cast<float2*>(o + ep.ldo + 8 * j) =
              make_float2(alpha * d[4 * j + 2], alpha * d[4 * j + 3]);
        }
      }
      continue;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      if constexpr (kSwap) {
        ep.store_pair(s0 + 8 * j, r0, d[4 * j], d[4 * j + 2]);
        ep.store_pair(s0 + 8 * j + 1, r0, d[4 * j + 1], d[4 * j + 3]);
      } else {
        ep.store_pair(r0, s0 + 8 * j, d[4 * j], d[4 * j + 1]);
        ep.store_pair(r0 + 1, s0 + 8 * j, d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
