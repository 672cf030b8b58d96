// Argument checks and the transposed-view dispatch shared by the CPU and CUDA copy ops
// (copy_cpu.cpp, copy_cuda.cpp). Host code (ATen); the kernels' side is launch.h.
#pragma once

#include <ATen/MemoryOverlap.h>

#include "common/checks.h"
#include "common/typed_op.h"

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

// A transposed view of a contiguous tensor (x.t(), x.mT, any batch) whose last two dims are both
// longer than 1. Its contiguous copy is the transpose of that contiguous tensor, which the
// transpose kernels write tile by tile (CUDA: coalesced reads and writes through a shared-memory
// tile, 2.9x clone() on the H100; CPU: cache blocks), where the strided paths read one element
// per index step.
inline bool is_transposed_contiguous(const at::Tensor& in) {
  if (in.dim() < 2 || in.size(-1) == 1 || in.size(-2) == 1) return false;
  const int64_t e = in.element_size();
  if (e != 1 && e != 2 && e != 4 && e != 8) return false;
  return in.mT().is_contiguous();
}

// out = in.mT().mT() contiguous, by cudasteps::transpose_ (through the dispatcher, below
// autograd: the caller's autograd kernel has already recorded the copy).
inline void copy_transposed_view(at::Tensor& out, const at::Tensor& in) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&)>("transpose_");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  op.call(out, in.mT());
}

}  // namespace cudasteps
