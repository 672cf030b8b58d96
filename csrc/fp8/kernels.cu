// cast_fp8's CUDA kernels (launch.h): one pass over x in tiles, each cast to FP8 with the scale,
// stored in place and, through a shared-memory tile, transposed (the transpose family's tile),
// while the tile's largest |x| is reduced over the warp (the reduce family's shuffle tree), left
// by each block in a partial and folded by the grid's last block into the output amax (amax.cuh's
// grid_max_bits: no amax word to zero in a launch of its own first; none for cast_fp8_dynamic,
// whose amax_scale_kernel, further down, takes the amax first, or whose caller gives the amax that
// x's producer took: then each block computes the scale from it, CastScale). The forms, which are
// also the steps of the cast's ladder (ladder_cast_fp8, CastForm):
//   tile32          cast_fp8_kernel: 32 x 32 tiles, one element per thread per access: 2- or 4-byte
//                   loads and byte stores. Any shape; what runs when the vector forms cannot.
//   vec16           cast_fp8_vec_kernel: 64 x 64 tiles, 16 elements per thread: 16-byte loads, and
//                   16-byte stores of both outputs (16 FP8 bytes of a row; 16 rows of a column,
//                   gathered from the shared tile). Rows and columns multiples of 16, x 16-byte
//                   aligned (every FFN shape). On an H100 tile32 moved 50% of the copy bandwidth
//                   for bf16 x (8192 x 8192), its byte stores a transaction per byte and thread;
//                   vec16 58% (72% for float32 x).
//   vec16_prefetch  vec16 with the next tile's loads issued before this tile is cast, stored and
//                   transposed: a block's loads were in flight only between its two barriers, so
//                   each SM kept less than the bandwidth's worth of bytes in flight; now a tile's
//                   loads run under the previous tile's stores and barriers (16-48 more registers
//                   per thread: the next tile's raw 16-byte words). Measured no faster than vec16
//                   (H100, 8192 x 8192 bf16: 0.1545 against 0.1502 ms).
//   tile128         cast_fp8_wide_kernel (what cast_fp8 runs where the 16-byte forms fit):
//                   128 x 128 tiles, each thread's four 16-element segments loaded before any is
//                   cast (64 or 128 bytes in flight per thread); the transpose read from the
//                   shared tile as words (not bytes), turned by byte permutes in 4 x 4 blocks, and
//                   stored so that each store of a warp fills 4 whole 128-byte lines of out_t
//                   (vec16's warps wrote half sectors: 16 bytes in each of 32 rows; this form's
//                   first version whole 32-byte sectors of 16 rows, 2-9% slower on an H200).
//                   8192 x 8192 bf16: 0.079 against vec16's 0.116 ms, 80% of the copy bandwidth
//                   (H200, the benchmark report); 0.106 against 0.144 ms, 85% (H100, the report
//                   before the whole-line stores).
//                   What holds it there (ncu, H200, 8192 x 8192 bf16, 73 us): the transposed
//                   stream. Without out_t the same kernel moves x and out in 50 us, 95% of the
//                   copy bandwidth; with it, warps wait on their loads half of their cycles, at
//                   four blocks per SM (64 registers). Tried and not kept: (1) each tile's rows
//                   brought by bulk copies (cp.async.bulk, one per row) into a ring of three
//                   shared-memory stages, two tiles in flight while one is cast: 74.5 us (two
//                   blocks per SM: 112 KiB of stages each), and act_cast_fp8 on it 110 us against
//                   87 (its GELU needs the warps the stages leave out); (2) more blocks per SM by
//                   launch bounds (5 or 6: 48 or 40 registers, with spills): 90 and 112 us;
//                   (3) tiles walked in groups of 4-64 tile rows, down each group's columns, so
//                   that the blocks at work at once write longer runs of out_t's rows: 74-76 us
//                   against 75 row by row, within noise; (4) the transposed tile written into
//                   one of two shared-memory stages and stored by the copy engine, so the warps
//                   only load x and store out (H200, ncu, 8192 x 8192 / 8192 x 2048 / 2048 x 8192
//                   bf16, 8192 x 8192 float32, us; this form 71.1-71.2 / 18.9-19.1 / 19.1-19.3 /
//                   99.6-102.1 in the same runs): one bulk copy per 128-byte out_t row
//                   (cp.async.bulk, 128 per tile) 76.1 / 20.9 / 21.0 / 103.8; one TMA tensor store
//                   per 64 out_t rows (two per tile, 128-byte swizzle) 76.6 / 20.4 / 20.5 / 101.1;
//                   act_cast_fp8 on either 92-98 us against 85-87 (CUDA events). With
//                   the warps out of the transposed store's path it ran no faster, so what holds
//                   the cast is the memory system's rate for that write stream (128 lines of 128
//                   bytes a tile, each in another DRAM row), not the warps' stores. (5) Cache
//                   hints (ncu, two runs, same shapes): streaming stores of both outputs
//                   (st.global.cs) 72.1-74.4 / 18.9-19.2 / 19.6-20.3 / 102 us against 70.4-71.5 /
//                   18.6-18.8 / 19.3-19.5 / 102-103; streaming loads of x too (ld.global.cs)
//                   73.7-74.0 / 19.0 / 19.9-20.0 / 99.7-100.6.
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "common/amax.cuh"
#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/nan_minmax.cuh"
#include "common/warp_reduce.cuh"
#include "elementwise/functors.h"
#include "fp8/launch.h"

