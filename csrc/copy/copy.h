// Argument checks shared by the CPU and CUDA copy kernels.
#pragma once

#include <ATen/MemoryOverlap.h>

#include "common/checks.h"

namespace cudasteps {

// copy_(self, src): same shape, dtype and device; self may not overlap itself (expanded views)
// nor partly overlap src. Returns false when self and src are the same memory (nothing to do).
inline bool check_copy_args(const at::Tensor& self, const at::Tensor& src) {
  constexpr const char* op = "copy_";
  check_same_device(src, self, op, "src", "self");
  check_same_dtype(src, self, op, "src", "self");
  check_same_shape(src, self, op, "src", "self");
  CUDASTEPS_CHECK(at::has_internal_overlap(self) != at::MemOverlap::Yes, op,
                  "self must not have overlapping elements (an expanded view), got strides ",
                  self.strides());
  const auto overlap = at::get_overlap_status(self, src);
  CUDASTEPS_CHECK(overlap != at::MemOverlapStatus::Partial, op,
                  "src and self partly share memory; copy from a clone of src instead");
  return overlap != at::MemOverlapStatus::Full;
}

}  // namespace cudasteps
