// Hopper tensor-core GEMM (sm_90a): warpgroup MMA (wgmma) on 128-byte-swizzled shared-memory tiles,
// the three Hopper steps of the tensor-core ladder:
//
//   tc:wgmma          2 consumer warpgroups (256 threads), operands brought by every thread with
//                     cp.async into a multistage ring written in the TMA's 128-byte swizzle, then
//                     wgmma from shared memory. What changes from mma.sync: one instruction per
//                     warpgroup computes a 64 x N x 16 product, operands never pass through
//                     registers, and the issue slots the ldmatrix/mma stream took are free.
//   tc:wgmma_tma      + the tensor memory accelerator: one thread issues cp.async.bulk.tensor per
//                     operand tile, completion counted in bytes on an mbarrier per stage; no
//                     address arithmetic or predication in the main loop, edges zero-filled by TMA.
//   tc:ws_persistent  + warp specialization: a producer warpgroup (registers given back with
//                     setmaxnreg) keeps the ring full while two consumer warpgroups (setmaxnreg up)
//                     run wgmma; full/empty mbarriers instead of block-wide barriers, one k-tile
//                     of wgmmas kept in flight while the previous stage is released; one block
//                     per SM walking the output tiles in a grouped (L2-friendly) order, so the
//                     loads of one tile overlap the epilogue of the last; the epilogue stages the
//                     output through swizzled shared memory (stmatrix; per-element checks only
//                     in tiles across the matrix edge) and writes it with TMA stores.
//                     Outputs too small to fill the SMs are split along K (fp32 partials, added
//                     in a fixed order).
//   tc:ws_multicast   + clusters of two CTAs on vertically adjacent tiles: each loads its own A
//                     and half of the shared B tile, multicast by TMA into both rings, so each
//                     CTA pulls 2/3 of the bytes out of L2. Measured no faster than
//                     tc:ws_persistent on an H100, so mm keeps the latter (see
//                     tc_hopper_final_launch).
//   tc:ws_pingpong    tc:ws_persistent with a 128 x 128 tile per consumer warpgroup: the two
//                     take turns at the main loop, so one's epilogue runs under the other's.
//   tc:ws_tf32_rs     TF32 only, one operand MN-major (mm's row-major B): tc:ws_persistent's
//                     producer and ring, but each consumer thread loads that operand's fragment
//                     from shared memory into registers, wgmma's other operand form, instead of
//                     having the operand transposed first (TF32 wgmma reads shared memory
//                     K-major only).
//
// Tiles: BM = 128 (one 64-row wgmma per consumer warpgroup), BN = 256 or 128, BK = one 128-byte
// swizzle row of K (64 bf16/fp16 or 32 tf32). bf16/fp16 operands are read in place in either
// layout (the wgmma transpose bits; MN-major tiles are 128-byte blocks of k-rows), TF32 ones
// K-major only (A row-major, B column-major, as linear's x and weight are) except through
// tc:ws_tf32_rs. Operands must be TMA-describable (16-byte aligned base and leading dimension):
// tc_hopper_supports() says so, and the dispatcher transposes or repacks the rest.
//
// Build: this file is compiled for sm_90a only (setup.py gives it -gencode=arch=compute_90a,
// code=sm_90a when the arch list has 9.0, and defines CUDASTEPS_HOPPER_KERNELS); in a build
// without 9.0 it compiles to stubs and tc_hopper_available() is false.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "common/launch.cuh"
#include "gemm/tc_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUDASTEPS_SM90A_DEVICE 1
#endif

namespace cudasteps {
namespace gemm {
namespace {

using tc::Epilogue;
using tc::smem_u32;
using tc::TileRaster;

// ---- tile configuration ----
template <TcType T, int BN_>
struct HopperCfg {
  static constexpr int BM = 128, BN = BN_;
  static constexpr int kElemBytes = T == TcType::kTF32 ? 4 : 2;
  static constexpr int BK = 128 / kElemBytes;  // one 128-byte swizzle row of K
  static constexpr int kMmaK = T == TcType::kTF32 ? 8 : 16;
  static constexpr int kKSteps = BK / kMmaK;          // wgmmas per k-tile, 32 bytes of K each
  static constexpr int kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // As many stages as fit beside the barriers in 227 KiB: 4 for 128 x 256, 6 for 128 x 128.
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr int kAccs = BN / 2;  // fp32 accumulators per thread of a consumer warpgroup
  // An MN-major operand tile is stored as blocks of 128 bytes of MN (64 bf16/fp16, 32 tf32) by BK
  // k-rows.
  static constexpr int kBlockBytes = BK * 128;
  // Offset of consumer warpgroup w's 64 rows of A: 64 K-major rows, or one MN-major block (the
  // same 8 KiB either way).
  static constexpr int kAHalfBytes = 64 * 128;
  // 1024 bytes of slack to align the ring to the 1024-byte swizzle atom, then the barriers.
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;
  // tc:ws_persistent stages its output through shared memory for TMA stores: per consumer
  // warpgroup, kStoreBoxes boxes of 64 rows x 128 bytes at a time (16 KiB), after the ring.
  static constexpr int kStoreBoxes = 2;
  static constexpr int kStoreBytes = 2 * kStoreBoxes * 64 * 128;
  static constexpr int kWsSmemBytes = kSmemBytes + kStoreBytes;
};

// ---- PTX wrappers (sm_90a) ----
#ifdef CUDASTEPS_SM90A_DEVICE
#include "gemm/tc_wgmma.inc"
#endif

__device__ __forceinline__ void hopper_only() {
#ifndef CUDASTEPS_SM90A_DEVICE
  __trap();
#endif
}

// Shared-memory matrix descriptor of an operand tile in the 128-byte swizzle (TMA's
// CU_TENSOR_MAP_SWIZZLE_128B; the 1024-byte atoms start 1024-byte aligned, so base offset 0):
//   K-major:  rows of 128 bytes of K, 8-row groups 1024 bytes apart (stride byte offset); the
//             leading byte offset is unused. One k16 (bf16/fp16) or k8 (tf32) slice is 32 bytes
//             further along each row.
//   MN-major: blocks of 64 MN-elements x BK k-rows, each k-row 128 bytes; 8-k-row groups 1024
//             bytes apart (stride byte offset), 64-element MN blocks `block_bytes` apart (leading
//             byte offset). One k16 slice is 16 rows = 2048 bytes further.
template <bool KMajor>
__device__ __forceinline__ uint64_t sw128_desc(const void* tile, uint32_t block_bytes) {
  const uint64_t addr = smem_u32(tile);
  const uint64_t lbo = KMajor ? 1 : (block_bytes >> 4);
  return ((addr & 0x3FFFF) >> 4) | (lbo << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// Descriptor advance (in 16-byte units) from one MMA k-slice to the next.
template <bool KMajor, int kMmaK>
constexpr uint64_t desc_k_step() {
  return KMajor ? (32 >> 4) : (kMmaK * 128) >> 4;
}

// One k-tile (128 bytes of K per row) of this warpgroup's 64 x BN block: kKSteps wgmmas.
// a_tile: this warpgroup's 64 rows of A; b_tile: all BN columns of B.
template <TcType T, int BN, bool AK, bool BKm>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[BN / 2], const uint8_t* a_tile,
                                             const uint8_t* b_tile) {
#ifdef CUDASTEPS_SM90A_DEVICE
  using Cfg = HopperCfg<T, BN>;
  const uint64_t da = sw128_desc<AK>(a_tile, Cfg::kBlockBytes);
  const uint64_t db = sw128_desc<BKm>(b_tile, Cfg::kBlockBytes);
  constexpr int ta = AK ? 0 : 1, tb = BKm ? 0 : 1;
#pragma unroll
  for (int s = 0; s < Cfg::kKSteps; ++s) {
    const uint64_t sa = da + s * desc_k_step<AK, Cfg::kMmaK>();
    const uint64_t sb = db + s * desc_k_step<BKm, Cfg::kMmaK>();
    if constexpr (T == TcType::kBF16 && BN == 256) wgmma_m64n256k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kBF16 && BN == 128) wgmma_m64n128k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 256) wgmma_m64n256k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 128) wgmma_m64n128k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kTF32 && BN == 256) wgmma_m64n256k8_tf32(d, sa, sb);
    if constexpr (T == TcType::kTF32 && BN == 128) wgmma_m64n128k8_tf32(d, sa, sb);
  }
#else
  (void)d, (void)a_tile, (void)b_tile;
  hopper_only();
#endif
}

