// The tiled SGEMM kernel template: tile parameters, the global->shared loader, the inner product
// loop and the epilogue. Instantiated by gemm_cuda.cu (the config table) and
// gemm_ladder_cuda.cu (the `vectorized` and `warptile` ladder steps, which are this kernel with
// features switched off).
//
// Problem: out[M, N] = alpha * A[M, K] @ B[K, N] + beta * C (C: optional strided addend).
//
// Structure (per block of Threads threads, one BM x BN output tile):
//   * K is walked in BK-deep slices. Each slice of A (BM x BK) and B (BK x BN) is staged through
//     registers into shared memory, both stored k-major: As[BK][BM + pad], Bs[BK][BN + pad].
//     A is therefore stored transposed, so that for a fixed k the M values a thread needs are
//     contiguous and come in with LDS.128.
//   * Global loads are 16 bytes (LDG.128) along whichever dimension is contiguous in memory: for
//     row-major A and column-major B that is K (the 4 values are then scattered to 4 k rows of the
//     shared tile: the transposed store); otherwise M or N (one STS.128).
//   * Each thread owns a TM x TN accumulator block in registers, made of (TM/4) x (TN/4) 4x4
//     sub-tiles spaced WM/(TM/4) rows and WN/(TN/4) columns apart inside its warp's WM x WN tile
//     (the warp tile). For one k, the 32 lanes of a warp read at most 8 distinct 16-byte words of
//     As (one 128-byte wavefront, the rest are broadcasts) and 8 of Bs: conflict-free LDS.128.
//     Per k a thread issues TM/4 + TN/4 LDS.128 for TM * TN FFMA (8x8: 4 loads, 64 FFMA).
//   * Stages = 2: double-buffered shared memory with register prefetch. The loads of slice t+1 are
//     issued before the FFMAs of slice t and stored to the other buffer after them, so global
//     latency hides behind math and there is one __syncthreads per slice.
//   * Stages >= 3 (sm_80+): a ring of Stages shared-memory slices filled by cp.async, global ->
//     shared with no register round trip (CpAsyncLoader), so the slices in flight hold no
//     registers. The tiles stay k-major: a K-contiguous operand is copied one float at a time
//     (4-byte cp.async), which transposes it on the way in, so the fragment loads are the same
//     LDS.128 as above. The one __syncthreads per slice sits before the last k step, whose
//     fragments are already in registers: after it the first fragments of slice t+1 load while
//     the last FFMAs of slice t run (fragments double-buffered across the slice boundary), and no
//     thread reads slice t again. So during slice t the stage of slice t-1 is free: the copies of
//     slice t+Stages-1 go there, spread over the first k steps (CopyGroup per step) instead of
//     one burst after the barrier, where both warps of a scheduler would stall on it together.
//     On an H100 the spreading took the 128x256x8 ring from 0.79-0.85x to 0.92x of cuBLAS at
//     4096^3. The copies keep little state (CpAsyncLoader): with it the 256x128x8 tile (8
//     4-byte copies of A per thread per slice) fits in 255 registers without spilling and runs
//     0.98x (it spilled 52-56 bytes before, with a predicate and a pointer per copy).
//   * Blocked sums (the ring, p.sum_block_slices > 0): every sum_block_slices slices a thread adds
//     its accumulators into a running total of its own in shared memory, past the ring, and
//     starts them again from zero; the epilogue takes total + accumulators. A straight fp32 sum
//     over K has a rounding error that grows like K (each add rounds at the size of the running
//     sum); in B blocks it grows like K / sqrt(B). A flush moves 2 x TM x TN floats per thread
//     through shared memory (all warps at once: about the time of one slice's FFMAs).
//   * Split-K (gridDim.z > 1): block z covers K range [z * k_per_split, ...) and writes its raw
//     partial sums to a workspace; splitk_epilogue_kernel adds them up and applies the epilogue.
//   * Epilogue: alpha * acc + beta * C[m * s0 + n * s1], stored as float4 when N allows; OutT
//     (an NN product run transposed, C^T = B^T A^T) stores the transposed product, float4 along M.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "gemm/tc_common.cuh"

