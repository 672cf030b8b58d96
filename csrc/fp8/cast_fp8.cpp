// cast_fp8: x (float32, bfloat16 or float16) to FP8 with a scale, its FP8 transpose, and its amax,
// in one pass over x: what an FP8 GEMM's operands need (both K-major copies: the forward reads x,
// the weight-gradient product its transpose) and what the next step's scale is computed from.
//
//   out   = fp8(x * scale)            round to nearest even, saturated to the format's largest
//                                     finite value (448 for e4m3, 57344 for e5m2); NaN stays NaN
//   out_t = out as [cols, rows]       out of x viewed as [rows, cols] (cols = x's last dimension),
//                                     transposed, contiguous; None unless transpose=True
//   amax  = max |x|                   float32, 0-dim; NaN if x holds one; 0 for an empty x
//
// The scale is a float32 tensor of one element on x's device, read by the kernel (no host sync):
// with delayed scaling it comes from earlier steps' amax (this call's amax is for the next).
//
// cast_fp8_dynamic: dynamic per-tensor scaling (what linear_fp8 runs), scale = fp8 max / amax(x)
// taken from this x, so its amax comes first: two passes over x, two launches on CUDA (one amax
// pass whose last block also writes the scale and its reciprocal, then the cast), instead of
// torch's norm, compare, divide, where, a zeroed amax and a reciprocal around cast_fp8. Given
// `amax` (x's amax, taken by the op that produced x: bias_act_amax), one pass: the cast computes
// the scale from it. The given amax is trusted: one below max |x| saturates the values above it.
//
//   (out, out_t, scale_inv, amax)     out, out_t as cast_fp8's with scale = fp8 max / amax (1 where
//                                     amax is 0 or NaN); scale_inv = 1 / scale (scaled_mm's scale);
//                                     amax x's (a copy of the given one)
//
// This unit: the checks, the CPU kernels (torch's own ops on fp32, the reference), the CUDA host
// side (the kernels are kernels.cu), the ladder op (ladder_cast_fp8: one kernel form by name,
// CUDA) and the autograd kernels (not differentiable: the casts of a training step are taken
// inside its own autograd function).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <utility>

#include "common/checks.h"
#include "common/typed_op.h"
#include "fp8/fp8.h"

#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "common/launch.cuh"
#include "fp8/launch.h"
#include "reduce/launch.h"  // grid_scratch: the amax partials and ticket
#endif

