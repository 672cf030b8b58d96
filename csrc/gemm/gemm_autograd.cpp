// Autograd for mm, addmm, linear, linear_act, linear_act_linear, linear_fp8 and linear_act_fp8
// (and mm_bias_act_backward's refusal: it is a backward). The backward runs
// cudasteps::mm on transposed views, which the kernels read in place (a transposed view is a
// column-major operand), so training with cudasteps.nn.Linear uses cudasteps GEMMs both ways (the
// FP8 linears: scaled_mm on the FP8 transposes their forward kept). Bias and broadcast-self
// gradients are reductions through cudasteps::sum, or (linear_act, linear_act_fp8) the column
// sums of bias_act_backward. The .dtype overloads (linear.dtype, linear_act.dtype,
// linear_act_linear.dtype: what autocast runs) cast their arguments in the forward and write each
// gradient in its argument's own dtype, a float32 weight's straight from its GEMM (mm.dtype,
// mm_into).
#include <torch/library.h>

#include "common/autograd.h"
#include "fp8/fp8.h"    // linear_fp8's dynamic cast
#include "gemm/gemm.h"  // linear_act_is_linear

namespace cudasteps {
namespace {

at::Tensor mm_call(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mm");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a, b);
}

at::Tensor mm_dtype_call(const at::Tensor& a, const at::Tensor& b, at::ScalarType out_dtype) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType)>("mm", "dtype");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a, b, out_dtype);
}

// a @ b with the result in out_dtype (a gradient in its argument's dtype): mm where that is the
// operands' dtype; mm.dtype's float32 output of 16-bit operands (written by the GEMM, no cast
// pass, no rounding to 16 bits on the way); else mm, then a cast.
at::Tensor mm_into(const at::Tensor& a, const at::Tensor& b, at::ScalarType out_dtype) {
  const auto dtype = a.scalar_type();
  if (out_dtype == dtype) return mm_call(a, b);
  if (out_dtype == at::kFloat && (dtype == at::kBFloat16 || dtype == at::kHalf)) {
    return mm_dtype_call(a, b, out_dtype);
  }
  return mm_call(a, b).to(out_dtype);
}

at::Tensor addmm_call(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Scalar&, const at::Scalar&)>("addmm");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self, a, b, beta, alpha);
}

at::Tensor linear_call(const at::Tensor& input, const at::Tensor& weight,
                       const c10::optional<at::Tensor>& bias) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&)>(
          "linear");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(input, weight, bias);
}

std::tuple<at::Tensor, at::Tensor> linear_act_aux_call(const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       const c10::optional<at::Tensor>& bias,
                                                       c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act_aux");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(input, weight, bias, act);
}

at::Tensor linear_act_call(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias, c10::string_view act) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                             const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(input, weight, bias, act);
}

// bias_act's backward, with autograd on (called from a backward).
std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_call(
    const at::Tensor& grad, const at::Tensor& x, const c10::optional<at::Tensor>& bias,
    c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, c10::optional<at::Tensor>>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "bias_act_backward");
  return op.call(grad, x, bias, act);
}

at::Tensor sum_call(const at::Tensor& t, std::vector<int64_t> dims, bool keepdim,
                    c10::optional<at::ScalarType> dtype = c10::nullopt) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                                             c10::optional<at::ScalarType>)>("sum");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(t, at::OptionalIntArrayRef(dims), keepdim, dtype);
}

// at::sum_to through cudasteps::sum: reduce `grad` to `sizes` (leading dims dropped, broadcast
// size-1 dims kept). Never called with an empty dim list (which would mean "all dims"). Sizes are
// symbolic: under torch.compile / torch.export with a dynamic batch, plain sizes would pin the
// batch to the traced value.
// dtype (where given): the result's, the sums accumulated as cudasteps::sum does for it (a
// float32 bias's gradient summed from a bf16 gradient in float32, with no cast after).
at::Tensor sum_to_sizes(const at::Tensor& grad, const std::vector<c10::SymInt>& sizes,
                        c10::optional<at::ScalarType> dtype = c10::nullopt) {
  at::Tensor r = grad;
  const int64_t lead = grad.dim() - int64_t(sizes.size());
  if (lead > 0) {
    std::vector<int64_t> dims(lead);
    for (int64_t d = 0; d < lead; ++d) dims[d] = d;
    r = sum_call(r, dims, false, dtype);
  }
  std::vector<int64_t> ones;
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    if (sizes[d] == 1 && r.sym_size(d) != 1) ones.push_back(d);
  if (!ones.empty()) r = sum_call(r, ones, true, dtype);
  if (dtype.has_value() && r.scalar_type() != *dtype) r = r.to(*dtype);
  return r;
}