namespace cudasteps {
namespace gemm {

// Floats of padding per shared-memory row. A multiple of 4 keeps every row 16-byte aligned for
// LDS.128 / STS.128; it also shifts consecutive k rows by 4 banks, so the transposed scalar stores
// of a K-contiguous operand (4 consecutive k of 8 different m per warp) hit at most 2 ways.
constexpr int kSmemPad = 4;
// Output tiles are visited in groups of kGroupM tile rows (Triton's grouped order): consecutive
// blocks share B column panels and A row panels while they are still in L2.
constexpr int kGroupM = 8;

// TileConfig::SerpentineFma's bit for an instantiation: the layout (ALayoutK: A contiguous along K,
// BLayoutK: B contiguous along K), and the kernel (sgemm_kernel, or stream-K's tail kernel).
constexpr unsigned fma_order_bit(bool a_layout_k, bool b_layout_k, bool stream_k) {
  return 1u << ((a_layout_k ? 2 : 0) + (b_layout_k ? 1 : 0) + (stream_k ? 4 : 0));
}

// The compile-time shape of one kernel instantiation.
//   BM x BN  block tile (outputs per block)        BK  K-depth of one shared-memory slice
//   WM x WN  warp tile (outputs per warp)          TM x TN  thread tile (accumulators per thread)
//   Stages   1: single buffer, 2: double buffer, 3..6: cp.async ring (sm_80+, warp tiles only)
//   WarpTile  false: threads laid out row-major over the block tile, each owning one contiguous
//            TM x TN block (the `vectorized` ladder step, whose Bs reads are 4-way bank
//            conflicted); true: the warp-tiled layout above.
//   MinBlocks  __launch_bounds__ occupancy target (caps registers at 64K / (Threads * MinBlocks)).
//   KUnroll  unroll factor of the per-k loop over a slice. Full unrolling (BK) lets ptxas hoist
//            shared loads of later k steps, which at the 128-register cap of 2 blocks/SM spills
//            (ptxas -v: 96-136 bytes for 128x128x16, 8x8); 1 keeps 8x8 tiles spill-free at ~3
//            loop instructions per 64 FFMA, the other warps of the SM covering the LDS latency.
//   CopyGroup  cp.async ring: copies of the next slice issued per k step (A's first, then B's);
//            CopyGroupKK when both operands are K-contiguous (every copy 4-byte: 12 per thread at
//            256x128x8 against 9 for a row-major B), CopyGroupUnaligned for the Vec = false
//            instantiation. No one rule fits ptxas's schedules: on an H100 at 4096^3, 256x128x8
//            NN ran 0.97x of cuBLAS with 1 or 2 per step, 0.98x with 3, 0.84x with all 9 at
//            once, NT 0.99x with 2 and 0.96x with 3; 128x256x8 NN 0.87x with 1, 0.93x with 4.
//   SerpentineFma  which instantiations issue a k step's TM x TN FFMAs in serpentine order (rows
//            of the thread tile alternately left to right and right to left) instead of row by
//            row: a bit per layout and kernel, fma_order_bit above; aligned (Vec) only. The
//            results are the same bit for bit (each accumulator gets the same FFMAs in the same
//            k order); what changes is ptxas's register assignment, so which operands share a
//            register bank. No order wins everywhere (256x128x8 on an H100, against row order:
//            TN +3%, NT +2%, TT +1.4%, the stream-K kernel NN better, sgemm_kernel NN 0.8%
//            worse; 128x256x8: +2-9% in every layout).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int Stages_, bool WarpTile_,
          int MinBlocks_, int KUnroll_ = BK_, int CopyGroup_ = 1, int CopyGroupKK_ = CopyGroup_,
          int CopyGroupUnaligned_ = CopyGroup_, unsigned SerpentineFma_ = 0>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int Stages = Stages_;
  static constexpr bool WarpTile = WarpTile_;
  static constexpr int MinBlocks = MinBlocks_;
  static constexpr int KUnroll = KUnroll_;
  static constexpr int kSubM = TM / 4, kSubN = TN / 4;  // 4x4 sub-tiles per thread
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = WarpTile ? (BM / WM) * (BN / WN) * 32 : (BM / TM) * (BN / TN);
  // Warp-tiled layout: lanes along N and M inside a warp tile.
  static constexpr int kLanesN = WN / kSubN / 4;
  static constexpr int kLanesM = WM / kSubM / 4;
  static constexpr int kStrideA = BM + kSmemPad;  // floats per As row (one k)
  static constexpr int kStrideB = BN + kSmemPad;
  static constexpr int kStageFloats = BK * (kStrideA + kStrideB);
  static constexpr size_t kSmemBytes = size_t(Stages) * kStageFloats * sizeof(float);
  // The blocked sums' running totals (the ring only), past the ring's stages.
  static constexpr size_t kSumBytes = size_t(BM) * BN * sizeof(float);
  static constexpr int CopyGroup = CopyGroup_, CopyGroupKK = CopyGroupKK_;
  static constexpr int CopyGroupUnaligned = CopyGroupUnaligned_;
  static constexpr unsigned SerpentineFma = SerpentineFma_;

  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4x4 sub-tiles");
  static_assert(BK % 4 == 0, "BK holds whole 16-byte chunks");
  static_assert(Stages >= 1 && Stages <= 6, "one or two buffers, or a ring of 3 to 6");
  static_assert(Stages <= 2 || (WarpTile && BK % 8 == 0 && (BM * BK) % kThreads == 0 &&
                                (BN * BK) % kThreads == 0 && BM % 32 == 0 && BN % 32 == 0),
                "the cp.async ring copies whole 8-deep k groups, one float per thread per copy");
  static_assert(!WarpTile || (BM % WM == 0 && BN % WN == 0), "warp tiles cover the block tile");
  static_assert(!WarpTile || kLanesM * kLanesN == 32, "a warp tile is WM*WN = 32*TM*TN outputs");
  static_assert(WarpTile || (BM % TM == 0 && BN % TN == 0), "thread tiles cover the block tile");
  static_assert((BM * BK / 4) % kThreads == 0 && (BN * BK / 4) % kThreads == 0,
                "each thread loads a whole number of 16-byte chunks per slice");
};

// Moves one BX x BK slice of an operand (x = m for A, n for B) from global memory into registers
// (load) and from registers into a k-major shared tile s[BK][BX + pad] (store).
//   KContig: the operand is contiguous along k (row-major A, column-major B): element (x, k) at
//            p[x * ld + k]; else contiguous along x: element (x, k) at p[k * ld + x].
//   Vec:     the base pointer is 16-byte aligned and ld % 4 == 0, so whole in-range chunks load as
//            one LDG.128; otherwise (and for the ragged last chunk) 4 guarded scalar loads.
// Out-of-range elements load as 0, so partial tiles need no special case in the math.
template <int BX, int BK, int Threads, bool KContig, bool Vec>
struct TileLoader {
  static constexpr int kChunks = BX * BK / 4;
  static constexpr int kPerThread = kChunks / Threads;
  static constexpr int kStride = BX + kSmemPad;
  float4 regs[kPerThread];

  // Local coordinates of the first element of chunk c.
  __device__ __forceinline__ static void chunk_coords(int c, int& x, int& k) {
    if constexpr (KContig) {
      x = c / (BK / 4);
      k = (c % (BK / 4)) * 4;
    } else {
      k = c / (BX / 4);
      x = (c % (BX / 4)) * 4;
    }
  }

