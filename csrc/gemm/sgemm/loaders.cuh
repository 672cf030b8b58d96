// How the SGEMM's operands travel: global memory -> shared memory through registers (TileLoader,
// the double buffer of Stages = 2) or by cp.async (CpAsyncLoader, the ring of Stages >= 3), always
// into k-major tiles; then shared memory -> registers (load_fragment, LDS.128).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gemm/sgemm/tile_config.cuh"
#include "gemm/tc/common.cuh"

namespace cudasteps {
namespace gemm {

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

}  // namespace gemm
}  // namespace cudasteps
