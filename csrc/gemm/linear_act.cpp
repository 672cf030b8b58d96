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

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("linear_act", &gemm::linear_act_cpu);
  m.impl("linear_act_aux", &gemm::linear_act_aux_cpu);
}

}  // namespace cudasteps
