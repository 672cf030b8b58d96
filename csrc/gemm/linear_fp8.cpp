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
// and linear_fp8_aux, which also returns what the backward reads: x8_t and w8_t (the FP8
// transposes the two backward products need as K-major operands) and the two dequantization
// scales 1 / scale_x and 1 / scale_w (scaled_mm's scale_a / scale_b, taken once here). The
// backward (gemm_autograd.cpp) casts the output gradient to e5m2 with its own scale the same way
// and runs grad_input = g8 @ w8 and grad_weight = g8^T @ x8 through scaled_mm; the bias gradient
// is g's column sums. Master weights stay in their dtype (float32 under autocast), and so does
// their gradient.
//
// This unit: the checks and the forward, one composite of ops for every device (registered for CPU
// and CUDA); it runs whatever scaled_mm and cast_fp8 run there.
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

void check_linear_fp8_args(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias,
                           c10::optional<at::ScalarType> out_dtype, const char* op) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  check_min_dim(input, 1, op, "input");
  check_dim(weight, 2, op, "weight");
  check_dtype(input, op, "input", {at::kFloat, at::kBFloat16, at::kHalf});
  check_dtype(weight, op, "weight", {at::kFloat, at::kBFloat16, at::kHalf});
  check_same_device(weight, input, op, "weight", "input");
  CUDASTEPS_CHECK(weight.size(1) == input.size(-1), op,
                  "weight.size(1) must equal input.size(-1) (", input.size(-1), "), got ",
                  weight.size(1));
  if (bias.has_value() && bias->defined()) {
    check_dim(*bias, 1, op, "bias");
    CUDASTEPS_CHECK(bias->size(0) == weight.size(0), op, "bias must have shape [", weight.size(0),
                    "], got shape ", bias->sizes());
    check_dtype(*bias, op, "bias", {at::kFloat, at::kBFloat16, at::kHalf});
    check_same_device(*bias, input, op, "bias", "input");
  }
  if (out_dtype.has_value()) {
    const at::ScalarType o = *out_dtype;
    CUDASTEPS_CHECK(o == at::kFloat || o == at::kBFloat16 || o == at::kHalf, op,
                    "out_dtype must be Float or BFloat16 or Half, got ", o);
  }
}

// The forward; `transposes`: also the FP8 transposes the backward reads (linear_fp8_aux), which
// the plain op (no gradient recorded: inference) does not write.
Fp8Parts linear_fp8_parts(const at::Tensor& input, const at::Tensor& weight,
                          const c10::optional<at::Tensor>& bias,
                          c10::optional<at::ScalarType> out_dtype, bool transposes,
                          const char* op) {
  check_linear_fp8_args(input, weight, bias, out_dtype, op);
  const at::ScalarType out_type = out_dtype.value_or(input.scalar_type());
  static const auto cast = typed_op<fp8::DynamicCast(const at::Tensor&, at::ScalarType, bool)>(
      "cast_fp8_dynamic");
  static const auto scaled_mm =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, const c10::optional<at::Tensor>&,
                          c10::optional<at::ScalarType>)>("scaled_mm");
  const int64_t K = input.size(-1), N = weight.size(0);
  const at::Tensor x = input.reshape({-1, K});
  // Each operand with its dequantization scale 1 / scale (scaled_mm's, and the backward's).
  auto [x8, x8_t, inv_x, amax_x] = cast.call(x, at::kFloat8_e4m3fn, transposes);
  auto [w8, w8_t, inv_w, amax_w] = cast.call(weight, at::kFloat8_e4m3fn, transposes);
  // The bias in the output's dtype, as F.linear under autocast casts it: scaled_mm's FP8 kernel
  // adds a bias of the output's type in its epilogue, where a float32 bias under a bf16 output
  // costs a float32 product and four more passes over it (the FP8 FFN step of the benchmark,
  // 8192 x 2048 -> 8192, took 4.63 ms on an H100 that way, against torch's bf16 3.14 ms).
  c10::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = bias->to(out_type);
  at::Tensor out = scaled_mm.call(x8, w8.t(), inv_x, inv_w, b, out_type);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  shape.back() = N;
  if (!transposes) return {out.view(shape), at::Tensor(), at::Tensor(), inv_x, inv_w};
  return {out.view(shape), *x8_t, *w8_t, inv_x, inv_w};
}

at::Tensor linear_fp8_kernel(const at::Tensor& input, const at::Tensor& weight,
                             const c10::optional<at::Tensor>& bias,
                             c10::optional<at::ScalarType> out_dtype) {
  return std::get<0>(linear_fp8_parts(input, weight, bias, out_dtype, false, "linear_fp8"));
}

Fp8Parts linear_fp8_aux_kernel(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias,
                               c10::optional<at::ScalarType> out_dtype) {
  return linear_fp8_parts(input, weight, bias, out_dtype, true, "linear_fp8_aux");
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("linear_fp8", &gemm::linear_fp8_kernel);
  m.impl("linear_fp8_aux", &gemm::linear_fp8_aux_kernel);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("linear_fp8", &gemm::linear_fp8_kernel);
  m.impl("linear_fp8_aux", &gemm::linear_fp8_aux_kernel);
}
#endif

}  // namespace cudasteps
