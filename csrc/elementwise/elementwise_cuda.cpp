// CUDA bias_act, ladder_bias_act, bias_act_backward (and the _amax forms of both) and sum_leading:
// the host side. Checks the arguments (elementwise.h, the same checks and messages as the CPU
// ops), allocates the outputs, makes the inputs contiguous, dispatches on the dtype and calls the
// launchers of launch.h (bias_act_cuda.cu, inst_backward_*.cu) on the current stream under a
// device guard.
// kernels.cuh says how the kernels work.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <type_traits>

#include "elementwise/elementwise.h"
#include "elementwise/launch.h"

namespace cudasteps {
namespace elementwise {
namespace {

#define CUDASTEPS_FLOAT_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)

// The launchers' math type (functors.h's light copy of ATen's trait) is ATen's.
template <typename T>
constexpr bool same_opmath() {
  return std::is_same<opmath_type<T>, at::opmath_type<T>>::value;
}
static_assert(same_opmath<float>() && same_opmath<double>() && same_opmath<at::Half>() &&
                  same_opmath<at::BFloat16>(),
              "functors.h's opmath_type must match at::opmath_type");

// The optional bias as the launchers take it: contiguous (kept alive by holder), its data (null
// without a bias) and whether it is fp32 (else x's dtype: check_feature_vector).
struct BiasOperand {
  at::Tensor holder;
  const void* ptr = nullptr;
  bool is_float = false;
};

BiasOperand bias_operand(const c10::optional<at::Tensor>& bias_in) {
  BiasOperand b;
  if (!bias_in.has_value()) return b;
  b.holder = bias_in->contiguous();
  b.ptr = b.holder.const_data_ptr();
  b.is_float = b.holder.scalar_type() == at::kFloat;
  return b;
}

// ---- ops -----------------------------------------------------------------------------------

// A float32 amax output, +0 (the kernels raise it): a memset, not a fill kernel.
at::Tensor zero_amax(const at::Tensor& like, cudaStream_t stream) {
  at::Tensor amax = at::empty({}, like.options().dtype(at::kFloat));
  C10_CUDA_CHECK(cudaMemsetAsync(amax.data_ptr(), 0, sizeof(float), stream));
  return amax;
}

unsigned* amax_word(const c10::optional<at::Tensor>& amax) {
  return amax.has_value() ? static_cast<unsigned*>(amax->data_ptr()) : nullptr;
}

// bias_act, and with `amax` (a zeroed float32, bias_act_amax) also max |out| into it.
at::Tensor bias_act_cuda_op(const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
                            c10::string_view act_name, const char* op_name,
                            const c10::optional<at::Tensor>& amax) {
  const Act act = check_bias_act_args(x_in, bias_in, act_name, op_name);
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const BiasOperand bias = bias_operand(bias_in);
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_cuda", [&] {
    launch_bias_act<scalar_t>(act, x.const_data_ptr<scalar_t>(), bias.ptr, bias.is_float,
                              out.data_ptr<scalar_t>(), num_rows(x), num_cols(x), x.numel(),
                              stream, amax_word(amax));
  });
  return out;
}

at::Tensor bias_act_cuda(const at::Tensor& x, const c10::optional<at::Tensor>& bias,
                         c10::string_view act) {
  return bias_act_cuda_op(x, bias, act, "bias_act", c10::nullopt);
}

std::tuple<at::Tensor, at::Tensor> bias_act_amax_cuda(const at::Tensor& x,
                                                      const c10::optional<at::Tensor>& bias,
                                                      c10::string_view act) {
  constexpr const char* op = "bias_act_amax";
  check_amax_input(x, op);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor amax = zero_amax(x, at::cuda::getCurrentCUDAStream());
  at::Tensor out = bias_act_cuda_op(x, bias, act, op, amax);
  return {out, amax};
}

at::Tensor ladder_bias_act_cuda(const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
                                c10::string_view act_name, c10::string_view variant) {
  constexpr const char* name = "ladder_bias_act";
  const Act act = check_bias_act_args(x_in, bias_in, act_name, name);
  CUDASTEPS_CHECK(variant == "unfused" || variant == "fused_scalar" || variant == "fused_vec16",
                  name, "variant must be one of unfused, fused_scalar, fused_vec16, got '",
                  std::string(variant), "'");
  if (variant == "fused_vec16") return bias_act_cuda(x_in, bias_in, act_name);
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const BiasOperand bias = bias_operand(bias_in);
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "ladder_bias_act_cuda", [&] {
    if (variant == "fused_scalar") {
      launch_ladder_fused_scalar<scalar_t>(act, x.const_data_ptr<scalar_t>(), bias.ptr,
                                           bias.is_float, out.data_ptr<scalar_t>(), x.numel(),
                                           num_cols(x), stream);
      return;
    }
    // Step 1 (unfused): the bias add and the activation as two kernels, with a round trip of
    // the intermediate through memory (as eager PyTorch runs F.gelu(x + b)).
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    at::Tensor sum;  // x + bias, materialized
    if (bias.ptr != nullptr) {
      sum = at::empty_like(x);
      launch_ladder_bias_add<scalar_t>(src, bias.ptr, bias.is_float, sum.data_ptr<scalar_t>(),
                                       num_rows(x), num_cols(x), stream);
      src = sum.const_data_ptr<scalar_t>();
    }
    launch_bias_act<scalar_t>(act, src, nullptr, false, out.data_ptr<scalar_t>(), num_rows(x),
                              num_cols(x), x.numel(), stream);
  });
  return out;
}

