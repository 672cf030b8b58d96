// Autograd for bias_act, add and mul. Forwards call the ops below the Autograd key; backwards call
// ops (bias_act_backward, sum_leading, mul, sum) through the dispatcher, so torch.compile and
// opcheck trace both directions, and mul is twice differentiable.
//
// add/mul broadcast, so each operand's gradient is the output gradient (times the other operand
// for mul) summed over the dims that operand was broadcast along, then cast to its dtype and moved
// to its device (a 0-dim CPU operand of a CUDA op). A per-feature operand takes the fused column
// sum sum_leading; any other broadcast takes cudasteps::sum. Both are deterministic.
//
// bias_act_amax and bias_act_backward_amax are not differentiable: they run inside the autograd
// function of linear_act_fp8 (gemm_autograd.cpp), below the Autograd key, and refuse an input that
// requires grad with a message saying so (rather than returning an output with no gradient).
//
// bias_act saves only x and bias (not x + bias nor act(x + bias)): the backward recomputes
// act'(x + bias) in its one fused pass, which reads grad and x and writes grad_x while summing the
// bias gradient. That is the least memory traffic for a memory-bound activation.
#include <torch/library.h>

#include <string>
#include <vector>

#include "common/autograd.h"
#include "common/error.h"
#include "common/symbolic.h"

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

at::Tensor add_scalar_call(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Scalar&, const at::Scalar&)>("add", "Scalar");
  return op.call(self, other, alpha);
}

at::Tensor mul_call(const at::Tensor& self, const at::Tensor& other) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mul");
  return op.call(self, other);
}

at::Tensor mul_scalar_call(const at::Tensor& self, const at::Scalar& other) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Scalar&)>("mul", "Scalar");
  return op.call(self, other);
}

at::Tensor sum_leading_call(const at::Tensor& self, const OptTensor& other, double alpha,
                            c10::optional<at::ScalarType> dtype) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const OptTensor&, double,
                                             c10::optional<at::ScalarType>)>("sum_leading");
  return op.call(self, other, alpha, dtype);
}

at::Tensor sum_call(const at::Tensor& self, at::IntArrayRef dims) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                                             std::optional<at::ScalarType>)>("sum");
  return op.call(self, dims, /*keepdim=*/true, std::nullopt);
}

// What the backward of a broadcasting binary op needs to know about one operand. Sizes are
// symbolic (sym_sizes): under torch.export / torch.compile with a dynamic batch, sizes() would
// pin the batch to the traced value. Every size test below compares SymInts (common/symbolic.h).
struct OperandInfo {
  std::vector<c10::SymInt> sizes;
  at::ScalarType dtype;
  at::Device device;
};

void save_operand(AutogradContext* ctx, const char* key, const at::Tensor& t) {
  const std::string k(key);
  ctx->saved_data[k + "_sizes"] = t.sym_sizes();
  ctx->saved_data[k + "_dtype"] = t.scalar_type();
  ctx->saved_data[k + "_device"] = t.device();
}

OperandInfo load_operand(AutogradContext* ctx, const char* key) {
  const std::string k(key);
  return {ctx->saved_data[k + "_sizes"].toSymIntVector(),
          ctx->saved_data[k + "_dtype"].toScalarType(), ctx->saved_data[k + "_device"].toDevice()};
}

// Equal shapes: the ranks first (no size is read when they differ), then each size as a SymInt.
bool same_sizes(c10::SymIntArrayRef a, c10::SymIntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// True when an operand of `sizes`, broadcast to `shape`, varies only along the last dim (a
// per-feature vector: [N], [1, N], ...): binary.h's is_feature_vector_shape on symbolic sizes. A
// dynamic leading size counts as not 1, with no guard on it.
bool is_feature_vector_operand(c10::SymIntArrayRef sizes, c10::SymIntArrayRef shape) {
  if (shape.empty() || sizes.empty() || sizes.size() > shape.size()) return false;
  // sizes broadcasts to shape: its last size is shape's, or a 1 broadcast along that dim.
  if (known_size_one(sizes.back()) && !known_size_one(shape.back())) return false;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (!known_size_one(sizes[i])) return false;
  }
  return true;
}

