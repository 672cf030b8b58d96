// The SGEMM's epilogue: which outputs a thread's accumulators are (thread_origin), and what each
// 4-wide group of them gets: alpha (applied by the kernel), beta * the strided addend (addmm's
// self, linear's bias), the bounds checks and one 16-byte store where it can (store_out4, and
// store_out4_t for a product run transposed). Split-K's partial sums are added up in split order by
// splitk_epilogue_kernel, which applies the same alpha and beta * addend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gemm/sgemm/tile_config.cuh"

namespace cudasteps {
namespace gemm {

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
