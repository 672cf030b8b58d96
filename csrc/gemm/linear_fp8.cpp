// linear_fp8: input @ weight^T + bias with both operands cast to FP8 (e4m3) with per-tensor scales
// taken from their current amax (dynamic tensorwise scaling, torchao's default float8 recipe):
//
//   scale_x = 448 / amax(input)          scale_w = 448 / amax(weight)   (on the device, no sync)
//   x8, x8_t = fp8(input * scale_x)      w8, w8_t = fp8(weight * scale_w)   (cast_fp8_dynamic,
//              two launches each; the FP8 transposes x8_t, w8_t for linear_fp8_aux alone: without
//              autograd none is written)
//   out      = scaled_mm(x8, w8^T, 1 / scale_x, 1 / scale_w) + bias, in out_dtype (default:
//              input's; autocast passes its dtype and leaves input as it is, so a float32 input
//              is quantized once, not rounded to bf16 first and copied)
//
// input_amax: input's amax where the op that produced input took it (linear_act_fp8's second
// output): input's cast is then one pass (cast_fp8_dynamic with that amax) instead of two.
//
// linear_act_fp8: act(linear_fp8(input, weight) + bias) and the amax of that output, the amax
// taken in the bias-and-activation pass (bias_act_amax) instead of by a pass of the next layer's
// cast: in an FP8 MLP the next linear_fp8 takes it as input_amax. The same values as linear_fp8
// (no bias) followed by bias_act, bit for bit. Its backward (gemm_autograd.cpp) takes the output
// gradient's amax in the pass of the activation's derivative the same way (bias_act_backward_amax).
//
// and linear_fp8_aux, which also returns what the backward reads: x8_t and w8_t (the FP8
// transposes the two backward products need as K-major operands) and the two dequantization
// scales 1 / scale_x and 1 / scale_w (scaled_mm's scale_a / scale_b, taken once here). The
// backward (gemm_autograd.cpp) casts the output gradient to e5m2 with its own scale the same way
// and runs grad_input = g8 @ w8 and grad_weight = g8^T @ x8 through scaled_mm; the bias gradient
// is g's column sums. Master weights stay in their dtype (float32 under autocast), and so does
// their gradient.
//
// This unit: the checks and the forwards, composites of ops for every device (registered for CPU
// and CUDA); they run whatever scaled_mm, cast_fp8_dynamic and bias_act_amax run there.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "common/checks.h"
#include "common/typed_op.h"
#include "fp8/fp8.h"
#include "gemm/gemm.h"

namespace cudasteps {
namespace gemm {
namespace {

using Fp8Parts = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// The forward; `transposes`: also the FP8 transposes the backward reads (linear_fp8_aux), which
// the plain op (no gradient recorded: inference) does not write.
Fp8Parts linear_fp8_parts(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias,
                          c10::optional<at::ScalarType> out_dtype,
                          const c10::optional<at::Tensor>& input_amax, bool transposes,
                          const char* op) {
  check_linear_fp8_args(input, weight, bias, out_dtype, input_amax, op);
  const at::ScalarType out_type = out_dtype.value_or(input.scalar_type());
  const int64_t K = input.size(-1), N = weight.size(0);
  const at::Tensor x = input.reshape({-1, K});
  // Each operand with its dequantization scale 1 / scale (scaled_mm's, and the backward's).
  auto [x8, x8_t, inv_x, amax_x] =
      fp8::cast_fp8_dynamic_call(x, at::kFloat8_e4m3fn, transposes, input_amax);
  auto [w8, w8_t, inv_w, amax_w] =
      fp8::cast_fp8_dynamic_call(weight, at::kFloat8_e4m3fn, transposes);
  // The bias in the output's dtype, as F.linear under autocast casts it: scaled_mm's FP8 kernel
  // adds a bias of the output's type in its epilogue, where a float32 bias under a bf16 output
  // costs a float32 product and four more passes over it (the FP8 FFN step of the benchmark,
  // 8192 x 2048 -> 8192, took 4.63 ms on an H100 that way, against torch's bf16 3.14 ms).
  at::Tensor out =
      scaled_mm_call(x8, w8.t(), inv_x, inv_w, fp8_out_bias(bias, out_type), out_type);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  shape.back() = N;
  if (!transposes) return {out.view(shape), at::Tensor(), at::Tensor(), inv_x, inv_w};
  return {out.view(shape), *x8_t, *w8_t, inv_x, inv_w};
}

at::Tensor linear_fp8_kernel(const at::Tensor& input, const at::Tensor& weight,
                             const c10::optional<at::Tensor>& bias,
                             c10::optional<at::ScalarType> out_dtype,
                             const c10::optional<at::Tensor>& input_amax) {
  return std::get<0>(
      linear_fp8_parts(input, weight, bias, out_dtype, input_amax, false, "linear_fp8"));
}

Fp8Parts linear_fp8_aux_kernel(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias,
                               c10::optional<at::ScalarType> out_dtype,
                               const c10::optional<at::Tensor>& input_amax) {
  return linear_fp8_parts(input, weight, bias, out_dtype, input_amax, true, "linear_fp8_aux");
}

// linear_act_fp8 without autograd (inference, and the Autograd kernel when nothing needs a
// gradient): the product without bias, then bias + act and the amax in one pass.
std::tuple<at::Tensor, at::Tensor> linear_act_fp8_kernel(
    const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
    c10::string_view act, c10::optional<at::ScalarType> out_dtype,
    const c10::optional<at::Tensor>& input_amax) {
  constexpr const char* op = "linear_act_fp8";
  check_linear_fp8_args(input, weight, bias, out_dtype, input_amax, op);
  elementwise::parse_act(act, op);
  const at::Tensor product = std::get<0>(
      linear_fp8_parts(input, weight, c10::nullopt, out_dtype, input_amax, false, op));
  return bias_act_amax_call(product, fp8_act_bias(bias, product.scalar_type()), act);
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("linear_fp8", &gemm::linear_fp8_kernel);
  m.impl("linear_fp8_aux", &gemm::linear_fp8_aux_kernel);
  m.impl("linear_act_fp8", &gemm::linear_act_fp8_kernel);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("linear_fp8", &gemm::linear_fp8_kernel);
  m.impl("linear_fp8_aux", &gemm::linear_fp8_aux_kernel);
  m.impl("linear_act_fp8", &gemm::linear_act_fp8_kernel);
}
#endif

}  // namespace cudasteps
