// Helpers for the C++ autograd kernels (csrc/<family>/<family>_autograd.cpp).
//
// Each differentiable op has a torch::autograd::Function whose forward calls the op again through a
// typed dispatcher handle, below the Autograd key, so that the call reaches the CPU or CUDA kernel
// (or, under tracing, the fake kernel). Backward computations are ops too, called the same way.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>

namespace cudasteps {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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