// grad_a = grad @ b^T and grad_b = a^T @ grad, each only when needed.
void mm_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, bool need_a,
                 bool need_b, at::Tensor& grad_a, at::Tensor& grad_b) {
  if (need_a) grad_a = mm_call(grad, b.t());
  if (need_b) grad_b = mm_call(a.t(), grad);
}

class MmFunction : public torch::autograd::Function<MmFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    return mm_call(a, b);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor grad_a, grad_b;
    mm_backward(grad_outputs[0], saved[0], saved[1], ctx->needs_input_grad(0),
                ctx->needs_input_grad(1), grad_a, grad_b);
    return {grad_a, grad_b};
  }
};

// mm.dtype: the gradient comes in out_dtype; each operand's is taken in the operands' dtype (the
// output gradient cast to it), as mm's, then written in that dtype.
class MmDtypeFunction : public torch::autograd::Function<MmDtypeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            at::ScalarType out_dtype) {
    ctx->save_for_backward({a, b});
    return mm_dtype_call(a, b, out_dtype);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor grad_a, grad_b;
    mm_backward(gemm::cast_to(grad_outputs[0], saved[0].scalar_type()), saved[0], saved[1],
                ctx->needs_input_grad(0), ctx->needs_input_grad(1), grad_a, grad_b);
    return {grad_a, grad_b, at::Tensor()};
  }
};

class AddmmFunction : public torch::autograd::Function<AddmmFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& a,
                            const at::Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["self_sizes"] = self.sym_sizes();
    return addmm_call(self, a, b, beta, alpha);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    const at::Scalar beta = ctx->saved_data["beta"].toScalar();
    const at::Scalar alpha = ctx->saved_data["alpha"].toScalar();
    at::Tensor grad_self, grad_a, grad_b;
    if (ctx->needs_input_grad(0)) {
      const auto sizes = ctx->saved_data["self_sizes"].toSymIntVector();
      grad_self = sum_to_sizes(grad, sizes);
      if (beta.toDouble() != 1.0) grad_self = grad_self.mul(beta);
    }
    // alpha * (a @ b): d/da = alpha * grad @ b^T, d/db = alpha * a^T @ grad.
    mm_backward(grad, saved[0], saved[1], ctx->needs_input_grad(1), ctx->needs_input_grad(2),
                grad_a, grad_b);
    if (alpha.toDouble() != 1.0) {
      if (grad_a.defined()) grad_a = grad_a.mul(alpha);
      if (grad_b.defined()) grad_b = grad_b.mul(alpha);
    }
    return {grad_self, grad_a, grad_b, at::Tensor(), at::Tensor()};
  }
};

// The dtypes the gradients of a linear.dtype-style call come back in (its arguments' own), kept
// by the forward: "<name>_dtype" in saved_data, read by grad_dtype (the casts' dtype, that of
// the saved tensors, where the call had no dtype).
void save_arg_dtype(AutogradContext* ctx, const char* name, const at::Tensor& t) {
  ctx->saved_data[std::string(name) + "_dtype"] = int64_t(t.scalar_type());
}
c10::optional<at::ScalarType> saved_arg_dtype(AutogradContext* ctx, const char* name) {
  const auto it = ctx->saved_data.find(std::string(name) + "_dtype");
  if (it == ctx->saved_data.end()) return c10::nullopt;
  return at::ScalarType(it->second.toInt());
}
at::ScalarType grad_dtype(AutogradContext* ctx, const char* name, const at::Tensor& cast) {
  return saved_arg_dtype(ctx, name).value_or(cast.scalar_type());
}
// A dtype-overload forward's argument: its dtype kept for the backward (save_arg_dtype), the
// argument cast to `dtype` returned. An absent optional one is kept absent.
at::Tensor cast_arg(AutogradContext* ctx, const char* name, const at::Tensor& arg,
                    at::ScalarType dtype) {
  save_arg_dtype(ctx, name, arg);
  return gemm::cast_to(arg, dtype);
}
c10::optional<at::Tensor> cast_arg(AutogradContext* ctx, const char* name,
                                   const c10::optional<at::Tensor>& arg, at::ScalarType dtype) {
  if (arg.has_value() && arg->defined()) save_arg_dtype(ctx, name, *arg);
  return gemm::cast_to(arg, dtype);
}

