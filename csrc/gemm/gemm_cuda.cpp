// CUDA mm / addmm / linear: the op layer of the gemm family. Checks the arguments (gemm.h), turns
// each op into one problem, out = alpha * a @ b + beta * addend, and sends it down one of two
// paths: tensor cores (tc/dispatch.cpp: bf16/fp16 always, and float32 when torch's TF32 switch is
// on) or the exact SIMT kernels (sgemm/dispatch.cpp: float32 and float64).
//
// Tensor cores for float32: torch.backends.cuda.matmul.allow_tf32, or
// set_float32_matmul_precision "high"/"medium", read from at::globalContext() per call, as
// cuBLAS does through torch.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/Context.h>
#include <torch/library.h>

#include "gemm/gemm_cuda.h"

namespace cudasteps {
namespace gemm {
namespace {

// The op-level choice: tensor cores for bf16/fp16, and for float32 when TF32 is allowed.
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                       double beta) {
  const auto dtype = a.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16 ||
      (dtype == at::kFloat && at::globalContext().allowTF32CuBLAS())) {
    return tc_gemm_cuda(a, b, add, alpha, beta, tc_type_of(dtype));
  }
  return gemm_cuda(a, b, add, alpha, beta);
}

at::Tensor mm_cuda(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm_pair(self, mat2, "mm", "self", "mat2");
  return matmul_cuda(self, mat2, Addend{}, 1.0, 0.0);
}

at::Tensor addmm_cuda(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  check_mm_pair(mat1, mat2, "addmm", "mat1", "mat2");
  check_addmm_self(self, mat1, mat1.size(0), mat2.size(1));
  const double beta_d = beta.toDouble();
  Addend add;
  if (beta_d != 0.0) add = make_addend(self, mat1.size(0), mat2.size(1));
  return matmul_cuda(mat1, mat2, add, alpha.toDouble(), beta_d);
}

at::Tensor linear_cuda(const at::Tensor& input, const at::Tensor& weight,
                       const c10::optional<at::Tensor>& bias) {
  check_linear_args(input, weight, bias);
  const int64_t N = weight.size(0);
  const at::Tensor x = flatten_input(input);
  Addend add;
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) add = make_bias_addend(*bias, N);
  // weight.t() is a column-major (K-major) [K, N] view: read in place by every kernel.
  at::Tensor out = matmul_cuda(x, weight.t(), add, 1.0, has_bias ? 1.0 : 0.0);
  return out.view(linear_out_shape(input, N));
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("mm", &gemm::mm_cuda);
  m.impl("addmm", &gemm::addmm_cuda);
  m.impl("linear", &gemm::linear_cuda);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
