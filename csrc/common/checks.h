// Input validation shared by every op. Messages follow one pattern, so that users can grep them:
//   "cudasteps.<op>: <arg> must be <expected>, got <actual>"
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <initializer_list>

#include "common/error.h"

namespace cudasteps {

inline std::string device_str(const at::Tensor& t) { return t.device().str(); }

inline void check_defined(const at::Tensor& t, const char* op, const char* arg) {
  CUDASTEPS_CHECK(t.defined(), op, arg, " must be a defined tensor, got None");
}

inline void check_dtype(const at::Tensor& t, const char* op, const char* arg,
                        std::initializer_list<at::ScalarType> allowed) {
  for (auto dtype : allowed) {
    if (t.scalar_type() == dtype) return;
  }
  std::string names;
  for (auto dtype : allowed) {
    if (!names.empty()) names += " or ";
    names += c10::toString(dtype);
  }
  CUDASTEPS_CHECK(false, op, arg, " must be ", names, ", got ", t.scalar_type());
}

inline void check_same_dtype(const at::Tensor& t, const at::Tensor& ref, const char* op,
                             const char* arg, const char* ref_arg) {
  CUDASTEPS_CHECK(t.scalar_type() == ref.scalar_type(), op, arg, " must have the dtype of ", ref_arg,
                  " (", ref.scalar_type(), "), got ", t.scalar_type());
}

inline void check_same_device(const at::Tensor& t, const at::Tensor& ref, const char* op,
                              const char* arg, const char* ref_arg) {
  CUDASTEPS_CHECK(t.device() == ref.device(), op, arg, " must be on ", ref_arg, "'s device (",
                  device_str(ref), "), got ", device_str(t));
}

inline void check_device_type(const at::Tensor& t, c10::DeviceType type, const char* op,
                              const char* arg) {
  CUDASTEPS_CHECK(t.device().type() == type, op, arg, " must be a ", c10::DeviceTypeName(type, true),
                  " tensor, got ", device_str(t));
}

inline void check_same_shape(const at::Tensor& t, const at::Tensor& ref, const char* op,
                             const char* arg, const char* ref_arg) {
  CUDASTEPS_CHECK(t.sizes() == ref.sizes(), op, arg, " must have the shape of ", ref_arg, " ",
                  ref.sizes(), ", got ", t.sizes());
}

inline void check_dim(const at::Tensor& t, int64_t dim, const char* op, const char* arg) {
  CUDASTEPS_CHECK(t.dim() == dim, op, arg, " must be ", dim, "-D, got ", t.dim(), "-D with shape ",
                  t.sizes());
}

inline void check_min_dim(const at::Tensor& t, int64_t min_dim, const char* op, const char* arg) {
  CUDASTEPS_CHECK(t.dim() >= min_dim, op, arg, " must have at least ", min_dim,
                  " dimensions, got ", t.dim(), "-D with shape ", t.sizes());
}

}  // namespace cudasteps
