// Strided (non-contiguous) element addressing, shared by CPU and CUDA kernels.
//
// A StridedPair describes two tensors of the same shape (an output and an input) by one list of
// sizes and two lists of strides, in elements. Dimensions that are contiguous with their neighbour
// in both tensors are merged first, so a transposed-but-dense input costs two divisions per element
// rather than one per original dimension. Light on purpose (no ATen header): kernel units include
// it. The pair is built from tensors by make_strided_pair, in strided_tensors.h, on the host side.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CUDASTEPS_HOST_DEVICE __host__ __device__ __forceinline__
// A loop of constant trip count unrolled in device code (host compilers unroll as they see fit).
#define CUDASTEPS_UNROLL _Pragma("unroll")
#else
#define CUDASTEPS_HOST_DEVICE inline
#define CUDASTEPS_UNROLL
#endif

namespace cudasteps {

constexpr int kMaxStridedDims = 25;  // as ATen's TensorIterator

struct StridedPair {
  int ndim = 0;
  int64_t sizes[kMaxStridedDims];
  int64_t out_strides[kMaxStridedDims];
  int64_t in_strides[kMaxStridedDims];

  // Element offsets of the `linear`-th element (row-major order) in the output and the input.
  CUDASTEPS_HOST_DEVICE void offsets(int64_t linear, int64_t& out_off, int64_t& in_off) const {
    out_off = 0;
    in_off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t idx = linear % size;
      linear /= size;
      out_off += idx * out_strides[d];
      in_off += idx * in_strides[d];
    }
  }
};

}  // namespace cudasteps
