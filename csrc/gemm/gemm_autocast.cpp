// Autocast for mm, addmm, linear, linear_act, linear_act_linear, linear_fp8 and linear_act_fp8:
// under torch.autocast the floating-point tensor arguments of mm, addmm and linear are cast to the
// autocast dtype (bf16 or fp16) before the op runs, as aten casts its own mm, addmm and linear
// (autocast's lower-precision list, on CUDA and on CPU); linear_act casts fewer and the FP8
// linears none (below). So cudasteps.nn.Linear under autocast runs the tensor-core GEMM in bf16
// exactly where torch.nn.Linear does, with no Python.
//
// The casts are autocast's own (at::autocast::cached_cast): float64 and non-floating tensors are
// left alone, and within one autocast region a leaf parameter (the weight) is cast once and reused.
// The cast is differentiable, so gradients reach the fp32 parameters through the dispatcher's
// Autograd key below this one. linear, linear_act and linear_act_linear instead hand their tensors
// uncast to their .dtype overloads where autocast would cast them all (all_cast): those cast them
// in their own autograd node, and its backward writes a float32 parameter's gradient in float32
// from the GEMM, where a cast node would take one more pass over it.
#include <ATen/autocast_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "common/typed_op.h"

namespace cudasteps {
namespace {

template <c10::DeviceType Device>
constexpr c10::DispatchKey autocast_key() {
  return Device == c10::DeviceType::CUDA ? c10::DispatchKey::AutocastCUDA
                                         : c10::DispatchKey::AutocastCPU;
}

template <c10::DeviceType Device>
at::Tensor cast(const at::Tensor& t) {
  return at::autocast::cached_cast(at::autocast::get_autocast_dtype(Device), t, Device);
}

template <c10::DeviceType Device>
c10::optional<at::Tensor> cast(const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return t;
  return cast<Device>(*t);
}

// Whether the tensors given are all ones autocast casts (at::autocast::is_eligible: floating point
// but float64, on this device type): then linear, linear_act and linear_act_linear run their
// .dtype overload, which casts them itself and writes their gradients in their own dtypes
// straight from the backward's GEMMs; the cached casts' ToCopyBackward nodes would each take a
// pass over a gradient (a float32 weight's: 6 bytes per element) after its GEMM. (The overloads
// cast a weight used twice in one autocast region twice, where cached_cast keeps one copy.)
template <c10::DeviceType Device>
bool all_cast(std::initializer_list<const c10::optional<at::Tensor>*> tensors) {
  for (const auto* t : tensors) {
    if (t->has_value() && (*t)->defined() && !at::autocast::is_eligible(**t, Device)) return false;
  }
  return true;
}

template <c10::DeviceType Device>
at::Tensor mm_autocast(const at::Tensor& self, const at::Tensor& mat2) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mm");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  return op.call(cast<Device>(self), cast<Device>(mat2));
}

template <c10::DeviceType Device>
at::Tensor addmm_autocast(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                          const at::Scalar& beta, const at::Scalar& alpha) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Scalar&, const at::Scalar&)>("addmm");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  return op.call(cast<Device>(self), cast<Device>(mat1), cast<Device>(mat2), beta, alpha);
}

template <c10::DeviceType Device>
at::Tensor linear_autocast(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&)>(
          "linear");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  const c10::optional<at::Tensor> in(input), w(weight);
  if (all_cast<Device>({&in, &w, &bias})) {
    static const auto dtype_op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                                     const c10::optional<at::Tensor>&,
                                                     at::ScalarType)>("linear", "dtype");
    return dtype_op.call(input, weight, bias, at::autocast::get_autocast_dtype(Device));
  }
  return op.call(cast<Device>(input), cast<Device>(weight), cast<Device>(bias));
}

// linear_act and linear_act_aux cast input and weight as linear does, and leave the bias alone:
// like bias_act's, it may stay float32 (added in fp32, no cast of the parameter each step, and its
// gradient comes back in fp32), where nn.Linear's bias is cast to the autocast dtype.
template <c10::DeviceType Device>
at::Tensor linear_act_autocast(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, c10::string_view act) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                             const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  const c10::optional<at::Tensor> in(input), w(weight);
  if (all_cast<Device>({&in, &w})) {
    static const auto dtype_op =
        typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&,
                            c10::string_view, at::ScalarType)>("linear_act", "dtype");
    return dtype_op.call(input, weight, bias, act, at::autocast::get_autocast_dtype(Device));
  }
  return op.call(cast<Device>(input), cast<Device>(weight), bias, act);
}

template <c10::DeviceType Device>
std::tuple<at::Tensor, at::Tensor> linear_act_aux_autocast(const at::Tensor& input,
                                                           const at::Tensor& weight,
                                                           const c10::optional<at::Tensor>& bias,
                                                           c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>(
      "linear_act_aux");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  return op.call(cast<Device>(input), cast<Device>(weight), bias, act);
}