// dtype (linear.dtype): input, weight and bias are cast to it first, the casts saved; the
// backward writes each gradient in its argument's dtype (mm_into, sum_to_sizes's dtype).
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input_arg,
                            const at::Tensor& weight_arg, const c10::optional<at::Tensor>& bias_arg,
                            c10::optional<at::ScalarType> dtype) {
    at::Tensor input = input_arg, weight = weight_arg;
    c10::optional<at::Tensor> bias = bias_arg;
    const bool has_bias = bias.has_value() && bias->defined();
    if (dtype.has_value()) {
      input = cast_arg(ctx, "input", input_arg, *dtype);
      weight = cast_arg(ctx, "weight", weight_arg, *dtype);
      bias = cast_arg(ctx, "bias", bias_arg, *dtype);
    }
    ctx->save_for_backward({input, weight});
    ctx->saved_data["bias_sizes"] = has_bias ? bias->sym_sizes() : c10::SymIntArrayRef();
    ctx->saved_data["has_bias"] = has_bias;
    return linear_call(input, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const c10::SymInt K = weight.sym_size(1), N = weight.sym_size(0);
    // grad [..., N] -> [rows, N]; input [..., K] -> [rows, K] (reshape: views when contiguous).
    // Symbolic sizes throughout (see sum_to_sizes).
    c10::SymInt rows = 1;  // explicit: reshape({-1, 0}) is ambiguous when K or N is 0
    for (int64_t d = 0; d + 1 < input.dim(); ++d) rows *= input.sym_size(d);
    const at::Tensor grad2d = grad_outputs[0].reshape_symint({rows, N});
    at::Tensor grad_input, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) {
      // [rows, N] @ [N, K]
      grad_input = mm_into(grad2d, weight, grad_dtype(ctx, "input", input))
                       .view_symint(input.sym_sizes());
    }
    if (ctx->needs_input_grad(1)) {
      const at::Tensor input2d = input.reshape_symint({rows, K});
      // [N, rows] @ [rows, K]
      grad_weight = mm_into(grad2d.t(), input2d, grad_dtype(ctx, "weight", weight));
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) {
      grad_bias = sum_to_sizes(grad2d, ctx->saved_data["bias_sizes"].toSymIntVector(),
                               saved_arg_dtype(ctx, "bias"));
    }
    return {grad_input, grad_weight, grad_bias, at::Tensor()};
  }
};

// linear_act_aux: out = act(input @ weight^T + bias) and product = input @ weight^T. The backward
// adds the two outputs' paths into the product's gradient: bias_act_backward turns grad_out into
// grad_out * act'(product + bias) and its column sums (the bias gradient) in one pass, plus
// grad_product where the product itself was used; then linear's two GEMMs. linear_act records this
// Function and returns its first output.
// dtype (linear_act.dtype): input and weight are cast to it first (bias as given), the casts
// saved; the backward writes their gradients in their own dtypes.
class LinearActFunction : public torch::autograd::Function<LinearActFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input_arg,
                               const at::Tensor& weight_arg, const c10::optional<at::Tensor>& bias,
                               c10::string_view act, c10::optional<at::ScalarType> dtype) {
    at::Tensor input = input_arg, weight = weight_arg;
    if (dtype.has_value()) {
      input = cast_arg(ctx, "input", input_arg, *dtype);
      weight = cast_arg(ctx, "weight", weight_arg, *dtype);
    }
    auto [out, product] = linear_act_aux_call(input, weight, bias, act);
    // An output nobody used gets an undefined gradient, not a tensor of zeros to add.
    ctx->set_materialize_grads(false);
    const bool has_bias = bias.has_value() && bias->defined();
    ctx->save_for_backward({input, weight, product, has_bias ? *bias : at::Tensor()});
    ctx->saved_data["act"] = std::string(act);
    return {out, product};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& product = saved[2];
    const c10::optional<at::Tensor> bias =
        saved[3].defined() ? c10::optional<at::Tensor>(saved[3]) : c10::nullopt;
    const c10::SymInt K = weight.sym_size(1), N = weight.sym_size(0);
    c10::SymInt rows = 1;
    for (int64_t d = 0; d + 1 < input.dim(); ++d) rows *= input.sym_size(d);
    at::Tensor grad_product, grad_bias;
    if (grad_outputs[0].defined()) {
      auto grads = bias_act_backward_call(grad_outputs[0].reshape_symint({rows, N}),
                                          product.reshape_symint({rows, N}), bias,
                                          ctx->saved_data["act"].toStringRef());
      grad_product = std::get<0>(grads);
      if (std::get<1>(grads).has_value()) grad_bias = *std::get<1>(grads);
    }
    if (grad_outputs[1].defined()) {
      const at::Tensor g = grad_outputs[1].reshape_symint({rows, N});
      grad_product = grad_product.defined() ? grad_product.add(g) : g;
      if (bias.has_value() && !grad_bias.defined()) grad_bias = at::zeros_like(*bias);
    }
    at::Tensor grad_input, grad_weight;
    if (grad_product.defined() && ctx->needs_input_grad(0)) {
      grad_input = mm_into(grad_product, weight, grad_dtype(ctx, "input", input))
                       .view_symint(input.sym_sizes());
    }
    if (grad_product.defined() && ctx->needs_input_grad(1)) {
      grad_weight = mm_into(grad_product.t(), input.reshape_symint({rows, K}),
                            grad_dtype(ctx, "weight", weight));
    }
    // An absent bias is no input of the graph (no edge to ask about).
    if (!bias.has_value() || !ctx->needs_input_grad(2)) grad_bias = at::Tensor();
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor()};
  }
};