namespace cudasteps {
namespace fp8 {
namespace {

constexpr int kTile = 32;      // a tile is 32 x 32 elements
constexpr int kBlockRows = 8;  // 32 x 8 threads: each thread takes 4 rows of the tile

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// The dynamic scale for an amax: fmax / amax, so the largest |x| maps to the format's largest
// value; 1 where amax is 0 or NaN (NaN > 0 is false), as fp8.h's scale_from_amax, bit for bit.
__device__ __forceinline__ float scale_for_amax(float amax, float fmax) {
  return amax > 0.0f ? fmax / amax : 1.0f;
}

// The cast's scale: the one given, or fmax / amax from a given amax (the producer of x took it),
// whose reciprocal (for the GEMM that reads the cast) and amax block 0 writes out.
__device__ __forceinline__ float cast_scale(const CastScale& cs) {
  if (cs.scale != nullptr) return *cs.scale;
  const float a = *cs.amax;
  const float s = scale_for_amax(a, cs.fmax);
  if (blockIdx.x == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    *cs.scale_inv = 1.0f / s;
    *cs.amax_out = a;
  }
  return s;
}

template <typename T, Fp8Kind K>
__global__ void __launch_bounds__(kTile* kBlockRows)
    cast_fp8_kernel(const T* __restrict__ x, int64_t rows, int64_t cols,
                    CastScale scale, uint8_t* __restrict__ out,
                    uint8_t* __restrict__ out_t, CastAmax amax) {
  constexpr __nv_fp8_interpretation_t kFormat = K == Fp8Kind::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  __shared__ uint8_t tile[kTile][kTile + 4];  // padded rows: the transposed reads skip banks
  const float s = cast_scale(scale);
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t tiles = ((rows + kTile - 1) / kTile) * tiles_c;
  unsigned my_max = 0;  // bits of the largest |x| this thread saw (+0 to start)
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
    const int64_t c = c0 + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kTile / kBlockRows; ++i) {
      const int lr = threadIdx.y + i * kBlockRows;
      const int64_t r = r0 + lr;
      uint8_t q = 0;
      if (r < rows && c < cols) {
        const float v = to_float(x[r * cols + c]);
        my_max = max(my_max, __float_as_uint(fabsf(v)));
        q = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, kFormat);
        out[r * cols + c] = q;
      }
      tile[lr][threadIdx.x] = q;
    }
    if (out_t != nullptr) {
      __syncthreads();
      // out_t is [cols, rows]: thread x now walks along r (the tile's rows) for columns c0 + lr.
      const int64_t r = r0 + threadIdx.x;
#pragma unroll
      for (int i = 0; i < kTile / kBlockRows; ++i) {
        const int lc = threadIdx.y + i * kBlockRows;
        const int64_t cc = c0 + lc;
        if (r < rows && cc < cols) out_t[cc * rows + r] = tile[threadIdx.x][lc];
      }
      __syncthreads();  // the tile is rewritten by the next iteration
    }
  }
  if (amax.amax == nullptr) return;  // cast_fp8_dynamic: the amax is taken before the cast
  if (grid_max_bits<kTile * kBlockRows>(my_max, amax.partials, amax.ticket)) {
    *amax.amax = __uint_as_float(my_max);
  }
}

// ---- the vector form ----

constexpr int kVecTile = 64;    // 64 x 64 elements
constexpr int kVec = 16;        // elements per thread: one 16-byte FP8 store
constexpr int kVecThreads = 256;  // 64 rows x 4 segments of 16
constexpr int kVecPitch = kVecTile + 16;  // shared tile row, bytes: 16-byte aligned rows

// A thread's 16 elements of one tile as raw 16-byte words (kVecWords of them): loaded early, cast
// later.
template <typename T>
constexpr int kVecWords = kVec * int(sizeof(T)) / 16;

template <typename T>
struct RawSegment {
  uint4 w[kVecWords<T>];
};

// Where this thread's segment of tile t lies, and whether it is inside x (rows and cols are
// multiples of 16: a segment is all inside or all outside).
struct SegmentAt {
  int64_t r, c;
  bool inside;
};

__device__ __forceinline__ SegmentAt segment_at(int64_t t, int64_t tiles_c, int64_t rows,
                                                int64_t cols, int lr, int seg) {
  const int64_t r = (t / tiles_c) * kVecTile + lr, c = (t % tiles_c) * kVecTile + kVec * seg;
  return {r, c, r < rows && c < cols};
}

