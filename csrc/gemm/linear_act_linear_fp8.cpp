// linear_act_linear_fp8: an FP8 FFN block, linear_fp8(act(linear_fp8(input, weight1) + bias1),
// weight2) + bias2 (dynamic per-tensor scales, e4m3 forward, e5m2 gradients, as linear_fp8), as one
// op and one autograd node whose hidden tensors never exist in 16 bits:
//
//   x8, w1_8, w2_8 = cast_fp8_dynamic(input, weight1, weight2)     (with their FP8 transposes
//                                                                   where autograd records; the
//                                                                   input's from input_amax where
//                                                                   its producer took it, as
//                                                                   linear_fp8's)
//   z, z_range = scaled_mm_range(x8, w1_8^T, bias1)   z = input @ weight1^T + bias1 in out_dtype,
//                                                     and its range, taken by the GEMM's epilogue
//   h8, h8_t   = act_cast_fp8(z, z_range, act)        act(z) cast to e4m3 in one pass, its scale
//                                                     bounded from z's range (no amax pass)
//   out        = scaled_mm(h8, w2_8^T, bias2)
//
// Backward, from the output gradient gy:
//   gy8, gy8_t     = cast_fp8_dynamic(gy, e5m2)
//   gh, gh_range   = scaled_mm_range(gy8, w2_8)                        the hidden output's gradient
//   gz8, gz8_t, db1 = act_grad_cast_fp8(gh, gh_range, z, act)          gh * act'(z) cast to e5m2,
//                                                                       and bias1's gradient
//   grad_weight2 = gy8^T @ h8, grad_bias2 = column sums of gy, grad_input = gz8 @ w1_8,
//   grad_weight1 = gz8^T @ x8                                          (scaled_mm)
//
// Against linear_act_fp8 followed by linear_fp8 (cudasteps.nn.MLP's layers one by one), which
// write the hidden activation h in 16 bits, read it for the cast and write and read its gradient the
// same way, this removes two passes over the hidden tensor each way (8192 x 8192 bf16 in the
// benchmark's FFN step: 128 MiB each). Its numbers differ from that pair's within FP8 rounding:
// bias1 is added in the GEMM (rounded once with the product, as F.linear adds it), and the hidden
// casts' scales come from a bound of the amax (act_cast.cpp) rather than the amax itself.
//
// This unit: the checks, the forward (a composite of the ops above, registered for CPU and CUDA:
// each runs whatever those run there), the autograd function and the autocast kernel (nothing
// cast: the hidden tensor and the output in the autocast dtype, as linear_fp8's).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <tuple>

#include "common/autograd.h"
#include "common/checks.h"
#include "common/typed_op.h"
#include "elementwise/elementwise.h"
#include "fp8/fp8.h"
#include "gemm/gemm.h"

