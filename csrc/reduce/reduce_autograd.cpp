// Autograd for sum: the gradient of a sum broadcasts back, d(sum x)/dx_i = 1. Backward returns the
// output gradient with the reduced dims restored (unsqueezed unless keepdim) and expanded to the
// input shape: a view, no kernel, as torch's own sum backward.
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "common/autograd.h"

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
    at::Tensor out = sum_redispatch(self, dim, keepdim, dtype);  // validates the arguments
    // Only sizes-free facts and symbolic sizes are kept: under torch.export / torch.compile with
    // dynamic shapes, reading self.sizes() (as check_sum_args does) would pin them to the traced
    // values. The reduced dims, sorted ascending, as check_sum_args computes them.
    const int64_t wrap = std::max<int64_t>(self.dim(), 1);
    std::vector<bool> reduced(wrap, !dim.has_value() || dim->empty());
    if (dim.has_value()) {
      for (int64_t d : *dim) reduced[d < 0 ? d + wrap : d] = true;
    }
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < wrap; ++d) {
      if (reduced[d]) dims.push_back(d);
    }
    ctx->saved_data["sizes"] = self.sym_sizes().vec();
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["dtype"] = self.scalar_type();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto sizes = ctx->saved_data["sizes"].toSymIntVector();
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
    grad = grad.expand_symint(sizes);
    if (grad.scalar_type() != dtype) grad = grad.to(dtype);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sum_autograd(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<at::ScalarType> dtype) {
  if (!records_grad("sum", self)) return sum_redispatch(self, dim, keepdim, dtype);
  return SumFunction::apply(self, dim, keepdim, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) { m.impl("sum", &sum_autograd); }

}  // namespace cudasteps