// bias_act_backward, and with `amax` (a zeroed float32, bias_act_backward_amax) also
// max |grad_x| into it.
std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_cuda_op(
    const at::Tensor& grad_in, const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
    c10::string_view act_name, const char* op_name, const c10::optional<at::Tensor>& amax) {
  const Act act = check_bias_act_backward_args(grad_in, x_in, bias_in, act_name, op_name);
  at::Tensor grad_x =
      at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  c10::optional<at::Tensor> grad_bias;
  // Every column is written by the finalize pass; zeros only when there are no rows to sum.
  if (bias_in.has_value()) grad_bias = at::empty(bias_in->sizes(), bias_in->options());
  if (x_in.numel() == 0) {
    if (grad_bias.has_value()) grad_bias->zero_();
    return {grad_x, grad_bias};
  }
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad = grad_in.contiguous();
  const BiasOperand bias = bias_operand(bias_in);
  // grad_bias has bias's dtype: x's or fp32 (check_feature_vector).
  void* grad_bias_ptr = bias.holder.defined() ? grad_bias->data_ptr() : nullptr;
  const bool grad_bias_is_float =
      bias.holder.defined() && grad_bias->scalar_type() == at::kFloat;
  TORCH_INTERNAL_ASSERT(!bias.holder.defined() || grad_bias_is_float ||
                        grad_bias->scalar_type() == x.scalar_type());
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_backward_cuda", [&] {
    launch_bias_act_backward<scalar_t>(act, grad.const_data_ptr<scalar_t>(),
                                       x.const_data_ptr<scalar_t>(), bias.ptr, bias.is_float,
                                       grad_x.data_ptr<scalar_t>(), grad_bias_ptr,
                                       grad_bias_is_float, num_rows(x), num_cols(x), x.numel(),
                                       stream, amax_word(amax));
  });
  return {grad_x, grad_bias};
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_cuda(
    const at::Tensor& grad, const at::Tensor& x, const c10::optional<at::Tensor>& bias,
    c10::string_view act) {
  return bias_act_backward_cuda_op(grad, x, bias, act, "bias_act_backward", c10::nullopt);
}

std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor> bias_act_backward_amax_cuda(
    const at::Tensor& grad, const at::Tensor& x, const c10::optional<at::Tensor>& bias,
    c10::string_view act) {
  constexpr const char* op = "bias_act_backward_amax";
  check_amax_input(x, op);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor amax = zero_amax(x, at::cuda::getCurrentCUDAStream());
  auto [grad_x, grad_bias] = bias_act_backward_cuda_op(grad, x, bias, act, op, amax);
  return {grad_x, grad_bias, amax};
}

at::Tensor sum_leading_cuda(const at::Tensor& self_in, const c10::optional<at::Tensor>& other_in,
                            double alpha, c10::optional<at::ScalarType> dtype) {
  check_sum_leading_args(self_in, other_in);
  const at::ScalarType out_dtype = sum_leading_dtype(self_in, dtype);
  const int64_t cols = self_in.size(-1);
  at::Tensor out = at::empty({cols}, self_in.options().dtype(out_dtype));
  if (self_in.numel() == 0) return out.zero_();
  const c10::cuda::CUDAGuard guard(self_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor self = self_in.contiguous();
  const at::Tensor other = other_in.has_value() ? other_in->contiguous() : at::Tensor();
  // The finalize pass writes fp32 or self's dtype directly; any other dtype goes through an fp32
  // (fp64 for double) buffer and a cast.
  const bool direct = out_dtype == at::kFloat || out_dtype == self.scalar_type();
  at::Tensor sum_acc =
      direct ? out : at::empty({cols}, self.options().dtype(at::toOpMathType(self.scalar_type())));
  const bool sum_is_float = sum_acc.scalar_type() == at::kFloat;
  TORCH_INTERNAL_ASSERT(sum_is_float || sum_acc.scalar_type() == self.scalar_type());
  CUDASTEPS_FLOAT_TYPES(self.scalar_type(), "sum_leading_cuda", [&] {
    launch_sum_leading<scalar_t>(self.const_data_ptr<scalar_t>(),
                                 other.defined() ? other.const_data_ptr<scalar_t>() : nullptr,
                                 sum_acc.data_ptr(), sum_is_float, alpha, num_rows(self), cols,
                                 stream);
  });
  if (!direct) out.copy_(sum_acc);
  return out;
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("bias_act", &elementwise::bias_act_cuda);
  m.impl("ladder_bias_act", &elementwise::ladder_bias_act_cuda);
  m.impl("bias_act_backward", &elementwise::bias_act_backward_cuda);
  m.impl("bias_act_amax", &elementwise::bias_act_amax_cuda);
  m.impl("bias_act_backward_amax", &elementwise::bias_act_backward_amax_cuda);
  m.impl("sum_leading", &elementwise::sum_leading_cuda);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
