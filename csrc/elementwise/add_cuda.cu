// CUDA add (tensor and scalar forms, with alpha): binary_kernels.cuh with the AddOp functor.
#include <torch/library.h>

#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {
namespace {

at::Tensor add_plan_cuda(const BinaryPlan& plan, const at::Scalar& alpha) {
  check_alpha(alpha, plan.dtype, "add");
  return run_binary_cuda(plan, "add", [&](auto acc) {
    using Acc = decltype(acc);
    return AddOp<Acc>{scalar_to<Acc>(alpha)};
  });
}

at::Tensor add_cuda(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return add_plan_cuda(plan_binary(self, other, "add"), alpha);
}

at::Tensor add_scalar_cuda(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  return add_plan_cuda(plan_binary(self, other, "add"), alpha);
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("add", &elementwise::add_cuda);
  m.impl("add.Scalar", &elementwise::add_scalar_cuda);
}

}  // namespace cudasteps
