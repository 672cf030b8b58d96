// Operands as the GEMM kernels read them, shared by both paths: a tensor as a row- or
// column-major matrix with a leading dimension (TcOperand), and its copy into rows padded to 16
// bytes, in either storage order (tc_repack: one cudasteps::copy_ or transpose_ pass), for the
// kernels that read 16-byte chunks (cp.async, TMA) or K-major operands only (TF32 wgmma).
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/ATen.h>

#include <algorithm>

#include "common/typed_op.h"
#include "common/launch.cuh"
#include "gemm/gemm_cuda.h"

namespace cudasteps {
namespace gemm {

// The shortest leading dimension, at least `cols`, that starts every row on a 16-byte boundary.
int64_t padded_ld(int64_t cols, int64_t elem_bytes) {
  const int64_t align = 16 / elem_bytes;
  return std::max<int64_t>(ceil_div<int64_t>(cols, align) * align, align);
}

// `t` (rows x cols) read in place: row- or column-major (make_operand copies other strides). A
// leading dimension that never steps (one row of a row-major matrix) is set to a 16-byte multiple
// so that alignment checks look at what matters.
TcOperand tc_operand(const at::Tensor& t, bool is_b) {
  const Operand o = make_operand(t);
  TcOperand r;
  r.holder = o.holder;
  r.ptr = o.ptr;
  r.ld = o.ld;
  r.k_major = is_b ? o.col_major : !o.col_major;
  const int64_t stepped = o.col_major ? t.size(1) : t.size(0);
  const int64_t contiguous = o.col_major ? t.size(0) : t.size(1);
  if (stepped <= 1) r.ld = padded_ld(contiguous, t.element_size());
  return r;
}

void tc_vector_as_k_major(TcOperand& o, bool is_b) {
  const at::Tensor& t = o.holder;
  const int64_t mn = is_b ? t.size(1) : t.size(0);
  const int64_t k = is_b ? t.size(0) : t.size(1);
  const int64_t k_stride = is_b ? t.stride(0) : t.stride(1);
  if (!o.k_major && mn == 1 && (k_stride == 1 || k <= 1)) {
    o.k_major = true;
    o.ld = padded_ld(k, t.element_size());
  }
}

bool tc_operand_aligned(const TcOperand& o, int64_t elem_bytes) {
  return tc_rows_16b_aligned(o.ptr, o.ld, elem_bytes);
}

// `t` rewritten into a fresh buffer whose rows are padded to 16 bytes, in the layout `k_major`
// asks for (A row-major / B column-major when true): cudasteps::copy_ when that is the layout
// `current` already has (one pass), cudasteps::transpose_ when it flips it (one pass, or two when
// the rows are padded: transpose_ writes a non-contiguous out through a contiguous buffer).
TcOperand tc_repack(const at::Tensor& t, const TcOperand& current, bool is_b, bool k_major) {
  static const auto copy_op = typed_op<void(at::Tensor&, const at::Tensor&)>("copy_");
  static const auto transpose_op = typed_op<void(at::Tensor&, const at::Tensor&)>("transpose_");
  // The operand as a [stepped, contiguous] view in the storage order asked for.
  const bool col_major = is_b ? k_major : !k_major;
  const at::Tensor rows_view = col_major ? t.t() : t;
  const int64_t rows = rows_view.size(0), cols = rows_view.size(1);
  const int64_t ld = padded_ld(cols, t.element_size());
  at::Tensor buf = at::empty({rows, ld}, t.options());
  at::Tensor window = buf.narrow(1, 0, cols);
  if (current.k_major == k_major) {
    copy_op.call(window, rows_view);
  } else {
    // rows_view.t() is `t` in its own storage order: the transpose kernel reads it in place.
    transpose_op.call(window, rows_view.t());
  }
  TcOperand r;
  r.holder = buf;
  r.ptr = buf.const_data_ptr();
  r.ld = ld;
  r.k_major = k_major;
  return r;
}

}  // namespace gemm
}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
