// The multistage cp.async SGEMM (sm_80+): the successor of kernel.cuh's register-staged double
// buffer. Instantiated by the inst_multistage_*.cu units (its configs join the SGEMM config table and
// the ladder steps cp_async_multistage ... swizzled_raster).
//
// Problem and parameters: those of sgemm_kernel (SgemmParams, split-K through gridDim.z).
//
// Structure (one BM x BN output tile per block, warp tiles WM x WN, thread tiles TM x TN):
//   * A ring of Stages shared-memory slices (BK deep) filled by cp.async.cg (16 bytes, global ->
//     shared without a register round trip). Slices t+1 .. t+Stages-1 are in flight while slice t
//     is computed; one commit group per slice, wait_group(Stages - 2) and ONE __syncthreads per
//     slice (the barrier both publishes slice t and retires the stage that the next load reuses).
//   * cp.async cannot transpose, so each operand keeps its global layout in shared memory:
//       contiguous along k (row-major A, linear's weight as B):   s[X][BK + 4]
//       contiguous along m or n (A = x.t(), row-major B):        s[BK][X + 4]
//     Ragged edges are zero-filled by the cp.async source size (0..16 bytes), so partial tiles
//     need no special case in the math.
//   * Fragments: the thread's values of 4 consecutive k. From a k-contiguous tile one LDS.128 per
//     row (TM for A, TN for B); from an m/n-contiguous tile one LDS.128 per 4x4 sub-tile per k
//     (4 * TM / 4: the same count). Then 4 k steps of TM x TN FFMA from registers.
//   * Which rows a thread owns depends on the layout, so that every LDS.128 is conflict-free:
//       m/n-contiguous tile: 4 consecutive rows per 4x4 sub-tile, lanes 4 rows apart: the warp's
//         distinct 16-byte words are consecutive in one k row (one wavefront).
//       k-contiguous tile: rows lane, lane + kLanes, ... (strided): the lanes of one LDS.128 read
//         consecutive rows; a row pitch of BK + 4 floats, an odd number of 16-byte words, puts up
//         to 8 consecutive rows in 8 different bank quads (one wavefront). With 4 consecutive rows
//         per lane (the other mapping) lanes would read rows 4 apart: 4 * pitch is a multiple of
//         8 words, every row in the same two bank quads, a 4-way conflict that no padding fixes.
//   * FragDB: fragment double buffering in registers: the fragments of k group g+1 are read from
//     shared memory while the FFMAs of group g run (costs one more fragment set of registers).
//   * SmemEpilogue: each warp stages its accumulators through (the retired ring's) shared memory,
//     one thread-row of its warp tile at a time, and writes whole 16-byte, fully coalesced output
//     rows; without it every thread stores its own (strided, when B is k-contiguous) elements.
//   * Swizzle: grouped tile order (tc::TileRaster, kGroupM tile rows per group) so that blocks that
//     run together share A and B panels in L2; off: row-major tile order.
// Every operand row must start on a 16-byte boundary (base aligned, leading dimension % 4 == 0):
// gemm_cuda routes other operands to sgemm_kernel's scalar-load path.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "gemm/sgemm/epilogue.cuh"
#include "gemm/sgemm/loaders.cuh"
#include "gemm/sgemm/scheduler.cuh"
#include "gemm/sgemm/tile_config.cuh"
#include "gemm/tc/common.cuh"