  // tile: the slice's element (0, 0) (x0, k0); x_rem, k_rem: in-range extents from there (may
  // exceed the tile). 32-bit in-tile coordinates, 64-bit offsets (x * ld can pass 2^31).
  __device__ __forceinline__ void load(const float* __restrict__ tile, int64_t ld, int x_rem,
                                       int k_rem, int tid) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      int x, k;
      chunk_coords(tid + j * Threads, x, k);
      const bool outer_ok = KContig ? x < x_rem : k < k_rem;
      const int first = KContig ? k : x;     // along the contiguous dimension
      const int last = KContig ? k_rem : x_rem;  // exclusive end of that dimension
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (outer_ok) {
        const float* src = KContig ? tile + int64_t(x) * ld + k : tile + int64_t(k) * ld + x;
        if (Vec && first + 4 <= last) {
          v = __ldg(reinterpret_cast<const float4*>(src));
        } else {
          if (first + 0 < last) v.x = __ldg(src + 0);
          if (first + 1 < last) v.y = __ldg(src + 1);
          if (first + 2 < last) v.z = __ldg(src + 2);
          if (first + 3 < last) v.w = __ldg(src + 3);
        }
      }
      regs[j] = v;
    }
  }

  __device__ __forceinline__ void store(float* __restrict__ s, int tid) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      int x, k;
      chunk_coords(tid + j * Threads, x, k);
      if constexpr (KContig) {
        // The transposed store: 4 consecutive k of one x go to 4 rows of the k-major tile.
        s[(k + 0) * kStride + x] = regs[j].x;
        s[(k + 1) * kStride + x] = regs[j].y;
        s[(k + 2) * kStride + x] = regs[j].z;
        s[(k + 3) * kStride + x] = regs[j].w;
      } else {
        *reinterpret_cast<float4*>(s + k * kStride + x) = regs[j];
      }
    }
  }
};

// The cp.async counterpart of TileLoader (Stages >= 3): issues the copies of one BX x BK slice of
// an operand straight into the k-major shared tile s[BK][BX + pad].
//   KContig: one float per copy. Lane l of a warp copies k = l % 8 of row x = l / 8 (+ 4 per
//            warp): every 32-byte row segment is one sector, and in shared memory the 8 k of a row
//            land kStride apart. kStride = BX + 4 is 4 banks mod 32 (BX % 32 == 0), so the 32
//            lanes (4 rows x 8 k) hit 32 different banks: the transpose is conflict-free.
//   else:    contiguous along x: 16-byte copies (Vec), or four 4-byte copies when the operand's
//            rows are not 16-byte aligned. A chunk that straddles x_rem copies its valid part.
// Past the operand's edge along x (rows of A past M, columns of B past N) the copies read the last
// row (KContig) or nothing: those shared values only reach outputs that are never stored. Past K
// (the last slice, and the dead slices after it) the copies write zeros, which the math needs.
// The thread's copies sit at fixed offsets from its first one (rows kRowsPerPass apart, k rows
// kKPerPass apart), computed once, so per slice issuing is a compare, 64-bit adds and the copies.
template <int BX, int BK, int Threads, bool KContig, bool Vec>
struct CpAsyncLoader {
  static constexpr int kStride = BX + kSmemPad;
  // KContig: floats per thread per slice; else 16-byte chunks.
  static constexpr int kPerThread = KContig ? BX * BK / Threads : BX * BK / 4 / Threads;
  static constexpr int kRowsPerPass = Threads / 8;      // KContig: rows covered by one copy of all
  static constexpr int kKPerPass = Threads / (BX / 4);  // else: k rows covered likewise
  static constexpr int kRows = KContig ? BX / kRowsPerPass : 1;  // distinct rows per thread
  static_assert(KContig ? BX % kRowsPerPass == 0 : Threads % (BX / 4) == 0,
                "each copy of a thread moves by whole rows of the slice");

  // Local offsets of copy j from copy 0 (compile-time; before the clamp at the edge).
  __device__ __forceinline__ static constexpr int dx(int j) {
    return KContig ? (j % kRows) * kRowsPerPass : 0;
  }
  __device__ __forceinline__ static constexpr int dk(int j) {
    return KContig ? 8 * (j / kRows) : j * kKPerPass;
  }

  const float* src;   // copy 0 of the current slice
  const float* base;  // KContig: copy 0's row at slice 0's first k; else its chunk at that k.
                      // In bounds: the copies that read nothing name it (+ their row offset).
  int64_t row_off[kRows];  // KContig: element offset of copy j's row from copy 0's (j % kRows)
  int64_t ld;
  int dst;      // copy 0's offset in the shared tile
  int k0;       // copy 0's k in the slice
  int x_valid;  // else: elements of the thread's 4-wide chunk inside the operand (0..4)