template <typename T>
__device__ __forceinline__ void load_segment(const T* p, RawSegment<T>& raw) {
#pragma unroll
  for (int l = 0; l < kVecWords<T>; ++l) raw.w[l] = __ldg(reinterpret_cast<const uint4*>(p) + l);
}

template <typename T, Fp8Kind K, bool kPrefetch>
__global__ void __launch_bounds__(kVecThreads)
    cast_fp8_vec_kernel(const T* __restrict__ x, int64_t rows, int64_t cols,
                        CastScale scale, uint8_t* __restrict__ out,
                        uint8_t* __restrict__ out_t, CastAmax amax) {
  constexpr __nv_fp8_interpretation_t kFormat = K == Fp8Kind::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  constexpr int kPerWord = 16 / int(sizeof(T));
  __shared__ __align__(16) uint8_t tile[kVecTile][kVecPitch];
  const float s = cast_scale(scale);
  const int64_t tiles_c = (cols + kVecTile - 1) / kVecTile;
  const int64_t tiles = ((rows + kVecTile - 1) / kVecTile) * tiles_c;
  // Phase 1 (cast): row lr of the tile, columns 16 seg .. 16 seg + 15. Phase 2 (transpose):
  // column lc of the tile, rows 16 chunk .. 16 chunk + 15; a warp takes 32 adjacent columns, so
  // each of its shared-memory reads is 32 bytes of one tile row (no bank conflict).
  const int lr = threadIdx.x / 4, seg = threadIdx.x % 4;
  const int lc = threadIdx.x % kVecTile, chunk = threadIdx.x / kVecTile;
  unsigned my_max = 0;
  RawSegment<T> next{};  // kPrefetch: the segment of this thread's next tile, already requested
  if constexpr (kPrefetch) {
    const SegmentAt first = segment_at(blockIdx.x, tiles_c, rows, cols, lr, seg);
    if (blockIdx.x < tiles && first.inside) load_segment(x + first.r * cols + first.c, next);
  }
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const SegmentAt at = segment_at(t, tiles_c, rows, cols, lr, seg);
    RawSegment<T> raw{};
    if constexpr (kPrefetch) {
      raw = next;
      const int64_t t_next = t + gridDim.x;
      const SegmentAt ahead = segment_at(t_next, tiles_c, rows, cols, lr, seg);
      if (t_next < tiles && ahead.inside) load_segment(x + ahead.r * cols + ahead.c, next);
    } else if (at.inside) {
      load_segment(x + at.r * cols + at.c, raw);
    }
    uint4 q = make_uint4(0, 0, 0, 0);
    if (at.inside) {
      float v[kVec];
#pragma unroll
      for (int l = 0; l < kVecWords<T>; ++l) {
        const T* e = reinterpret_cast<const T*>(&raw.w[l]);
#pragma unroll
        for (int i = 0; i < kPerWord; ++i) v[l * kPerWord + i] = to_float(e[i]);
      }
      uint16_t* pairs = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
      for (int i = 0; i < kVec; i += 2) {
        my_max = max(my_max, max(__float_as_uint(fabsf(v[i])), __float_as_uint(fabsf(v[i + 1]))));
        pairs[i / 2] = __nv_cvt_float2_to_fp8x2(make_float2(v[i] * s, v[i + 1] * s),
                                                __NV_SATFINITE, kFormat);
      }
      *reinterpret_cast<uint4*>(out + at.r * cols + at.c) = q;
    }
    if (out_t != nullptr) {
      const int64_t r0 = at.r - lr, c0 = at.c - kVec * seg;
      *reinterpret_cast<uint4*>(&tile[lr][kVec * seg]) = q;
      __syncthreads();
      const int64_t cc = c0 + lc, rr = r0 + kVec * chunk;
      if (cc < cols && rr < rows) {
        uint4 col;
        uint8_t* bytes = reinterpret_cast<uint8_t*>(&col);
#pragma unroll
        for (int i = 0; i < kVec; ++i) bytes[i] = tile[kVec * chunk + i][lc];
        *reinterpret_cast<uint4*>(out_t + cc * rows + rr) = col;
      }
      __syncthreads();  // the tile is rewritten by the next iteration
    }
  }
  if (amax.amax == nullptr) return;  // cast_fp8_dynamic: the amax is taken before the cast
  if (grid_max_bits<kVecThreads>(my_max, amax.partials, amax.ticket)) {
    *amax.amax = __uint_as_float(my_max);
  }
}


// ---- the wide form: 128 x 128 tiles, transposed through 4 x 4 byte blocks ----

constexpr int kWideTile = 128;                             // 128 x 128 elements, 16 KiB of FP8
constexpr int kWideThreads = 256;
constexpr int kWideRowsPerPass = kWideThreads / (kWideTile / kVec);  // 32: 8 threads per row
constexpr int kWidePasses = kWideTile / kWideRowsPerPass;            // 4 segments per thread