// Orders this warpgroup's accumulator registers before the wgmmas that follow.
__device__ __forceinline__ void wgmma_fence() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// The registers stay live across the asm (the wgmma writes them asynchronously): tie them to it.
template <int N>
__device__ __forceinline__ void keep_live(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Makes this thread's generic-proxy shared-memory writes (cp.async) visible to the async proxy
// (wgmma reads), once a barrier has ordered them.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
#endif
}

// Makes barrier initialisation visible to the async proxy (TMA completes transactions on them).
__device__ __forceinline__ void fence_barrier_init() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// Blocks until the phase of parity `parity` of `bar` has completed. A fresh barrier counts its
// (never run) phase of parity 1 as completed, so a producer waiting on "empty" with parity 1
// passes at once in the first round of the ring.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
#ifdef CUDASTEPS_SM90A_DEVICE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// One box of a 2-D tensor map (inner coordinate k, outer coordinate row) into shared memory;
// completion is counted on `bar` in bytes. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int k,
                                            int row) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row)
      : "memory");
#endif
}

// The same box, written to the same shared-memory offset in every CTA of the cluster named in
// `cta_mask` (bit i: CTA rank i), each CTA's copy of `bar` counting the bytes it received.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map,
                                                      uint64_t* bar, int k, int row,
                                                      uint16_t cta_mask) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row), "h"(cta_mask)
      : "memory");
#endif
}

// This CTA's rank in its cluster (0 without clusters).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank = 0;
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// Every thread of every CTA of the cluster arrives, then waits for all of them (release/acquire:
// shared-memory writes before it, barrier initialisation included, are seen by the whole cluster).
__device__ __forceinline__ void cluster_sync() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

// Arrives on the barrier at the address of `bar` in the shared memory of cluster CTA `cta`
// (which may be this one). Plain arrive (release at CTA scope, what the consumers need: their
// wgmmas have finished reading the stage): with .release.cluster the multicast kernel ran at half
// speed on an H100, each arrive apparently waiting for the wgmmas still in flight.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(cta)
      : "memory");
#endif
}

// One box of shared memory (written in the 128-byte swizzle) to a 2-D tensor map at (col, row);
// the parts of the box outside the tensor are not written. Completion is tracked per thread with
// bulk groups (commit, then wait until the shared memory has been read).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int col,
                                             int row) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
      "r"(smem_u32(src)), "r"(col), "r"(row)
      : "memory");
#endif
}

__device__ __forceinline__ void bulk_commit() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until this thread's committed bulk stores have finished reading shared memory.
__device__ __forceinline__ void bulk_wait_read() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

// Waits until this thread's committed bulk stores are complete.
__device__ __forceinline__ void bulk_wait() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// A barrier of one warpgroup (128 threads) on hardware barrier `id` (0 is __syncthreads's).
__device__ __forceinline__ void warpgroup_barrier(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

__device__ __forceinline__ uint8_t* align_1024(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Each consumer warpgroup owns 64 rows of the 128-row tile: accumulator element d[4j + 2i + c] of
// lane l in warp w sits at row 16w + l/4 + 8i, column 8j + 2(l%4) + c of its 64 x BN block.
template <TcType T, int BN>
__device__ __forceinline__ void store_accumulators(const Epilogue<T>& ep, const float (&d)[BN / 2],
                                                   int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int64_t row = m0 + warp * 16 + lane / 4;
  const int64_t col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    ep.store_pair(row, col + 8 * j, d[4 * j], d[4 * j + 1]);
    ep.store_pair(row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3]);
  }
}

// Stores four 8 x 8 matrices of 16-bit elements to shared memory (sm_90): lanes 8q..8q+7 give the
// row addresses of matrix q, and register q of every lane holds its fragment of matrix q (lane l:
// row l/4, columns 2(l%4) and 2(l%4) + 1), the accumulator layout of mma and wgmma.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  (void)addr, (void)r0, (void)r1, (void)r2, (void)r3;
  hopper_only();
#endif
}

// How the epilogue turns accumulators into outputs, chosen once per tile so the per-element code
// carries no branches: kPlain (alpha * acc) and kAddend (+ beta * addend) for tiles inside the
// matrix, kEdge for tiles across its edge (every element checked: no addend read outside, zeros
// staged there, and the TMA store clips them).
enum class StageMode { kPlain, kAddend, kEdge };

// Outputs (m, n) and (m, n + 1) of accumulator pair (j, h) of this thread (the layout above).
template <TcType T, int BN, StageMode kMode>
__device__ __forceinline__ float2 output_pair(const Epilogue<T>& ep, const float (&d)[BN / 2], int j,
                                              int h, int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128;
  const int64_t m = m0 + (t / 32) * 16 + (t % 32) / 4 + 8 * h;
  const int64_t n = n0 + 8 * j + 2 * (t % 4);
  const float a0 = ep.alpha * d[4 * j + 2 * h], a1 = ep.alpha * d[4 * j + 2 * h + 1];
  if constexpr (kMode == StageMode::kPlain) {
    return make_float2(a0, a1);
  } else if constexpr (kMode == StageMode::kAddend) {
    using Src = tc::Elem<T>;
    const auto* row = ep.addend + m * ep.add_s0;
    return make_float2(a0 + ep.beta * Src::to_float(row[n * ep.add_s1]),
                       a1 + ep.beta * Src::to_float(row[(n + 1) * ep.add_s1]));
  } else {
    return make_float2(m < ep.M && n < ep.N ? ep.value(m, n, d[4 * j + 2 * h]) : 0.f,
                       m < ep.M && n + 1 < ep.N ? ep.value(m, n + 1, d[4 * j + 2 * h + 1]) : 0.f);
  }
}

// Writes columns [kRound * kRoundCols, (kRound + 1) * kRoundCols) of this warpgroup's 64 x BN block
// into `staging`: kStoreBoxes boxes of 64 rows x 128 bytes in the 128-byte swizzle (16-byte chunk
// c of row r sits at chunk c ^ (r % 8)). 16-bit outputs go out with stmatrix, two 16 x 8 column
// blocks per instruction (lane 8q + i gives row i of matrix q: rows 8(q % 2) + i of the warp's 16,
// column block j0 + q / 2); fp32 outputs with 8-byte stores, which the swizzle keeps free of bank
// conflicts (the 8 rows a warp writes at once land in 8 different 16-byte bank groups).
template <TcType T, int BN, StageMode kMode, int kRound>
__device__ __forceinline__ void stage_round(const Epilogue<T>& ep, const float (&d)[BN / 2], int64_t m0,
                                            int64_t n0, uint8_t* staging) {
  using E = typename tc::Elem<T>::type;
  constexpr int kBoxCols = 128 / int(sizeof(E));
  constexpr int kRoundCols = HopperCfg<T, BN>::kStoreBoxes * kBoxCols;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  if constexpr (T == TcType::kTF32) {
#pragma unroll
    for (int j = kRound * kRoundCols / 8; j < (kRound + 1) * kRoundCols / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + lane / 4 + 8 * h;  // row in the warpgroup's 64
        const int c = 8 * j + 2 * (lane % 4);         // column in the tile
        const int box = (c % kRoundCols) / kBoxCols, byte = (c % kBoxCols) * 4;
        *reinterpret_cast<float2*>(staging + box * (64 * 128) + r * 128 +
                                   (((byte / 16) ^ (r % 8)) * 16) + byte % 16) =
            output_pair<T, BN, kMode>(ep, d, j, h, m0, n0);
      }
    }
  } else {
    using Out = tc::Elem<T>;
    const int q = lane / 8, i = lane % 8;
    const int r = warp * 16 + 8 * (q % 2) + i;  // the row this lane addresses (r % 8 == i)
#pragma unroll
    for (int j0 = kRound * kRoundCols / 8; j0 < (kRound + 1) * kRoundCols / 8; j0 += 2) {
      const float2 v00 = output_pair<T, BN, kMode>(ep, d, j0, 0, m0, n0);
      const float2 v01 = output_pair<T, BN, kMode>(ep, d, j0, 1, m0, n0);
      const float2 v10 = output_pair<T, BN, kMode>(ep, d, j0 + 1, 0, m0, n0);
      const float2 v11 = output_pair<T, BN, kMode>(ep, d, j0 + 1, 1, m0, n0);
      const int c = 8 * (j0 + q / 2);  // first column of this lane's 8 x 8 matrix
      const int box = (c % kRoundCols) / kBoxCols, chunk = (c % kBoxCols) / 8;
      stmatrix_x4(smem_u32(staging + box * (64 * 128) + r * 128 + ((chunk ^ i) * 16)),
                  Out::pack2(v00.x, v00.y), Out::pack2(v01.x, v01.y), Out::pack2(v10.x, v10.y),
                  Out::pack2(v11.x, v11.y));
    }
  }
}

