// Builds a StridedPair (strided.h) from two tensors: host code only, as it needs ATen's Tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include "common/error.h"
#include "common/strided.h"

namespace cudasteps {

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
