// add / mul: type promotion, devices, broadcasting and the kernel path (binary.h).
#include <algorithm>
#include <string>

#include "elementwise/binary.h"

namespace cudasteps {
namespace elementwise {
namespace {

bool is_supported_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kBool: return true;
    default: return false;
  }
}

void check_result_dtype(at::ScalarType dtype, const char* op) {
  CUDASTEPS_CHECK(is_supported_dtype(dtype), op,
                  "the result dtype (torch.result_type(self, other)) must be Float, Double, Half, "
                  "BFloat16, Byte, Char, Short, Int, Long or Bool, got ",
                  dtype);
}

std::string sizes_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::vector<int64_t> broadcast_shape(at::IntArrayRef a, at::IntArrayRef b, const char* op) {
  const size_t ndim = std::max(a.size(), b.size());
  std::vector<int64_t> shape(ndim);
  for (size_t i = 0; i < ndim; ++i) {  // i counts from the last dim
    const int64_t sa = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t sb = i < b.size() ? b[b.size() - 1 - i] : 1;
    CUDASTEPS_CHECK(sa == sb || sa == 1 || sb == 1, op, "self ", sizes_str(a), " and other ",
                    sizes_str(b), " are not broadcastable: sizes ", sa, " and ", sb,
                    " at dimension -", i + 1);
    shape[ndim - 1 - i] = sa == 1 ? sb : sa;
  }
  return shape;
}

// A 0-dim CPU tensor as a host value. An integer one is converted to the result dtype first, so
// that it wraps as torch's cast does (torch.tensor(300) with an int8 tensor adds 44).
at::Scalar value_of(const at::Tensor& t, at::ScalarType dtype) {
  if (at::isIntegralType(dtype, /*includeBool=*/true) && t.scalar_type() != dtype) {
    return t.to(dtype).item();
  }
  return t.item();
}

// The operand as the kernels read it: the result dtype, expanded to the result shape.
at::Tensor prepared(const at::Tensor& t, const BinaryPlan& plan) {
  at::Tensor r = t.scalar_type() == plan.dtype ? t : t.to(plan.dtype);
  return r.expand(plan.shape);
}

// Dense and of the full result shape (no broadcast dims): the flat and row kernels index it
// linearly.
bool is_dense_full(const at::Tensor& original, const BinaryPlan& plan) {
  return original.sizes().equals(plan.shape) && original.is_contiguous();
}

bool is_dense_vector(const at::Tensor& original, const BinaryPlan& plan) {
  return is_feature_vector_shape(original.sizes(), plan.shape) &&
         (original.dim() == 0 || original.stride(-1) == 1 || original.size(-1) == 1);
}

void choose_path(const at::Tensor& self, const at::Tensor* other, BinaryPlan& plan) {
  if (plan.numel == 0) {
    plan.path = BinaryPath::kEmpty;
    return;
  }
  plan.cols = plan.shape.empty() ? 1 : plan.shape.back();
  plan.rows = plan.numel / plan.cols;
  const bool self_full = !plan.self.is_value() && is_dense_full(self, plan);
  if (plan.self.is_value() || plan.other.is_value()) {
    const bool full = plan.self.is_value() ? is_dense_full(*other, plan) : self_full;
    plan.path = full ? BinaryPath::kFlatValue : BinaryPath::kStrided;
    return;
  }
  const bool other_full = is_dense_full(*other, plan);
  if (self_full && other_full) {
    plan.path = BinaryPath::kFlat;
  } else if (plan.device.is_cuda() && self_full && other->numel() == 1) {
    plan.path = BinaryPath::kFlatDeviceOther;
  } else if (plan.device.is_cuda() && other_full && self.numel() == 1) {
    plan.path = BinaryPath::kFlatDeviceSelf;
  } else if (self_full && is_dense_vector(*other, plan) && plan.shape.size() >= 1) {
    plan.path = BinaryPath::kRowVec;
  } else if (other_full && is_dense_vector(self, plan) && plan.shape.size() >= 1) {
    plan.path = BinaryPath::kVecRow;
  } else {
    plan.path = BinaryPath::kStrided;
  }
}

}  // namespace

bool is_feature_vector_shape(at::IntArrayRef sizes, at::IntArrayRef shape) {
  if (shape.empty() || sizes.empty() || sizes.size() > shape.size()) return false;
  if (sizes.back() != shape.back()) return false;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (sizes[i] != 1) return false;
  }
  return true;
}

BinaryPlan plan_binary(const at::Tensor& self, const at::Tensor& other, const char* op) {
  check_defined(self, op, "self");
  check_defined(other, op, "other");
  BinaryPlan plan;
  plan.dtype = at::result_type(self, other);
  check_result_dtype(plan.dtype, op);
  // torch's device rule: equal devices, or a 0-dim CPU tensor with a tensor on any device.
  const bool self_cpu_scalar = self.dim() == 0 && self.device().is_cpu();
  const bool other_cpu_scalar = other.dim() == 0 && other.device().is_cpu();
  if (self.device() == other.device()) {
    plan.device = self.device();
  } else if (other_cpu_scalar) {
    plan.device = self.device();
  } else if (self_cpu_scalar) {
    plan.device = other.device();
  } else {
    CUDASTEPS_CHECK(false, op, "self and other must be on the same device (or one of them a 0-dim CPU "
                    "tensor), got ", device_str(self), " and ", device_str(other));
  }
  plan.shape = broadcast_shape(self.sizes(), other.sizes(), op);
  plan.numel = c10::multiply_integers(plan.shape);
  // A 0-dim CPU operand becomes a host value when the other operand is a tensor on the result
  // device that can carry the kernel: always on CUDA, on the CPU when the other one has dims.
  const bool on_cpu = plan.device.is_cpu();
  if (other_cpu_scalar && (!on_cpu || self.dim() > 0)) {
    plan.other.set_value(value_of(other, plan.dtype));
  } else if (self_cpu_scalar && (!on_cpu || other.dim() > 0)) {
    plan.self.set_value(value_of(self, plan.dtype));
  }
  if (!plan.self.is_value()) plan.self.tensor = prepared(self, plan);
  if (!plan.other.is_value()) plan.other.tensor = prepared(other, plan);
  choose_path(self, &other, plan);
  return plan;
}

BinaryPlan plan_binary(const at::Tensor& self, const at::Scalar& other, const char* op) {
  check_defined(self, op, "self");
  BinaryPlan plan;
  plan.dtype = at::result_type(self, other);
  check_result_dtype(plan.dtype, op);
  plan.device = self.device();
  plan.shape = self.sizes().vec();
  plan.numel = self.numel();
  plan.other.set_value(other);
  plan.self.tensor = prepared(self, plan);
  choose_path(self, nullptr, plan);
  return plan;
}

void check_alpha(const at::Scalar& alpha, at::ScalarType dtype, const char* op) {
  CUDASTEPS_CHECK(!alpha.isBoolean() || dtype == at::kBool, op,
                  "a boolean alpha is only supported for Bool results, got a ", dtype, " result");
  CUDASTEPS_CHECK(at::isFloatingType(dtype) || alpha.isIntegral(/*includeBool=*/true), op,
                  "alpha must be an integer for integer results (as in torch.add), got ", alpha,
                  " for a ", dtype, " result");
}

}  // namespace elementwise
}  // namespace cudasteps