// ---- linear_act_linear: an FFN block, linear(linear_act(input, w1, b1, act), w2, b2) ----
//
// One node for both linears, so that its backward has in one op what the per-layer nodes split:
// the GEMM that turns the output's gradient into the hidden activation's (grad @ w2) and that
// activation's derivative with the bias gradient (bias_act_backward): mm_bias_act_backward, the
// place for a GEMM with that epilogue (its fused form measured slower, gemm_cuda.cpp: today it
// runs the same two passes, and the gradients are the layers' nodes', bit for bit).
// Forward: linear_act_aux (the hidden activation h and the product it came from), then linear.
// Saved: input, w1, the product, b1, h and w2, what the two layers' nodes save. Backward:
// grad_w2 = grad^T @ h, grad_b2 = grad's column sums, then (g, grad_b1) = mm_bias_act_backward(
// grad, w2, product, b1, act), grad_input = g @ w1 and grad_w1 = g^T @ input.

using OptTensor = c10::optional<at::Tensor>;

std::tuple<at::Tensor, OptTensor> mm_bias_act_backward_call(const at::Tensor& grad,
                                                           const at::Tensor& weight,
                                                           const at::Tensor& x,
                                                           const OptTensor& bias,
                                                           c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, OptTensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&,
      c10::string_view)>("mm_bias_act_backward");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, weight, x, bias, act);
}

// dtype (linear_act_linear.dtype): input, weight1, weight2 and bias2 are cast to it first (bias1
// as given), the casts saved; the backward writes each gradient in its argument's dtype.
class LinearActLinearFunction : public torch::autograd::Function<LinearActLinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input_arg,
                            const at::Tensor& weight1_arg, const OptTensor& bias1,
                            const at::Tensor& weight2_arg, const OptTensor& bias2_arg,
                            c10::string_view act, c10::optional<at::ScalarType> dtype) {
    at::Tensor input = input_arg, weight1 = weight1_arg, weight2 = weight2_arg;
    OptTensor bias2 = bias2_arg;
    const bool has_bias1 = bias1.has_value() && bias1->defined();
    const bool has_bias2 = bias2.has_value() && bias2->defined();
    if (dtype.has_value()) {
      input = cast_arg(ctx, "input", input_arg, *dtype);
      weight1 = cast_arg(ctx, "weight1", weight1_arg, *dtype);
      weight2 = cast_arg(ctx, "weight2", weight2_arg, *dtype);
      bias2 = cast_arg(ctx, "bias2", bias2_arg, *dtype);
      // The checks of the casts (shapes, devices, bias1's dtype), as linear_act_linear_autograd
      // runs them on the default overload's arguments.
      gemm::check_linear_act_linear_args(input, weight1, bias1, weight2, bias2, act);
    }
    auto [h, product] = linear_act_aux_call(input, weight1, bias1, act);
    ctx->save_for_backward(
        {input, weight1, product, has_bias1 ? *bias1 : at::Tensor(), h, weight2});
    ctx->saved_data["act"] = std::string(act);
    ctx->saved_data["has_bias2"] = has_bias2;
    ctx->saved_data["bias2_sizes"] = has_bias2 ? bias2->sym_sizes() : c10::SymIntArrayRef();
    return linear_call(h, weight2, bias2);
  }
  // The graph's edges count the tensors given (an absent bias has none), so weight2's and bias2's
  // shift when bias1 is absent; the gradients returned go by argument position all the same.
  static bool needs(AutogradContext* ctx, int arg, bool has_bias1) {
    return ctx->needs_input_grad(arg >= 3 && !has_bias1 ? arg - 1 : arg);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight1 = saved[1];
    const at::Tensor& product = saved[2];
    const OptTensor bias1 = saved[3].defined() ? OptTensor(saved[3]) : OptTensor();
    const at::Tensor& h = saved[4];
    const at::Tensor& weight2 = saved[5];
    const c10::SymInt K = weight1.sym_size(1), H = weight1.sym_size(0), D = weight2.sym_size(0);
    c10::SymInt rows = 1;  // explicit: reshape({-1, 0}) is ambiguous when a size is 0
    for (int64_t d = 0; d + 1 < input.dim(); ++d) rows *= input.sym_size(d);
    const at::Tensor grad = grad_outputs[0].reshape_symint({rows, D});
    const bool has_bias1 = bias1.has_value();
    at::Tensor grad_input, grad_weight1, grad_bias1, grad_weight2, grad_bias2;
    if (needs(ctx, 3, has_bias1)) {
      grad_weight2 =
          mm_into(grad.t(), h.reshape_symint({rows, H}), grad_dtype(ctx, "weight2", weight2));
    }
    if (ctx->saved_data["has_bias2"].toBool() && needs(ctx, 4, has_bias1)) {
      grad_bias2 = sum_to_sizes(grad, ctx->saved_data["bias2_sizes"].toSymIntVector(),
                                saved_arg_dtype(ctx, "bias2"));
    }
    // (An absent bias1 is no input of the graph: no edge to ask about.)
    const bool need_bias1 = has_bias1 && ctx->needs_input_grad(2);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(1) || need_bias1) {
      auto [g, grad_b1] = mm_bias_act_backward_call(grad, weight2, product.reshape_symint({rows, H}),
                                                    bias1, ctx->saved_data["act"].toStringRef());
      if (ctx->needs_input_grad(0)) {
        grad_input = mm_into(g, weight1, grad_dtype(ctx, "input", input))
                         .view_symint(input.sym_sizes());
      }
      if (ctx->needs_input_grad(1)) {
        grad_weight1 = mm_into(g.t(), input.reshape_symint({rows, K}),
                               grad_dtype(ctx, "weight1", weight1));
      }
      if (need_bias1) grad_bias1 = *grad_b1;
    }
    return {grad_input, grad_weight1, grad_bias1, grad_weight2, grad_bias2, at::Tensor(),
            at::Tensor()};
  }
};

