// CUDA mul (tensor and scalar forms): binary_kernels.cuh with the MulOp functor.
#include <torch/library.h>

#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {
namespace {

at::Tensor mul_cuda(const at::Tensor& self, const at::Tensor& other) {
  return run_binary_cuda(plan_binary(self, other, "mul"), "mul", [](auto) { return MulOp{}; });
}

at::Tensor mul_scalar_cuda(const at::Tensor& self, const at::Scalar& other) {
  return run_binary_cuda(plan_binary(self, other, "mul"), "mul", [](auto) { return MulOp{}; });
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("mul", &elementwise::mul_cuda);
  m.impl("mul.Scalar", &elementwise::mul_scalar_cuda);
}

}  // namespace cudasteps
