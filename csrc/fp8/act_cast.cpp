// act_cast_fp8 and act_grad_cast_fp8: the FP8 MLP's hidden casts, each one pass over its inputs.
// In linear_act_linear_fp8 the hidden tensors never exist in 16 bits: the first product's output z
// (bias included) goes straight to the FP8 copies the second product and the weight gradient read,
// and the hidden gradient the same way. Their dynamic scales come from the range of z (and of the
// gradient of the activation's output) that the GEMM writing them took (scaled_mm_range), so no
// pass reads them for an amax first:
//
//   act_cast_fp8(x, x_range, act, dtype) -> (out, out_t, scale_inv)
//     h     = act(x), rounded to x's dtype       (bias_act(x, None, act)'s values, bit for bit)
//     amax  = a bound of max |h| from x_range = (hi, lo), the range of x taken with 0:
//             max(|h(hi)|, |h(lo)|, and the depth of act's negative lobe where lo lies beyond it)
//             (elementwise::ActBounds): max |h| itself wherever a value above the lobe's depth is
//             the largest, as in any trained MLP's hidden layer
//     scale = fp8 max / amax (1 where amax is 0 or NaN), out = fp8(h * scale) (saturating),
//     out_t = out transposed ([cols, rows]), scale_inv = 1 / scale
//
//   act_grad_cast_fp8(grad, grad_range, x, act, dtype, bias_grad) -> (out, out_t, scale_inv,
//                                                                       grad_bias)
//     g     = grad * act'(x), rounded to x's dtype (bias_act_backward(grad, x, None, act)'s values)
//     amax  = max |grad| over grad_range times the largest |act'| (ActBounds::kDerivMax, at most
//             1.13), rounded to x's dtype: within 13% of max |g|, a shift of the e5m2 exponent window, no loss of
//             precision (the format's relative step is the same across its range)
//     out, out_t, scale_inv as above; grad_bias (bias_grad) = g's column sums, float32 [cols]
//
// Both take 2-D x (and grad) of float32, bf16 or fp16. The CPU kernels and the CUDA kernels'
// fallback (shapes the 16-byte kernel form cannot take: rows or columns not multiples of 16, views
// not 16-byte aligned; act_cast_fp8 to e5m2, act_grad_cast_fp8 to e4m3) are these steps through
// bias_act, bias_act_backward and cast_fp8; the CUDA kernel (fp8/kernels.cu, the cast's wide form
// with the activation in its loads) is one pass: read x (and grad), write out and out_t (and the
// column sums per 128 rows, added up in order).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

#include "common/checks.h"
#include "common/typed_op.h"
#include "elementwise/elementwise.h"
#include "fp8/fp8.h"

#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "common/launch.cuh"
#include "fp8/launch.h"
#endif