// The same outputs through shared memory and TMA stores: each round stages kStoreBoxes boxes
// (64 rows x 128 bytes of columns), then one thread stores them with the TMA, which clips them at
// the matrix edge. The stores run on while the warpgroup starts its next tile; only their reads of
// `staging` are waited for, before `staging` is written again. Round kRound, then the next: the
// rounds are template arguments, so every accumulator index is a constant (a runtime round index
// leaves ptxas unsure which registers the epilogue reads, and it then serializes the wgmmas).
template <TcType T, int BN, StageMode kMode, int kRound = 0>
__device__ __forceinline__ void store_rounds_tma(const Epilogue<T>& ep, const CUtensorMap* map_out,
                                                 const float (&d)[BN / 2], int64_t m0, int64_t n0,
                                                 uint8_t* staging, int bar_id) {
  using E = typename tc::Elem<T>::type;
  constexpr int kBoxCols = 128 / int(sizeof(E));
  constexpr int kBoxes = HopperCfg<T, BN>::kStoreBoxes;
  constexpr int kRoundCols = kBoxes * kBoxCols;
  const int t = threadIdx.x % 128;
  // The last round's stores (of this tile or the one before) must have read `staging`; they are
  // waited for only now, so a tile's final stores run on under the next tile's main loop.
  if (t == 0) bulk_wait_read();
  warpgroup_barrier(bar_id);
  stage_round<T, BN, kMode, kRound>(ep, d, m0, n0, staging);
  fence_proxy_async();  // the TMA (async proxy) reads what these generic stores wrote
  warpgroup_barrier(bar_id);
  if (t == 0) {
#pragma unroll
    for (int box = 0; box < kBoxes; ++box) {
      tma_store_2d(map_out, staging + box * (64 * 128), int(n0) + kRound * kRoundCols + box * kBoxCols,
                   int(m0));
    }
    bulk_commit();
  }
  if constexpr ((kRound + 1) * kRoundCols < BN) {
    store_rounds_tma<T, BN, kMode, kRound + 1>(ep, map_out, d, m0, n0, staging, bar_id);
  }
}

// This warpgroup's 64 x BN block at (m0, n0) through store_rounds_tma, in the mode its place needs.
template <TcType T, int BN>
__device__ __forceinline__ void store_accumulators_tma(const Epilogue<T>& ep,
                                                       const CUtensorMap* map_out,
                                                       const float (&d)[BN / 2], int64_t m0,
                                                       int64_t n0, uint8_t* staging, int bar_id) {
  if (m0 + 64 > ep.M || n0 + BN > ep.N) {
    store_rounds_tma<T, BN, StageMode::kEdge>(ep, map_out, d, m0, n0, staging, bar_id);
  } else if (ep.addend != nullptr) {
    store_rounds_tma<T, BN, StageMode::kAddend>(ep, map_out, d, m0, n0, staging, bar_id);
  } else {
    store_rounds_tma<T, BN, StageMode::kPlain>(ep, map_out, d, m0, n0, staging, bar_id);
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) d[i] = 0.f;
}

struct HopperParams {
  const uint8_t* a;  // tc:wgmma only (the TMA kernels read through tensor maps)
  const uint8_t* b;
  int64_t lda, ldb;  // elements
  int64_t M, N, K;
  int k_tiles;
  TileRaster raster;
  // Split-K (tc:ws_persistent): each tile's k-tiles are cut into `splits` ranges of
  // `k_tiles_per_split`; with splits > 1 every range writes its fp32 sums to
  // partial[split][M][N] and splitk_reduce_kernel adds them in a fixed order (deterministic).
  int splits;
  int k_tiles_per_split;
  float* partial;
  // The output is TMA-describable (16-byte aligned rows): staged TMA stores, else direct stores.
  bool tma_store;
};

// ---- operand tiles: TMA boxes and cp.async chunks in the 128-byte swizzle ----

// TMA: one stage tile of an operand with `Rows` rows along M (or N) starting at mn0, k-tile kt.
// K-major: one box of BK x Rows. MN-major: Rows / BK boxes of BK (MN, 128 bytes) x BK, one block
// each.
// cta_mask != 0: multicast to those CTAs of the cluster (tma_load_2d_multicast).
template <bool KMajor, int Rows, int BK>
__device__ __forceinline__ void tma_tile(uint8_t* dst, const CUtensorMap* map, uint64_t* bar,
                                         int mn0, int kt, uint16_t cta_mask = 0) {
  auto box = [&](uint8_t* to, int inner, int outer) {
    if (cta_mask) {
      tma_load_2d_multicast(to, map, bar, inner, outer, cta_mask);
    } else {
      tma_load_2d(to, map, bar, inner, outer);
    }
  };
  if constexpr (KMajor) {
    box(dst, kt * BK, mn0);
  } else {
    static_assert(Rows % BK == 0, "MN-major tiles are whole 128-byte (BK-element) blocks");
#pragma unroll
    for (int blk = 0; blk < Rows / BK; ++blk) box(dst + blk * BK * 128, mn0 + blk * BK, kt * BK);
  }
}

// cp.async (tc:wgmma): the same tile and layout as tma_tile writes, by every thread of the block.
// 16-byte chunk c of a 128-byte row r lands at chunk c ^ (r % 8): 8 consecutive rows of one chunk
// column hit 8 different 16-byte bank groups, so neither the stores nor the tensor cores' reads
// conflict. Chunks past the matrix edge are zero-filled (cp_async_16_bytes), as TMA does.
template <bool KMajor, int Rows, int BK, int kElemBytes>
__device__ __forceinline__ void cp_async_tile(uint8_t* dst, const uint8_t* src, int64_t ld,
                                              int64_t mn0, int64_t mn_total, int64_t k0,
                                              int64_t K) {
  static_assert(BK * kElemBytes == 128, "a k-tile is one 128-byte swizzle row");
  constexpr int kElemsPerChunk = 16 / kElemBytes;
  // K-major: Rows rows (mn) of 8 chunks along k. MN-major: Rows / BK blocks of BK rows (k) of 8
  // chunks along mn.
  constexpr int kChunks = Rows * 8;
  for (int i = threadIdx.x; i < kChunks; i += blockDim.x) {
    int r, c, blk;
    int64_t row_mn, k, left;
    if constexpr (KMajor) {
      r = i / 8, c = i % 8, blk = 0;
      row_mn = mn0 + r;
      k = k0 + int64_t(c) * kElemsPerChunk;
      left = row_mn < mn_total ? (K - k) * kElemBytes : 0;
    } else {
      blk = i / (BK * 8), r = (i / 8) % BK, c = i % 8;
      row_mn = mn0 + blk * BK + int64_t(c) * kElemsPerChunk;
      k = k0 + r;
      left = k < K ? (mn_total - row_mn) * kElemBytes : 0;
    }
    const int bytes = left <= 0 ? 0 : (left >= 16 ? 16 : int(left));
    const uint8_t* g = bytes == 0 ? src
                       : KMajor   ? src + (row_mn * ld + k) * kElemBytes
                                  : src + (k * ld + row_mn) * kElemBytes;
    tc::cp_async_16_bytes(dst + blk * BK * 128 + r * 128 + ((c ^ (r % 8)) * 16), g, bytes);
  }
}

