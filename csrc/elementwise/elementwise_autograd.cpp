// Autograd for bias_act, add and mul. Forwards call the ops below the Autograd key; backwards call
// ops (bias_act_backward, sum_leading, mul) through the dispatcher, so torch.compile and opcheck
// trace both directions.
//
// bias_act saves only x and bias (not x + bias nor act(x + bias)): the backward recomputes
// act'(x + bias) in its one fused pass, which reads grad and x and writes grad_x while summing the
// bias gradient. That is the least memory traffic for a memory-bound activation.
#include <torch/library.h>

#include "common/autograd.h"

namespace cudasteps {
namespace {

using OptTensor = c10::optional<at::Tensor>;

OptTensor as_optional(const at::Tensor& t) { return t.defined() ? OptTensor(t) : OptTensor(); }

at::Tensor bias_act_call(const at::Tensor& x, const OptTensor& bias, c10::string_view act) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const OptTensor&, c10::string_view)>("bias_act");
  return op.call(x, bias, act);
}

std::tuple<at::Tensor, OptTensor> bias_act_backward_call(const at::Tensor& grad, const at::Tensor& x,
                                                         const OptTensor& bias, c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, OptTensor>(
      const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view)>("bias_act_backward");
  return op.call(grad, x, bias, act);
}

at::Tensor add_call(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>("add");
  return op.call(self, other, alpha);
}

at::Tensor mul_call(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mul");
  return op.call(self, other);
}

at::Tensor sum_leading_call(const at::Tensor& self, const OptTensor& other, double alpha,
                            c10::optional<at::ScalarType> dtype) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const OptTensor&, double,
                                             c10::optional<at::ScalarType>)>("sum_leading");
  return op.call(self, other, alpha, dtype);
}

// True when `other` is a per-feature vector of `self` rather than a same-shape operand (the
// kernels check the rest). Symbolic sizes: under torch.export / torch.compile with a dynamic
// batch, sizes() would pin the batch to the traced value.
bool is_per_feature(const at::Tensor& self, const at::Tensor& other) {
  return other.sym_sizes() != self.sym_sizes();
}

class BiasActFunction : public torch::autograd::Function<BiasActFunction> {
 public:
  // bias as an optional: an absent bias is a non-tensor input to autograd (no edge, no grad).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const OptTensor& bias,
                            c10::string_view act) {
    at::Tensor y;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      y = bias_act_call(x, bias, act);
    }
    ctx->save_for_backward({x, bias.has_value() ? *bias : at::Tensor()});
    ctx->saved_data["act"] = std::string(act);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const std::string act = ctx->saved_data["act"].toStringRef();
    auto grads = bias_act_backward_call(grad_outputs[0], saved[0], as_optional(saved[1]), act);
    at::Tensor grad_bias = std::get<1>(grads).has_value() ? *std::get<1>(grads) : at::Tensor();
    return {std::get<0>(grads), grad_bias, at::Tensor()};
  }
};

class AddFunction : public torch::autograd::Function<AddFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other,
                            const at::Scalar& alpha) {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = add_call(self, other, alpha);
    }
    ctx->saved_data["alpha"] = alpha.toDouble();
    ctx->saved_data["per_feature"] = is_per_feature(self, other);
    ctx->saved_data["other_dtype"] = other.scalar_type();
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) grad_self = grad;
    if (ctx->needs_input_grad(1)) {
      if (ctx->saved_data["per_feature"].toBool()) {
        grad_other = sum_leading_call(grad, OptTensor(), alpha,
                                      ctx->saved_data["other_dtype"].toScalarType());
      } else {
        grad_other = alpha == 1.0 ? grad : grad.mul(alpha);
      }
    }
    return {grad_self, grad_other, at::Tensor()};
  }
};

class MulFunction : public torch::autograd::Function<MulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      out = mul_call(self, other);
    }
    // Each gradient needs the other operand only: save what the requested gradients need.
    // (Grad mode is off inside forward, so ask requires_grad directly, not needs_grad.)
    const bool need_self = other.requires_grad();
    const bool need_other = self.requires_grad();
    ctx->save_for_backward({need_self ? self : at::Tensor(), need_other ? other : at::Tensor()});
    ctx->saved_data["per_feature"] = is_per_feature(self, other);
    ctx->saved_data["other_dtype"] = other.scalar_type();
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) grad_self = mul_call(grad, saved[1]);
    if (ctx->needs_input_grad(1)) {
      if (ctx->saved_data["per_feature"].toBool()) {
        grad_other = sum_leading_call(grad, OptTensor(saved[0]), 1.0,
                                      ctx->saved_data["other_dtype"].toScalarType());
      } else {
        grad_other = mul_call(grad, saved[0]);
      }
    }
    return {grad_self, grad_other};
  }
};

at::Tensor bias_act_autograd(const at::Tensor& x, const OptTensor& bias, c10::string_view act) {
  if (!needs_grad(x) && !needs_grad_opt(bias)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return bias_act_call(x, bias, act);
  }
  return BiasActFunction::apply(x, bias, act);
}

at::Tensor add_autograd(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!needs_grad(self, other)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return add_call(self, other, alpha);
  }
  return AddFunction::apply(self, other, alpha);
}

at::Tensor mul_autograd(const at::Tensor& self, const at::Tensor& other) {
  if (!needs_grad(self, other)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return mul_call(self, other);
  }
  return MulFunction::apply(self, other);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("bias_act", &bias_act_autograd);
  m.impl("add", &add_autograd);
  m.impl("mul", &mul_autograd);
}

}  // namespace cudasteps