// ---- linear_fp8: FP8 forward (e4m3), FP8 backward (e5m2 gradients), dynamic scales ----

using Fp8Parts = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Fp8Parts linear_fp8_aux_call(const at::Tensor& input, const at::Tensor& weight,
                             const OptTensor& bias, c10::optional<at::ScalarType> out_dtype,
                             const OptTensor& input_amax) {
  static const auto op =
      typed_op<Fp8Parts(const at::Tensor&, const at::Tensor&, const OptTensor&,
                        c10::optional<at::ScalarType>, const OptTensor&)>("linear_fp8_aux");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(input, weight, bias, out_dtype, input_amax);
}

// What an FP8 linear's forward keeps for its backward: the FP8 transposes x8_t [K, M] and
// w8_t [K, N] and their dequantization scales (a quarter of a float32 input's bytes), and the
// dtypes the gradients come back in (extra: what a caller keeps after them). Read by
// fp8_linear_grads.
void save_fp8_linear(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& x8_t, const at::Tensor& w8_t, const at::Tensor& inv_x,
                     const at::Tensor& inv_w, std::vector<at::Tensor> extra = {}) {
  std::vector<at::Tensor> saved = {x8_t, w8_t, inv_x, inv_w};
  saved.insert(saved.end(), extra.begin(), extra.end());
  ctx->save_for_backward(saved);
  ctx->saved_data["input_dtype"] = int64_t(input.scalar_type());
  ctx->saved_data["weight_dtype"] = int64_t(weight.scalar_type());
}

// The two products of an FP8 linear's backward from g (the gradient of its product, [..., N]):
// g cast to e5m2 with its own dynamic scale (the wider range gradients need; an empty g gets
// scale 1), from g_amax where the caller took it (linear_act_fp8: in the activation's backward
// pass), then grad_input = g8 @ w8 and grad_weight = g8^T @ x8 on scaled_mm. Either is undefined
// where its input needs no gradient.
std::pair<at::Tensor, at::Tensor> fp8_linear_grads(AutogradContext* ctx, const at::Tensor& grad,
                                                   const OptTensor& g_amax) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& x8_t = saved[0];  // [K, M]
  const at::Tensor& w8_t = saved[1];  // [K, N]
  const at::Tensor& inv_x = saved[2];  // 1 / scale_x
  const at::Tensor& inv_w = saved[3];  // 1 / scale_w
  const auto input_dtype = at::ScalarType(ctx->saved_data["input_dtype"].toInt());
  const auto weight_dtype = at::ScalarType(ctx->saved_data["weight_dtype"].toInt());
  const c10::SymInt K = w8_t.sym_size(0), N = w8_t.sym_size(1);
  const at::Tensor g = grad.reshape_symint({-1, N});
  auto [g8, g8_t, inv_g, amax_g] = fp8::cast_fp8_dynamic_call(g, at::kFloat8_e5m2, true, g_amax);
  (void)amax_g;
  at::Tensor grad_input, grad_weight;
  if (ctx->needs_input_grad(0)) {
    std::vector<c10::SymInt> shape(grad.sym_sizes().begin(), grad.sym_sizes().end());
    shape.back() = K;
    grad_input = gemm::scaled_mm_call(g8, w8_t.t(), inv_g, inv_w, c10::nullopt, input_dtype)
                     .view_symint(shape);
  }
  if (ctx->needs_input_grad(1)) {
    grad_weight = gemm::scaled_mm_call(*g8_t, x8_t.t(), inv_g, inv_x, c10::nullopt, weight_dtype);
  }
  return {grad_input, grad_weight};
}