// ---- tc:wgmma: cp.async ring, every thread loads ----

template <TcType T, int BN, bool AK, bool BKm>
__global__ void __launch_bounds__(256, 1)
    wgmma_cp_async_kernel(const HopperParams p, const Epilogue<T> ep) {
  using Cfg = HopperCfg<T, BN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  int tm, tn;
  p.raster.coords(int(blockIdx.x), tm, tn);
  const int64_t m0 = int64_t(tm) * Cfg::BM, n0 = int64_t(tn) * BN;
  const int wg = threadIdx.x / 128;

  auto load = [&](int kt) {
    uint8_t* stage = ring + (kt % Cfg::kStages) * Cfg::kStageBytes;
    const int64_t k0 = int64_t(kt) * Cfg::BK;
    cp_async_tile<AK, Cfg::BM, Cfg::BK, Cfg::kElemBytes>(stage, p.a, p.lda, m0, p.M, k0, p.K);
    cp_async_tile<BKm, BN, Cfg::BK, Cfg::kElemBytes>(stage + Cfg::kABytes, p.b, p.ldb, n0, p.N, k0,
                                                     p.K);
  };
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < p.k_tiles) load(s);
    tc::cp_async_commit();  // empty groups keep the wait count uniform
  }
  float d[Cfg::kAccs];
  zero(d);
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    tc::cp_async_wait<Cfg::kStages - 2>();
    fence_proxy_async();
    __syncthreads();  // stage kt is complete for every thread; stage kt - 1 is no longer read
    if (kt + Cfg::kStages - 1 < p.k_tiles) load(kt + Cfg::kStages - 1);
    tc::cp_async_commit();
    const uint8_t* stage = ring + (kt % Cfg::kStages) * Cfg::kStageBytes;
    keep_live(d);
    wgmma_fence();
    wgmma_k_tile<T, BN, AK, BKm>(d, stage + wg * Cfg::kAHalfBytes, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
  }
  store_accumulators<T, BN>(ep, d, m0 + wg * 64, n0);
}

// ---- tc:wgmma_tma: TMA into the ring, one thread issues, block barrier to recycle a stage ----

template <TcType T, int BN, bool AK, bool BKm>
__global__ void __launch_bounds__(256, 1)
    wgmma_tma_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_b, const HopperParams p,
                     const Epilogue<T> ep) {
  using Cfg = HopperCfg<T, BN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + Cfg::kStages * Cfg::kStageBytes);
  int tm, tn;
  p.raster.coords(int(blockIdx.x), tm, tn);
  const int m0 = tm * Cfg::BM, n0 = tn * BN;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) mbar_init(&full[s], 1);
    fence_barrier_init();
  }
  __syncthreads();
  auto load = [&](int kt) {
    const int s = kt % Cfg::kStages;
    uint8_t* stage = ring + s * Cfg::kStageBytes;
    mbar_arrive_expect_tx(&full[s], Cfg::kStageBytes);
    tma_tile<AK, Cfg::BM, Cfg::BK>(stage, &map_a, &full[s], m0, kt);
    tma_tile<BKm, BN, Cfg::BK>(stage + Cfg::kABytes, &map_b, &full[s], n0, kt);
  };
  if (threadIdx.x == 0) {
    for (int kt = 0; kt < Cfg::kStages - 1 && kt < p.k_tiles; ++kt) load(kt);
  }
  float d[Cfg::kAccs];
  zero(d);
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int s = kt % Cfg::kStages;
    mbar_wait(&full[s], (kt / Cfg::kStages) & 1);
    const uint8_t* stage = ring + s * Cfg::kStageBytes;
    keep_live(d);
    wgmma_fence();
    wgmma_k_tile<T, BN, AK, BKm>(d, stage + wg * Cfg::kAHalfBytes, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
    __syncthreads();  // both warpgroups are done with stage kt - 1, which the next load refills
    if (threadIdx.x == 0 && kt + Cfg::kStages - 1 < p.k_tiles) load(kt + Cfg::kStages - 1);
  }
  store_accumulators<T, BN>(ep, d, int64_t(m0) + wg * 64, n0);
}

// ---- tc:ws_persistent: producer warpgroup + 2 consumer warpgroups, persistent tiles ----

// Split-K partial sums of a consumer warpgroup's 64 x BN block, fp32, bounds-checked.
template <int BN>
__device__ __forceinline__ void store_partial(float* partial, int64_t M, int64_t N,
                                              const float (&d)[BN / 2], int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int64_t row = m0 + warp * 16 + lane / 4;
  const int64_t col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = row + 8 * h, n = col + 8 * j;
      if (m >= M) continue;
      if (n < N) partial[m * N + n] = d[4 * j + 2 * h];
      if (n + 1 < N) partial[m * N + n + 1] = d[4 * j + 2 * h + 1];
    }
  }
}

// The register split of the warp-specialized kernels (384 threads, one CTA per SM): the producer
// warpgroup, where one thread issues the TMA, gives registers back; each consumer warpgroup takes
// them for its accumulators (128 x 40 + 256 x 232 registers fit the SM's 64K).
__device__ __forceinline__ void producer_registers() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
}

__device__ __forceinline__ void consumer_registers() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
}

// The k-tiles [kb, ke) of work unit `unit` (its tile is unit / p.splits, its k range unit % splits).
__device__ __forceinline__ void unit_k_range(const HopperParams& p, int unit, int& kb, int& ke) {
  kb = (unit % p.splits) * p.k_tiles_per_split;
  ke = min(p.k_tiles, kb + p.k_tiles_per_split);
}

// The producer thread of the persistent kernels: walks the CTA's work units (first_unit,
// first_unit + unit_step, ...) and fills the ring stage by stage, each once its consumers have
// released it. A unit covers Ctas vertically adjacent tiles (one per CTA of a cluster); this CTA
// loads its own A tile and its share of the B tile, multicast to every CTA of the cluster.
template <TcType T, int BN, bool AK, bool BKm, int Ctas>
__device__ __forceinline__ void produce_tiles(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                              const HopperParams& p, uint8_t* ring, uint64_t* full,
                                              uint64_t* empty, uint32_t rank, int first_unit,
                                              int unit_step) {
  using Cfg = HopperCfg<T, BN>;
  constexpr int kBRows = BN / Ctas;  // rows of B (along N) this CTA loads per stage
  const int units = p.raster.count() * p.splits;
  int stage = 0, phase = 0;
  for (int unit = first_unit; unit < units; unit += unit_step) {
    int tg, tn, kb, ke;
    p.raster.coords(unit / p.splits, tg, tn);
    unit_k_range(p, unit, kb, ke);
    const int tm = tg * Ctas + int(rank);
    for (int kt = kb; kt < ke; ++kt) {
      mbar_wait(&empty[stage], phase ^ 1);
      uint8_t* dst = ring + stage * Cfg::kStageBytes;
      mbar_arrive_expect_tx(&full[stage], Cfg::kStageBytes);
      tma_tile<AK, Cfg::BM, Cfg::BK>(dst, map_a, &full[stage], tm * Cfg::BM, kt);
      // This CTA's rows of B sit at the same place in the tile (and in every CTA's ring).
      tma_tile<BKm, kBRows, Cfg::BK>(dst + Cfg::kABytes + int(rank) * kBRows * 128, map_b,
                                     &full[stage], tn * BN + int(rank) * kBRows, kt,
                                     Ctas == 1 ? 0 : (1 << Ctas) - 1);
      if (++stage == Cfg::kStages) stage = 0, phase ^= 1;
    }
  }
}

