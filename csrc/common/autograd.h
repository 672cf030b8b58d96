// Helpers for the C++ autograd kernels (csrc/<family>/<family>_autograd.cpp).
//
// Each differentiable op has a torch::autograd::Function whose forward calls the op again through a
// typed dispatcher handle (typed_op.h), below the Autograd key, so that the call reaches the CPU or
// CUDA kernel (or, under tracing, the fake kernel). Backward computations are ops too, called the
// same way. Only the autograd units include this header: torch/autograd.h is the heaviest header
// of the build (about 15 s of compile time per unit).
#pragma once

#include <torch/autograd.h>

#include "common/typed_op.h"

namespace cudasteps {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

}  // namespace cudasteps
