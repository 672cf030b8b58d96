// add / mul with torch's semantics, the part shared by the CPU and CUDA kernels: type promotion,
// the device rule, broadcasting, and the choice of kernel path (binary_plan.cpp).
//
// An operand is either a tensor (converted to the result dtype and expanded to the result shape:
// a view, strides 0 on broadcast dims) or a host value (a Scalar overload's number, or a 0-dim
// CPU tensor, which torch lets combine with a tensor of any device). The kernels then take one of
// the paths of binary_path.h (flat, flat with a host value, flat with one element in GPU memory,
// row-vector either way round, strided).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/checks.h"
#include "elementwise/binary_path.h"

namespace cudasteps {
namespace elementwise {

struct BinaryOperand {
  at::Tensor tensor;  // result dtype, result device, expanded to the result shape (a tensor operand)
  at::Scalar value;   // a host-value operand
  bool has_value = false;
  bool is_value() const { return has_value; }
  void set_value(const at::Scalar& v) {
    value = v;
    has_value = true;
  }
};

struct BinaryPlan {
  at::ScalarType dtype = at::kFloat;  // torch.result_type(self, other)
  at::Device device{at::kCPU};
  std::vector<int64_t> shape;  // the broadcast shape of self and other
  int64_t numel = 0;
  BinaryOperand self, other;
  BinaryPath path = BinaryPath::kEmpty;
  int64_t rows = 0, cols = 0;  // kRowVec / kVecRow: the dense operand as (rows, cols)
};

// add(self, other) / mul(self, other) and their Scalar overloads. `op` names the op in messages.
BinaryPlan plan_binary(const at::Tensor& self, const at::Tensor& other, const char* op);
BinaryPlan plan_binary(const at::Tensor& self, const at::Scalar& other, const char* op);

// torch.add's rules for alpha: an integral alpha for integral results, a boolean one only for
// boolean results.
void check_alpha(const at::Scalar& alpha, at::ScalarType dtype, const char* op);

// A host value in the kernels' math type (float for half/bf16). Integers convert with an overflow
// check, as torch converts a Python number for an integer tensor; floating types without one
// (1e300 becomes inf in float, as in torch).
template <typename Acc>
Acc scalar_to(const at::Scalar& s) {
  if constexpr (std::is_same<Acc, bool>::value) {
    return s.toBool();
  } else if constexpr (std::is_integral<Acc>::value) {
    return s.to<Acc>();
  } else {
    return static_cast<Acc>(s.toDouble());
  }
}

// True when a tensor of `sizes` broadcast to `shape` varies only along the last dim (a
// per-feature vector: [N], [1, N], ...). N == shape.back().
bool is_feature_vector_shape(at::IntArrayRef sizes, at::IntArrayRef shape);

}  // namespace elementwise
}  // namespace cudasteps