// Ctas = 2 (tc:ws_multicast): the kernel runs in clusters of two CTAs on vertically adjacent tiles
// (2t, n) and (2t + 1, n), which need the same B tile. Each CTA's producer loads its own A tile and
// one half of the B tile, multicast into both CTAs' rings, so every CTA pulls 2/3 of the bytes per
// stage out of L2 (A + B/2 instead of A + B), the remedy when L2 bandwidth limits a GEMM (on an
// H100 it did not limit ours: see tc_hopper_final_launch). A stage may be refilled only when the
// consumers of both CTAs are done with it, so every consumer warp releases it in both CTAs (remote
// mbarrier arrives), and each CTA's empty barrier counts both CTAs' warps.
template <TcType T, int BN, bool AK, bool BKm, int Ctas>
__global__ void __launch_bounds__(384, 1)
    wgmma_ws_kernel(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_out, const HopperParams p,
                    const Epilogue<T> ep) {
  static_assert(Ctas == 1 || Ctas == 2, "clusters of one or two CTAs");
  using Cfg = HopperCfg<T, BN>;
  constexpr int S = Cfg::kStages;
  constexpr int kConsumerWarps = 8;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint8_t* staging = ring + S * Cfg::kStageBytes;  // kStoreBytes, 1024-byte aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + Cfg::kStoreBytes);
  uint64_t* empty = full + S;
  const uint32_t rank = Ctas == 1 ? 0 : cluster_rank();
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive (plus the TMA bytes of every CTA)
      mbar_init(&empty[s], kConsumerWarps * Ctas);  // each consumer warp of each CTA, once read
    }
    fence_barrier_init();
  }
  // The peer CTA's multicasts and arrives land on these barriers: they must be initialised first.
  if constexpr (Ctas == 1) {
    __syncthreads();
  } else {
    cluster_sync();
  }
  // Work units: (tile group, k range); consecutive units are the k ranges of one tile group. A
  // tile group is Ctas vertically adjacent tiles, one per CTA of a cluster (the raster counts
  // groups: its tiles_m is ceil(tiles / Ctas)).
  const int units = p.raster.count() * p.splits;
  const int first_unit = int(blockIdx.x) / Ctas, unit_step = int(gridDim.x) / Ctas;
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // Producer: one thread issues every TMA; the warpgroup's other registers go to the consumers.
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<T, BN, AK, BKm, Ctas>(&map_a, &map_b, p, ring, full, empty, rank, first_unit,
                                          unit_step);
    }
  } else {
    consumer_registers();
    const int cwg = wg - 1;  // which 64-row half of the tile
    const bool releaser = threadIdx.x % 32 == 0;
    auto release = [&](int s) {
      if (!releaser) return;
      if constexpr (Ctas == 1) {
        mbar_arrive(&empty[s]);
      } else {
#pragma unroll
        for (int c = 0; c < Ctas; ++c) mbar_arrive_cluster(&empty[s], uint32_t(c));
      }
    };
    int stage = 0, phase = 0;
    float d[Cfg::kAccs];
    for (int unit = first_unit; unit < units; unit += unit_step) {
      int tg, tn;
      p.raster.coords(unit / p.splits, tg, tn);
      const int tm = tg * Ctas + int(rank);
      const int split = unit % p.splits;
      int kb, ke;
      unit_k_range(p, unit, kb, ke);
      zero(d);
      int prev = -1;
      for (int kt = kb; kt < ke; ++kt) {
        mbar_wait(&full[stage], phase);
        const uint8_t* src = ring + stage * Cfg::kStageBytes;
        keep_live(d);
        wgmma_fence();
        wgmma_k_tile<T, BN, AK, BKm>(d, src + cwg * Cfg::kAHalfBytes, src + Cfg::kABytes);
        wgmma_commit();
        // Keep this k-tile's wgmmas in flight while the previous k-tile's stage is handed back:
        // the tensor cores never wait for the release round trip. The wait is warp-wide, so one
        // lane releases for its warp.
        wgmma_wait<1>();
        keep_live(d);
        if (prev >= 0) release(prev);
        prev = stage;
        if (++stage == S) stage = 0, phase ^= 1;
      }
      wgmma_wait<0>();
      keep_live(d);
      if (prev >= 0) release(prev);
      // A CTA whose tile lies below the matrix (odd tile count, Ctas = 2) still loaded its half of
      // B for its peer; its stores are clipped (TMA) or skipped (bounds checks).
      const int64_t m0 = int64_t(tm) * Cfg::BM + cwg * 64, n0 = int64_t(tn) * BN;
      if (p.splits == 1 && p.tma_store) {
        store_accumulators_tma<T, BN>(ep, &map_out, d, m0, n0,
                                      staging + cwg * (Cfg::kStoreBytes / 2), 1 + cwg);
      } else if (p.splits == 1) {
        store_accumulators<T, BN>(ep, d, m0, n0);
      } else {
        store_partial<BN>(p.partial + int64_t(split) * p.M * p.N, p.M, p.N, d, m0, n0);
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait();  // the last tile's stores are complete
  }
  // No CTA may leave while its peer can still multicast into its ring or arrive on its barriers.
  if constexpr (Ctas == 2) cluster_sync();
}

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
  int stage = 0, phase = 0;
  float d[Cfg::kAccs];
  uint32_t f[16];  // the k-tile's fragments: 4 registers per k8 step
  for (int unit = int(blockIdx.x); unit < units; unit += int(gridDim.x)) {
    int tr, ts;
    p.raster.coords(unit, tr, ts);
    zero(d);
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      mbar_wait(&full[stage], phase);
      const uint32_t base = smem_u32(ring + stage * Cfg::kStageBytes);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        lds_pair(base + frag_lo + s * 1024, f[4 * s], f[4 * s + 1]);
        lds_pair(base + frag_hi + s * 1024, f[4 * s + 2], f[4 * s + 3]);
      }
      const uint64_t desc = sw128_desc<true>(ring + stage * Cfg::kStageBytes + Cfg::kABytes, 0);
      keep_live(d);
      wgmma_fence();
#ifdef CUDASTEPS_SM90A_DEVICE
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint64_t ds = desc + s * desc_k_step<true, Cfg::kMmaK>();
        if constexpr (BN == 256) {
          wgmma_m64n256k8_tf32_rs(d, f[4 * s], f[4 * s + 1], f[4 * s + 2], f[4 * s + 3], ds);
        } else {
          wgmma_m64n128k8_tf32_rs(d, f[4 * s], f[4 * s + 1], f[4 * s + 2], f[4 * s + 3], ds);
        }
      }
#endif
      wgmma_commit();
      // Each k-tile's wgmmas are retired before the next k-tile's fragments are loaded, and its
      // stage is handed back at once. Keeping them in flight across the loads instead (as
      // tc:ws_persistent does, with two register sets) makes ptxas serialize every wgmma (C7513:
      // it cannot tell which commit group still reads a register): 4096^3 and 8192^3 ran 7-13%
      // slower on an H100. While one consumer warpgroup waits, the other's wgmmas keep the tensor
      // cores busy. (Two k-tiles per commit group, half the waits, measured no faster.)
      wgmma_wait<0>();
      keep_live(d);
      if (releaser) mbar_arrive(&empty[stage]);
      if (++stage == S) stage = 0, phase ^= 1;
    }
    // Accumulator d[4j + 2h + c]: row 16 warp + g + 8h of the warpgroup's 64 (renumbered: tile row
    // r0 + h), column 8j + 2t + c of S's BN.
    const int64_t r0 = int64_t(tr) * Cfg::BM + cwg * 64 + rs_row(warp, g);
    const int64_t s0 = int64_t(ts) * BN + 2 * t;
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

// ---- tc:ws_pingpong: the two consumer warpgroups take turns, one tile each ----

// Named barriers of the ping-pong schedule (0 is __syncthreads's; 1 and 2 are the consumer
// warpgroups' epilogue barriers): kTurnBar + c is where consumer warpgroup c waits for its turn.
constexpr int kTurnBar = 3;