namespace cudasteps {
namespace gemm {

//   BM x BN block tile, BK slice depth, WM x WN warp tile, TM x TN thread tile (4x4 sub-tiles),
//   Stages shared-memory slices in the ring, MinBlocks the __launch_bounds__ occupancy target.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int Stages_,
          int MinBlocks_, bool FragDB_, bool SmemEpilogue_, bool Swizzle_>
struct MsConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int Stages = Stages_, MinBlocks = MinBlocks_;
  static constexpr bool FragDB = FragDB_, SmemEpilogue = SmemEpilogue_, Swizzle = Swizzle_;
  static constexpr int kSubM = TM / 4, kSubN = TN / 4;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = (BM / WM) * (BN / WN) * 32;
  static constexpr int kLanesM = WM / TM, kLanesN = WN / TN;
  static constexpr int kGroups = BK / 4;  // 4-deep k groups per slice
  // Above one block per SM the register cap (64K / (threads * MinBlocks)) leaves no room for a
  // fully unrolled slice (ptxas hoists later groups' loads and spills): those walk the groups in a
  // loop. FragDB indexes its two fragment sets by group parity: it needs the full unroll.
  static constexpr int kGroupUnroll = (MinBlocks == 1 || FragDB) ? kGroups : 1;

  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4x4 sub-tiles");
  static_assert(BK % 4 == 0 && ((BK + kSmemPad) / 4) % 2 == 1,
                "BK + 4 floats must be an odd number of 16-byte words (conflict-free row reads)");
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles cover the block tile");
  static_assert(kLanesM * kLanesN == 32 && WM % TM == 0 && WN % TN == 0,
                "a warp tile is WM * WN = 32 * TM * TN outputs");
  static_assert(Stages >= 2 && Stages <= 6, "2 to 6 shared-memory slices in the ring");
  static_assert((BM * BK / 4) % kThreads == 0 && (BN * BK / 4) % kThreads == 0,
                "each thread copies a whole number of 16-byte chunks per slice");
  static_assert((kLanesM * WN / 4) % 32 == 0, "the staged epilogue gives each lane whole float4s");
};

// Shared-memory layout of one instantiation (it depends on the operands' layouts).
template <class Cfg, bool ALayoutK, bool BLayoutK>
struct MsSmem {
  static constexpr int kStrideA = ALayoutK ? Cfg::BK + kSmemPad : Cfg::BM + kSmemPad;
  static constexpr int kFloatsA = ALayoutK ? Cfg::BM * kStrideA : Cfg::BK * kStrideA;
  static constexpr int kStrideB = BLayoutK ? Cfg::BK + kSmemPad : Cfg::BN + kSmemPad;
  static constexpr int kFloatsB = BLayoutK ? Cfg::BN * kStrideB : Cfg::BK * kStrideB;
  static constexpr int kStageFloats = kFloatsA + kFloatsB;
  static constexpr int kRingFloats = Cfg::Stages * kStageFloats;
  // Staged epilogue: per warp kLanesM rows of WN outputs (+4: 16-byte rows, shifted banks).
  static constexpr int kEpiStride = Cfg::WN + kSmemPad;
  static constexpr int kEpiFloats =
      Cfg::SmemEpilogue ? (Cfg::kThreads / 32) * Cfg::kLanesM * kEpiStride : 0;
  static constexpr size_t kBytes =
      size_t(kRingFloats > kEpiFloats ? kRingFloats : kEpiFloats) * sizeof(float);
};

// Row (or column) of the block tile held by accumulator index i of a thread whose lane index
// along that dimension is `lane_x`, for an operand tile that is k-contiguous (KContig) or not.
// See the file comment: strided rows for a k-contiguous tile, 4x4 sub-tiles otherwise.
template <bool KContig, int W, int T, int Lanes>
__device__ __forceinline__ int ms_local(int warp_x, int lane_x, int i) {
  if constexpr (KContig) {
    return warp_x * W + lane_x + i * Lanes;
  } else {
    return warp_x * W + lane_x * 4 + (i / 4) * (W / (T / 4)) + (i % 4);
  }
}

// Issues the cp.async copies of one BX x BK slice of an operand into its shared tile `s` (layout:
// see MsSmem). base: the operand; (x0, k0): the slice's first element; x_rem, k_rem: in-range
// extents from there (>= 1, may exceed the slice). Elements out of range are zero-filled.
template <int BX, int BK, int Threads, bool KContig>
__device__ __forceinline__ void ms_load_tile(float* __restrict__ s, int stride,
                                             const float* __restrict__ base, int64_t ld, int64_t x0,
                                             int64_t k0, int x_rem, int k_rem, int tid) {
  constexpr int kChunks = BX * BK / 4;
#pragma unroll
  for (int j = 0; j < kChunks / Threads; ++j) {
    const int c = tid + j * Threads;
    int x, k, first, last;
    bool outer_ok;
    float* dst;
    const float* src;
    if constexpr (KContig) {
      x = c / (BK / 4);
      k = (c % (BK / 4)) * 4;
      outer_ok = x < x_rem;
      first = k;
      last = k_rem;
      dst = s + x * stride + k;
      src = base + (x0 + x) * ld + (k0 + k);
    } else {
      k = c / (BX / 4);
      x = (c % (BX / 4)) * 4;
      outer_ok = k < k_rem;
      first = x;
      last = x_rem;
      dst = s + k * stride + x;
      src = base + (k0 + k) * ld + (x0 + x);
    }
    const int left = last - first;
    const int valid = outer_ok ? (left >= 4 ? 4 : (left > 0 ? left : 0)) : 0;
    // Nothing is read when valid == 0; the operand's (16-byte aligned) base stands in for an
    // address that may lie past the allocation.
    tc::cp_async_16_bytes(dst, valid > 0 ? src : base, valid * 4);
  }
}

template <class Cfg, bool ALayoutK, bool BLayoutK>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    sgemm_multistage_kernel(const SgemmParams p) {
  using Smem = MsSmem<Cfg, ALayoutK, BLayoutK>;
  // With both operands k-contiguous and 128 accumulators, the fragments of one group (4 * (TM +
  // TN) floats) leave no room for a fully unrolled slice (ptxas -v: 128x256x16 spills 8 bytes):
  // walk the groups in a loop there.
  constexpr int kGroupUnroll =
      (ALayoutK && BLayoutK && Cfg::TM * Cfg::TN >= 128 && !Cfg::FragDB) ? 1 : Cfg::kGroupUnroll;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int Stages = Cfg::Stages;
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
  const int lane_m = lane / Cfg::kLanesN, lane_n = lane % Cfg::kLanesN;

  int tile_m, tile_n;
  const tc::TileRaster raster{p.tiles_m, p.tiles_n, Cfg::Swizzle ? kGroupM : 1};
  raster.coords(int(blockIdx.x), tile_m, tile_n);
  const int64_t m0 = int64_t(tile_m) * BM, n0 = int64_t(tile_n) * BN;

  const int64_t k_begin = int64_t(blockIdx.z) * p.k_per_split;
  const int64_t k_end = p.K < k_begin + p.k_per_split ? p.K : k_begin + p.k_per_split;
  const int num_slices = k_end > k_begin ? int((k_end - k_begin + BK - 1) / BK) : 0;
  const int m_rem = int(min(p.M - m0, int64_t(BM)));
  const int n_rem = int(min(p.N - n0, int64_t(BN)));

  float acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = 0.f;

  auto load_slice = [&](int t, int stage) {
    const int64_t k0 = k_begin + int64_t(t) * BK;
    const int k_rem = int(min(k_end - k0, int64_t(BK)));
    float* As = smem + stage * Smem::kStageFloats;
    float* Bs = As + Smem::kFloatsA;
    ms_load_tile<BM, BK, Cfg::kThreads, ALayoutK>(As, Smem::kStrideA, p.a, p.lda, m0, k0, m_rem,
                                                  k_rem, tid);
    ms_load_tile<BN, BK, Cfg::kThreads, BLayoutK>(Bs, Smem::kStrideB, p.b, p.ldb, n0, k0, n_rem,
                                                  k_rem, tid);
  };

  // The thread's A and B values of one 4-deep k group: a[kk][r], b[kk][c].
  struct Frag {
    float a[4][TM];
    float b[4][TN];
  };
  auto load_frag = [&](Frag& f, const float* __restrict__ As, const float* __restrict__ Bs, int g) {
    if constexpr (ALayoutK) {
#pragma unroll
      for (int r = 0; r < TM; ++r) {
        const int m = ms_local<true, Cfg::WM, TM, Cfg::kLanesM>(warp_m, lane_m, r);
        const float4 v = *reinterpret_cast<const float4*>(As + m * Smem::kStrideA + g * 4);
        f.a[0][r] = v.x;
        f.a[1][r] = v.y;
        f.a[2][r] = v.z;
        f.a[3][r] = v.w;
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int i = 0; i < Cfg::kSubM; ++i) {
          const int m = ms_local<false, Cfg::WM, TM, Cfg::kLanesM>(warp_m, lane_m, i * 4);
          const float4 v = *reinterpret_cast<const float4*>(As + (g * 4 + kk) * Smem::kStrideA + m);
          f.a[kk][i * 4 + 0] = v.x;
          f.a[kk][i * 4 + 1] = v.y;
          f.a[kk][i * 4 + 2] = v.z;
          f.a[kk][i * 4 + 3] = v.w;
        }
    }
    if constexpr (BLayoutK) {
#pragma unroll
      for (int c = 0; c < TN; ++c) {
        const int n = ms_local<true, Cfg::WN, TN, Cfg::kLanesN>(warp_n, lane_n, c);
        const float4 v = *reinterpret_cast<const float4*>(Bs + n * Smem::kStrideB + g * 4);
        f.b[0][c] = v.x;
        f.b[1][c] = v.y;
        f.b[2][c] = v.z;
        f.b[3][c] = v.w;
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int j = 0; j < Cfg::kSubN; ++j) {
          const int n = ms_local<false, Cfg::WN, TN, Cfg::kLanesN>(warp_n, lane_n, j * 4);
          const float4 v = *reinterpret_cast<const float4*>(Bs + (g * 4 + kk) * Smem::kStrideB + n);
          f.b[kk][j * 4 + 0] = v.x;
          f.b[kk][j * 4 + 1] = v.y;
          f.b[kk][j * 4 + 2] = v.z;
          f.b[kk][j * 4 + 3] = v.w;
        }
    }
  };
  auto fma_frag = [&](const Frag& f) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] = fmaf(f.a[kk][r], f.b[kk][c], acc[r][c]);
  };
  auto compute_slice = [&](int stage) {
    const float* As = smem + stage * Smem::kStageFloats;
    const float* Bs = As + Smem::kFloatsA;
    if constexpr (Cfg::FragDB) {
      Frag f[2];
      load_frag(f[0], As, Bs, 0);
#pragma unroll
      for (int g = 0; g < Cfg::kGroups; ++g) {
        if (g + 1 < Cfg::kGroups) load_frag(f[(g + 1) & 1], As, Bs, g + 1);
        fma_frag(f[g & 1]);
      }
    } else {
#pragma unroll kGroupUnroll
      for (int g = 0; g < Cfg::kGroups; ++g) {
        Frag f;
        load_frag(f, As, Bs, g);
        fma_frag(f);
      }
    }
  };

  // Prologue: slices 0 .. Stages-2 in flight. Every step commits exactly one group (empty past
  // the last slice), so before the wait of iteration t, Stages - 1 + t groups are committed and
  // wait_group(Stages - 2) leaves slice t's group complete.
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < num_slices) load_slice(s, s);
    tc::cp_async_commit();
  }
  int read_stage = 0, write_stage = Stages - 1;
  for (int t = 0; t < num_slices; ++t) {
    tc::cp_async_wait<Stages - 2>();
    // Publishes slice t to every thread, and every thread is done with slice t-1, whose stage
    // (write_stage) the next copies overwrite.
    __syncthreads();
    if (t + Stages - 1 < num_slices) load_slice(t + Stages - 1, write_stage);
    tc::cp_async_commit();
    compute_slice(read_stage);
    read_stage = read_stage + 1 == Stages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == Stages ? 0 : write_stage + 1;
  }
  tc::cp_async_wait<0>();  // only empty groups can remain; none may outlive the block

  float* out = p.out + int64_t(blockIdx.z) * p.out_split_stride;
  const bool vec_out = (p.N % 4 == 0) && ((reinterpret_cast<uintptr_t>(out) & 15) == 0);
  // alpha * acc + beta * C for the 4 outputs (m, n .. n+3), stored as one float4 when possible.
  auto store4 = [&](int64_t m, int64_t n, float4 v) {
    float w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      w[c] *= p.alpha;
      if (p.addend != nullptr && n + c < p.N)
        w[c] += p.beta * __ldg(p.addend + m * p.add_s0 + (n + c) * p.add_s1);
    }
    float* dst = out + m * p.N + n;
    if (vec_out && n + 4 <= p.N) {
      // An explicit STG.128: written as a float4 assignment, the compiler merged it with the
      // scalar branch into 4 predicated 4-byte stores.
      __stwb(reinterpret_cast<float4*>(dst), make_float4(w[0], w[1], w[2], w[3]));
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (n + c < p.N) dst[c] = w[c];
    }
  };

  if constexpr (Cfg::SmemEpilogue) {
    __syncthreads();  // every warp is done reading the ring that the staging area reuses
    float* stage = smem + warp * Cfg::kLanesM * Smem::kEpiStride;
    constexpr int kVecPerRow = Cfg::WN / 4;
    constexpr int kVecPerLane = Cfg::kLanesM * kVecPerRow / 32;
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      // Pass r: the warp's kLanesM rows that hold accumulator row r (row lane_m of the stage).
#pragma unroll
      for (int c = 0; c < TN; ++c) {
        const int n = ms_local<BLayoutK, Cfg::WN, TN, Cfg::kLanesN>(0, lane_n, c);
        stage[lane_m * Smem::kEpiStride + n] = acc[r][c];
      }
      __syncwarp();
#pragma unroll
      for (int v = 0; v < kVecPerLane; ++v) {
        const int i = lane + v * 32;
        const int row = i / kVecPerRow, col = (i % kVecPerRow) * 4;
        const int64_t m = m0 + ms_local<ALayoutK, Cfg::WM, TM, Cfg::kLanesM>(warp_m, row, r);
        const int64_t n = n0 + warp_n * Cfg::WN + col;
        if (m < p.M && n < p.N)
          store4(m, n, *reinterpret_cast<const float4*>(stage + row * Smem::kEpiStride + col));
      }
      __syncwarp();  // the stage is rewritten by the next pass
    }
  } else {
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      const int64_t m = m0 + ms_local<ALayoutK, Cfg::WM, TM, Cfg::kLanesM>(warp_m, lane_m, r);
      if (m >= p.M) continue;
      if constexpr (!BLayoutK) {
#pragma unroll
        for (int j = 0; j < Cfg::kSubN; ++j) {
          const int64_t n = n0 + ms_local<false, Cfg::WN, TN, Cfg::kLanesN>(warp_n, lane_n, j * 4);
          if (n < p.N)
            store4(m, n,
                   make_float4(acc[r][j * 4], acc[r][j * 4 + 1], acc[r][j * 4 + 2],
                               acc[r][j * 4 + 3]));
        }
      } else {
#pragma unroll
        for (int c = 0; c < TN; ++c) {
          const int64_t n = n0 + ms_local<true, Cfg::WN, TN, Cfg::kLanesN>(warp_n, lane_n, c);
          if (n < p.N) {
            float v = p.alpha * acc[r][c];
            if (p.addend != nullptr) v += p.beta * __ldg(p.addend + m * p.add_s0 + n * p.add_s1);
            out[m * p.N + n] = v;
          }
        }
      }
    }
  }
}

}  // namespace gemm
}  // namespace cudasteps
