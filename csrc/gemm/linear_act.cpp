// linear_act: linear + bias + activation as one op, act(input @ weight^T + bias), and
// linear_act_aux, which also returns the product input @ weight^T (before the bias) that the
// backward reads. This unit holds the op's two-pass form, which every device can run:
//
//   product = linear(input, weight)            (no bias: the GEMM)
//   out     = bias_act(product, bias, act)     (the bias and the activation, one elementwise pass)
//
// It is the CPU kernel, and what the CUDA kernel runs where the fused epilogue (gemm_cuda.cpp:
// the bias and activation in the Hopper GEMM's epilogue) cannot, and the training forward
// (linear_act_aux) everywhere: inside a training step it ran faster than the fused kernel writing
// the product too (gemm_cuda.cpp, kFuseWithAux). With act "none" and a bias linear takes,
// linear_act is linear. The fused form applies bias_act's functor to the product rounded to the
// output dtype, as this form does, so both give the same bits (with an activation; act "none" is
// linear's single rounding of product + bias in the fused form).
// The backward (gemm_autograd.cpp) is bias_act_backward on the saved product, then linear's two
// GEMMs.
//
// Also the two-pass forms of the two ops around it:
//   mm_bias_act_backward(grad, weight, x, bias, act) = bias_act_backward(grad @ weight, x, bias,
//     act): the gradient of bias_act's input where its output fed a linear of `weight` (the
//     backward of linear_act_linear; its fused form, the ladder's, in gemm_cuda.cpp);
//   linear_act_linear(input, weight1, bias1, weight2, bias2, act) = linear(linear_act(input,
//     weight1, bias1, act), weight2, bias2): an FFN block, one autograd node whose backward runs
//     mm_bias_act_backward (gemm_autograd.cpp); its forward is these two ops on every device.
// And the kernels of the .dtype overloads of linear, linear_act and linear_act_linear (autocast's:
// the arguments cast to dtype here, then the default overload; their Autograd kernels write each
// gradient in its argument's dtype, gemm_autograd.cpp).
#include <torch/library.h>

#include <tuple>

#include "common/typed_op.h"
#include "gemm/gemm.h"

namespace cudasteps {
namespace gemm {

namespace {

at::Tensor linear_call(const at::Tensor& input, const at::Tensor& weight,
                       const c10::optional<at::Tensor>& bias) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&)>(
          "linear");
  return op.call(input, weight, bias);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> linear_act_two_pass(const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       const c10::optional<at::Tensor>& bias,
                                                       c10::string_view act) {
  static const auto bias_act_op =
      typed_op<at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
          "bias_act");
  at::Tensor product = linear_call(input, weight, c10::nullopt);
  at::Tensor out = bias_act_op.call(product, bias, act);
  return {out, product};
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> mm_bias_act_backward_two_pass(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act) {
  static const auto mm_op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mm");
  static const auto bias_act_backward_op = typed_op<std::tuple<at::Tensor, c10::optional<at::Tensor>>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "bias_act_backward");
  int64_t rows = 1;  // explicit: reshape({-1, 0}) is ambiguous when a dimension is 0
  for (int64_t d = 0; d + 1 < grad.dim(); ++d) rows *= grad.size(d);
  const at::Tensor product = mm_op.call(grad.reshape({rows, weight.size(0)}), weight);
  return bias_act_backward_op.call(product.view(x.sizes()), x, bias, act);
}

at::Tensor linear_act_unfused(const at::Tensor& input, const at::Tensor& weight,
                              const c10::optional<at::Tensor>& bias, c10::string_view act) {
  if (linear_act_is_linear(input, bias, act)) return linear_call(input, weight, bias);
  return std::get<0>(linear_act_two_pass(input, weight, bias, act));
}

namespace {

at::Tensor linear_act_cpu(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias, c10::string_view act) {
  check_linear_act_args(input, weight, bias, act, "linear_act");
  return linear_act_unfused(input, weight, bias, act);
}

std::tuple<at::Tensor, at::Tensor> linear_act_aux_cpu(const at::Tensor& input,
                                                      const at::Tensor& weight,
                                                      const c10::optional<at::Tensor>& bias,
                                                      c10::string_view act) {
  check_linear_act_args(input, weight, bias, act, "linear_act_aux");
  return linear_act_two_pass(input, weight, bias, act);
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> mm_bias_act_backward_cpu(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act) {
  check_mm_bias_act_backward_args(grad, weight, x, bias, act);
  return mm_bias_act_backward_two_pass(grad, weight, x, bias, act);
}

}  // namespace

// (Registered for CPU here and for CUDA in gemm_cuda.cpp.)
at::Tensor linear_act_linear_kernel(const at::Tensor& input, const at::Tensor& weight1,
                                    const c10::optional<at::Tensor>& bias1,
                                    const at::Tensor& weight2,
                                    const c10::optional<at::Tensor>& bias2, c10::string_view act) {
  static const auto linear_act_op = typed_op<at::Tensor(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act");
  check_linear_act_linear_args(input, weight1, bias1, weight2, bias2, act);
  return linear_call(linear_act_op.call(input, weight1, bias1, act), weight2, bias2);
}

at::Tensor linear_dtype_kernel(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, at::ScalarType dtype) {
  const bool has_bias = bias.has_value() && bias->defined();
  check_cast_args("linear", dtype, {{&input, "input"}, {&weight, "weight"}});
  if (has_bias) check_cast_args("linear", dtype, {{&*bias, "bias"}});
  return linear_call(cast_to(input, dtype), cast_to(weight, dtype), cast_to(bias, dtype));
}

at::Tensor linear_act_dtype_kernel(const at::Tensor& input, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, c10::string_view act,
                                   at::ScalarType dtype) {
  static const auto linear_act_op = typed_op<at::Tensor(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act");
  check_cast_args("linear_act", dtype, {{&input, "input"}, {&weight, "weight"}});
  return linear_act_op.call(cast_to(input, dtype), cast_to(weight, dtype), bias, act);
}

at::Tensor linear_act_linear_dtype_kernel(const at::Tensor& input, const at::Tensor& weight1,
                                          const c10::optional<at::Tensor>& bias1,
                                          const at::Tensor& weight2,
                                          const c10::optional<at::Tensor>& bias2,
                                          c10::string_view act, at::ScalarType dtype) {
  constexpr const char* op = "linear_act_linear";
  check_cast_args(op, dtype, {{&input, "input"}, {&weight1, "weight1"}, {&weight2, "weight2"}});
  if (bias2.has_value() && bias2->defined()) check_cast_args(op, dtype, {{&*bias2, "bias2"}});
  return linear_act_linear_kernel(cast_to(input, dtype), cast_to(weight1, dtype), bias1,
                                  cast_to(weight2, dtype), cast_to(bias2, dtype), act);
}

}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("linear_act", &gemm::linear_act_cpu);
  m.impl("linear_act_aux", &gemm::linear_act_aux_cpu);
  m.impl("mm_bias_act_backward", &gemm::mm_bias_act_backward_cpu);
  m.impl("linear_act_linear", &gemm::linear_act_linear_kernel);
  m.impl("linear.dtype", &gemm::linear_dtype_kernel);
  m.impl("linear_act.dtype", &gemm::linear_act_dtype_kernel);
  m.impl("linear_act_linear.dtype", &gemm::linear_act_linear_dtype_kernel);
}

}  // namespace cudasteps