// `threads` threads (a multiple of 32) meet at hardware barrier `id`: bar.sync waits for them,
// bar.arrive counts this warp in without waiting (the producer side of a signal).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// In tc:ws_persistent both consumer warpgroups work on one 128 x BN tile, so they reach the
// epilogue together and the tensor cores idle while they store it (a fifth of the consumer warps'
// ncu samples at K = 2048 before that epilogue lost its per-element checks and took stmatrix; a
// few percent after). Here each consumer warpgroup owns a whole
// 128 x 128 tile (two 64 x 128 accumulator blocks, the same 128 registers per thread) and the
// CTA's tiles alternate between them: tile i goes to warpgroup i % 2. Their main loops take turns
// (tile i's starts once tile i - 1's has consumed its last stage, signalled through a named
// barrier), so one warpgroup's epilogue runs under the other's main loop. The producer fills the
// ring in tile order, as before; each consumer walks the same sequence of stages and skips the
// other's. The turn order also keeps the mbarrier parity waits exact: a stage's previous fill has
// always been waited for (by either warpgroup) before anyone waits for its next one.
template <TcType T, bool AK, bool BKm>
__global__ void __launch_bounds__(384, 1)
    wgmma_pingpong_kernel(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b,
                          const __grid_constant__ CUtensorMap map_out, const HopperParams p,
                          const Epilogue<T> ep) {
  constexpr int BN = 128;
  using Cfg = HopperCfg<T, BN>;
  constexpr int S = Cfg::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint8_t* staging = ring + S * Cfg::kStageBytes;  // kStoreBytes, 1024-byte aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + Cfg::kStoreBytes);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive (plus the TMA bytes)
      mbar_init(&empty[s], 4);  // each warp of the consuming warpgroup, once read
    }
    fence_barrier_init();
  }
  __syncthreads();
  const int units = p.raster.count() * p.splits;
  const int first_unit = int(blockIdx.x), unit_step = int(gridDim.x);
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<T, BN, AK, BKm, 1>(&map_a, &map_b, p, ring, full, empty, 0, first_unit, unit_step);
    }
  } else {
    consumer_registers();
    const int c = wg - 1;  // this warpgroup takes the CTA's tiles c, c + 2, c + 4, ...
    const bool releaser = threadIdx.x % 32 == 0;
    int stage = 0, phase = 0;  // the ring position of the next k-tile in the CTA's sequence
    float d0[Cfg::kAccs], d1[Cfg::kAccs];  // rows 0-63 and 64-127 of the tile
    int i = 0;
    for (int unit = first_unit; unit < units; unit += unit_step, ++i) {
      int kb, ke;
      unit_k_range(p, unit, kb, ke);
      if (i % 2 != c) {  // the other warpgroup's tile: skip its stages
        stage += ke - kb;
        phase ^= (stage / S) & 1;
        stage %= S;
        continue;
      }
      int tm, tn;
      p.raster.coords(unit / p.splits, tm, tn);
      if (i > 0) named_barrier_sync(kTurnBar + c, 256);  // tile i - 1 has taken its last stage
      zero(d0);
      zero(d1);
      int prev = -1;
      for (int kt = kb; kt < ke; ++kt) {
        mbar_wait(&full[stage], phase);
        const uint8_t* src = ring + stage * Cfg::kStageBytes;
        keep_live(d0);
        keep_live(d1);
        wgmma_fence();
        wgmma_k_tile<T, BN, AK, BKm>(d0, src, src + Cfg::kABytes);
        wgmma_k_tile<T, BN, AK, BKm>(d1, src + Cfg::kAHalfBytes, src + Cfg::kABytes);
        wgmma_commit();
        // As in tc:ws_persistent: this k-tile's wgmmas stay in flight while the previous k-tile's
        // stage is handed back.
        wgmma_wait<1>();
        keep_live(d0);
        keep_live(d1);
        if (prev >= 0 && releaser) mbar_arrive(&empty[prev]);
        prev = stage;
        if (++stage == S) stage = 0, phase ^= 1;
      }
      // Every stage of this tile has been waited for: the next tile's main loop may start (its
      // wgmmas queue behind this tile's last ones).
      if (unit + unit_step < units) named_barrier_arrive(kTurnBar + 1 - c, 256);
      wgmma_wait<0>();
      keep_live(d0);
      keep_live(d1);
      if (prev >= 0 && releaser) mbar_arrive(&empty[prev]);
      const int64_t m0 = int64_t(tm) * Cfg::BM, n0 = int64_t(tn) * BN;
      const int split = unit % p.splits;
      uint8_t* my_staging = staging + c * (Cfg::kStoreBytes / 2);
      if (p.splits == 1 && p.tma_store) {
        store_accumulators_tma<T, BN>(ep, &map_out, d0, m0, n0, my_staging, 1 + c);
        store_accumulators_tma<T, BN>(ep, &map_out, d1, m0 + 64, n0, my_staging, 1 + c);
      } else if (p.splits == 1) {
        store_accumulators<T, BN>(ep, d0, m0, n0);
        store_accumulators<T, BN>(ep, d1, m0 + 64, n0);
      } else {
        float* partial = p.partial + int64_t(split) * p.M * p.N;
        store_partial<BN>(partial, p.M, p.N, d0, m0, n0);
        store_partial<BN>(partial, p.M, p.N, d1, m0 + 64, n0);
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait();  // the last tile's stores are complete
  }
}

// out = epilogue(sum over splits of partial[s]), the splits added in order 0, 1, ...
template <TcType T>
__global__ void splitk_reduce_kernel(const float* __restrict__ partial, int splits,
                                     const Epilogue<T> ep) {
  const int64_t total = ep.M * ep.N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) sum += partial[int64_t(s) * total + i];
    ep.store_one(i / ep.N, i % ep.N, sum);
  }
}

// ---- host side ----

// cuTensorMapEncodeTiled from the driver, found through the runtime (no link against libcuda).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                    cudaEnableDefault, &status));
#else
    C10_CUDA_CHECK(
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &status));
#endif
    TORCH_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr,
                "cudasteps.mm: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12+)");
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// An operand as a 2-D tensor map whose box is what tma_tile loads: K-major (rows x K, element
// (r, k) at base[r * ld + k]) boxes of BK x box_rows; MN-major (element (r, k) at base[k * ld + r])
// boxes of BK x BK (128 bytes of MN by BK k-rows). Out-of-bounds box elements arrive as zeros.
CUtensorMap operand_tensor_map(const void* base, bool k_major, int64_t rows, int64_t K, int64_t ld,
                               TcType type, int box_rows) {
  const int eb = tc_elem_bytes(type);
  const int bk = 128 / eb;
  const CUtensorMapDataType dtype = type == TcType::kBF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : type == TcType::kFP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k_major ? K : rows), cuuint64_t(k_major ? rows : K)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * eb};
  const cuuint32_t box[2] = {cuuint32_t(bk), cuuint32_t(k_major ? box_rows : bk)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, dtype, 2, const_cast<void*>(base), dims, strides, box,
                                    elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cudasteps.mm: cuTensorMapEncodeTiled failed (error ", int(r),
              ") for a ", rows, " x ", K, (k_major ? " K-major" : " MN-major"),
              " operand with leading dimension ", ld);
  return map;
}

// The output (row-major M x N, leading dimension ldo) as the TMA stores of tc:ws_persistent see
// it: boxes of 64 rows x 128 bytes, written from the 128-byte-swizzled staging buffer.
CUtensorMap output_tensor_map(void* out, int64_t M, int64_t N, int64_t ldo, TcType type) {
  const int eb = tc_elem_bytes(type);
  const CUtensorMapDataType dtype = type == TcType::kBF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : type == TcType::kFP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(N), cuuint64_t(M)};
  const cuuint64_t strides[1] = {cuuint64_t(ldo) * eb};
  const cuuint32_t box[2] = {cuuint32_t(128 / eb), 64};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, dtype, 2, out, dims, strides, box, elem_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cudasteps.mm: cuTensorMapEncodeTiled failed (error ", int(r),
              ") for the ", M, " x ", N, " output");
  return map;
}

enum class HopperKernel { kCpAsync, kTma, kWarpSpecialized, kMulticast, kPingPong };