class LinearFp8Function : public torch::autograd::Function<LinearFp8Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const OptTensor& bias, c10::optional<at::ScalarType> out_dtype,
                            const OptTensor& input_amax) {
    auto [out, x8_t, w8_t, inv_x, inv_w] =
        linear_fp8_aux_call(input, weight, bias, out_dtype, input_amax);
    ctx->set_materialize_grads(false);
    save_fp8_linear(ctx, input, weight, x8_t, w8_t, inv_x, inv_w);
    const bool has_bias = bias.has_value() && bias->defined();
    ctx->saved_data["bias_dtype"] = has_bias ? int64_t(bias->scalar_type()) : int64_t(-1);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.defined()) return variable_list(5);
    auto [grad_input, grad_weight] = fp8_linear_grads(ctx, grad, c10::nullopt);
    at::Tensor grad_bias;
    const int64_t bias_dtype = ctx->saved_data["bias_dtype"].toInt();
    if (bias_dtype >= 0 && ctx->needs_input_grad(2)) {
      // Column sums accumulated in float32 by cudasteps::sum, one pass over g (a float32 copy of
      // a bf16 g first would write and read it again at twice its size).
      const at::Tensor g = grad.reshape_symint({-1, grad.sym_size(-1)});
      grad_bias = sum_call(g, {0}, false, at::kFloat).to(at::ScalarType(bias_dtype));
    }
    // (none for out_dtype and input_amax)
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor()};
  }
};

at::Tensor linear_fp8_autograd(const at::Tensor& input, const at::Tensor& weight,
                               const OptTensor& bias, c10::optional<at::ScalarType> out_dtype,
                               const OptTensor& input_amax) {
  if (!records_grad("linear_fp8", input, weight, bias)) {
    static const auto op =
        typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&,
                            c10::optional<at::ScalarType>, const OptTensor&)>("linear_fp8");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight, bias, out_dtype, input_amax);
  }
  return LinearFp8Function::apply(input, weight, bias, out_dtype, input_amax);
}

// ---- linear_act_fp8: linear_fp8 (no bias), then bias + act with the output's amax ----
//
// Forward: linear_fp8_aux's product h_pre (the FP8 transposes kept as linear_fp8 keeps them), then
// (out, amax) = bias_act_amax(h_pre, bias, act). Saved: linear_fp8's, plus h_pre and the bias for
// the activation's derivative. Backward: (g, grad_bias, g_amax) = bias_act_backward_amax(grad,
// h_pre, bias, act), one pass that also sums the bias gradient; then linear_fp8's two products
// from g, whose e5m2 cast takes g_amax instead of a pass of its own. The same gradients as
// linear_fp8 followed by bias_act, bit for bit. The amax output has no gradient.

std::tuple<at::Tensor, OptTensor, at::Tensor> bias_act_backward_amax_call(const at::Tensor& grad,
                                                                         const at::Tensor& x,
                                                                         const OptTensor& bias,
                                                                         c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, OptTensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view)>(
      "bias_act_backward_amax");
  return op.call(grad, x, bias, act);
}

