// The FP8 formats' facts and the per-tensor scale recipe, shared by the fp8 family (cast_fp8), the
// elementwise ops that emit an amax (bias_act_amax) and the gemm family's FP8 linears (linear_fp8,
// linear_act_fp8 and their backward): one place for the formats' largest values, for how a
// dynamic scale is taken, and for calling the dynamic cast. Host code (ATen ops on the tensor's
// device, no host sync).
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <tuple>

#include "common/checks.h"
#include "common/typed_op.h"

#ifdef CUDASTEPS_WITH_CUDA
#include "fp8/launch.h"  // SrcType
#endif

namespace cudasteps {
namespace fp8 {

// The largest finite value of an FP8 format (casts saturate to it): 448 for e4m3, 57344 for e5m2.
inline double fp8_max(at::ScalarType format) {
  return format == at::kFloat8_e4m3fn ? 448.0 : 57344.0;
}

// max |t| as a float32 0-dim tensor on t's device; 0 for an empty t (amax of nothing); NaN if t
// holds one. The infinity norm, one reduction pass over t (t.abs().amax() wrote |t| out first and
// read it back: three passes' worth of traffic). Exact: the largest |t| is one of t's values, and
// every bf16/fp16 value is a float32. The size is read symbolically: a backward traced with
// dynamic shapes calls this on fake tensors.
inline at::Tensor abs_max(const at::Tensor& t) {
  return t.sym_numel() == 0 ? at::zeros({}, t.options().dtype(at::kFloat))
                        : at::linalg_vector_norm(t, INFINITY).to(at::kFloat);
}

// Dynamic per-tensor scaling from an amax: fp8_max(format) / amax, so the tensor's largest value
// maps to the format's; 1 when amax is 0 (an empty or all-zero tensor: no division by zero) or
// NaN. The reference recipe (cast_fp8_dynamic's CPU kernel): its CUDA kernel computes the same on
// the device, bit for bit. (A scalar 1 in the where, not a tensor of ones: one kernel less.)
inline at::Tensor scale_from_amax(const at::Tensor& amax, at::ScalarType format) {
  // A true division (ATen's `Scalar / Tensor` multiplies by the reciprocal: two roundings).
  const at::Tensor largest = at::scalar_tensor(fp8_max(format), amax.options());
  return at::where(amax > 0, largest.div(amax), at::Scalar(1.0));
}

// A per-tensor float32 value (a scale, an amax) named `arg`: defined, float32, one element, on the
// device of `ref` (named `ref_arg`). cast_fp8's scale, cast_fp8_dynamic's amax, linear_fp8's
// input_amax.
inline void check_per_tensor(const at::Tensor& t, const at::Tensor& ref, const char* op,
                             const char* arg, const char* what, const char* ref_arg) {
  check_defined(t, op, arg);
  CUDASTEPS_CHECK(t.scalar_type() == at::kFloat, op, arg, " must be float32, got ",
                  t.scalar_type());
  CUDASTEPS_CHECK(t.numel() == 1, op, arg, " must have one element (", what, "), got shape ",
                  t.sizes());
  check_same_device(t, ref, op, arg, ref_arg);
}

#ifdef CUDASTEPS_WITH_CUDA
// The kernels' name for x's type (float32, bf16 or fp16: the casts' checks allow no other).
inline SrcType src_type(const at::Tensor& x) {
  return x.scalar_type() == at::kHalf       ? SrcType::kHalf
         : x.scalar_type() == at::kBFloat16 ? SrcType::kBFloat16
                                            : SrcType::kFloat;
}
#endif

// cast_fp8 through the dispatcher: (out, out_t, amax) (act_cast_fp8's composite steps).
inline std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor> cast_fp8_call(
    const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype, bool transpose) {
  static const auto op =
      typed_op<std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor>(
          const at::Tensor&, const at::Tensor&, at::ScalarType, bool)>("cast_fp8");
  return op.call(x, scale, dtype, transpose);
}

// cast_fp8_dynamic's result: (out, out_t, scale_inv, amax).
using DynamicCast = std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor, at::Tensor>;

// cast_fp8_dynamic through the dispatcher (linear_fp8 and its backward, the Autograd kernel):
// amax, where given, is x's, taken by x's producer (one pass over x instead of two).
inline DynamicCast cast_fp8_dynamic_call(const at::Tensor& x, at::ScalarType dtype, bool transpose,
                                         const c10::optional<at::Tensor>& amax = c10::nullopt) {
  static const auto op = typed_op<DynamicCast(const at::Tensor&, at::ScalarType, bool,
                                              const c10::optional<at::Tensor>&)>("cast_fp8_dynamic");
  return op.call(x, dtype, transpose, amax);
}

}  // namespace fp8
}  // namespace cudasteps