namespace cudasteps {
namespace fp8 {
namespace {

constexpr const char* kActOp = "act_cast_fp8";
constexpr const char* kGradOp = "act_grad_cast_fp8";

using ActCast = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using ActGradCast = std::tuple<at::Tensor, at::Tensor, at::Tensor, c10::optional<at::Tensor>>;

void check_matrix(const at::Tensor& x, const char* op, const char* arg) {
  check_defined(x, op, arg);
  check_dim(x, 2, op, arg);
  check_dtype(x, op, arg, {at::kFloat, at::kBFloat16, at::kHalf});
}

void check_range(const at::Tensor& range, const at::Tensor& x, const char* op, const char* arg,
                 const char* x_arg) {
  check_defined(range, op, arg);
  CUDASTEPS_CHECK(range.scalar_type() == at::kFloat, op, arg, " must be float32, got ",
                  range.scalar_type());
  CUDASTEPS_CHECK(range.dim() == 1 && range.size(0) == 2, op, arg,
                  " must have shape [2] (the largest and the smallest value of ", x_arg,
                  ", as scaled_mm_range returns them), got shape ", range.sizes());
  check_same_device(range, x, op, arg, x_arg);
}

void check_format(at::ScalarType dtype, const char* op) {
  CUDASTEPS_CHECK(dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2, op,
                  "dtype must be Float8_e4m3fn or Float8_e5m2, got ", dtype);
}

elementwise::Act check_act_cast_args(const at::Tensor& x, const at::Tensor& x_range,
                                     c10::string_view act, at::ScalarType dtype) {
  check_matrix(x, kActOp, "x");
  check_range(x_range, x, kActOp, "x_range", "x");
  check_format(dtype, kActOp);
  return elementwise::parse_act(act, kActOp);
}

elementwise::Act check_act_grad_cast_args(const at::Tensor& grad, const at::Tensor& grad_range,
                                          const at::Tensor& x, c10::string_view act,
                                          at::ScalarType dtype) {
  check_matrix(grad, kGradOp, "grad");
  check_matrix(x, kGradOp, "x");
  check_same_device(x, grad, kGradOp, "x", "grad");
  check_same_dtype(x, grad, kGradOp, "x", "grad");
  check_same_shape(x, grad, kGradOp, "x", "grad");
  check_range(grad_range, grad, kGradOp, "grad_range", "grad");
  check_format(dtype, kGradOp);
  return elementwise::parse_act(act, kGradOp);
}

// act(x) as bias_act writes it (no bias).
at::Tensor activated(const at::Tensor& x, c10::string_view act) {
  static const auto bias_act =
      typed_op<at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
          "bias_act");
  return bias_act.call(x, c10::nullopt, act);
}

// The bounds of the header, from tensors (the reference; the CUDA kernel's act_range_bound and
// act_grad_range_bound compute the same, bit for bit): 0-dim float32 on the range's device.
at::Tensor act_range_bound(const at::Tensor& range, c10::string_view act, at::ScalarType x_dtype) {
  // The range's values are x's (or 0): exact in x's dtype.
  const at::Tensor h = activated(range.to(x_dtype), act).to(at::kFloat).abs();
  at::Tensor bound = h.max();
  return elementwise::with_act(elementwise::parse_act(act, kActOp), [&](auto a) {
    using B = elementwise::ActBounds<decltype(a)::value>;
    if constexpr (B::kLobe == 0.0f) {
      return bound;
    } else {
      return at::where(range[1] < B::kLobeBelow, at::clamp_min(bound, B::kLobe), bound);
    }
  });
}

at::Tensor act_grad_range_bound(const at::Tensor& range, c10::string_view act,
                                at::ScalarType x_dtype) {
  const float deriv_max = elementwise::with_act(elementwise::parse_act(act, kGradOp), [](auto a) {
    return elementwise::ActBounds<decltype(a)::value>::kDerivMax;
  });
  // Rounded to x's dtype as the values are (monotone: none rounds above the rounded bound).
  return range.abs().max().mul(deriv_max).to(x_dtype).to(at::kFloat);
}

// The steps of the header through the ops (CPU, and the CUDA fallback).
ActCast act_cast_composite(const at::Tensor& x, const at::Tensor& x_range, c10::string_view act,
                           at::ScalarType dtype) {
  const at::Tensor h = activated(x, act);
  const at::Tensor scale = scale_from_amax(act_range_bound(x_range, act, x.scalar_type()), dtype);
  auto [out, out_t, amax] = cast_fp8_call(h, scale, dtype, true);
  (void)amax;
  return {out, *out_t, scale.reciprocal()};
}

ActGradCast act_grad_cast_composite(const at::Tensor& grad, const at::Tensor& grad_range,
                                    const at::Tensor& x, c10::string_view act,
                                    at::ScalarType dtype, bool bias_grad) {
  static const auto backward = typed_op<std::tuple<at::Tensor, c10::optional<at::Tensor>>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "bias_act_backward");
  static const auto sum = typed_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                                              c10::optional<at::ScalarType>)>("sum");
  const at::Tensor g = std::get<0>(backward.call(grad, x, c10::nullopt, act));
  const at::Tensor scale = scale_from_amax(act_grad_range_bound(grad_range, act, x.scalar_type()), dtype);
  auto [out, out_t, amax] = cast_fp8_call(g, scale, dtype, true);
  (void)amax;
  c10::optional<at::Tensor> grad_bias;
  if (bias_grad) grad_bias = sum.call(g, at::IntArrayRef{0}, false, at::kFloat);
  return {out, *out_t, scale.reciprocal(), grad_bias};
}

ActCast act_cast_fp8_cpu(const at::Tensor& x, const at::Tensor& x_range, c10::string_view act,
                         at::ScalarType dtype) {
  check_act_cast_args(x, x_range, act, dtype);
  return act_cast_composite(x, x_range, act, dtype);
}

ActGradCast act_grad_cast_fp8_cpu(const at::Tensor& grad, const at::Tensor& grad_range,
                                  const at::Tensor& x, c10::string_view act, at::ScalarType dtype,
                                  bool bias_grad) {
  check_act_grad_cast_args(grad, grad_range, x, act, dtype);
  return act_grad_cast_composite(grad, grad_range, x, act, dtype, bias_grad);
}

#ifdef CUDASTEPS_WITH_CUDA

// Where the one-pass kernel takes these tensors: contiguous, non-empty, the wide form's shapes.
bool kernel_fits(const at::Tensor& x) {
  return x.is_contiguous() && x.numel() > 0 &&
         cast_fp8_vector_form_fits(x.const_data_ptr(), x.size(0), x.size(1));
}