// The shared tile is 128 rows of 128 bytes (no padding: every row starts at bank 0). A row's
// 16-byte segment `seg` sits at segment seg ^ c in the rows of 16-row chunk c, so the transposed
// reads of a warp, which take the 4 column words of one segment from each of the 8 chunks, fall
// in 8 different segments, all 32 banks (no conflict), and a quarter-warp's 16-byte stores still
// fill one row.
__device__ __forceinline__ int wide_segment(int row, int seg) {
  return seg ^ ((row >> 4) & 7);
}

// Columns k = 0..3 of a 4 x 4 byte block (rows a, b, c, d: 4 bytes each, byte k = column k) as
// four words, column k's word holding a_k, b_k, c_k, d_k: eight byte permutes.
__device__ __forceinline__ void transpose4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d,
                                             uint32_t col[4]) {
  const uint32_t ab_lo = __byte_perm(a, b, 0x5140), cd_lo = __byte_perm(c, d, 0x5140);
  const uint32_t ab_hi = __byte_perm(a, b, 0x7362), cd_hi = __byte_perm(c, d, 0x7362);
  col[0] = __byte_perm(ab_lo, cd_lo, 0x5410);
  col[1] = __byte_perm(ab_lo, cd_lo, 0x7632);
  col[2] = __byte_perm(ab_hi, cd_hi, 0x5410);
  col[3] = __byte_perm(ab_hi, cd_hi, 0x7632);
}

// ---- what the wide form casts ----
//
// PlainValues: x itself (cast_fp8, cast_fp8_dynamic). ActValues: act(x) rounded to x's type, the
// value bias_act writes (act_cast_fp8: the FP8 MLP's hidden activation). ActGradValues: g * act'(x)
// rounded to the type, the value bias_act_backward writes (act_grad_cast_fp8: the hidden
// gradient), whose column sums (the bias gradient) the kernel also takes. The last two take their
// scale from a range of their input (scaled_mm_range's) through a bound of what they cast
// (act_range_bound, act_grad_range_bound): no pass reads their output for its amax.

// v rounded to T (exact for float).
template <typename T>
__device__ __forceinline__ float round_to(float v);
template <>
__device__ __forceinline__ float round_to<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float round_to<__half>(float v) {
  return __half2float(__float2half_rn(v));
}
template <>
__device__ __forceinline__ float round_to<__nv_bfloat16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// act_cast_fp8's amax: a bound of max |act(z)| (rounded to T, as bias_act writes it) over the range
// [lo, hi] of z (elementwise::ActBounds; NaN where the range holds one). fp8.h's
// act_range_bound_host computes the same from the same operations, bit for bit.
template <typename T, elementwise::Act A>
__device__ __forceinline__ float act_range_bound(float hi, float lo) {
  using Bounds = elementwise::ActBounds<A>;
  auto act_abs = [](float z) {
    return fabsf(round_to<T>(elementwise::BiasActOpFor<A, T>()(z, 0.f)));
  };
  float b = max_nan(act_abs(hi), act_abs(lo));
  if (lo < Bounds::kLobeBelow) b = max_nan(b, Bounds::kLobe);
  return b;
}

// act_grad_cast_fp8's amax: max |g| over g's range times the activation's largest |act'|, rounded
// to T as the values are (rounding is monotone: no value rounds above the rounded bound).
template <typename T, elementwise::Act A>
__device__ __forceinline__ float act_grad_range_bound(float hi, float lo) {
  return round_to<T>(max_nan(fabsf(hi), fabsf(lo)) * elementwise::ActBounds<A>::kDerivMax);
}

// A segment's 16 raw values as floats.
template <typename T>
__device__ __forceinline__ void segment_values(const RawSegment<T>& raw, float (&v)[kVec]) {
  constexpr int kPerWord = 16 / int(sizeof(T));
#pragma unroll
  for (int l = 0; l < kVecWords<T>; ++l) {
    const T* e = reinterpret_cast<const T*>(&raw.w[l]);
#pragma unroll
    for (int i = 0; i < kPerWord; ++i) v[l * kPerWord + i] = to_float(e[i]);
  }
}

// The scale from an amax its caller computed (act_cast_fp8's bound): as cast_scale's given amax,
// fmax / amax, with 1 / scale and the amax written out by block 0.
__device__ __forceinline__ float scale_from_bound(const CastScale& cs, float amax) {
  const float s = scale_for_amax(amax, cs.fmax);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *cs.scale_inv = 1.0f / s;
    if (cs.amax_out != nullptr) *cs.amax_out = amax;
  }
  return s;
}

template <typename T>
struct PlainValues {
  static constexpr bool kTakesAmax = true;  // takes max |x| where asked (CastAmax)
  static constexpr bool kColSums = false;
  struct Raw {
    RawSegment<T> x;
  };
  const T* x;
  __device__ __forceinline__ void load(int64_t at, Raw& raw) const { load_segment(x + at, raw.x); }
  __device__ __forceinline__ void values(const Raw& raw, float (&v)[kVec]) const {
    segment_values(raw.x, v);
  }
  __device__ __forceinline__ float scale(const CastScale& cs) const { return cast_scale(cs); }
};

