// The elementwise family's argument checks, shared by its CPU and CUDA ops (elementwise_cpu.cpp,
// elementwise_cuda.cpp), so that both backends reject the same inputs with the same messages: the
// act names, the tensor checks of bias_act, its backward and sum_leading, and the (rows, cols) view
// of x. Host code (ATen); the functors both backends compute are functors.h.
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <cstdint>
#include <string>

#include "common/checks.h"
#include "elementwise/functors.h"

namespace cudasteps {
namespace elementwise {

// ---- argument parsing and checks ---------------------------------------------------------------

inline Act parse_act(c10::string_view act, const char* op) {
  if (act == "none") return Act::kNone;
  if (act == "relu") return Act::kRelu;
  if (act == "gelu") return Act::kGelu;
  if (act == "gelu_tanh") return Act::kGeluTanh;
  if (act == "silu") return Act::kSilu;
  CUDASTEPS_CHECK(false, op, "act must be one of none, relu, gelu, gelu_tanh, silu, got '",
                  std::string(act), "'");
  return Act::kNone;  // unreachable
}

inline void check_float_input(const at::Tensor& t, const char* op, const char* arg) {
  check_dtype(t, op, arg, {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble});
}

// A per-feature vector `v` for x (..., N): 1-D of size N, on x's device, with x's dtype or fp32
// (fp32 parameters under autocast feed bf16/fp16 activations).
inline void check_feature_vector(const at::Tensor& v, const at::Tensor& x, const char* op,
                                 const char* arg, const char* x_arg) {
  check_same_device(v, x, op, arg, x_arg);
  CUDASTEPS_CHECK(x.dim() >= 1, op, x_arg, " must have at least 1 dimension when ", arg,
                  " is given, got a 0-D tensor");
  CUDASTEPS_CHECK(v.dim() == 1 && v.size(0) == x.size(-1), op, arg, " must have shape [",
                  x.size(-1), "] (the last dimension of ", x_arg, "), got ", v.sizes());
  CUDASTEPS_CHECK(v.scalar_type() == x.scalar_type() || v.scalar_type() == at::kFloat, op, arg,
                  " must have the dtype of ", x_arg, " (", x.scalar_type(), ") or Float, got ",
                  v.scalar_type());
}

inline Act check_bias_act_args(const at::Tensor& x, const c10::optional<at::Tensor>& bias,
                               c10::string_view act, const char* op) {
  check_float_input(x, op, "x");
  if (bias.has_value()) check_feature_vector(*bias, x, op, "bias", "x");
  return parse_act(act, op);
}

inline Act check_bias_act_backward_args(const at::Tensor& grad, const at::Tensor& x,
                                        const c10::optional<at::Tensor>& bias, c10::string_view act,
                                        const char* op = "bias_act_backward") {
  check_float_input(x, op, "x");
  check_same_device(grad, x, op, "grad", "x");
  check_same_dtype(grad, x, op, "grad", "x");
  check_same_shape(grad, x, op, "grad", "x");
  if (bias.has_value()) check_feature_vector(*bias, x, op, "bias", "x");
  return parse_act(act, op);
}

// bias_act_amax and bias_act_backward_amax feed an FP8 cast: x of a type it reads (not double).
inline void check_amax_input(const at::Tensor& x, const char* op) {
  check_dtype(x, op, "x", {at::kFloat, at::kHalf, at::kBFloat16});
}

// sum_leading(self, other?): other, when given, has self's shape and dtype; self is at least 1-D.
inline void check_sum_leading_args(const at::Tensor& self, const c10::optional<at::Tensor>& other) {
  constexpr const char* op = "sum_leading";
  check_float_input(self, op, "self");
  check_min_dim(self, 1, op, "self");
  if (other.has_value()) {
    check_same_device(*other, self, op, "other", "self");
    check_same_dtype(*other, self, op, "other", "self");
    check_same_shape(*other, self, op, "other", "self");
  }
}

inline at::ScalarType sum_leading_dtype(const at::Tensor& self, c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out = dtype.value_or(self.scalar_type());
  CUDASTEPS_CHECK(out == at::kFloat || out == at::kHalf || out == at::kBFloat16 || out == at::kDouble,
                  "sum_leading", "dtype must be Float or Half or BFloat16 or Double, got ", out);
  return out;
}

// Rows and columns of x viewed as (numel / N, N).
inline int64_t num_cols(const at::Tensor& x) { return x.dim() == 0 ? 1 : x.size(-1); }
inline int64_t num_rows(const at::Tensor& x) {
  const int64_t cols = num_cols(x);
  return cols == 0 ? 0 : x.numel() / cols;
}

}  // namespace elementwise
}  // namespace cudasteps
