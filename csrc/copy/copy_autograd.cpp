// Autograd for copy and copy_: the gradient passes through unchanged to the source.
#include <torch/library.h>

#include "common/autograd.h"

namespace cudasteps {
namespace {

at::Tensor copy_redispatch(const at::Tensor& self) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&)>("copy");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self);
}

void copy__redispatch(at::Tensor& out, const at::Tensor& src) {
  static const auto op = typed_op<void(at::Tensor&, const at::Tensor&)>("copy_");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  op.call(out, src);
}

class CopyFunction : public torch::autograd::Function<CopyFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    return copy_redispatch(self);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    return {grad_outputs[0]};
  }
};

class CopyInplaceFunction : public torch::autograd::Function<CopyInplaceFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::Tensor out, const at::Tensor& src) {
    copy__redispatch(out, src);
    ctx->mark_dirty({out});  // also bumps out's version counter
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // out's old values are overwritten: no gradient flows to them (undefined = zero).
    return {at::Tensor(), grad_outputs[0]};
  }
};

at::Tensor copy_autograd(const at::Tensor& self) {
  if (!records_grad("copy", self)) return copy_redispatch(self);
  return CopyFunction::apply(self);
}

void copy__autograd(at::Tensor& out, const at::Tensor& src) {
  if (!records_grad("copy_", out, src)) {
    copy__redispatch(out, src);
    out.unsafeGetTensorImpl()->bump_version();  // in-place writes must invalidate saved tensors
    return;
  }
  CopyInplaceFunction::apply(out, src);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("copy", &copy_autograd);
  m.impl("copy_", &copy__autograd);
}

}  // namespace cudasteps
