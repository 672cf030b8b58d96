// Strided (non-contiguous) element addressing, shared by CPU and CUDA kernels.
//
// A StridedPair describes two tensors of the same shape (an output and an input) by one list of
// sizes and two lists of strides, in elements. Dimensions that are contiguous with their neighbour
// in both tensors are merged first, so a transposed-but-dense input costs two divisions per element
// rather than one per original dimension.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "common/checks.h"

#if defined(__CUDACC__)
#define CUDASTEPS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CUDASTEPS_HOST_DEVICE inline
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

// Builds the pair for out/in of equal shape, dropping size-1 dims and merging contiguous runs.
inline StridedPair make_strided_pair(const at::Tensor& out, const at::Tensor& in, const char* op) {
  StridedPair p;
  CUDASTEPS_CHECK(out.dim() <= kMaxStridedDims, op, "tensors of more than ", kMaxStridedDims,
                  " dimensions are not supported, got ", out.dim());
  for (int64_t d = 0; d < out.dim(); ++d) {
    const int64_t size = out.size(d);
    if (size == 1) continue;
    if (p.ndim > 0) {
      const int last = p.ndim - 1;
      // Merge into the previous dim when stepping it equals stepping `size` times along d.
      if (p.out_strides[last] == out.stride(d) * size && p.in_strides[last] == in.stride(d) * size) {
        p.sizes[last] *= size;
        p.out_strides[last] = out.stride(d);
        p.in_strides[last] = in.stride(d);
        continue;
      }
    }
    p.sizes[p.ndim] = size;
    p.out_strides[p.ndim] = out.stride(d);
    p.in_strides[p.ndim] = in.stride(d);
    ++p.ndim;
  }
  if (p.ndim == 0) {  // a single element
    p.sizes[0] = 1;
    p.out_strides[0] = 1;
    p.in_strides[0] = 1;
    p.ndim = 1;
  }
  return p;
}

}  // namespace cudasteps