// grad (of the broadcast shape) summed over the dims the operand was broadcast along, with
// cudasteps::sum (deterministic: no floating-point atomics). A dim counts as broadcast when the
// operand has size 1 there and grad does not; as in at::sum_to, a dynamic size counts as not 1
// (known_size_one) instead of being guarded on.
at::Tensor reduce_to(const at::Tensor& grad, c10::SymIntArrayRef sizes) {
  if (same_sizes(grad.sym_sizes(), sizes)) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (known_size_one(sizes[d - lead]) && !known_size_one(grad.sym_size(d)))) {
      dims.push_back(d);
    }
  }
  if (dims.empty()) return grad.reshape_symint(sizes);
  return sum_call(grad, dims).reshape_symint(sizes);
}

// The gradient of one operand of add (partner undefined: d/d operand = alpha) or mul (partner the
// other operand: d/d operand = partner), reduced to the operand's shape, dtype and device.
at::Tensor operand_grad(const at::Tensor& grad, const at::Tensor& partner, const at::Scalar& alpha,
                        const OperandInfo& info) {
  at::Tensor g;
  // A per-feature operand ([N], [1, N], ...) of a float op: one fused, deterministic column sum
  // of grad (* partner) * alpha, without materializing the product. sum_leading itself is not
  // differentiable, so a backward that records a graph (create_graph) takes mul and sum instead.
  const bool per_feature =
      !at::GradMode::is_enabled() && at::isFloatingType(grad.scalar_type()) &&
      at::isFloatingType(info.dtype) && grad.dim() >= 1 &&
      !same_sizes(grad.sym_sizes(), info.sizes) &&
      is_feature_vector_operand(info.sizes, grad.sym_sizes()) &&
      (!partner.defined() ||
       (same_sizes(partner.sym_sizes(), grad.sym_sizes()) &&
        partner.scalar_type() == grad.scalar_type() && partner.device() == grad.device()));
  if (per_feature) {
    g = sum_leading_call(grad, as_optional(partner), alpha.toDouble(), info.dtype)
            .view_symint(info.sizes);
  } else {
    g = partner.defined() ? mul_call(grad, partner) : grad;
    g = reduce_to(g, info.sizes);
    if (!alpha.equal(1)) g = mul_scalar_call(g, alpha);
  }
  if (g.scalar_type() != info.dtype) g = g.to(info.dtype);
  if (g.device() != info.device) g = g.to(info.device);
  return g;
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
    ctx->saved_data["alpha"] = alpha;
    save_operand(ctx, "self", self);
    save_operand(ctx, "other", other);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad = grad_outputs[0];
    const at::Scalar alpha = ctx->saved_data["alpha"].toScalar();
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) {
      grad_self = operand_grad(grad, at::Tensor(), at::Scalar(1), load_operand(ctx, "self"));
    }
    if (ctx->needs_input_grad(1)) {
      grad_other = operand_grad(grad, at::Tensor(), alpha, load_operand(ctx, "other"));
    }
    return {grad_self, grad_other, at::Tensor()};
  }
};

// add.Scalar / mul.Scalar: the output has self's shape; only self has a gradient.
class AddScalarFunction : public torch::autograd::Function<AddScalarFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Scalar& other,
                            const at::Scalar& alpha) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->saved_data["dtype"] = self.scalar_type();
    return add_scalar_call(self, other, alpha);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::Tensor grad = grad_outputs[0];
    const auto dtype = ctx->saved_data["dtype"].toScalarType();
    if (grad.scalar_type() != dtype) grad = grad.to(dtype);
    return {grad, at::Tensor(), at::Tensor()};
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
    save_operand(ctx, "self", self);
    save_operand(ctx, "other", other);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) {
      grad_self = operand_grad(grad, saved[1], at::Scalar(1), load_operand(ctx, "self"));
    }
    if (ctx->needs_input_grad(1)) {
      grad_other = operand_grad(grad, saved[0], at::Scalar(1), load_operand(ctx, "other"));
    }
    return {grad_self, grad_other};
  }
};