template <typename T, elementwise::Act A>
struct ActValues {
  static constexpr bool kTakesAmax = false;
  static constexpr bool kColSums = false;
  struct Raw {
    RawSegment<T> x;
  };
  const T* x;
  const float* range;
  __device__ __forceinline__ void load(int64_t at, Raw& raw) const { load_segment(x + at, raw.x); }
  __device__ __forceinline__ void values(const Raw& raw, float (&v)[kVec]) const {
    segment_values(raw.x, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = round_to<T>(elementwise::BiasActOpFor<A, T>()(v[i], 0.f));
  }
  __device__ __forceinline__ float scale(const CastScale& cs) const {
    return scale_from_bound(cs, act_range_bound<T, A>(range[0], range[1]));
  }
};

template <typename T, elementwise::Act A>
struct ActGradValues {
  static constexpr bool kTakesAmax = false;
  static constexpr bool kColSums = true;
  struct Raw {
    RawSegment<T> g, x;
  };
  const T* g;
  const T* x;
  const float* range;  // g's
  __device__ __forceinline__ void load(int64_t at, Raw& raw) const {
    load_segment(g + at, raw.g);
    load_segment(x + at, raw.x);
  }
  __device__ __forceinline__ void values(const Raw& raw, float (&v)[kVec]) const {
    float xv[kVec];
    segment_values(raw.g, v);
    segment_values(raw.x, xv);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      v[i] = round_to<T>(elementwise::BiasActGradOpFor<A, T>()(v[i], xv[i], 0.f));
    }
  }
  __device__ __forceinline__ float scale(const CastScale& cs) const {
    return scale_from_bound(cs, act_grad_range_bound<T, A>(range[0], range[1]));
  }
};

// The wide form. Phase 1: each thread loads 4 segments of 16 elements (rows lr, lr + 32, lr + 64,
// lr + 96 of the tile, one column segment), all loads issued before any is cast: 64 (16-bit x) or
// 128 (float32 x) bytes in flight per thread. Phase 2: each thread reads a 16-row x 4-column block
// of the shared tile as 16 words (no byte loads), transposes it with byte permutes and stores four
// 16-byte column pieces; a warp's store covers 4 whole 128-byte lines of out_t.
// With V::kColSums, each tile's column sums of the values cast (as rounded to T) go to
// col_partials[tile row][column]: each thread's 4 rows, then the 4 lanes of a warp that share a
// segment (shuffles), then the 8 warps in order (shared memory): the same sums on every run.
template <typename T, Fp8Kind K, typename V>
__global__ void __launch_bounds__(kWideThreads)
    cast_fp8_wide_kernel(const V src, int64_t rows, int64_t cols, CastScale scale,
                         uint8_t* __restrict__ out, uint8_t* __restrict__ out_t, CastAmax amax,
                         float* __restrict__ col_partials) {
  constexpr __nv_fp8_interpretation_t kFormat = K == Fp8Kind::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  __shared__ __align__(16) uint8_t tile[kWideTile][kWideTile];
  __shared__ float warp_cols[V::kColSums ? kWideThreads / 32 : 1][kWideTile];
  const float s = src.scale(scale);
  const int64_t tiles_c = (cols + kWideTile - 1) / kWideTile;
  const int64_t tiles = ((rows + kWideTile - 1) / kWideTile) * tiles_c;
  const int lr = threadIdx.x / (kWideTile / kVec), seg = threadIdx.x % (kWideTile / kVec);
  // Phase 2: warp w takes the column words 4 w .. 4 w + 3 (the tile's 16-byte segment w), lane l
  // column word 4 w + l / 8 of 16-row chunk l % 8: the 8 lanes of a column word store 128
  // consecutive bytes of each of its out_t rows, so each store instruction of the warp fills 4
  // whole 128-byte lines (lanes of 16 column words over two chunks, 16 lines of 32 bytes a store,
  // ran 2-9% slower on an H200).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col_word = 4 * warp + lane / 8, chunk = lane % 8;
  unsigned my_max = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * kWideTile, c0 = (t % tiles_c) * kWideTile;
    const int64_t c = c0 + kVec * seg;
    typename V::Raw raw[kWidePasses];
#pragma unroll
    for (int p = 0; p < kWidePasses; ++p) {
      const int64_t r = r0 + lr + kWideRowsPerPass * p;
      if (r < rows && c < cols) src.load(r * cols + c, raw[p]);
    }
    float sums[V::kColSums ? kVec : 1] = {};
#pragma unroll
    for (int p = 0; p < kWidePasses; ++p) {
      const int row = lr + kWideRowsPerPass * p;
      const int64_t r = r0 + row;
      uint4 q = make_uint4(0, 0, 0, 0);
      if (r < rows && c < cols) {
        float v[kVec];
        src.values(raw[p], v);
        uint16_t* pairs = reinterpret_cast<uint16_t*>(&q);
#pragma unroll
        for (int i = 0; i < kVec; i += 2) {
          if constexpr (V::kTakesAmax) {
            my_max = max(my_max, max(__float_as_uint(fabsf(v[i])), __float_as_uint(fabsf(v[i + 1]))));
          }
          if constexpr (V::kColSums) {
            sums[i] += v[i];
            sums[i + 1] += v[i + 1];
          }
          pairs[i / 2] =
              __nv_cvt_float2_to_fp8x2(make_float2(v[i] * s, v[i + 1] * s), __NV_SATFINITE, kFormat);
        }
        *reinterpret_cast<uint4*>(out + r * cols + c) = q;
      }
      *reinterpret_cast<uint4*>(&tile[row][kVec * wide_segment(row, seg)]) = q;
    }
    if constexpr (V::kColSums) {
      // The warp's 4 lanes of each segment (lanes seg, seg + 8, seg + 16, seg + 24), then the warps.
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        sums[i] += __shfl_xor_sync(0xffffffffu, sums[i], 8);
        sums[i] += __shfl_xor_sync(0xffffffffu, sums[i], 16);
      }
      if (lane < 8) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) warp_cols[warp][kVec * seg + i] = sums[i];
      }
      __syncthreads();
      if (threadIdx.x < kWideTile && c0 + threadIdx.x < cols) {
        float col = 0.f;
#pragma unroll
        for (int w = 0; w < kWideThreads / 32; ++w) col += warp_cols[w][threadIdx.x];
        col_partials[(r0 / kWideTile) * cols + c0 + threadIdx.x] = col;
      }
      // (warp_cols is written again only after the next tile's barriers below.)
    }
    if (out_t != nullptr) {
      __syncthreads();
      const int64_t rr = r0 + kVec * chunk, cc = c0 + 4 * col_word;
      if (rr < rows && cc < cols) {
        const int phys_seg = wide_segment(kVec * chunk, col_word / 4);  // the same for the chunk
        const int byte = kVec * phys_seg + 4 * (col_word % 4);
        uint32_t w[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          w[i] = *reinterpret_cast<const uint32_t*>(&tile[kVec * chunk + i][byte]);
        }
        uint32_t col[4][4];  // col[k][j]: column k, rows 4 j .. 4 j + 3
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t block[4];
          transpose4x4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3], block);
