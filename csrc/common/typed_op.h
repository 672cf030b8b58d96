// Calling another cudasteps op through the dispatcher: its typed handle (typed_op), whether
// autograd must record a call (records_grad, the differentiable ops' gate; needs_grad), and the
// guard that calls below autograd (at::AutoDispatchBelowADInplaceOrView, from
// LegacyTypeDispatch.h). Apart from autograd.h because torch/autograd.h, which the autograd
// Functions need, costs a unit about 15 s of compile time, and the ops that only call other ops
// (copy_ through transpose_, the gemm operand repacks, the plans) need none of it.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
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

// True when autograd must record this call: grad mode is on and some input requires grad. (The
// non-differentiable ops' refusals of such inputs use it; the differentiable ops, records_grad.)
template <typename... Tensors>
bool needs_grad(const Tensors&... tensors) {
  if (!at::GradMode::is_enabled()) return false;
  return ((tensors.defined() && tensors.requires_grad()) || ...);
}

inline bool needs_grad_opt(const c10::optional<at::Tensor>& t) {
  return at::GradMode::is_enabled() && t.has_value() && t->defined() && t->requires_grad();
}

namespace detail {
inline const at::Tensor* defined_or_null(const at::Tensor& t) { return t.defined() ? &t : nullptr; }
inline const at::Tensor* defined_or_null(const c10::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? &*t : nullptr;
}
inline bool requires_grad(const at::Tensor* t) { return t != nullptr && t->requires_grad(); }
inline bool is_dual(const at::Tensor* t) { return t != nullptr && t->_fw_grad(0).defined(); }
}  // namespace detail

// The gate of a differentiable op's autograd kernel (tensors and optional tensors): true when
// autograd must record this call of cudasteps.<op> (grad mode on, some input requiring grad).
// Forward-mode AD (a dual tensor: torch.autograd.forward_ad, torch.func.jvp) is refused, as torch
// refuses it for its ops that have no forward derivative: no cudasteps op computes tangents, and
// below autograd the output would come back without one, a wrong answer given silently.
template <typename... Inputs>
bool records_grad(const char* op, const Inputs&... inputs) {
  TORCH_CHECK_NOT_IMPLEMENTED(!(detail::is_dual(detail::defined_or_null(inputs)) || ...),
                              "cudasteps.", op,
                              ": forward-mode AD is not supported (an input is a dual tensor with "
                              "a tangent); differentiate in reverse mode (backward or "
                              "torch.autograd.grad)");
  if (!at::GradMode::is_enabled()) return false;
  return (detail::requires_grad(detail::defined_or_null(inputs)) || ...);
}

}  // namespace cudasteps