// Split-K for outputs too small to give every SM a tile: as many k ranges as fill one wave, each
// at least kSplitMinKTiles k-tiles long, and no more than keep the fp32 partials (written and
// read back: 8 * splits * M * N bytes) under a quarter of the operand bytes (2 * K * N, mostly the
// weight): splits <= K / (16 M). Measured on an H100 (bf16, 16-256 rows against 4096 x 4096,
// 8192 x 2048 and 2048 x 8192 weights; ladder variants tc:ws_persistent:bn<w>:s<k>): 16-64 rows
// ran fastest with 4-8 splits, 128 rows against K = 4096 with 1-2 (4 splits: 20% slower), 128 rows
// against K = 2048 with none.
constexpr int kSplitMinKTiles = 8;
constexpr int kSplitMax = 16;

int choose_splits(int tiles, int k_tiles, int64_t M, int64_t K, int sms) {
  if (tiles * 2 > sms) return 1;
  const int64_t want = std::min<int64_t>({sms / tiles, kSplitMax, K / (16 * std::max<int64_t>(M, 1))});
  return int(std::max<int64_t>(1, std::min<int64_t>(want, k_tiles / kSplitMinKTiles)));
}

// A launch of `blocks` CTAs of `threads` threads in clusters of `ctas` (along x). Holds the cluster
// attribute its config points to, so it is neither copied nor moved.
struct ClusterLaunch {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attr = {};

  ClusterLaunch(int blocks, int ctas, int threads, size_t smem_bytes, cudaStream_t stream) {
    config.gridDim = dim3(unsigned(blocks));
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(ctas);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Clusters of `ctas` CTAs of `kernel` that can be resident at once (the persistent grid's size).
template <typename Kernel>
int max_active_clusters(Kernel kernel, int ctas, int threads, size_t smem_bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> known;  // (kernel, device) -> clusters
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel),
                                        int(c10::cuda::current_device())};
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  const ClusterLaunch query(ctas, ctas, threads, smem_bytes, nullptr);
  int clusters = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &query.config));
  TORCH_CHECK(clusters > 0, "cudasteps.mm: no cluster of ", ctas, " CTAs with ", smem_bytes,
              " bytes of shared memory each fits on this GPU");
  known.emplace(key, clusters);
  return clusters;
}

template <TcType T, int BN, bool AK, bool BKm>
void launch_typed(const TcProblem& pr, HopperKernel which, cudaStream_t stream) {
  using Cfg = HopperCfg<T, BN>;
  HopperParams p;
  p.a = static_cast<const uint8_t*>(pr.a);
  p.b = static_cast<const uint8_t*>(pr.b);
  p.lda = pr.lda;
  p.ldb = pr.ldb;
  p.M = pr.M;
  p.N = pr.N;
  p.K = pr.K;
  p.k_tiles = int(ceil_div<int64_t>(pr.K, Cfg::BK));
  const int64_t tiles_m = ceil_div<int64_t>(pr.M, Cfg::BM), tiles_n = ceil_div<int64_t>(pr.N, BN);
  TORCH_CHECK(tiles_m * tiles_n <= INT_MAX / kSplitMax, "cudasteps.mm: the output [", pr.M, ", ",
              pr.N, "] has too many tiles of ", Cfg::BM, " x ", BN);
  p.raster.tiles_m = int(tiles_m);
  p.raster.tiles_n = int(tiles_n);
  p.raster.group = 8;
  p.splits = 1;
  p.k_tiles_per_split = p.k_tiles;
  p.partial = nullptr;
  p.tma_store = reinterpret_cast<uintptr_t>(pr.out) % 16 == 0 && (pr.ldo * Cfg::kElemBytes) % 16 == 0;
  const Epilogue<T> ep = Epilogue<T>::from(pr);
  const int tiles = p.raster.count();
  if (which == HopperKernel::kCpAsync) {
    auto kernel = wgmma_cp_async_kernel<T, BN, AK, BKm>;
    tc::configure_smem_once(kernel, Cfg::kSmemBytes);
    kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(p, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const CUtensorMap map_a = operand_tensor_map(pr.a, AK, pr.M, pr.K, pr.lda, T, Cfg::BM);
  if (which == HopperKernel::kTma) {
    const CUtensorMap map_b = operand_tensor_map(pr.b, BKm, pr.N, pr.K, pr.ldb, T, BN);
    auto kernel = wgmma_tma_kernel<T, BN, AK, BKm>;
    tc::configure_smem_once(kernel, Cfg::kSmemBytes);
    kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(map_a, map_b, p, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const int sms = sm_count();
  p.splits = pr.tuning.splits > 0 ? std::min(pr.tuning.splits, std::min(p.k_tiles, kSplitMax))
                                  : choose_splits(tiles, p.k_tiles, pr.M, pr.K, sms);
  const int ctas = which == HopperKernel::kMulticast ? 2 : 1;
  // With clusters each CTA loads BN / 2 rows of B (and multicasts them): the box is that tall.
  const CUtensorMap map_b = operand_tensor_map(pr.b, BKm, pr.N, pr.K, pr.ldb, T, BN / ctas);
  at::Tensor partial;
  if (p.splits > 1) {
    p.k_tiles_per_split = ceil_div(p.k_tiles, p.splits);
    p.splits = ceil_div(p.k_tiles, p.k_tiles_per_split);  // no empty range
    partial = at::empty({p.splits, pr.M, pr.N},
                        at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, c10::cuda::current_device()));
    p.partial = partial.data_ptr<float>();
  }
  // Without TMA stores the output map is never read; the operand map stands in for it.
  const CUtensorMap map_out =
      p.tma_store ? output_tensor_map(pr.out, pr.M, pr.N, pr.ldo, T) : map_a;
  // The single-CTA persistent kernels: one block per SM, each walking its work units.
  auto launch_persistent = [&](auto kernel) {
    tc::configure_smem_once(kernel, Cfg::kWsSmemBytes);
    const int grid = std::min(tiles * p.splits, sms);
    kernel<<<grid, 384, Cfg::kWsSmemBytes, stream>>>(map_a, map_b, map_out, p, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (which == HopperKernel::kPingPong) {
    TORCH_CHECK(BN == 128, "cudasteps.mm: tc:ws_pingpong runs 128 x 128 tiles");
    launch_persistent(wgmma_pingpong_kernel<T, AK, BKm>);
  } else if (ctas == 1) {
    launch_persistent(wgmma_ws_kernel<T, BN, AK, BKm, 1>);
  } else {
    // The raster walks pairs of vertically adjacent tiles (one per CTA of a cluster); a group of
    // 4 pairs keeps the 8 tile rows of A in L2 that the single-CTA raster's group of 8 does.
    p.raster.tiles_m = int(ceil_div<int64_t>(tiles_m, 2));
    p.raster.group = 4;
    const int pairs = p.raster.count();
    auto kernel = wgmma_ws_kernel<T, BN, AK, BKm, 2>;
    tc::configure_smem_once(kernel, Cfg::kWsSmemBytes);
    const int clusters =
        std::min(pairs * p.splits, max_active_clusters(kernel, 2, 384, Cfg::kWsSmemBytes));
    const ClusterLaunch launch(2 * clusters, 2, 384, Cfg::kWsSmemBytes, stream);
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, map_out, p, ep));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  if (p.splits > 1) {
    constexpr int kThreads = 256;
    auto reduce = splitk_reduce_kernel<T>;
    const int64_t blocks = persistent_grid(reduce, kThreads, pr.M * pr.N, kThreads);
    reduce<<<unsigned(blocks), kThreads, 0, stream>>>(p.partial, p.splits, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// The tile width of the persistent kernels for a rows x cols output in 128-row tiles: 256 when
// those wider tiles still give every SM one, else 128 (twice the tiles). `forced` (a ladder
// variant's bn<128|256>) wins when non-zero.
int persistent_bn(int64_t rows, int64_t cols, int forced) {
  if (forced != 0) return forced;
  return ceil_div<int64_t>(rows, 128) * ceil_div<int64_t>(cols, 256) >= sm_count() ? 256 : 128;
}

// tc:ws_tf32_rs (kSwap: R = B, S = A; else R = A, S = B): one block per SM over the raster of
// R x S tiles, never split along K.
template <int BN, bool kSwap>
void launch_rs_typed(const TcProblem& pr, cudaStream_t stream) {
  constexpr TcType T = TcType::kTF32;
  using Cfg = RsCfg<BN>;
  const void* r_ptr = kSwap ? pr.b : pr.a;
  const void* s_ptr = kSwap ? pr.a : pr.b;
  const int64_t ldr = kSwap ? pr.ldb : pr.lda, lds = kSwap ? pr.lda : pr.ldb;
  const int64_t rows_r = kSwap ? pr.N : pr.M, rows_s = kSwap ? pr.M : pr.N;
  HopperParams p = {};
  p.M = pr.M;
  p.N = pr.N;
  p.K = pr.K;
  p.k_tiles = int(ceil_div<int64_t>(pr.K, Cfg::BK));
  const int64_t tiles_r = ceil_div<int64_t>(rows_r, Cfg::BM), tiles_s = ceil_div<int64_t>(rows_s, BN);
  TORCH_CHECK(tiles_r * tiles_s <= INT_MAX, "cudasteps.mm: the output [", pr.M, ", ", pr.N,
              "] has too many tiles of ", Cfg::BM, " x ", BN);
  p.raster.tiles_m = int(tiles_r);
  p.raster.tiles_n = int(tiles_s);
  p.raster.group = 8;
  p.splits = 1;
  p.k_tiles_per_split = p.k_tiles;
  const CUtensorMap map_r = operand_tensor_map(r_ptr, false, rows_r, pr.K, ldr, T, Cfg::BM);
  const CUtensorMap map_s = operand_tensor_map(s_ptr, true, rows_s, pr.K, lds, T, BN);
  auto kernel = wgmma_ws_rs_kernel<BN, kSwap>;
  tc::configure_smem_once(kernel, Cfg::kSmemBytes);
  const int grid = std::min(p.raster.count(), sm_count());
  kernel<<<grid, 384, Cfg::kSmemBytes, stream>>>(map_r, map_s, p, Epilogue<T>::from(pr));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_rs(const TcProblem& p, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_rs_supports(p), "cudasteps.mm: tc:ws_tf32_rs cannot take this problem");
  const bool swap = p.a_kmajor;  // A K-major, B MN-major: B is the register operand
  // 128-row tiles along R, BN along S.
  const int bn = swap ? persistent_bn(p.N, p.M, p.tuning.bn) : persistent_bn(p.M, p.N, p.tuning.bn);
  if (swap) {
    bn == 256 ? launch_rs_typed<256, true>(p, stream) : launch_rs_typed<128, true>(p, stream);
  } else {
    bn == 256 ? launch_rs_typed<256, false>(p, stream) : launch_rs_typed<128, false>(p, stream);
  }
}

// The tile width persistent_bn picks (ping-pong: 128 x 128 per consumer warpgroup).
template <TcType T, bool AK, bool BKm>
void launch_layout(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  if (which == HopperKernel::kPingPong) {
    launch_typed<T, 128, AK, BKm>(p, which, stream);  // each consumer warpgroup: 128 x 128
  } else if (persistent_bn(p.M, p.N, p.tuning.bn) == 256) {
    launch_typed<T, 256, AK, BKm>(p, which, stream);
  } else {
    launch_typed<T, 128, AK, BKm>(p, which, stream);
  }
}

template <TcType T>
void launch_type(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  if constexpr (T == TcType::kTF32) {
    launch_layout<T, true, true>(p, which, stream);  // tc_hopper_supports: K-major only
  } else if (p.a_kmajor) {
    if (p.b_kmajor) {
      launch_layout<T, true, true>(p, which, stream);
    } else {
      launch_layout<T, true, false>(p, which, stream);
    }
  } else if (p.b_kmajor) {
    launch_layout<T, false, true>(p, which, stream);
  } else {
    launch_layout<T, false, false>(p, which, stream);
  }
}

void launch(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_supports(p), "cudasteps.mm: the Hopper kernels cannot take this problem");
  // An MN-major TF32 operand goes to launch_rs (or is transposed by the dispatcher).
  TORCH_CHECK(p.type != TcType::kTF32 || (p.a_kmajor && p.b_kmajor),
              "cudasteps.mm: the shared-memory TF32 kernels read K-major operands only");
  switch (p.type) {
    case TcType::kBF16: return launch_type<TcType::kBF16>(p, which, stream);
    case TcType::kFP16: return launch_type<TcType::kFP16>(p, which, stream);
    default: return launch_type<TcType::kTF32>(p, which, stream);
  }
}

}  // namespace

bool tc_hopper_available() {
#ifdef CUDASTEPS_HOPPER_KERNELS
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major == 9 && prop->minor == 0;
#else
  return false;
#endif
}

bool tc_hopper_supports(const TcProblem& p) {
  // TMA coordinates are 32-bit. TF32 wgmma reads shared-memory operands K-major only: one
  // MN-major operand is read through registers (tc:ws_tf32_rs), two are not read.
  const bool layouts_ok = p.type != TcType::kTF32 || p.a_kmajor || p.b_kmajor;
  return tc_hopper_available() && tc_operands_16b_aligned(p) && layouts_ok && p.M < INT_MAX &&
         p.N < INT_MAX && p.K < INT_MAX;
}

bool tc_hopper_rs_supports(const TcProblem& p) {
  return tc_hopper_supports(p) && p.type == TcType::kTF32 && p.a_kmajor != p.b_kmajor;
}

bool tc_hopper_tf32_rs_wanted(int64_t M, int64_t N, int64_t K) {
  // tc:ws_persistent's tiles and split-K choice (launch_layout, launch_typed) for this size.
  const int64_t tiles = ceil_div<int64_t>(M, 128) * ceil_div<int64_t>(N, persistent_bn(M, N, 0));
  if (tiles > INT_MAX / kSplitMax) return false;
  return choose_splits(int(tiles), int(ceil_div<int64_t>(K, 32)), M, K, sm_count()) == 1;
}

void tc_wgmma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kCpAsync, stream);
}

void tc_wgmma_tma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kTma, stream);
}

void tc_ws_persistent_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kWarpSpecialized, stream);
}