class MulScalarFunction : public torch::autograd::Function<MulScalarFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self, const at::Scalar& other) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->saved_data["other"] = other;
    ctx->saved_data["dtype"] = self.scalar_type();
    return mul_scalar_call(self, other);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    at::Tensor grad = mul_scalar_call(grad_outputs[0], ctx->saved_data["other"].toScalar());
    const auto dtype = ctx->saved_data["dtype"].toScalarType();
    if (grad.scalar_type() != dtype) grad = grad.to(dtype);
    return {grad, at::Tensor()};
  }
};

at::Tensor bias_act_autograd(const at::Tensor& x, const OptTensor& bias, c10::string_view act) {
  if (!records_grad("bias_act", x, bias)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return bias_act_call(x, bias, act);
  }
  return BiasActFunction::apply(x, bias, act);
}

at::Tensor add_autograd(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!records_grad("add", self, other)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return add_call(self, other, alpha);
  }
  return AddFunction::apply(self, other, alpha);
}

at::Tensor add_scalar_autograd(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  if (!records_grad("add", self)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return add_scalar_call(self, other, alpha);
  }
  return AddScalarFunction::apply(self, other, alpha);
}

at::Tensor mul_autograd(const at::Tensor& self, const at::Tensor& other) {
  if (!records_grad("mul", self, other)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return mul_call(self, other);
  }
  return MulFunction::apply(self, other);
}

at::Tensor mul_scalar_autograd(const at::Tensor& self, const at::Scalar& other) {
  if (!records_grad("mul", self)) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return mul_scalar_call(self, other);
  }
  return MulScalarFunction::apply(self, other);
}

// The _amax forms: refuse inputs that require grad, else call the kernel below autograd.
void refuse_grad(const at::Tensor& x, const OptTensor& bias, const char* op) {
  CUDASTEPS_CHECK(!needs_grad(x) && !needs_grad_opt(bias), op,
                  "x or bias requires grad, but ", op,
                  " is not differentiable: call it inside the autograd function that uses its "
                  "amax (as linear_act_fp8 does), or call bias_act");
}

std::tuple<at::Tensor, at::Tensor> bias_act_amax_autograd(const at::Tensor& x,
                                                          const OptTensor& bias,
                                                          c10::string_view act) {
  refuse_grad(x, bias, "bias_act_amax");
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const OptTensor&, c10::string_view)>("bias_act_amax");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(x, bias, act);
}

std::tuple<at::Tensor, OptTensor, at::Tensor> bias_act_backward_amax_autograd(
    const at::Tensor& grad, const at::Tensor& x, const OptTensor& bias, c10::string_view act) {
  refuse_grad(x, bias, "bias_act_backward_amax");
  CUDASTEPS_CHECK(!needs_grad(grad), "bias_act_backward_amax",
                  "grad requires grad, but bias_act_backward_amax is not differentiable");
  static const auto op = typed_op<std::tuple<at::Tensor, OptTensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view)>(
      "bias_act_backward_amax");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(grad, x, bias, act);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("bias_act", &bias_act_autograd);
  m.impl("bias_act_amax", &bias_act_amax_autograd);
  m.impl("bias_act_backward_amax", &bias_act_backward_amax_autograd);
  m.impl("add", &add_autograd);
  m.impl("add.Scalar", &add_scalar_autograd);
  m.impl("mul", &mul_autograd);
  m.impl("mul.Scalar", &mul_scalar_autograd);
}

}  // namespace cudasteps