#pragma unroll
          for (int k = 0; k < 4; ++k) col[k][j] = block[k];
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          *reinterpret_cast<uint4*>(out_t + (cc + k) * rows + rr) =
              make_uint4(col[k][0], col[k][1], col[k][2], col[k][3]);
        }
      }
      __syncthreads();  // the tile is rewritten by the next iteration
    } else if constexpr (V::kColSums) {
      __syncthreads();  // warp_cols is read before the next tile writes it
    }
  }
  if constexpr (V::kTakesAmax) {
    if (amax.amax == nullptr) return;  // cast_fp8_dynamic: the amax is taken before the cast
    if (grid_max_bits<kWideThreads>(my_max, amax.partials, amax.ticket)) {
      *amax.amax = __uint_as_float(my_max);
    }
  }
}

// ---- the dynamic scale: amax, then scale = fp8 max / amax, in one launch ----

constexpr int kAmaxThreads = 512;
constexpr int kAmaxUnroll = 4;  // 16-byte loads in flight per thread


template <typename T>
__device__ __forceinline__ unsigned max_abs_bits(uint4 word, unsigned m) {
  const T* e = reinterpret_cast<const T*>(&word);
#pragma unroll
  for (int i = 0; i < 16 / int(sizeof(T)); ++i) m = max(m, abs_bits(to_float(e[i])));
  return m;
}