class LinearActFp8Function : public torch::autograd::Function<LinearActFp8Function> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input,
                               const at::Tensor& weight, const OptTensor& bias,
                               c10::string_view act, c10::optional<at::ScalarType> out_dtype,
                               const OptTensor& input_amax) {
    auto [h_pre, x8_t, w8_t, inv_x, inv_w] =
        linear_fp8_aux_call(input, weight, c10::nullopt, out_dtype, input_amax);
    const OptTensor b = gemm::fp8_act_bias(bias, h_pre.scalar_type());
    auto [out, amax] = [&] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      return gemm::bias_act_amax_call(h_pre, b, act);
    }();
    ctx->set_materialize_grads(false);
    save_fp8_linear(ctx, input, weight, x8_t, w8_t, inv_x, inv_w,
                    {h_pre, b.has_value() ? *b : at::Tensor()});
    ctx->saved_data["act"] = std::string(act);
    ctx->saved_data["bias_dtype"] = bias.has_value() && bias->defined()
                                        ? int64_t(bias->scalar_type())
                                        : int64_t(-1);
    ctx->mark_non_differentiable({amax});
    return {out, amax};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const variable_list none(6);
    if (!grad.defined()) return none;
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& h_pre = saved[4];
    const OptTensor b = saved[5].defined() ? OptTensor(saved[5]) : OptTensor();
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto [g, grad_b, g_amax] = bias_act_backward_amax_call(grad, h_pre, b, act);
    auto [grad_input, grad_weight] = fp8_linear_grads(ctx, g, g_amax);
    at::Tensor grad_bias;
    const int64_t bias_dtype = ctx->saved_data["bias_dtype"].toInt();
    if (bias_dtype >= 0 && ctx->needs_input_grad(2) && grad_b.has_value()) {
      grad_bias = grad_b->to(at::ScalarType(bias_dtype));
    }
    // (none for act, out_dtype and input_amax)
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> linear_act_fp8_autograd(
    const at::Tensor& input, const at::Tensor& weight, const OptTensor& bias,
    c10::string_view act, c10::optional<at::ScalarType> out_dtype, const OptTensor& input_amax) {
  if (!records_grad("linear_act_fp8", input, weight, bias)) {
    static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
        const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view,
        c10::optional<at::ScalarType>, const OptTensor&)>("linear_act_fp8");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight, bias, act, out_dtype, input_amax);
  }
  // The checks of the op (the Autograd path calls linear_fp8_aux and bias_act_amax, whose
  // messages would name them).
  gemm::check_linear_fp8_args(input, weight, bias, out_dtype, input_amax, "linear_act_fp8");
  elementwise::parse_act(act, "linear_act_fp8");
  auto outs = LinearActFp8Function::apply(input, weight, bias, act, out_dtype, input_amax);
  return {outs[0], outs[1]};
}

at::Tensor mm_autograd(const at::Tensor& self, const at::Tensor& mat2) {
  if (!records_grad("mm", self, mat2)) return mm_call(self, mat2);
  return MmFunction::apply(self, mat2);
}

at::Tensor mm_dtype_autograd(const at::Tensor& self, const at::Tensor& mat2,
                             at::ScalarType out_dtype) {
  if (!records_grad("mm", self, mat2)) return mm_dtype_call(self, mat2, out_dtype);
  return MmDtypeFunction::apply(self, mat2, out_dtype);
}

at::Tensor addmm_autograd(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                          const at::Scalar& beta, const at::Scalar& alpha) {
  if (!records_grad("addmm", self, mat1, mat2)) return addmm_call(self, mat1, mat2, beta, alpha);
  return AddmmFunction::apply(self, mat1, mat2, beta, alpha);
}

at::Tensor linear_autograd(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias) {
  if (!records_grad("linear", input, weight, bias)) return linear_call(input, weight, bias);
  return LinearFunction::apply(input, weight, bias, c10::nullopt);
}

at::Tensor linear_dtype_autograd(const at::Tensor& input, const at::Tensor& weight,
                                 const c10::optional<at::Tensor>& bias, at::ScalarType dtype) {
  if (!records_grad("linear", input, weight, bias)) {
    static const auto op =
        typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&,
                            at::ScalarType)>("linear", "dtype");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight, bias, dtype);
  }
  // The checks of the op (of its arguments as given, then of the casts, by linear's kernel).
  gemm::check_cast_args("linear", dtype, {{&input, "input"}, {&weight, "weight"}});
  if (bias.has_value() && bias->defined()) {
    gemm::check_cast_args("linear", dtype, {{&*bias, "bias"}});
  }
  return LinearFunction::apply(input, weight, bias, dtype);
}

std::tuple<at::Tensor, at::Tensor> linear_act_aux_autograd(const at::Tensor& input,
                                                           const at::Tensor& weight,
                                                           const c10::optional<at::Tensor>& bias,
                                                           c10::string_view act) {
  if (!records_grad("linear_act_aux", input, weight, bias)) {
    return linear_act_aux_call(input, weight, bias, act);
  }
  auto outs = LinearActFunction::apply(input, weight, bias, act, c10::nullopt);
  return {outs[0], outs[1]};
}

// Where linear_act is linear (act "none", a bias linear takes), LinearFunction (no product to
// save); otherwise LinearActFunction, whose saved product is all its backward reads besides input
// and weight.
at::Tensor linear_act_autograd(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, c10::string_view act) {
  if (!records_grad("linear_act", input, weight, bias)) {
    return linear_act_call(input, weight, bias, act);
  }
  if (gemm::linear_act_is_linear(input, bias, act)) return linear_autograd(input, weight, bias);
  return LinearActFunction::apply(input, weight, bias, act, c10::nullopt)[0];
}