  // tile: slice 0's element (0, 0); x_rem: in-range extent along x from there (>= 1, may
  // exceed BX).
  __device__ __forceinline__ CpAsyncLoader(const float* tile, int64_t ld_, int x_rem, int tid)
      : ld(ld_) {
    int x;
    if constexpr (KContig) {
      x = tid / 8;
      k0 = tid % 8;
      // Rows past the edge read the last row instead (their outputs are not stored).
      const int x_read = x < x_rem ? x : x_rem - 1;
      base = tile + int64_t(x_read) * ld;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int xr = x + r * kRowsPerPass;
        row_off[r] = int64_t((xr < x_rem ? xr : x_rem - 1) - x_read) * ld;
      }
      src = base + k0;
      x_valid = 0;
    } else {
      x = (tid % (BX / 4)) * 4;
      k0 = tid / (BX / 4);
      const int left = x_rem - x;
      x_valid = left >= 4 ? 4 : (left > 0 ? left : 0);
      base = tile + (x_valid > 0 ? x : 0);  // a chunk wholly past the edge names column 0
      src = base + int64_t(k0) * ld;
    }
    dst = k0 * kStride + x;
  }

  // k_rem: in-range extent along k from the slice's first k (<= 0: nothing is read, the copies
  // write zeros) -> the limit that issue_one takes.
  __device__ __forceinline__ int k_limit(int k_rem) const { return k_rem - k0; }

  // Copy j (0 <= j < kPerThread) of the current slice into the shared tile s.
  __device__ __forceinline__ void issue_one(int j, float* __restrict__ s, int k_lim) const {
    const bool k_ok = dk(j) < k_lim;
    float* to = s + dst + dk(j) * kStride + dx(j);
    if constexpr (KContig) {
      const int64_t off = j % kRows == 0 ? 0 : row_off[j % kRows];
      tc::cp_async_4(to, (k_ok ? src + dk(j) : base) + off, k_ok);
    } else {
      const float* from = k_ok ? src + int64_t(dk(j)) * ld : base;
      if constexpr (Vec) {
        tc::cp_async_16_bytes(to, from, k_ok ? x_valid * 4 : 0);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const bool ok = k_ok && i < x_valid;
          tc::cp_async_4(to + i, ok ? from + i : base, ok);
        }
      }
    }
  }

  // Moves to the next slice, `step` elements on.
  __device__ __forceinline__ void advance(int64_t step) { src += step; }
};

// A thread's N fragment values at one k: N / 4 LDS.128 of 4 consecutive floats, at src,
// src + step, src + 2 * step, ... (its 4x4 sub-tiles along one dimension of the warp tile).
template <int N>
__device__ __forceinline__ void load_fragment(float* dst, const float* __restrict__ src, int step) {
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const float4 v = *reinterpret_cast<const float4*>(src + i * step);
    dst[i * 4 + 0] = v.x;
    dst[i * 4 + 1] = v.y;
    dst[i * 4 + 2] = v.z;
    dst[i * 4 + 3] = v.w;
  }
}

struct SgemmParams {
  const float* a;
  const float* b;
  int64_t lda, ldb;
  float* out;               // row-major, leading dimension N (OutT: column-major, M)
  int64_t out_split_stride;  // elements between the partial outputs of split-K blocks
  const float* addend;      // nullptr: none
  int64_t add_s0, add_s1;
  float alpha, beta;
  int64_t M, N, K;
  int64_t k_per_split;  // multiple of BK; >= K when not split
  int tiles_m, tiles_n;
  // The ring: slices per block of the blocked sums (0: one running sum; else the kernel is
  // launched with kSumBytes more shared memory).
  int sum_block_slices;
};

// First row (m) and column (n) of this thread's accumulators, and the spacing of its 4x4
// sub-tiles: accumulator (r, c) is output (row0 + (r / 4) * row_step + r % 4,
// col0 + (c / 4) * col_step + c % 4) of the block tile.
template <class Cfg>
__device__ __forceinline__ void thread_origin(int tid, int& row0, int& col0, int& row_step,
                                              int& col_step) {
  if constexpr (Cfg::WarpTile) {
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;
    row0 = warp_m * Cfg::WM + (lane / Cfg::kLanesN) * 4;
    col0 = warp_n * Cfg::WN + (lane % Cfg::kLanesN) * 4;
    row_step = Cfg::WM / Cfg::kSubM;
    col_step = Cfg::WN / Cfg::kSubN;
  } else {
    row0 = (tid / (Cfg::BN / Cfg::TN)) * Cfg::TM;
    col0 = (tid % (Cfg::BN / Cfg::TN)) * Cfg::TN;
    row_step = 4;
    col_step = 4;
  }
}

// Stores v[0..3] (alpha already applied) plus beta * p.addend[add + (pos + c) * step] to
// dst[0..3], for the positions pos + c below `limit` (the others are past the matrix): one
// 16-byte store when vec_out and all four are in bounds.
__device__ __forceinline__ void store_out4_at(const SgemmParams& p, float* dst, int64_t add,
                                              int64_t step, int64_t pos, int64_t limit,
                                              float (&v)[4], bool vec_out) {
#pragma unroll
  for (int c = 0; c < 4; ++c)
    if (p.addend != nullptr && pos + c < limit)
      v[c] += p.beta * __ldg(p.addend + add + (pos + c) * step);
  if (vec_out && pos + 4 <= limit) {
    *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (pos + c < limit) dst[c] = v[c];
  }
}

// Output row m, columns n .. n+3 (store_out4_at).
__device__ __forceinline__ void store_out4(const SgemmParams& p, float* out, int64_t m, int64_t n,
                                           float (&v)[4], bool vec_out) {
  store_out4_at(p, out + m * p.N + n, m * p.add_s0, p.add_s1, n, p.N, v, vec_out);
}

// The same for a kernel that computes the transposed output (OutT: an NN product run as
// (B^T A^T)^T, see sgemm_tile): its element (m, n) is output element (n, m), at out[n * M + m].
// Stores the kernel's rows m .. m+3 of column n, contiguous in the output (vec_out: M % 4 == 0,
// out aligned). The addend's strides are the kernel's (swapped by the caller).
__device__ __forceinline__ void store_out4_t(const SgemmParams& p, float* out, int64_t m,
                                             int64_t n, float (&v)[4], bool vec_out) {
  store_out4_at(p, out + n * p.M + m, n * p.add_s1, p.add_s0, m, p.M, v, vec_out);
}