// A grid-stride pass of one wave over x's n elements (16-byte loads, kAmaxUnroll in flight, where
// x is 16-byte aligned), each block's largest |x| (as bits) into partials; the last block to take
// a ticket folds the partials and writes amax, scale = fmax / amax (1 where amax is 0 or NaN, as
// fp8.h's scale_from_amax) and scale_inv = 1 / scale, then resets the ticket for the next launch.
// One launch instead of torch's norm, compare, divide and where (and the reciprocal after): the
// scale never leaves the device. The pass walks x from its end to its start: what x's producer
// wrote last (its end) is the likeliest to be in L2 still, and what this pass reads last (x's
// start) is where the cast, walking its tiles from the start, begins: up to an L2's worth of each
// pass's reads hit the cache instead of DRAM.
template <typename T>
__global__ void __launch_bounds__(kAmaxThreads)
    amax_scale_kernel(const T* __restrict__ x, int64_t n, float fmax,
                      unsigned* __restrict__ partials, unsigned* __restrict__ ticket,
                      float* __restrict__ scale, float* __restrict__ scale_inv,
                      float* __restrict__ amax) {
  constexpr int kPer = 16 / int(sizeof(T));
  const int64_t stride = int64_t(gridDim.x) * kAmaxThreads;
  int64_t i = int64_t(blockIdx.x) * kAmaxThreads + threadIdx.x;
  unsigned m = 0;
  int64_t scalar_from = 0;  // elements before this are covered by the 16-byte loads
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const uint4* v = reinterpret_cast<const uint4*>(x);
    const int64_t n_vec = n / kPer;
    for (; i + (kAmaxUnroll - 1) * stride < n_vec; i += kAmaxUnroll * stride) {
      uint4 w[kAmaxUnroll];
#pragma unroll
      for (int u = 0; u < kAmaxUnroll; ++u) w[u] = __ldg(v + (n_vec - 1 - (i + u * stride)));
#pragma unroll
      for (int u = 0; u < kAmaxUnroll; ++u) m = max_abs_bits<T>(w[u], m);
    }
    for (; i < n_vec; i += stride) m = max_abs_bits<T>(__ldg(v + (n_vec - 1 - i)), m);
    scalar_from = n_vec * kPer;
  }
  for (int64_t j = scalar_from + int64_t(blockIdx.x) * kAmaxThreads + threadIdx.x; j < n;
       j += stride) {
    m = max(m, abs_bits(to_float(x[j])));
  }
  if (grid_max_bits<kAmaxThreads>(m, partials, ticket)) {
    const float a = __uint_as_float(m);
    const float s = scale_for_amax(a, fmax);
    *amax = a;
    *scale = s;
    *scale_inv = 1.0f / s;
  }
}

}  // namespace