at::Tensor linear_act_dtype_autograd(const at::Tensor& input, const at::Tensor& weight,
                                     const c10::optional<at::Tensor>& bias, c10::string_view act,
                                     at::ScalarType dtype) {
  if (!records_grad("linear_act", input, weight, bias)) {
    static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                               const OptTensor&, c10::string_view, at::ScalarType)>(
        "linear_act", "dtype");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight, bias, act, dtype);
  }
  gemm::check_cast_args("linear_act", dtype, {{&input, "input"}, {&weight, "weight"}});
  // Where linear_act is linear (act none, a bias of dtype or none), linear.dtype's node: the bias
  // needs no cast there.
  if (act == "none" && (!bias.has_value() || !bias->defined() || bias->scalar_type() == dtype)) {
    return LinearFunction::apply(input, weight, bias, dtype);
  }
  return LinearActFunction::apply(input, weight, bias, act, dtype)[0];
}

at::Tensor linear_act_linear_autograd(const at::Tensor& input, const at::Tensor& weight1,
                                     const OptTensor& bias1, const at::Tensor& weight2,
                                     const OptTensor& bias2, c10::string_view act) {
  if (!records_grad("linear_act_linear", input, weight1, bias1, weight2, bias2)) {
    static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                               const OptTensor&, const at::Tensor&,
                                               const OptTensor&, c10::string_view)>(
        "linear_act_linear");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight1, bias1, weight2, bias2, act);
  }
  // The op's checks here: the ops the node calls would name themselves in a message. They read
  // sizes symbolically, so that a traced program's batch stays symbolic.
  gemm::check_linear_act_linear_args(input, weight1, bias1, weight2, bias2, act);
  return LinearActLinearFunction::apply(input, weight1, bias1, weight2, bias2, act, c10::nullopt);
}

at::Tensor linear_act_linear_dtype_autograd(const at::Tensor& input, const at::Tensor& weight1,
                                           const OptTensor& bias1, const at::Tensor& weight2,
                                           const OptTensor& bias2, c10::string_view act,
                                           at::ScalarType dtype) {
  if (!records_grad("linear_act_linear", input, weight1, bias1, weight2, bias2)) {
    static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                               const OptTensor&, const at::Tensor&,
                                               const OptTensor&, c10::string_view, at::ScalarType)>(
        "linear_act_linear", "dtype");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(input, weight1, bias1, weight2, bias2, act, dtype);
  }
  constexpr const char* op = "linear_act_linear";
  gemm::check_cast_args(op, dtype,
                        {{&input, "input"}, {&weight1, "weight1"}, {&weight2, "weight2"}});
  if (bias2.has_value() && bias2->defined()) gemm::check_cast_args(op, dtype, {{&*bias2, "bias2"}});
  // (The casts' checks: in the forward, once they exist.)
  return LinearActLinearFunction::apply(input, weight1, bias1, weight2, bias2, act, dtype);
}

// mm_bias_act_backward is a backward (linear_act_linear's): not differentiable itself.
std::tuple<at::Tensor, OptTensor> mm_bias_act_backward_autograd(const at::Tensor& grad,
                                                                const at::Tensor& weight,
                                                                const at::Tensor& x,
                                                                const OptTensor& bias,
                                                                c10::string_view act) {
  CUDASTEPS_CHECK(!needs_grad(grad, weight) && !needs_grad(x) && !needs_grad_opt(bias),
                  "mm_bias_act_backward",
                  "an input requires grad, but mm_bias_act_backward is not differentiable (it "
                  "computes a backward: call it on tensors that do not require grad, or call mm "
                  "and bias_act_backward)");
  return mm_bias_act_backward_call(grad, weight, x, bias, act);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("mm", &mm_autograd);
  m.impl("mm.dtype", &mm_dtype_autograd);
  m.impl("linear.dtype", &linear_dtype_autograd);
  m.impl("linear_act.dtype", &linear_act_dtype_autograd);
  m.impl("linear_act_linear.dtype", &linear_act_linear_dtype_autograd);
  m.impl("addmm", &addmm_autograd);
  m.impl("linear", &linear_autograd);
  m.impl("linear_act", &linear_act_autograd);
  m.impl("linear_act_aux", &linear_act_aux_autograd);
  m.impl("linear_fp8", &linear_fp8_autograd);
  m.impl("linear_act_fp8", &linear_act_fp8_autograd);
  m.impl("linear_act_linear", &linear_act_linear_autograd);
  m.impl("mm_bias_act_backward", &mm_bias_act_backward_autograd);
}

}  // namespace cudasteps