namespace cudasteps {
namespace gemm {
namespace {

constexpr const char* kOp = "linear_act_linear_fp8";
using OptTensor = c10::optional<at::Tensor>;

void check_args(const at::Tensor& input, const at::Tensor& weight1, const OptTensor& bias1,
                const at::Tensor& weight2, const OptTensor& bias2, c10::string_view act,
                c10::optional<at::ScalarType> out_dtype, const OptTensor& input_amax) {
  check_linear_fp8_args(input, weight1, bias1, out_dtype, input_amax, kOp);
  check_defined(weight2, kOp, "weight2");
  check_dim(weight2, 2, kOp, "weight2");
  check_dtype(weight2, kOp, "weight2", {at::kFloat, at::kBFloat16, at::kHalf});
  check_same_device(weight2, input, kOp, "weight2", "input");
  CUDASTEPS_CHECK(weight2.sym_size(1) == weight1.sym_size(0), kOp,
                  "weight2.size(1) must equal weight1.size(0) (", weight1.sym_size(0), "), got ",
                  weight2.sym_size(1));
  if (bias2.has_value() && bias2->defined()) check_fp8_bias(*bias2, weight2, input, kOp, "bias2");
  elementwise::parse_act(act, kOp);
}

std::tuple<at::Tensor, at::Tensor> scaled_mm_range_call(const at::Tensor& a, const at::Tensor& b,
                                                        const at::Tensor& scale_a,
                                                        const at::Tensor& scale_b,
                                                        const OptTensor& bias,
                                                        at::ScalarType out_dtype) {
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const OptTensor&, c10::optional<at::ScalarType>)>("scaled_mm_range");
  return op.call(a, b, scale_a, scale_b, bias, out_dtype);
}

// What the forward computes, and what the backward reads (defined where `keep`).
struct Forward {
  at::Tensor out;
  at::Tensor x8_t, w1_8_t, w2_8_t, h8_t, z;   // [K, M], [K, N1], [N1, N2], [N1, M], [M, N1]
  at::Tensor inv_x, inv_w1, inv_w2, inv_h;    // dequantization scales (1 / scale)
};

Forward mlp_forward(const at::Tensor& input, const at::Tensor& weight1, const OptTensor& bias1,
                    const at::Tensor& weight2, const OptTensor& bias2, c10::string_view act,
                    c10::optional<at::ScalarType> out_dtype, const OptTensor& input_amax,
                    bool keep) {
  static const auto act_cast = typed_op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, c10::string_view, at::ScalarType)>("act_cast_fp8");
  const at::ScalarType out_type = out_dtype.value_or(input.scalar_type());
  const c10::SymInt K = input.sym_size(-1);
  const at::Tensor x = input.reshape_symint({-1, K});
  auto [x8, x8_t, inv_x, amax_x] =
      fp8::cast_fp8_dynamic_call(x, at::kFloat8_e4m3fn, keep, input_amax);
  auto [w1_8, w1_8_t, inv_w1, amax_w1] =
      fp8::cast_fp8_dynamic_call(weight1, at::kFloat8_e4m3fn, keep);
  auto [w2_8, w2_8_t, inv_w2, amax_w2] =
      fp8::cast_fp8_dynamic_call(weight2, at::kFloat8_e4m3fn, keep);
  (void)amax_x, (void)amax_w1, (void)amax_w2;
  auto [z, z_range] =
      scaled_mm_range_call(x8, w1_8.t(), inv_x, inv_w1, fp8_out_bias(bias1, out_type), out_type);
  auto [h8, h8_t, inv_h] = act_cast.call(z, z_range, act, at::kFloat8_e4m3fn);
  const at::Tensor y =
      scaled_mm_call(h8, w2_8.t(), inv_h, inv_w2, fp8_out_bias(bias2, out_type), out_type);
  std::vector<c10::SymInt> shape(input.sym_sizes().begin(), input.sym_sizes().end());
  shape.back() = weight2.sym_size(0);
  Forward f;
  f.out = y.view_symint(shape);
  if (keep) {
    f.x8_t = *x8_t;
    f.w1_8_t = *w1_8_t;
    f.w2_8_t = *w2_8_t;
    f.h8_t = h8_t;
    f.z = z;
    f.inv_x = inv_x;
    f.inv_w1 = inv_w1;
    f.inv_w2 = inv_w2;
    f.inv_h = inv_h;
  }
  return f;
}

// The op without autograd (inference, and the Autograd kernel when nothing needs a gradient).
at::Tensor linear_act_linear_fp8_kernel(const at::Tensor& input, const at::Tensor& weight1,
                                        const OptTensor& bias1, const at::Tensor& weight2,
                                        const OptTensor& bias2, c10::string_view act,
                                        c10::optional<at::ScalarType> out_dtype,
                                        const OptTensor& input_amax) {
  check_args(input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax);
  return mlp_forward(input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax, false).out;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t dtype_or_none(const OptTensor& t) {
  return t.has_value() && t->defined() ? int64_t(t->scalar_type()) : int64_t(-1);
}

class LinearActLinearFp8Function : public torch::autograd::Function<LinearActLinearFp8Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight1, const OptTensor& bias1,
                            const at::Tensor& weight2, const OptTensor& bias2,
                            c10::string_view act, c10::optional<at::ScalarType> out_dtype,
                            const OptTensor& input_amax) {
    Forward f = [&] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      return mlp_forward(input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax, true);
    }();
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({f.x8_t, f.w1_8_t, f.w2_8_t, f.h8_t, f.z, f.inv_x, f.inv_w1, f.inv_w2,
                            f.inv_h});
    ctx->saved_data["act"] = std::string(act);
    ctx->saved_data["input_dtype"] = int64_t(input.scalar_type());
    ctx->saved_data["weight1_dtype"] = int64_t(weight1.scalar_type());
    ctx->saved_data["weight2_dtype"] = int64_t(weight2.scalar_type());
    ctx->saved_data["bias1_dtype"] = dtype_or_none(bias1);
    ctx->saved_data["bias2_dtype"] = dtype_or_none(bias2);
    return f.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static const auto act_grad_cast =
        typed_op<std::tuple<at::Tensor, at::Tensor, at::Tensor, OptTensor>(
            const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view,
            at::ScalarType, bool)>("act_grad_cast_fp8");
    static const auto sum = typed_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                                                c10::optional<at::ScalarType>)>("sum");
    variable_list grads(8);
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.defined()) return grads;
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x8_t = saved[0], &w1_8_t = saved[1], &w2_8_t = saved[2], &h8_t = saved[3],
                     &z = saved[4], &inv_x = saved[5], &inv_w1 = saved[6], &inv_w2 = saved[7],
                     &inv_h = saved[8];
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto dtype = [&](const char* key) { return at::ScalarType(ctx->saved_data[key].toInt()); };
    const int64_t bias1_dtype = ctx->saved_data["bias1_dtype"].toInt();
    const int64_t bias2_dtype = ctx->saved_data["bias2_dtype"].toInt();
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    const c10::SymInt K = x8_t.sym_size(0), N2 = w2_8_t.sym_size(1);
    const at::Tensor gy = grad.reshape_symint({-1, N2});
    auto [gy8, gy8_t, inv_gy, amax_gy] = fp8::cast_fp8_dynamic_call(gy, at::kFloat8_e5m2, true);
    (void)amax_gy;
    if (ctx->needs_input_grad(3)) {  // weight2: gy^T @ h
      grads[3] = scaled_mm_call(*gy8_t, h8_t.t(), inv_gy, inv_h, c10::nullopt,
                                dtype("weight2_dtype"));
    }
    if (bias2_dtype >= 0 && ctx->needs_input_grad(4)) {
      grads[4] =
          sum.call(gy, at::IntArrayRef{0}, false, at::kFloat).to(at::ScalarType(bias2_dtype));
    }
    const bool want_b1 = bias1_dtype >= 0 && ctx->needs_input_grad(2);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || want_b1) {
      auto [gh, gh_range] =
          scaled_mm_range_call(gy8, w2_8_t.t(), inv_gy, inv_w2, c10::nullopt, z.scalar_type());
      auto [gz8, gz8_t, inv_gz, grad_b1] =
          act_grad_cast.call(gh, gh_range, z, act, at::kFloat8_e5m2, want_b1);
      if (ctx->needs_input_grad(0)) {
        std::vector<c10::SymInt> shape(grad.sym_sizes().begin(), grad.sym_sizes().end());
        shape.back() = K;
        grads[0] = scaled_mm_call(gz8, w1_8_t.t(), inv_gz, inv_w1, c10::nullopt,
                                  dtype("input_dtype"))
                       .view_symint(shape);
      }
      if (ctx->needs_input_grad(1)) {
        grads[1] =
            scaled_mm_call(gz8_t, x8_t.t(), inv_gz, inv_x, c10::nullopt, dtype("weight1_dtype"));
      }
      if (want_b1) grads[2] = grad_b1->to(at::ScalarType(bias1_dtype));
    }
    return grads;  // (none for act, out_dtype and input_amax)
  }
};

using OpSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&,
                               const at::Tensor&, const OptTensor&, c10::string_view,
                               c10::optional<at::ScalarType>, const OptTensor&);

at::Tensor linear_act_linear_fp8_autograd(const at::Tensor& input, const at::Tensor& weight1,
                                          const OptTensor& bias1, const at::Tensor& weight2,
                                          const OptTensor& bias2, c10::string_view act,
                                          c10::optional<at::ScalarType> out_dtype,
                                          const OptTensor& input_amax) {
  if (!records_grad(kOp, input, weight1, bias1, weight2, bias2)) {
    static const auto op = typed_op<OpSignature>(kOp);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax);
  }
  check_args(input, weight1, bias1, weight2, bias2, act, out_dtype, input_amax);
  return LinearActLinearFp8Function::apply(input, weight1, bias1, weight2, bias2, act, out_dtype,
                                           input_amax);
}

// Autocast: nothing cast, the hidden tensor and the output in the autocast dtype unless the call
// names one (linear_fp8's rule: a float32 input is quantized once, from float32).
template <c10::DeviceType Device>
at::Tensor linear_act_linear_fp8_autocast(const at::Tensor& input, const at::Tensor& weight1,
                                          const OptTensor& bias1, const at::Tensor& weight2,
                                          const OptTensor& bias2, c10::string_view act,
                                          c10::optional<at::ScalarType> out_dtype,
                                          const OptTensor& input_amax) {
  static const auto op = typed_op<OpSignature>(kOp);
  constexpr auto key = Device == c10::DeviceType::CUDA ? c10::DispatchKey::AutocastCUDA
                                                       : c10::DispatchKey::AutocastCPU;
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(key);
  return op.call(input, weight1, bias1, weight2, bias2, act,
                 out_dtype.has_value() ? *out_dtype : at::autocast::get_autocast_dtype(Device),
                 input_amax);
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("linear_act_linear_fp8", &gemm::linear_act_linear_fp8_kernel);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("linear_act_linear_fp8", &gemm::linear_act_linear_fp8_kernel);
}
#endif

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("linear_act_linear_fp8", &gemm::linear_act_linear_fp8_autograd);
}

TORCH_LIBRARY_IMPL(cudasteps, AutocastCUDA, m) {
  m.impl("linear_act_linear_fp8",
         &gemm::linear_act_linear_fp8_autocast<c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(cudasteps, AutocastCPU, m) {
  m.impl("linear_act_linear_fp8", &gemm::linear_act_linear_fp8_autocast<c10::DeviceType::CPU>);
}

}  // namespace cudasteps