namespace cudasteps {
namespace fp8 {
namespace {

constexpr const char* kOp = "cast_fp8";
constexpr const char* kDynamicOp = "cast_fp8_dynamic";

using CastResult = std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor>;
using DynamicResult = DynamicCast;

void check_x_and_format(const at::Tensor& x, at::ScalarType dtype, const char* op) {
  check_defined(x, op, "x");
  check_min_dim(x, 1, op, "x");
  check_dtype(x, op, "x", {at::kFloat, at::kBFloat16, at::kHalf});
  CUDASTEPS_CHECK(dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2, op,
                  "dtype must be Float8_e4m3fn or Float8_e5m2, got ", dtype);
}

void check_cast_args(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                     const char* op) {
  check_x_and_format(x, dtype, op);
  check_per_tensor(scale, x, op, "scale", "a per-tensor scale", "x");
}

void check_dynamic_args(const at::Tensor& x, at::ScalarType dtype,
                        const c10::optional<at::Tensor>& amax) {
  check_x_and_format(x, dtype, kDynamicOp);
  if (amax.has_value()) check_per_tensor(*amax, x, kDynamicOp, "amax", "x's amax", "x");
}

// x as [rows, cols], cols its last dimension.
std::pair<int64_t, int64_t> matrix_shape(const at::Tensor& x) {
  const int64_t cols = x.size(-1);
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

// The CPU cast: x * scale in float32 (exact for bf16/fp16 x), clamped (NaN passes through),
// rounded once; and its transpose when asked for.
std::pair<at::Tensor, c10::optional<at::Tensor>> cast_values_cpu(const at::Tensor& x,
                                                                 const at::Tensor& scale,
                                                                 at::ScalarType dtype,
                                                                 bool transpose) {
  const auto [rows, cols] = matrix_shape(x);
  const double largest = fp8_max(dtype);
  const at::Tensor out = x.to(at::kFloat).mul(scale.reshape({})).clamp(-largest, largest).to(dtype);
  c10::optional<at::Tensor> out_t;
  if (transpose) out_t = out.reshape({rows, cols}).t().contiguous();
  return {out, out_t};
}

CastResult cast_fp8_cpu(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                        bool transpose) {
  check_cast_args(x, scale, dtype, kOp);
  auto [out, out_t] = cast_values_cpu(x, scale, dtype, transpose);
  return {out, out_t, abs_max(x)};
}

// The reference recipe (fp8.h's scale_from_amax, then cast_fp8's values): what the CUDA kernels
// match bit for bit. One amax pass (cast_fp8 would take it a second time).
DynamicResult cast_fp8_dynamic_cpu(const at::Tensor& x, at::ScalarType dtype, bool transpose,
                                   const c10::optional<at::Tensor>& amax_in) {
  check_dynamic_args(x, dtype, amax_in);
  const at::Tensor amax = amax_in.has_value() ? amax_in->reshape({}).clone() : abs_max(x);
  const at::Tensor scale = scale_from_amax(amax, dtype);
  auto [out, out_t] = cast_values_cpu(x, scale, dtype, transpose);
  return {out, out_t, scale.reciprocal(), amax};
}

#ifdef CUDASTEPS_WITH_CUDA

// The CUDA kernel in kernel form `form` (kAuto for cast_fp8; a ladder step for ladder_cast_fp8,
// whose vector forms must fit x).
CastResult cast_fp8_cuda_form(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                              bool transpose, CastForm form, const char* op) {
  const c10::cuda::CUDAGuard guard(x.device());
  const auto [rows, cols] = matrix_shape(x);
  // The kernel reads a contiguous x (a copy for other strides).
  const at::Tensor xc = x.contiguous();
  const bool vector = form != CastForm::kTile32 && form != CastForm::kAuto;
  CUDASTEPS_CHECK(!vector || cast_fp8_vector_form_fits(xc.const_data_ptr(), rows, cols), op,
                  "the 16-byte forms need x's rows and columns (as [", rows, ", ", cols,
                  "]) to be multiples of 16 and x 16-byte aligned");
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(dtype));
  c10::optional<at::Tensor> out_t;
  if (transpose) out_t = at::empty({cols, rows}, x.options().dtype(dtype));
  at::Tensor amax = at::empty({}, x.options().dtype(at::kFloat));
  if (x.numel() == 0) return {out, out_t, amax.zero_()};
  const SrcType src = src_type(x);
  const Fp8Kind kind = dtype == at::kFloat8_e4m3fn ? Fp8Kind::kE4M3 : Fp8Kind::kE5M2;
  const at::Tensor s = scale.contiguous();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int sms = sm_count();
  // The amax is written by the cast's last block: no zeroed word, so no fill launch before it.
  const reduce::GridScratch scratch =
      reduce::grid_scratch(cast_fp8_max_grid(sms), sizeof(unsigned), stream);
  launch_cast_fp8(src, kind, xc.const_data_ptr(), rows, cols, CastScale{s.const_data_ptr<float>()},
                  static_cast<uint8_t*>(out.data_ptr()),
                  transpose ? static_cast<uint8_t*>(out_t->data_ptr()) : nullptr,
                  CastAmax{amax.data_ptr<float>(), static_cast<unsigned*>(scratch.partials),
                           scratch.ticket},
                  sms, stream, form);
  return {out, out_t, amax};
}

CastResult cast_fp8_cuda(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                         bool transpose) {
  check_cast_args(x, scale, dtype, kOp);
  return cast_fp8_cuda_form(x, scale, dtype, transpose, CastForm::kAuto, kOp);
}

DynamicResult cast_fp8_dynamic_cuda(const at::Tensor& x, at::ScalarType dtype, bool transpose,
                                    const c10::optional<at::Tensor>& amax_in) {
  check_dynamic_args(x, dtype, amax_in);
  const c10::cuda::CUDAGuard guard(x.device());
  const auto [rows, cols] = matrix_shape(x);
  const at::Tensor xc = x.contiguous();
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(dtype));
  c10::optional<at::Tensor> out_t;
  if (transpose) out_t = at::empty({cols, rows}, x.options().dtype(dtype));
  at::Tensor scale_inv = at::empty({}, f32), amax = at::empty({}, f32);
  const int64_t n = xc.numel();
  if (n == 0) return {out, out_t, scale_inv.fill_(1.0), amax.zero_()};
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int sms = sm_count();
  const SrcType src = src_type(xc);
  const Fp8Kind kind = dtype == at::kFloat8_e4m3fn ? Fp8Kind::kE4M3 : Fp8Kind::kE5M2;
  uint8_t* const out_ptr = static_cast<uint8_t*>(out.data_ptr());
  uint8_t* const out_t_ptr = transpose ? static_cast<uint8_t*>(out_t->data_ptr()) : nullptr;
  if (amax_in.has_value()) {
    // One pass: the cast's blocks take the scale from the given amax; block 0 writes scale_inv
    // and the amax output.
    const at::Tensor given = amax_in->contiguous();
    CastScale from_amax;
    from_amax.amax = given.const_data_ptr<float>();
    from_amax.fmax = float(fp8_max(dtype));
    from_amax.scale_inv = scale_inv.data_ptr<float>();
    from_amax.amax_out = amax.data_ptr<float>();
    launch_cast_fp8(src, kind, xc.const_data_ptr(), rows, cols, from_amax, out_ptr, out_t_ptr,
                    CastAmax{}, sms, stream);
    return {out, out_t, scale_inv, amax};
  }
  const at::Tensor scale = at::empty({}, f32);
  // The amax pass's blocks leave their partial maxima for its last block.
  const int grid = amax_scale_grid(n, sms);
  const reduce::GridScratch scratch = reduce::grid_scratch(grid, sizeof(unsigned), stream);
  launch_amax_scale(src, xc.const_data_ptr(), n, float(fp8_max(dtype)), grid,
                    static_cast<unsigned*>(scratch.partials), scratch.ticket,
                    scale.data_ptr<float>(), scale_inv.data_ptr<float>(), amax.data_ptr<float>(),
                    stream);
  launch_cast_fp8(src, kind, xc.const_data_ptr(), rows, cols,
                  CastScale{scale.const_data_ptr<float>()}, out_ptr, out_t_ptr, CastAmax{}, sms,
                  stream);
  return {out, out_t, scale_inv, amax};
}

// ladder_cast_fp8: one step of the cast's ladder (kernels.cu: tile32, vec16, vec16_prefetch,
// tile128, the last what cast_fp8 runs where it fits).
CastResult ladder_cast_fp8_cuda(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                                bool transpose, c10::string_view variant) {
  constexpr const char* op = "ladder_cast_fp8";
  check_cast_args(x, scale, dtype, op);
  CastForm form = CastForm::kAuto;
  if (variant == "tile32") {
    form = CastForm::kTile32;
  } else if (variant == "vec16") {
    form = CastForm::kVec16;
  } else if (variant == "vec16_prefetch") {
    form = CastForm::kVec16Prefetch;
  } else if (variant == "tile128") {
    form = CastForm::kTile128;
  } else {
    CUDASTEPS_CHECK(false, op,
                    "variant must be one of tile32, vec16, vec16_prefetch, tile128, got '",
                    std::string(variant), "'");
  }
  return cast_fp8_cuda_form(x, scale, dtype, transpose, form, op);
}
#endif

// Autograd: not differentiable. Refuses an x or scale that requires grad, else calls the kernel
// below the Autograd key.
CastResult cast_fp8_autograd(const at::Tensor& x, const at::Tensor& scale, at::ScalarType dtype,
                             bool transpose) {
  CUDASTEPS_CHECK(!needs_grad(x), kOp,
                  "x requires grad, but cast_fp8 is not differentiable: cast inside the autograd "
                  "function of the FP8 computation");
  CUDASTEPS_CHECK(!needs_grad(scale), kOp,
                  "scale requires grad, but cast_fp8 is not differentiable");
  static const auto op =
      typed_op<CastResult(const at::Tensor&, const at::Tensor&, at::ScalarType, bool)>("cast_fp8");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(x, scale, dtype, transpose);
}

DynamicResult cast_fp8_dynamic_autograd(const at::Tensor& x, at::ScalarType dtype, bool transpose,
                                        const c10::optional<at::Tensor>& amax) {
  CUDASTEPS_CHECK(!needs_grad(x), kDynamicOp,
                  "x requires grad, but cast_fp8_dynamic is not differentiable: cast inside the "
                  "autograd function of the FP8 computation");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return cast_fp8_dynamic_call(x, dtype, transpose, amax);
}

}  // namespace
}  // namespace fp8

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("cast_fp8", &fp8::cast_fp8_cpu);
  m.impl("cast_fp8_dynamic", &fp8::cast_fp8_dynamic_cpu);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("cast_fp8", &fp8::cast_fp8_cuda);
  m.impl("cast_fp8_dynamic", &fp8::cast_fp8_dynamic_cuda);
  m.impl("ladder_cast_fp8", &fp8::ladder_cast_fp8_cuda);
}
#endif

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("cast_fp8", &fp8::cast_fp8_autograd);
  m.impl("cast_fp8_dynamic", &fp8::cast_fp8_dynamic_autograd);
}

}  // namespace cudasteps
