// Argument checks shared by the CPU and CUDA copy kernels.
#pragma once

#include <ATen/MemoryOverlap.h>

#include "common/checks.h"

namespace cudasteps {

// copy_(out, src): same shape, dtype and device; out may not overlap itself (expanded views)
// nor partly overlap src. Returns false when out and src are the same memory (nothing to do).
inline bool check_copy_args(const at::Tensor& out, const at::Tensor& src) {
  constexpr const char* op = "copy_";
  check_same_device(src, out, op, "src", "out");
  check_same_dtype(src, out, op, "src", "out");
  check_same_shape(src, out, op, "src", "out");
  CUDASTEPS_CHECK(at::has_internal_overlap(out) != at::MemOverlap::Yes, op,
                  "out must not have overlapping elements (an expanded view), got strides ",
                  out.strides());
  const auto overlap = at::get_overlap_status(out, src);
  CUDASTEPS_CHECK(overlap != at::MemOverlapStatus::Partial, op,
                  "src and out partly share memory; copy from a clone of src instead");
  return overlap != at::MemOverlapStatus::Full;
}

}  // namespace cudasteps
