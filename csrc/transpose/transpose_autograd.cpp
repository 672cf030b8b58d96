// Autograd for transpose and transpose_: the gradient of a transpose is the transpose of the
// gradient, computed by cudasteps::transpose itself (through the dispatcher).
#include <torch/library.h>

#include "common/autograd.h"

namespace cudasteps {
namespace {

at::Tensor transpose_redispatch(const at::Tensor& self) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&)>("transpose");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self);
}

void transpose__redispatch(at::Tensor& out, const at::Tensor& src) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&)>("transpose_");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  op.call(out, src);
}

// The backward calls the op with autograd on, so that double backward works too.
at::Tensor transpose_of_grad(const at::Tensor& grad) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&)>("transpose");
  return op.call(grad);
}

class TransposeFunction : public torch::autograd::Function<TransposeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    return transpose_redispatch(self);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {transpose_of_grad(grad_outputs[0])};
  }
};

class TransposeInplaceFunction : public torch::autograd::Function<TransposeInplaceFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::Tensor out, const at::Tensor& src) {
    transpose__redispatch(out, src);
    ctx->mark_dirty({out});  // also bumps out's version counter
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // out's old values are overwritten: no gradient flows to them (undefined = zero).
    return {at::Tensor(), transpose_of_grad(grad_outputs[0])};
  }
};

at::Tensor transpose_autograd(const at::Tensor& self) {
  if (!records_grad("transpose", self)) return transpose_redispatch(self);
  return TransposeFunction::apply(self);
}

void transpose__autograd(at::Tensor& out, const at::Tensor& src) {
  if (!records_grad("transpose_", out, src)) {
    transpose__redispatch(out, src);
    out.unsafeGetTensorImpl()->bump_version();  // in-place writes must invalidate saved tensors
    return;
  }
  TransposeInplaceFunction::apply(out, src);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("transpose", &transpose_autograd);
  m.impl("transpose_", &transpose__autograd);
}

}  // namespace cudasteps