// One launch; `g` null: act_cast_fp8, else act_grad_cast_fp8 (col_partials then its column sums
// per 128 rows).
at::Tensor launch_one_pass(const at::Tensor& x, const at::Tensor* g, const at::Tensor& range,
                           elementwise::Act act, at::ScalarType dtype, at::Tensor& out,
                           at::Tensor& out_t, float* col_partials) {
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor scale_inv = at::empty({}, x.options().dtype(at::kFloat));
  CastScale scale;
  scale.fmax = float(fp8_max(dtype));
  scale.scale_inv = scale_inv.data_ptr<float>();
  launch_act_cast_fp8(src_type(x), act, x.const_data_ptr(), g ? g->const_data_ptr() : nullptr,
                      range.const_data_ptr<float>(), rows, cols, scale,
                      static_cast<uint8_t*>(out.data_ptr()), static_cast<uint8_t*>(out_t.data_ptr()),
                      col_partials, at::cuda::getCurrentCUDAStream());
  return scale_inv;
}

ActCast act_cast_fp8_cuda(const at::Tensor& x, const at::Tensor& x_range, c10::string_view act,
                          at::ScalarType dtype) {
  const elementwise::Act a = check_act_cast_args(x, x_range, act, dtype);
  if (dtype != at::kFloat8_e4m3fn || !kernel_fits(x)) {
    return act_cast_composite(x, x_range, act, dtype);
  }
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(dtype));
  at::Tensor out_t = at::empty({x.size(1), x.size(0)}, x.options().dtype(dtype));
  const at::Tensor range = x_range.contiguous();
  at::Tensor scale_inv = launch_one_pass(x, nullptr, range, a, dtype, out, out_t, nullptr);
  return {out, out_t, scale_inv};
}

ActGradCast act_grad_cast_fp8_cuda(const at::Tensor& grad, const at::Tensor& grad_range,
                                   const at::Tensor& x, c10::string_view act, at::ScalarType dtype,
                                   bool bias_grad) {
  const elementwise::Act a = check_act_grad_cast_args(grad, grad_range, x, act, dtype);
  if (dtype != at::kFloat8_e5m2 || !kernel_fits(x) || !kernel_fits(grad)) {
    return act_grad_cast_composite(grad, grad_range, x, act, dtype, bias_grad);
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(dtype));
  at::Tensor out_t = at::empty({cols, rows}, x.options().dtype(dtype));
  // Every (128-row group, column) of the partials is written by the tile that holds it.
  at::Tensor partials = at::empty({(rows + 127) / 128, cols}, x.options().dtype(at::kFloat));
  const at::Tensor range = grad_range.contiguous();
  at::Tensor scale_inv =
      launch_one_pass(x, &grad, range, a, dtype, out, out_t, partials.data_ptr<float>());
  c10::optional<at::Tensor> grad_bias;
  if (bias_grad) {
    static const auto sum_leading =
        typed_op<at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, double,
                            c10::optional<at::ScalarType>)>("sum_leading");
    grad_bias = sum_leading.call(partials, c10::nullopt, 1.0, at::kFloat);
  }
  return {out, out_t, scale_inv, grad_bias};
}
#endif

// Autograd: not differentiable (the casts of a training step run inside its autograd function).
ActCast act_cast_fp8_autograd(const at::Tensor& x, const at::Tensor& x_range, c10::string_view act,
                              at::ScalarType dtype) {
  CUDASTEPS_CHECK(!needs_grad(x), kActOp,
                  "x requires grad, but act_cast_fp8 is not differentiable: cast inside the "
                  "autograd function of the FP8 computation");
  static const auto op = typed_op<ActCast(const at::Tensor&, const at::Tensor&, c10::string_view,
                                          at::ScalarType)>(kActOp);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(x, x_range, act, dtype);
}

ActGradCast act_grad_cast_fp8_autograd(const at::Tensor& grad, const at::Tensor& grad_range,
                                       const at::Tensor& x, c10::string_view act,
                                       at::ScalarType dtype, bool bias_grad) {
  CUDASTEPS_CHECK(!needs_grad(grad) && !needs_grad(x), kGradOp,
                  "grad and x must not require grad: act_grad_cast_fp8 is not differentiable");
  static const auto op =
      typed_op<ActGradCast(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           c10::string_view, at::ScalarType, bool)>(kGradOp);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, grad_range, x, act, dtype, bias_grad);
}

}  // namespace
}  // namespace fp8

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("act_cast_fp8", &fp8::act_cast_fp8_cpu);
  m.impl("act_grad_cast_fp8", &fp8::act_grad_cast_fp8_cpu);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("act_cast_fp8", &fp8::act_cast_fp8_cuda);
  m.impl("act_grad_cast_fp8", &fp8::act_grad_cast_fp8_cuda);
}
#endif

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("act_cast_fp8", &fp8::act_cast_fp8_autograd);
  m.impl("act_grad_cast_fp8", &fp8::act_grad_cast_fp8_autograd);
}

}  // namespace cudasteps
