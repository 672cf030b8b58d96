// Calling another cudasteps op through the dispatcher: its typed handle (typed_op), whether
// autograd must record a call (needs_grad), and the guard that calls below autograd
// (at::AutoDispatchBelowADInplaceOrView, from LegacyTypeDispatch.h). Apart from autograd.h because torch/autograd.h, which
// the autograd Functions need, costs a unit about 15 s of compile time, and the ops that only call
// other ops (copy_ through transpose_, the gemm operand repacks, the plans) need none of it.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Optional.h>

#include <string>

namespace cudasteps {

// The typed handle of cudasteps::<name>, looked up once per call site:
//   static const auto op = typed_op<at::Tensor(const at::Tensor&)>("copy");
template <typename Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow((std::string("cudasteps::") + name).c_str(), overload)
      .template typed<Signature>();
}

// True when autograd must record this call: grad mode is on and some input requires grad.
template <typename... Tensors>
bool needs_grad(const Tensors&... tensors) {
  if (!at::GradMode::is_enabled()) return false;
  return ((tensors.defined() && tensors.requires_grad()) || ...);
}

inline bool needs_grad_opt(const c10::optional<at::Tensor>& t) {
  return at::GradMode::is_enabled() && t.has_value() && t->defined() && t->requires_grad();
}

}  // namespace cudasteps