void tc_ws_multicast_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kMulticast, stream);
}

void tc_ws_pingpong_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kPingPong, stream);
}

void tc_ws_tf32_rs_launch(const TcProblem& p, cudaStream_t stream) { launch_rs(p, stream); }

// The final kernel is ws_persistent. Measured on an H100:
//   - ws_multicast ran within +-3% of it (bf16, 4096^3, 8192^3 and the FFN shapes in all three
//     layouts; scripts/tc_sweep.py), the run-to-run noise, with no shape consistently faster: the
//     L2 traffic that multicast halves is not what limits these tiles.
//   - ws_pingpong, timed against it on the same buffers call after call (8 interleaved rounds),
//     ran 1.5-6% ahead where K <= 2048 (8192 x 8192 x 2048 NT and NN, 8192 x 8192 x 1024,
//     4096 x 4096 x 2048) and within +-1.5% at K = 4096-8192 (20-25% behind on 4097 x 4095 x
//     4099, where 128 x 128 tiles double the edge waste). But in the benchmark's regime, a new
//     input set per call (operands not in L2), tc:final running ping-pong for K <= 2048 measured
//     the FFN's grad_y @ W2 (8192 x 8192 x 2048, NN) at 0.513-0.517 ms in two full runs, against
//     0.467 ms for ws_persistent, and x @ W1^T no faster (0.431 ms against 0.427 ms). So neither
//     is chosen.
//
// TF32 with one MN-major operand (mm of two row-major matrices) runs tc:ws_tf32_rs, which reads
// that operand through registers instead of having it transposed first. On an H100 (fresh inputs
// per call, two rounds) 4096^3 NN took 0.424-0.443 ms against 0.460-0.466 ms for the transpose
// and tc:ws_persistent, 8192^3 3.26-3.30 ms against 3.37 ms. (The dispatcher only sends it
// products that need no split-K: tc_hopper_tf32_rs_wanted.)
void tc_hopper_final_launch(const TcProblem& p, cudaStream_t stream) {
  if (p.type == TcType::kTF32 && p.a_kmajor != p.b_kmajor) {
    launch_rs(p, stream);
  } else {
    launch(p, HopperKernel::kWarpSpecialized, stream);
  }
}

}  // namespace gemm
}  // namespace cudasteps