// First output row and column of output tile `tile`. Grouped order: kGroupM tile rows at a time,
// column by column inside the group, so that consecutive tiles share panels of A and B in L2.
template <class Cfg>
__device__ __forceinline__ void tile_origin(const SgemmParams& p, int tile, int64_t& m0,
                                            int64_t& n0) {
  const int tiles_per_group = kGroupM * p.tiles_n;
  const int first_m = (tile / tiles_per_group) * kGroupM;
  const int group_rows = min(p.tiles_m - first_m, kGroupM);
  const int in_group = tile % tiles_per_group;
  m0 = int64_t(first_m + in_group % group_rows) * Cfg::BM;
  n0 = int64_t(in_group / group_rows) * Cfg::BN;
}

// ---- stream-K tail ----
//
// A product of T tiles on S SMs (one block per SM) runs floor(T / S) full waves and a last wave
// of `tail` = T % S tiles that leaves the other SMs idle (8192^3 at 256x128: 15 waves + 68 of
// 132). With the stream-K tail, sgemm_kernel runs the full waves (tiles [0, dp_tiles)) and
// sgemm_streamk_kernel shares the tail tiles' K iterations (slices of BK, iters_per_tile per
// tile) evenly over `blocks` blocks, one per SM: block b takes iterations
// [b * I / blocks, (b + 1) * I / blocks) of the tail's I = tail * iters_per_tile, tile by tile.
// With tail <= blocks that is a part of at most two tiles: the end of one and the start of the
// next. Each part's partial sums go to one of the block's two workspace slots; the block that
// writes a tile's last part adds up the tile's parts in block order (deterministic: the same order
// whichever block comes last; no floating-point atomics; no block waits on another) and stores it.
struct StreamKParams {
  int dp_tiles;        // tiles [0, dp_tiles) are sgemm_kernel's; the tail is [dp_tiles, T)
  int blocks;          // blocks sharing the tail: from the tail's tile count up to iters (so
                       // that no block's range is empty)
  int iters_per_tile;  // ceil(K / BK)
  int64_t iters;       // tail * iters_per_tile
  float* workspace;    // blocks * 2 slots of BM * BN floats
  int* counters;       // parts written, one per tail tile, zero before the launch
};

// First tail iteration of block b's range.
__host__ __device__ __forceinline__ int64_t streamk_begin(const StreamKParams& sk, int b) {
  return int64_t(b) * sk.iters / sk.blocks;
}

// The block whose range holds tail iteration `it` (no range is empty: blocks <= iters).
__device__ __forceinline__ int streamk_block_of(const StreamKParams& sk, int64_t it) {
  int b = int(it * sk.blocks / sk.iters);
  while (b > 0 && streamk_begin(sk, b) > it) --b;
  while (streamk_begin(sk, b + 1) <= it) ++b;
  return b;
}

// One block's work on output tile `tile` over the K range [k_begin, k_end): the main loop (the
// ring or the register-staged buffers), then the epilogue: alpha * acc + beta * C into the output
// (or, split-K, into block z's partial output). StreamK: the block's sums are one part of the
// tile; they go to the workspace, and the block that writes the tile's last part adds up all the
// parts in block order (a fixed order whichever block comes last: deterministic) and stores them.
// ALayoutK: A is contiguous along K (row-major); BLayoutK: B is contiguous along K (column-major).
// OutT: the product is the transpose of the output (gemm_cuda.cu runs an NN product C = A B as
// C^T = B^T A^T, whose operands need only A's 4-byte transposing copies for the smaller side of the
// tile); element (m, n) goes to out[n * M + m], 16-byte stores along m.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool StreamK = false,
          bool OutT = false>
