// Autograd for sum: the gradient of a sum broadcasts back, d(sum x)/dx_i = 1. Backward returns the
// output gradient with the reduced dims restored (unsqueezed unless keepdim) and expanded to the
// input shape: a view, no kernel, as torch's own sum backward.
#include <torch/library.h>

#include "common/autograd.h"
#include "reduce/reduce.h"

namespace cudasteps {
namespace {

at::Tensor sum_redispatch(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, at::OptionalIntArrayRef, bool,
                          std::optional<at::ScalarType>)>("sum");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(self, dim, keepdim, dtype);
}

class SumFunction : public torch::autograd::Function<SumFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self,
                            at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype) {
    const SumArgs args = check_sum_args(self, dim, keepdim, dtype);
    ctx->saved_data["sizes"] = self.sizes().vec();
    ctx->saved_data["dims"] = args.dims;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["dtype"] = self.scalar_type();
    return sum_redispatch(self, dim, keepdim, dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const auto dims = ctx->saved_data["dims"].toIntVector();
    const bool keepdim = ctx->saved_data["keepdim"].toBool();
    const auto dtype = ctx->saved_data["dtype"].toScalarType();
    at::Tensor grad = grad_outputs[0];
    if (!keepdim) {
      // dims are sorted ascending, so each unsqueeze lands at its input position. A 0-d input has
      // dims == {0} but no dim to restore.
      for (int64_t d : dims) {
        if (d < static_cast<int64_t>(sizes.size())) grad = grad.unsqueeze(d);
      }
    }
    grad = grad.expand(sizes);
    if (grad.scalar_type() != dtype) grad = grad.to(dtype);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sum_autograd(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  if (!needs_grad(self)) return sum_redispatch(self, dim, keepdim, dtype);
  return SumFunction::apply(self, dim, keepdim, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) { m.impl("sum", &sum_autograd); }

}  // namespace cudasteps
