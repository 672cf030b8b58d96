// Host logic shared by the CPU and CUDA transpose kernels: argument checks and the normalization
// of any input layout to the one problem the kernels solve (TransposeProblem, problem.h).
//
// The kernels solve: `batch` matrices of rows x cols (M x N), input element (b, r, c) at
//   in + b * in_batch_stride + r * in_row_stride + c        (unit column stride)
// output contiguous (batch, cols, rows). Everything else is reduced to that, or to a copy:
//   - M == 1 or N == 1: the contiguous (.., N, M) result has the bytes of the contiguous (.., M, N)
//     input, so it is a copy (cudasteps::copy_ into a view of out).
//   - unit row stride (a transposed view such as x.mT): the result is a copy of self.mT.
//   - unit column stride and batch dims that collapse to one stride (contiguous tensors, storage
//     offsets, row slices like x[:, 3:], batch slices): the kernel reads it directly.
//   - anything else: cudasteps::copy makes it contiguous first (one extra pass).
// A non-contiguous `out` of transpose_ gets a contiguous result copied into it.
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <cstdint>

#include "common/typed_op.h"
#include "common/checks.h"
#include "transpose/problem.h"

namespace cudasteps {

// `name` is the input's schema argument: `self` of transpose, `src` of transpose_.
inline void check_transpose_input(const at::Tensor& in, const char* op, const char* name) {
  check_min_dim(in, 2, op, name);
  const int64_t e = in.element_size();
  CUDASTEPS_CHECK(e == 1 || e == 2 || e == 4 || e == 8, op, name,
                  " must have an element size of 1, 2, 4 or 8 bytes, got ", e, " (",
                  in.scalar_type(), ")");
}

inline std::vector<int64_t> transposed_shape(const at::Tensor& self) {
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return shape;
}

inline void check_transpose_out(const at::Tensor& out, const at::Tensor& src) {
  constexpr const char* op = "transpose_";
  check_transpose_input(src, op, "src");
  check_same_device(out, src, op, "out", "src");
  check_same_dtype(out, src, op, "out", "src");
  const auto expected = transposed_shape(src);
  CUDASTEPS_CHECK(out.sizes() == at::IntArrayRef(expected), op, "out must have the shape ",
                  at::IntArrayRef(expected), " (src's last two dimensions swapped), got ",
                  out.sizes());
  // Any overlap would let the kernel read elements it already overwrote. Layouts too irregular
  // for ATen to decide (TooHard) are rejected only when the two share a storage.
  const auto overlap = at::get_overlap_status(out, src);
  const bool shared = overlap == at::MemOverlapStatus::Full ||
                      overlap == at::MemOverlapStatus::Partial ||
                      (overlap == at::MemOverlapStatus::TooHard && out.numel() > 0 &&
                       out.storage().is_alias_of(src.storage()));
  CUDASTEPS_CHECK(!shared, op, "out must not share memory with src");
}

// Fills `p` when the kernels can read `t` in place (unit column stride, collapsible batch dims).
inline bool kernel_layout(const at::Tensor& t, TransposeProblem& p) {
  const int64_t d = t.dim();
  p.rows = t.size(d - 2);
  p.cols = t.size(d - 1);
  if (t.stride(d - 1) != 1) return false;
  p.in_row_stride = t.stride(d - 2);
  p.batch = 1;
  p.in_batch_stride = p.rows * p.cols;
  int64_t inner_stride = -1;  // stride of the innermost batch dim of size > 1 seen so far
  int64_t inner_size = 1;
  for (int64_t k = d - 3; k >= 0; --k) {
    const int64_t size = t.size(k);
    if (size == 1) continue;
    if (inner_stride < 0) {
      p.in_batch_stride = t.stride(k);
    } else if (t.stride(k) != inner_stride * inner_size) {
      return false;
    }
    inner_stride = t.stride(k);
    inner_size = size;
    p.batch *= size;
  }
  return true;
}

inline void copy__op(const at::Tensor& dst, const at::Tensor& src) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&)>("copy_");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor d = dst;
  op.call(d, src);
}

inline at::Tensor copy_op(const at::Tensor& src) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&)>("copy");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(src);
}

// Writes transpose(self) into `out` (shape checked, no overlap). `run_kernel(out, self, problem)`
// gets a contiguous `out` and a `self` laid out as `problem` says; `aligned(ptr)` says whether a
// data pointer suits the kernel (the CUDA kernels move whole words).
template <typename RunKernel, typename Aligned>
void transpose_into(const at::Tensor& out, const at::Tensor& self, RunKernel&& run_kernel,
                    Aligned&& aligned) {
  if (self.numel() == 0) return;
  const int64_t d = self.dim();
  if (self.size(d - 2) == 1 || self.size(d - 1) == 1) {
    if (out.is_contiguous()) {
      copy__op(out.view(self.sizes()), self);
    } else {
      copy__op(out, self.transpose(d - 2, d - 1));
    }
    return;
  }
  if (self.stride(d - 2) == 1) {  // a transposed view: the result is a plain copy of self.mT
    copy__op(out, self.transpose(d - 2, d - 1));
    return;
  }
  if (!out.is_contiguous() || !aligned(out.data_ptr())) {
    at::Tensor tmp = at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
    transpose_into(tmp, self, run_kernel, aligned);
    copy__op(out, tmp);
    return;
  }
  TransposeProblem p;
  if (kernel_layout(self, p) && aligned(self.const_data_ptr())) {
    run_kernel(out, self, p);
    return;
  }
  const at::Tensor dense = copy_op(self);
  const bool ok = kernel_layout(dense, p);
  TORCH_INTERNAL_ASSERT(ok, "a contiguous tensor must have the kernel layout");
  run_kernel(out, dense, p);
}

}  // namespace cudasteps