__device__ __forceinline__ void sgemm_tile(const SgemmParams& p, float* smem, int tile,
                                           int64_t k_begin, int64_t k_end,
                                           const StreamKParams& sk = StreamKParams{}) {
  int tid;
  if constexpr (StreamK) {  // see sgemm_streamk_kernel
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  } else {
    tid = threadIdx.x;
  }

  int64_t m0, n0;
  tile_origin<Cfg>(p, tile, m0, n0);

  const int num_slices = k_end > k_begin ? int((k_end - k_begin + Cfg::BK - 1) / Cfg::BK) : 0;

  int row0, col0, row_step, col_step;
  thread_origin<Cfg>(tid, row0, col0, row_step, col_step);

  float acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
    for (int c = 0; c < Cfg::TN; ++c) acc[r][c] = 0.f;

  // A stage holds As[BK][BM + pad], then Bs[BK][BN + pad] kBOffset floats on.
  constexpr int kBOffset = Cfg::BK * Cfg::kStrideA;
  auto stage_a = [&](int s) { return smem + s * Cfg::kStageFloats; };
  auto stage_b = [&](int s) { return smem + s * Cfg::kStageFloats + kBOffset; };

  // The thread's TM values of A and TN values of B at depth k of the slice held in (As, Bs).
  struct Frag {
    float a[Cfg::TM], b[Cfg::TN];
  };
  auto load_frag = [&](Frag& f, const float* __restrict__ As, const float* __restrict__ Bs,
                       int k) {
    load_fragment<Cfg::TM>(f.a, As + k * Cfg::kStrideA + row0, row_step);
    load_fragment<Cfg::TN>(f.b, Bs + k * Cfg::kStrideB + col0, col_step);
  };
  constexpr bool kSerpentine =
      Vec && (Cfg::SerpentineFma & fma_order_bit(ALayoutK, BLayoutK, StreamK)) != 0;
  // TM x TN outer product of one k (odd rows right to left when kSerpentine).
  auto fma_frag = [&](const Frag& f) {
#pragma unroll
    for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
      for (int i = 0; i < Cfg::TN; ++i) {
        const int c = kSerpentine && (r & 1) ? Cfg::TN - 1 - i : i;
        acc[r][c] = fmaf(f.a[r], f.b[c], acc[r][c]);
      }
  };
  // Every k of the slice held in (As, Bs).
  auto compute_slice = [&](const float* __restrict__ As, const float* __restrict__ Bs) {
#pragma unroll Cfg::KUnroll
    for (int k = 0; k < Cfg::BK; ++k) {
      Frag f;
      load_frag(f, As, Bs, k);
      fma_frag(f);
    }
  };

  // Slice base pointers, advanced by one slice per step; remaining extents clamped to int.
  const float* a_tile = ALayoutK ? p.a + m0 * p.lda + k_begin : p.a + k_begin * p.lda + m0;
  const float* b_tile = BLayoutK ? p.b + n0 * p.ldb + k_begin : p.b + k_begin * p.ldb + n0;
  const int64_t a_step = ALayoutK ? Cfg::BK : Cfg::BK * p.lda;
  const int64_t b_step = BLayoutK ? Cfg::BK : Cfg::BK * p.ldb;
  const int m_rem = int(min(p.M - m0, int64_t(Cfg::BM)));
  const int n_rem = int(min(p.N - n0, int64_t(Cfg::BN)));
  int k_rem = int(min(k_end - k_begin, int64_t(INT_MAX)));

  if constexpr (Cfg::Stages >= 3) {
    // The cp.async ring.
    using CopyA = CpAsyncLoader<Cfg::BM, Cfg::BK, Cfg::kThreads, ALayoutK, Vec>;
    using CopyB = CpAsyncLoader<Cfg::BN, Cfg::BK, Cfg::kThreads, BLayoutK, Vec>;
    CopyA copy_a(a_tile, p.lda, m_rem, tid);
    CopyB copy_b(b_tile, p.ldb, n_rem, tid);
    // The k step of the slice being computed that issues copy c of the next slice: A's copies
    // first, then B's, kGroup of them per step, all before the step that holds the barrier.
    constexpr int kGroup = !Vec                  ? Cfg::CopyGroupUnaligned
                           : ALayoutK && BLayoutK ? Cfg::CopyGroupKK
                                                  : Cfg::CopyGroup;
    auto copy_step = [](int c) { return (c / kGroup) % (Cfg::BK - 1); };
    // The copies of one slice (k < 0), or those of them that go with k step `k`, into the stage
    // at float offset `stage` of the ring. live false (past the last slice): they read nothing and
    // write zeros to a stage that is not read again, which keeps the loop free of branches.
    auto copies = [&](int k, int stage, bool live) {
      const int k_in = live ? k_rem : 0;
#pragma unroll
      for (int j = 0; j < CopyA::kPerThread; ++j)
        if (k < 0 || copy_step(j) == k)
          copy_a.issue_one(j, smem + stage, copy_a.k_limit(k_in));
#pragma unroll
      for (int j = 0; j < CopyB::kPerThread; ++j)
        if (k < 0 || copy_step(CopyA::kPerThread + j) == k)
          copy_b.issue_one(j, smem + stage + kBOffset, copy_b.k_limit(k_in));
    };
    // Stages are addressed by float offset, stepped with an add and a wrap: a stage index times
    // the stage size is an IMAD, which waits for the FMA pipe behind the FFMAs (ncu: most of the
    // loop's math-pipe-throttle stalls sat on two such IMADs right before the barrier).
    constexpr int kRingFloats = Cfg::Stages * Cfg::kStageFloats;
    auto next_stage = [](int off) {
      return off + Cfg::kStageFloats == kRingFloats ? 0 : off + Cfg::kStageFloats;
    };
    auto next_slice = [&] {
      tc::cp_async_commit();
      copy_a.advance(a_step);
      copy_b.advance(b_step);
      k_rem -= Cfg::BK;
    };
    // The step that issues the slice's last copies (then commits its group).
    constexpr int kCopies = CopyA::kPerThread + CopyB::kPerThread;
    constexpr int kLastCopyStep =
        (kCopies - 1) / kGroup < Cfg::BK - 2 ? (kCopies - 1) / kGroup : Cfg::BK - 2;
    // Prologue: slices 0 .. Stages-2 in flight, one commit group each (empty past the last).
#pragma unroll
    for (int s = 0; s < Cfg::Stages - 1; ++s) {
      copies(-1, s * Cfg::kStageFloats, s < num_slices);
      next_slice();
    }
    // The thread's running total of the blocked sums: element r * TN + c at total[that *
    // kThreads] (consecutive threads, consecutive words: no bank conflicts). Scalar accesses: a
    // 16-byte access would pin the accumulators to aligned register quads (see the stream-K
    // epilogue below).
    float* total = smem + kRingFloats + tid;
    bool summed = false;  // the total holds blocks
    if (num_slices > 0) {
      tc::cp_async_wait<Cfg::Stages - 2>();
      __syncthreads();
      Frag f[2];
      load_frag(f[0], stage_a(0), stage_b(0), 0);
      int read = 0, write = (Cfg::Stages - 1) * Cfg::kStageFloats;  // stage offsets
      int block_left = p.sum_block_slices > 0 ? p.sum_block_slices : INT_MAX;
      for (int t = 0; t < num_slices; ++t) {
        const float* As = smem + read;
        const float* Bs = As + kBOffset;
        // Slice t+Stages-1 goes to the stage of slice t-1, free since the last barrier.
        const bool live = t + Cfg::Stages - 1 < num_slices;
#pragma unroll
        for (int k = 0; k < Cfg::BK; ++k) {
          Frag& next = f[(k + 1) & 1];
          if (k + 1 < Cfg::BK) {
            load_frag(next, As, Bs, k + 1);
            copies(k, write, live);
            if (k == kLastCopyStep) next_slice();
          } else {
            // Slices 0 .. t+Stages-1 are committed: waiting down to Stages-2 groups completes
            // slice t+1, and the barrier publishes it. Every thread's loads from slice t are
            // behind it too (this step's fragments are in registers): slice t's stage is free
            // for the copies of the next iteration.
            tc::cp_async_wait<Cfg::Stages - 2>();
            __syncthreads();
            write = read;
            read = next_stage(read);
            // (After the last slice this reads a stage that is not used: harmless, no branch.)
            load_frag(next, smem + read, smem + read + kBOffset, 0);
          }
          fma_frag(f[k & 1]);
        }
        // End of a block of slices (not the last one: the epilogue adds that): into the total.
        if (--block_left == 0 && t + 1 < num_slices) {
          block_left = p.sum_block_slices;
#pragma unroll
          for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
            for (int c = 0; c < Cfg::TN; ++c) {
              float* q = total + (r * Cfg::TN + c) * Cfg::kThreads;
              *q = summed ? *q + acc[r][c] : acc[r][c];
              acc[r][c] = 0.f;
            }
          summed = true;
        }
      }
    }
    tc::cp_async_wait<0>();  // only empty groups can remain; none may outlive the block
    if (summed) {
#pragma unroll
      for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
        for (int c = 0; c < Cfg::TN; ++c)
          acc[r][c] = total[(r * Cfg::TN + c) * Cfg::kThreads] + acc[r][c];
    }
  } else if (num_slices > 0) {
    // The register-staged loaders. B's element (k, n): "x" is n, K-contiguous when column-major.
    TileLoader<Cfg::BM, Cfg::BK, Cfg::kThreads, ALayoutK, Vec> load_a;
    TileLoader<Cfg::BN, Cfg::BK, Cfg::kThreads, BLayoutK, Vec> load_b;
    load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
    load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
    load_a.store(stage_a(0), tid);
    load_b.store(stage_b(0), tid);
    __syncthreads();
    for (int t = 0; t < num_slices; ++t) {
      const bool has_next = t + 1 < num_slices;
      if (has_next) {
        a_tile += a_step;
        b_tile += b_step;
        k_rem -= Cfg::BK;
      }
      if constexpr (Cfg::Stages == 2) {
        const int cur = t & 1;
        // Prefetch: the global loads of slice t+1 are in flight during the FFMAs of slice t.
        if (has_next) {
          load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
          load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
        }
        compute_slice(stage_a(cur), stage_b(cur));
        // The other buffer was last read in iteration t-1, which ended with a barrier.
        if (has_next) {
          load_a.store(stage_a(cur ^ 1), tid);
          load_b.store(stage_b(cur ^ 1), tid);
        }
        __syncthreads();
      } else {
        compute_slice(stage_a(0), stage_b(0));
        __syncthreads();  // everyone is done reading before the buffer is overwritten
        if (has_next) {
          load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
          load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
          load_a.store(stage_a(0), tid);
          load_b.store(stage_b(0), tid);
          __syncthreads();
        }
      }
    }
  }

  if constexpr (StreamK) {
    // Where the parts live is recomputed here from the kernel parameters, not kept in registers
    // through the main loop. Tail tile t's parts are those of blocks b_first .. b_last, in order.
    const int ipt = sk.iters_per_tile;
    const int t = tile - sk.dp_tiles;
    const int b_first = streamk_block_of(sk, int64_t(t) * ipt);
    const int parts = streamk_block_of(sk, int64_t(t + 1) * ipt - 1) - b_first + 1;
    const int64_t kSlot = int64_t(Cfg::BM) * Cfg::BN;
    // A block's first slot holds the tile its range begins in, its second the next tile. Only
    // block b_first's range can begin before tile t (in tile t - 1).
    const int first_seg = streamk_begin(sk, b_first) < int64_t(t) * ipt ? 1 : 0;
    auto slot_of = [&](int q) -> const float* {  // part q's slot
      return sk.workspace + ((int64_t(b_first) + q) * 2 + (q == 0 ? first_seg : 0)) * kSlot;
    };
    // The part, times alpha, into the block's slot (tile-local, row-major). The product matters
    // for speed: a 16-byte store straight from the accumulators pins them to aligned register
    // quads, which puts them in the register banks of the B fragment (ptxas then leaves about
    // 2/3 of the FFMAs with a bank conflict, and the main loop runs 3-4% slower).
    // With OutT the slot is in output order (column-major in the tile), so that the last block's
    // stores are whole output rows.
    const int b = blockIdx.x;
    float* own = sk.workspace +
                 (int64_t(b) * 2 + (streamk_begin(sk, b) < int64_t(t) * ipt ? 1 : 0)) * kSlot;
    if constexpr (OutT) {
#pragma unroll
      for (int i = 0; i < Cfg::kSubM; ++i)
#pragma unroll
        for (int c = 0; c < Cfg::TN; ++c)
          __stcg(reinterpret_cast<float4*>(own + (col0 + (c / 4) * col_step + (c % 4)) * Cfg::BM +
                                           row0 + i * row_step),
                 make_float4(p.alpha * acc[i * 4][c], p.alpha * acc[i * 4 + 1][c],
                             p.alpha * acc[i * 4 + 2][c], p.alpha * acc[i * 4 + 3][c]));
    } else {
#pragma unroll
      for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
        for (int j = 0; j < Cfg::kSubN; ++j)
          __stcg(reinterpret_cast<float4*>(own + (row0 + (r / 4) * row_step + (r % 4)) * Cfg::BN +
                                           col0 + j * col_step),
                 make_float4(p.alpha * acc[r][j * 4], p.alpha * acc[r][j * 4 + 1],
                             p.alpha * acc[r][j * 4 + 2], p.alpha * acc[r][j * 4 + 3]));
    }
    // Publish the part, then count it (the classic last-block pattern: no block waits on another).
    __threadfence();
    __syncthreads();
    __shared__ int is_last;
    if (tid == 0) {
      is_last = atomicAdd(sk.counters + t, 1) == parts - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    // Every part is written: the last block adds them up in part order (its own part too, read
    // back: the order, and so the result, must not depend on which block came last) and stores
    // the tile, float4 chunks spread over the threads so that the stores coalesce. The
    // accumulators are dead by now, which leaves the registers for loads in flight.
    tile_origin<Cfg>(p, tile, m0, n0);
    const bool vec_out = ((OutT ? p.M : p.N) % 4 == 0) &&
                         ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0);
    constexpr int kChunks = Cfg::BM * Cfg::BN / 4, kUnroll = 8;
    for (int c0 = tid; c0 < kChunks; c0 += Cfg::kThreads * kUnroll) {
      float4 sum[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) sum[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      // Unrolled over parts too, so that the loads of several parts are in flight together.
#pragma unroll 4
      for (int q = 0; q < parts; ++q) {
        const float4* slot = reinterpret_cast<const float4*>(slot_of(q));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * Cfg::kThreads;
          if (c < kChunks) {
            const float4 v = __ldcg(slot + c);
            sum[u].x += v.x;
            sum[u].y += v.y;
            sum[u].z += v.z;
            sum[u].w += v.w;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + u * Cfg::kThreads;
        float v[4] = {sum[u].x, sum[u].y, sum[u].z, sum[u].w};
        if constexpr (OutT) {
          const int64_t n = n0 + c * 4 / Cfg::BM, m = m0 + c * 4 % Cfg::BM;
          if (c < kChunks && n < p.N) store_out4_t(p, p.out, m, n, v, vec_out);
        } else {
          const int64_t m = m0 + c * 4 / Cfg::BN, n = n0 + c * 4 % Cfg::BN;
          if (c < kChunks && m < p.M) store_out4(p, p.out, m, n, v, vec_out);
        }
      }
    }
    return;
  }
  // Epilogue. The output (and the split-K workspace) is row-major with leading dimension N.
  // The tile origin is recomputed rather than kept live through the main loop (registers).
  tile_origin<Cfg>(p, tile, m0, n0);
  float* out = p.out + int64_t(blockIdx.z) * p.out_split_stride;
  const bool vec_out =
      ((OutT ? p.M : p.N) % 4 == 0) && ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0);
  if constexpr (OutT) {
    // Each 4x4 sub-tile, column by column: 4 rows of the kernel's product, contiguous in out.
#pragma unroll
    for (int i = 0; i < Cfg::kSubM; ++i) {
      const int64_t m = m0 + row0 + i * row_step;
      if (m >= p.M) continue;
#pragma unroll
      for (int c = 0; c < Cfg::TN; ++c) {
        const int64_t n = n0 + col0 + (c / 4) * col_step + (c % 4);
        if (n >= p.N) continue;
        float v[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) v[r] = p.alpha * acc[i * 4 + r][c];
        store_out4_t(p, out, m, n, v, vec_out);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < Cfg::TM; ++r) {
      const int64_t m = m0 + row0 + (r / 4) * row_step + (r % 4);
      if (m >= p.M) continue;
#pragma unroll
      for (int j = 0; j < Cfg::kSubN; ++j) {
        const int64_t n = n0 + col0 + j * col_step;
        float v[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] = p.alpha * acc[r][j * 4 + c];
        store_out4(p, out, m, n, v, vec_out);
      }
    }
  }
}

// One output tile per block (blockIdx.x, grouped order), K split over gridDim.z.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    sgemm_kernel(const SgemmParams p) {
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int64_t k_begin = int64_t(blockIdx.z) * p.k_per_split;
  const int64_t k_end = p.K < k_begin + p.k_per_split ? p.K : k_begin + p.k_per_split;
  sgemm_tile<Cfg, ALayoutK, BLayoutK, Vec, false, OutT>(p, smem, blockIdx.x, k_begin, k_end);
}

// The tail's blocks (StreamKParams): block b computes its part of one or two tail tiles.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    sgemm_streamk_kernel(const SgemmParams p, const StreamKParams sk) {
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int ipt = sk.iters_per_tile;
  const int64_t begin = streamk_begin(sk, blockIdx.x), end = streamk_begin(sk, blockIdx.x + 1);
  // One sgemm_tile call site in a loop of at most two parts. (The tile's thread index is read
  // opaquely in stream-K mode: otherwise the compiler hoists the tile's setup out of this loop
  // and keeps it live through the main loop, which then spills.)
  for (int64_t it = begin; it < end;) {
    const int t = int(it / ipt);
    const int kb = int(it % ipt);
    const int ke = end - it < ipt - kb ? kb + int(end - it) : ipt;
    // Every thread is done with the ring and the last-part flag of the first part.
    if (it != begin) __syncthreads();
    sgemm_tile<Cfg, ALayoutK, BLayoutK, Vec, true, OutT>(p, smem, sk.dp_tiles + t,
                                                         int64_t(kb) * Cfg::BK,
                                                         min(int64_t(ke) * Cfg::BK, p.K), sk);
    it += ke - kb;
  }
}

// out[i] = alpha * sum_s partial[s][i] + beta * C[m * s0 + n * s1]. With splits = 0 this is the
// K = 0 case (alpha * 0 + beta * C); any element type (float64 K = 0 uses it too).
template <typename T>
__global__ void splitk_epilogue_kernel(const T* __restrict__ partial, int splits, int64_t M,
                                       int64_t N, T* __restrict__ out, T alpha, T beta,
                                       const T* __restrict__ addend, int64_t s0, int64_t s1) {
  const int64_t total = M * N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    T sum = T(0);
    for (int s = 0; s < splits; ++s) sum += partial[int64_t(s) * total + i];
    T v = alpha * sum;
    if (addend != nullptr) v += beta * addend[(i / N) * s0 + (i % N) * s1];
    out[i] = v;
  }
}

}  // namespace gemm
}  // namespace cudasteps