// linear_act_linear casts what its two layers' ops would: input and weight1 as linear_act (bias1
// left alone), weight2 and bias2 as linear. (mm_bias_act_backward, a backward, has no autocast
// kernel: it runs on the tensors the forward saved, in their dtypes.)
template <c10::DeviceType Device>
at::Tensor linear_act_linear_autocast(const at::Tensor& input, const at::Tensor& weight1,
                                      const c10::optional<at::Tensor>& bias1,
                                      const at::Tensor& weight2,
                                      const c10::optional<at::Tensor>& bias2,
                                      c10::string_view act) {
  static const auto op = typed_op<at::Tensor(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, const at::Tensor&,
      const c10::optional<at::Tensor>&, c10::string_view)>("linear_act_linear");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  const c10::optional<at::Tensor> in(input), w1(weight1), w2(weight2);
  if (all_cast<Device>({&in, &w1, &w2, &bias2})) {
    static const auto dtype_op = typed_op<at::Tensor(
        const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, const at::Tensor&,
        const c10::optional<at::Tensor>&, c10::string_view, at::ScalarType)>("linear_act_linear",
                                                                              "dtype");
    return dtype_op.call(input, weight1, bias1, weight2, bias2, act,
                         at::autocast::get_autocast_dtype(Device));
  }
  return op.call(cast<Device>(input), cast<Device>(weight1), bias1, cast<Device>(weight2),
                 cast<Device>(bias2), act);
}

// linear_fp8 casts nothing: its output (and so the next layer's input) comes in the autocast
// dtype through out_dtype (unless the call names one), while input and weight go to FP8 straight
// from their own dtypes (a float32 input quantized once, not rounded to bf16 first; no copy of it
// forward, no cast of its gradient back), and the gradients come back in those dtypes. The bias
// is added in the output's dtype, as F.linear under autocast adds it.
template <c10::DeviceType Device>
at::Tensor linear_fp8_autocast(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias,
                               c10::optional<at::ScalarType> out_dtype,
                               const c10::optional<at::Tensor>& input_amax) {
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&,
                          c10::optional<at::ScalarType>, const c10::optional<at::Tensor>&)>(
          "linear_fp8");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  return op.call(input, weight, bias,
                 out_dtype.has_value() ? *out_dtype : at::autocast::get_autocast_dtype(Device),
                 input_amax);
}

// linear_act_fp8 as linear_fp8: nothing cast, the output in the autocast dtype (so the amax it
// returns is of the values the next layer reads).
template <c10::DeviceType Device>
std::tuple<at::Tensor, at::Tensor> linear_act_fp8_autocast(
    const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
    c10::string_view act, c10::optional<at::ScalarType> out_dtype,
    const c10::optional<at::Tensor>& input_amax) {
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view,
      c10::optional<at::ScalarType>, const c10::optional<at::Tensor>&)>("linear_act_fp8");
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key<Device>());
  return op.call(input, weight, bias, act,
                 out_dtype.has_value() ? *out_dtype : at::autocast::get_autocast_dtype(Device),
                 input_amax);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, AutocastCUDA, m) {
  m.impl("mm", &mm_autocast<c10::DeviceType::CUDA>);
  m.impl("addmm", &addmm_autocast<c10::DeviceType::CUDA>);
  m.impl("linear", &linear_autocast<c10::DeviceType::CUDA>);
  m.impl("linear_act", &linear_act_autocast<c10::DeviceType::CUDA>);
  m.impl("linear_act_aux", &linear_act_aux_autocast<c10::DeviceType::CUDA>);
  m.impl("linear_act_linear", &linear_act_linear_autocast<c10::DeviceType::CUDA>);
  m.impl("linear_fp8", &linear_fp8_autocast<c10::DeviceType::CUDA>);
  m.impl("linear_act_fp8", &linear_act_fp8_autocast<c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(cudasteps, AutocastCPU, m) {
  m.impl("mm", &mm_autocast<c10::DeviceType::CPU>);
  m.impl("addmm", &addmm_autocast<c10::DeviceType::CPU>);
  m.impl("linear", &linear_autocast<c10::DeviceType::CPU>);
  m.impl("linear_act", &linear_act_autocast<c10::DeviceType::CPU>);
  m.impl("linear_act_aux", &linear_act_aux_autocast<c10::DeviceType::CPU>);
  m.impl("linear_act_linear", &linear_act_linear_autocast<c10::DeviceType::CPU>);
  m.impl("linear_fp8", &linear_fp8_autocast<c10::DeviceType::CPU>);
  m.impl("linear_act_fp8", &linear_act_fp8_autocast<c10::DeviceType::CPU>);
}

}  // namespace cudasteps
