// CUDA add (tensor and scalar forms, with alpha) and mul (tensor and scalar forms): the host side.
// binary.h's plan (type promotion, the device rule, broadcasting, the kernel path), the output,
// the dtype dispatch and the host values in the kernels' math type, then the launchers of
// launch.h (binary_kernels.cuh, instantiated in inst_add_*.cu and inst_mul_*.cu) on the current
// stream under a device guard.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <type_traits>

#include "common/strided_tensors.h"
#include "elementwise/binary.h"
#include "elementwise/launch.h"

namespace cudasteps {
namespace elementwise {
namespace {

// Every dtype add/mul take: floating (fp32 math for half/bf16), integers and bool.
#define CUDASTEPS_BINARY_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, TYPE, NAME, __VA_ARGS__)

// The plan's operands as the launchers read them, for data of type T: pointers, the path's sizes,
// the host value in the math type and, for the strided path, the views' merged dims.
template <typename T>
BinaryArgs<T> binary_args(const BinaryPlan& plan, const at::Tensor& out, const char* name) {
  using Acc = opmath_type<T>;
  // The launchers' math type (functors.h's light copy of ATen's trait) is ATen's.
  static_assert(std::is_same<Acc, at::opmath_type<T>>::value,
                "functors.h's opmath_type must match at::opmath_type");
  const at::Tensor& a = plan.self.tensor;
  const at::Tensor& b = plan.other.tensor;
  BinaryArgs<T> args;
  args.path = plan.path;
  args.self = a.defined() ? a.const_data_ptr<T>() : nullptr;
  args.other = b.defined() ? b.const_data_ptr<T>() : nullptr;
  args.out = out.data_ptr<T>();
  args.numel = plan.numel;
  args.rows = plan.rows;
  args.cols = plan.cols;
  if (plan.other.is_value()) {
    args.value_operand = ValueOperand::kOther;
    args.value = scalar_to<Acc>(plan.other.value);
  } else if (plan.self.is_value()) {
    args.value_operand = ValueOperand::kSelf;
    args.value = scalar_to<Acc>(plan.self.value);
  }
  if (plan.path == BinaryPath::kStrided) {
    // A host value with a strided tensor: the tensor stands in for both operands (the value goes
    // in the functor).
    if (plan.other.is_value()) {
      args.strided = make_strided_pair(a, a, name);
    } else if (plan.self.is_value()) {
      args.strided = make_strided_pair(b, b, name);
    } else {
      args.strided = make_strided_pair(a, b, name);
    }
  }
  return args;
}

// The output: a new contiguous tensor of the plan's broadcast shape and result dtype.
at::Tensor binary_out(const BinaryPlan& plan) {
  return at::empty(plan.shape, at::TensorOptions().dtype(plan.dtype).device(plan.device));
}

at::Tensor add_plan_cuda(const BinaryPlan& plan, const at::Scalar& alpha) {
  check_alpha(alpha, plan.dtype, "add");
  at::Tensor out = binary_out(plan);
  if (plan.path == BinaryPath::kEmpty) return out;
  const c10::cuda::CUDAGuard guard(plan.device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  CUDASTEPS_BINARY_TYPES(plan.dtype, "binary_cuda", [&] {
    using Acc = opmath_type<scalar_t>;
    const Acc alpha_acc = scalar_to<Acc>(alpha);
    launch_add<scalar_t>(binary_args<scalar_t>(plan, out, "add"), alpha_acc, stream);
  });
  return out;
}

at::Tensor mul_plan_cuda(const BinaryPlan& plan) {
  at::Tensor out = binary_out(plan);
  if (plan.path == BinaryPath::kEmpty) return out;
  const c10::cuda::CUDAGuard guard(plan.device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  CUDASTEPS_BINARY_TYPES(plan.dtype, "binary_cuda", [&] {
    launch_mul<scalar_t>(binary_args<scalar_t>(plan, out, "mul"), stream);
  });
  return out;
}

at::Tensor add_cuda(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return add_plan_cuda(plan_binary(self, other, "add"), alpha);
}

at::Tensor add_scalar_cuda(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  return add_plan_cuda(plan_binary(self, other, "add"), alpha);
}

at::Tensor mul_cuda(const at::Tensor& self, const at::Tensor& other) {
  return mul_plan_cuda(plan_binary(self, other, "mul"));
}

at::Tensor mul_scalar_cuda(const at::Tensor& self, const at::Scalar& other) {
  return mul_plan_cuda(plan_binary(self, other, "mul"));
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("add", &elementwise::add_cuda);
  m.impl("add.Scalar", &elementwise::add_scalar_cuda);
  m.impl("mul", &elementwise::mul_cuda);
  m.impl("mul.Scalar", &elementwise::mul_scalar_cuda);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