// The vector forms need whole 16-element segments along both dimensions and 16-byte aligned rows
// of x (out and out_t are fresh allocations, aligned, with rows of cols and rows bytes).
bool cast_fp8_vector_form_fits(const void* x, int64_t rows, int64_t cols) {
  return rows % kVec == 0 && cols % kVec == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

namespace {

template <typename T, Fp8Kind K>
void launch_typed(CastForm form, const void* x, int64_t rows, int64_t cols, CastScale scale,
                  uint8_t* out, uint8_t* out_t, const CastAmax& amax, int sm_count,
                  cudaStream_t stream) {
  if (form == CastForm::kAuto) {
    form = cast_fp8_vector_form_fits(x, rows, cols) ? CastForm::kTile128 : CastForm::kTile32;
  }
  if (form == CastForm::kTile128) {
    const int64_t tiles =
        ((rows + kWideTile - 1) / kWideTile) * ((cols + kWideTile - 1) / kWideTile);
    auto kernel = cast_fp8_wide_kernel<T, K, PlainValues<T>>;
    const int64_t grid = persistent_grid(kernel, kWideThreads, tiles, 1);
    kernel<<<unsigned(grid), kWideThreads, 0, stream>>>(PlainValues<T>{static_cast<const T*>(x)},
                                                       rows, cols, scale, out, out_t, amax, nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  if (form == CastForm::kVec16 || form == CastForm::kVec16Prefetch) {
    const int64_t tiles = ((rows + kVecTile - 1) / kVecTile) * ((cols + kVecTile - 1) / kVecTile);
    auto kernel = form == CastForm::kVec16Prefetch ? cast_fp8_vec_kernel<T, K, true>
                                                   : cast_fp8_vec_kernel<T, K, false>;
    // One wave of resident blocks, each walking its tiles: 8 blocks of 256 threads per SM for
    // vec16 (32 registers, 5 KiB of shared memory each); fewer for vec16_prefetch, whose next
    // tile's words take 38 (16-bit x) to 53 (float32 x) registers a thread.
    const int64_t grid = persistent_grid(kernel, kVecThreads, tiles, 1);
    kernel<<<unsigned(grid), kVecThreads, 0, stream>>>(static_cast<const T*>(x), rows, cols, scale,
                                                      out, out_t, amax);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const int64_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  // One wave of blocks (8 of 256 threads fill an SM); each walks its tiles (64-bit indices).
  const int64_t grid = std::max<int64_t>(1, std::min(tiles, cast_fp8_max_grid(sm_count)));
  cast_fp8_kernel<T, K><<<unsigned(grid), dim3(kTile, kBlockRows), 0, stream>>>(
      static_cast<const T*>(x), rows, cols, scale, out, out_t, amax);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <Fp8Kind K>
void launch_kind(CastForm form, SrcType src, const void* x, int64_t rows, int64_t cols,
                 CastScale scale, uint8_t* out, uint8_t* out_t, const CastAmax& amax,
                 int sm_count, cudaStream_t stream) {
  switch (src) {
    case SrcType::kHalf:
      return launch_typed<__half, K>(form, x, rows, cols, scale, out, out_t, amax, sm_count,
                                     stream);
    case SrcType::kBFloat16:
      return launch_typed<__nv_bfloat16, K>(form, x, rows, cols, scale, out, out_t, amax,
                                            sm_count, stream);
    default:
      return launch_typed<float, K>(form, x, rows, cols, scale, out, out_t, amax, sm_count,
                                    stream);
  }
}

}  // namespace

// Every form runs 256-thread blocks, at most one wave of them: 8 per SM of 2048 threads (the most
// threads an SM holds), tile32's grid by this, the vector forms' by their occupancy.
int64_t cast_fp8_max_grid(int sm_count) { return int64_t(sm_count) * 8; }

void launch_cast_fp8(SrcType src, Fp8Kind kind, const void* x, int64_t rows, int64_t cols,
                     CastScale scale, uint8_t* out, uint8_t* out_t, const CastAmax& amax,
                     int sm_count, cudaStream_t stream, CastForm form) {
  if (kind == Fp8Kind::kE4M3) {
    launch_kind<Fp8Kind::kE4M3>(form, src, x, rows, cols, scale, out, out_t, amax, sm_count,
                                stream);
  } else {
    launch_kind<Fp8Kind::kE5M2>(form, src, x, rows, cols, scale, out, out_t, amax, sm_count,
                                stream);
  }
}

namespace {

template <typename T, Fp8Kind K, typename V>
void launch_wide(const V& src, int64_t rows, int64_t cols, CastScale scale, uint8_t* out,
                 uint8_t* out_t, float* col_partials, cudaStream_t stream) {
  const int64_t tiles =
      ((rows + kWideTile - 1) / kWideTile) * ((cols + kWideTile - 1) / kWideTile);
  auto kernel = cast_fp8_wide_kernel<T, K, V>;
  const int64_t grid = persistent_grid(kernel, kWideThreads, tiles, 1);
  kernel<<<unsigned(grid), kWideThreads, 0, stream>>>(src, rows, cols, scale, out, out_t,
                                                     CastAmax{}, col_partials);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_act_typed(elementwise::Act act, const void* x, const void* g, const float* range,
                      int64_t rows, int64_t cols, CastScale scale, uint8_t* out, uint8_t* out_t,
                      float* col_partials, cudaStream_t stream) {
  elementwise::with_act(act, [&](auto a) {
    constexpr elementwise::Act A = decltype(a)::value;
    if (g == nullptr) {
      launch_wide<T, Fp8Kind::kE4M3>(ActValues<T, A>{static_cast<const T*>(x), range}, rows, cols,
                                     scale, out, out_t, nullptr, stream);
    } else {
      launch_wide<T, Fp8Kind::kE5M2>(
          ActGradValues<T, A>{static_cast<const T*>(g), static_cast<const T*>(x), range}, rows,
          cols, scale, out, out_t, col_partials, stream);
    }
  });
}

}  // namespace

void launch_act_cast_fp8(SrcType src, elementwise::Act act, const void* x, const void* g,
                         const float* range, int64_t rows, int64_t cols, CastScale scale,
                         uint8_t* out, uint8_t* out_t, float* col_partials, cudaStream_t stream) {
  switch (src) {
    case SrcType::kHalf:
      return launch_act_typed<__half>(act, x, g, range, rows, cols, scale, out, out_t,
                                      col_partials, stream);
    case SrcType::kBFloat16:
      return launch_act_typed<__nv_bfloat16>(act, x, g, range, rows, cols, scale, out, out_t,
                                             col_partials, stream);
    default:
      return launch_act_typed<float>(act, x, g, range, rows, cols, scale, out, out_t,
                                     col_partials, stream);
  }
}

int amax_scale_grid(int64_t n, int sm_count) {
  // One wave of 512-thread blocks at most (4 per SM on 2048-thread SMs), fewer for small x: a
  // block per 4 loads of 16 bytes per thread.
  const int64_t per_block = int64_t(kAmaxThreads) * kAmaxUnroll * 4;
  return int(std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block,
                                                    int64_t(sm_count) * 4)));
}

void launch_amax_scale(SrcType src, const void* x, int64_t n, float fmax, int grid,
                       unsigned* partials, unsigned* ticket, float* scale, float* scale_inv,
                       float* amax, cudaStream_t stream) {
  switch (src) {
    case SrcType::kHalf:
      amax_scale_kernel<__half><<<grid, kAmaxThreads, 0, stream>>>(
          static_cast<const __half*>(x), n, fmax, partials, ticket, scale, scale_inv, amax);
      break;
    case SrcType::kBFloat16:
      amax_scale_kernel<__nv_bfloat16><<<grid, kAmaxThreads, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(x), n, fmax, partials, ticket, scale, scale_inv, amax);
      break;
    default:
      amax_scale_kernel<float><<<grid, kAmaxThreads, 0, stream>>>(
          static_cast<const float*>(x), n, fmax, partials, ticket, scale, scale_inv, amax);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace fp8
}  // namespace cudasteps
