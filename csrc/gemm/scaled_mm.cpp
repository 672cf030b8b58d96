// scaled_mm: the scaled FP8 GEMM, out = (scale_a * a) @ (scale_b * b) + bias, as torch._scaled_mm
// computes it but for any M, N, K and any strides: a [M, K] and b [K, N] float8_e4m3fn or
// float8_e5m2 (either pair), scale_a per tensor (one element) or per row ([M, 1]), scale_b per
// tensor or per column ([1, N]), float32; bias [N] of out_dtype or float32; out_dtype bfloat16
// (the default), float16 or float32. Accumulation in float32.
//
// This unit holds the op's checks, its CPU kernel, its CUDA kernel (the Hopper path and the first
// form), the autograd kernel and the ladder op (ladder_scaled_mm: one form forced, CUDA). The CPU
// kernel and the CUDA kernel's first form run the same steps, each exact or rounded once:
//
//   a32, b32 = a, b as float32           (exact: every FP8 value is a float32, and a TF32)
//   product  = a32 @ b32                 (products exact, sums in float32: on a GPU the TF32
//                                         tensor cores, which hold FP8 values exactly)
//   out      = product * scale_a * scale_b (+ bias), rounded once to out_dtype
//
// so its error against a float64 product of the same FP8 inputs is float32 accumulation plus one
// rounding. That is the first form of the FP8 ladder (`widen_tf32`), and what the CUDA kernel runs
// where the Hopper kernel cannot: it moves four bytes per operand element where an FP8 kernel
// moves one and runs at the TF32 rate (half of bf16's, a quarter of FP8's).
//
// On Hopper the CUDA kernel runs tc:fp8_ws (gemm/tc/sm90/: FP8 wgmmas, TMA, warp specialization,
// persistent tiles; each k-tile's sums promoted into fp32 registers, so the accumulation is fp32's
// as above). Operands that are not K-major or whose rows are not 16-byte aligned (K not a multiple
// of 16, which torch._scaled_mm refuses) are copied into K-major rows padded to 16 bytes first. Per-
// tensor scales and a bias of the output's type go into its epilogue (the scales read on the
// device); row-wise scales, a float32 bias under a 16-bit output, and float16 outputs take its
// float32 output through the baseline's last step. A pair it does not build (b e5m2) runs the
// baseline.
//
// scaled_mm_range: scaled_mm's output and its range (max(0, max out), min(0, min out)), float32
// [2], taken by the Hopper kernel as it stores (tc:fp8_ws's OutRange): what the FP8 MLP
// (linear_act_linear_fp8) takes its hidden tensors' FP8 scales from, so that no pass of its own
// reads them for their amax.
//
// Not differentiable (torch._scaled_mm is not either): FP8 operands are casts of higher-precision
// tensors, and training differentiates through those (the autograd kernel refuses inputs that
// require grad by name).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <utility>

#include "common/checks.h"
#include "common/typed_op.h"

#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "gemm/gemm_cuda.h"
#include "gemm/tc/tc_gemm.h"
#endif

namespace cudasteps {
namespace gemm {
namespace {

constexpr const char* kOp = "scaled_mm";
constexpr const char* kRangeOp = "scaled_mm_range";

bool is_fp8(at::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }

// scale_a: one element, or [M, 1]; scale_b: one element, or [1, N] (`rows` of them along
// `dim`, the other dimension 1).
void check_scale(const at::Tensor& scale, const at::Tensor& a, const char* arg, int64_t count,
                 int dim, const char* op) {
  check_defined(scale, op, arg);
  CUDASTEPS_CHECK(scale.scalar_type() == at::kFloat, op, arg, " must be float32, got ",
                  scale.scalar_type());
  check_same_device(scale, a, op, arg, "a");
  const bool per_tensor = scale.numel() == 1;
  const bool per_row = scale.dim() == 2 && scale.size(dim) == count && scale.size(1 - dim) == 1;
  CUDASTEPS_CHECK(per_tensor || per_row, op, arg,
                  " must have one element (a per-tensor scale) or shape ",
                  dim == 0 ? "[M, 1] = [" : "[1, N] = [", dim == 0 ? count : 1, ", ",
                  dim == 0 ? 1 : count, "], got shape ", scale.sizes());
}

// The checks of the op (the fake kernel in torch_ops/cudasteps/gemm.py raises the same messages).
at::ScalarType check_scaled_mm_args(const at::Tensor& a, const at::Tensor& b,
                                    const at::Tensor& scale_a, const at::Tensor& scale_b,
                                    const c10::optional<at::Tensor>& bias,
                                    c10::optional<at::ScalarType> out_dtype,
                                    const char* op = kOp) {
  check_defined(a, op, "a");
  check_defined(b, op, "b");
  check_dim(a, 2, op, "a");
  check_dim(b, 2, op, "b");
  CUDASTEPS_CHECK(is_fp8(a.scalar_type()), op, "a must be Float8_e4m3fn or Float8_e5m2, got ",
                  a.scalar_type(), " (cast with tensor.to(torch.float8_e4m3fn))");
  CUDASTEPS_CHECK(is_fp8(b.scalar_type()), op, "b must be Float8_e4m3fn or Float8_e5m2, got ",
                  b.scalar_type(), " (cast with tensor.to(torch.float8_e4m3fn))");
  check_same_device(b, a, op, "b", "a");
  CUDASTEPS_CHECK(b.size(0) == a.size(1), op, "b.size(0) must equal a.size(1) (", a.size(1),
                  "), got ", b.size(0), " (shapes ", a.sizes(), " and ", b.sizes(), ")");
  const at::ScalarType out = out_dtype.value_or(at::kBFloat16);
  CUDASTEPS_CHECK(out == at::kBFloat16 || out == at::kHalf || out == at::kFloat, op,
                  "out_dtype must be BFloat16, Half or Float, got ", out);
  check_scale(scale_a, a, "scale_a", a.size(0), 0, op);
  check_scale(scale_b, a, "scale_b", b.size(1), 1, op);
  if (bias.has_value() && bias->defined()) {
    check_dim(*bias, 1, op, "bias");
    CUDASTEPS_CHECK(bias->size(0) == b.size(1), op, "bias must have shape [", b.size(1),
                    "], got shape ", bias->sizes());
    CUDASTEPS_CHECK(bias->scalar_type() == out || bias->scalar_type() == at::kFloat, op,
                    "bias must have the dtype of out_dtype (", out, ") or Float, got ",
                    bias->scalar_type());
    check_same_device(*bias, a, op, "bias", "a");
  }
  return out;
}

// A scale as the product broadcasts it: a 0-dim tensor (per tensor), or [M, 1] / [1, N].
at::Tensor broadcastable(const at::Tensor& scale) {
  return scale.numel() == 1 ? scale.reshape({}) : scale;
}

// The last step of both kernels: product * scale_a * scale_b (+ bias) in float32, rounded once.
at::Tensor scale_and_round(at::Tensor product, const at::Tensor& scale_a,
                           const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                           at::ScalarType out_dtype) {
  product.mul_(broadcastable(scale_a)).mul_(broadcastable(scale_b));
  if (bias.has_value() && bias->defined()) product.add_(bias->to(at::kFloat));
  return product.to(out_dtype);
}

at::Tensor scaled_mm_cpu(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                         const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                         c10::optional<at::ScalarType> out_dtype) {
  const at::ScalarType out = check_scaled_mm_args(a, b, scale_a, scale_b, bias, out_dtype);
  // cudasteps' own float32 GEMM (the CPU kernel of mm), on the exact float32 copies.
  static const auto mm = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&)>("mm");
  const at::Tensor product = mm.call(a.to(at::kFloat), b.to(at::kFloat));
  return scale_and_round(product, scale_a, scale_b, bias, out);
}

// scaled_mm_range's range of `out`, the reference (and the CUDA kernel's where the FP8 kernel does
// not take it): (max(0, max out), min(0, min out)) as float32 [2], NaN where out holds one (exact:
// every bf16/fp16 value is a float32).
at::Tensor range_with_zero(const at::Tensor& out) {
  if (out.numel() == 0) return at::zeros({2}, out.options().dtype(at::kFloat));
  auto [lo, hi] = at::aminmax(out);
  return at::stack({at::clamp_min(hi.to(at::kFloat), 0), at::clamp_max(lo.to(at::kFloat), 0)});
}

std::tuple<at::Tensor, at::Tensor> scaled_mm_range_cpu(const at::Tensor& a, const at::Tensor& b,
                                                       const at::Tensor& scale_a,
                                                       const at::Tensor& scale_b,
                                                       const c10::optional<at::Tensor>& bias,
                                                       c10::optional<at::ScalarType> out_dtype) {
  check_scaled_mm_args(a, b, scale_a, scale_b, bias, out_dtype, kRangeOp);
  const at::Tensor out = scaled_mm_cpu(a, b, scale_a, scale_b, bias, out_dtype);
  return {out, range_with_zero(out)};
}

#ifdef CUDASTEPS_WITH_CUDA
TcType fp8_type(at::ScalarType t) {
  return t == at::kFloat8_e4m3fn ? TcType::kE4M3 : TcType::kE5M2;
}

// The Hopper kernel (tc:fp8_ws, or the one the ladder's `tuning` asks for: ctas 2 for
// tc:fp8_multicast, bm 256 for tc:fp8_ws256), or an undefined tensor where it cannot run this
// product (not a Hopper GPU, b e5m2, an empty product): the caller then
// runs the baseline.
// With `range` (scaled_mm_range: a float32 [2] on a's device), the kernel also writes the range
// of the output into it; it runs then only where it writes the output directly (per-tensor scales,
// a bf16 or float32 output, a bias of its type) with TMA stores (rows of a multiple of 16 bytes),
// unsplit along K, and returns an undefined tensor elsewhere.
at::Tensor scaled_mm_hopper(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                            const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                            at::ScalarType out_dtype, TcTuning tuning = {},
                            const at::Tensor* range = nullptr) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (!tc_hopper_available() || b.scalar_type() != at::kFloat8_e4m3fn || M == 0 || N == 0 ||
      K == 0) {
    return at::Tensor();
  }
  const bool has_bias = bias.has_value() && bias->defined();
  // What the epilogue does itself: per-tensor scales, a bf16 or float32 output, a bias of its type.
  const bool per_tensor = scale_a.numel() == 1 && scale_b.numel() == 1;
  const bool direct_out = out_dtype == at::kBFloat16 || out_dtype == at::kFloat;
  const bool in_epilogue =
      per_tensor && direct_out && (!has_bias || bias->scalar_type() == out_dtype);
  const at::ScalarType kernel_out = in_epilogue ? out_dtype : at::kFloat;
  if (range != nullptr && (!in_epilogue || (N * at::elementSize(kernel_out)) % 16 != 0)) {
    return at::Tensor();
  }
  // FP8 wgmmas read K-major operands only, and the TMA 16-byte aligned rows: other operands are
  // repacked as the tensor-core dispatcher repacks its own (tc_repack: cudasteps' copy_ or
  // transpose_ into rows padded to 16 bytes; the kernel reads the true K, zeros past it).
  TcOperand a_op = tc_operand(a, false), b_op = tc_operand(b, true);
  if (!a_op.k_major || !tc_operand_aligned(a_op, 1)) a_op = tc_repack(a, a_op, false, true);
  if (!b_op.k_major || !tc_operand_aligned(b_op, 1)) b_op = tc_repack(b, b_op, true, true);
  at::Tensor out = at::empty({M, N}, a.options().dtype(kernel_out));
  const at::Tensor bias_row = in_epilogue && has_bias ? bias->contiguous() : at::Tensor();
  // The true K for both: the TMA reads zeros past it, never a row's padding or whatever follows K
  // in a view (FP8 bytes there may be NaNs, and 0 * NaN is not 0).
  TcProblem p = operand_problem(fp8_type(a.scalar_type()), M, N, K, a_op, b_op, out);
  p.b_type = TcType::kE4M3;
  p.out_type = kernel_out == at::kFloat ? TcType::kTF32 : TcType::kBF16;
  p.tuning = tuning;
  if (in_epilogue) {
    // One element each (per tensor), on a's device (checked): its address, whatever the shape.
    p.scale_a = scale_a.const_data_ptr<float>();
    p.scale_b = scale_b.const_data_ptr<float>();
    if (has_bias) {
      p.beta = 1.f;
      p.addend = bias_row.data_ptr();
      p.add_s0 = 0;
      p.add_s1 = 1;
    }
  }
  if (!tc_hopper_fp8_supports(p)) return at::Tensor();
  at::Tensor range_bits;
  if (range != nullptr) {
    // The workspace's keys and count start at 0 (a memset node in a CUDA graph: every replay too).
    range_bits = at::zeros({4}, a.options().dtype(at::kInt));
    p.range_bits = reinterpret_cast<unsigned*>(range_bits.data_ptr<int>());
    p.range_out = range->data_ptr<float>();
    p.tuning.splits = 1;  // every tile stored by the kernel's staged stores
  }
  tc_fp8_launch(p, at::cuda::getCurrentCUDAStream());
  return in_epilogue ? out : scale_and_round(out, scale_a, scale_b, bias, out_dtype);
}

// The ladder's first form (`widen_tf32`): both operands widened to float32 (exact), their
// product on the TF32 tensor cores (exact products of FP8 values; the exact SGEMM before sm_80),
// then the scales and the bias, rounded once.
at::Tensor scaled_mm_widened(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                             const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                             at::ScalarType out_dtype) {
  const at::Tensor a32 = a.to(at::kFloat), b32 = b.to(at::kFloat);
  // TF32 tensor cores where the GPU has them, whatever torch's TF32 switch says: a TF32 holds
  // every FP8 value exactly, so the products are exact either way. Older GPUs: the exact SGEMM.
  const bool tensor_cores = at::cuda::getCurrentDeviceProperties()->major >= 8;
  const at::Tensor product = tensor_cores
                                 ? tc_gemm_cuda(a32, b32, Addend{}, 1.0, 0.0, TcType::kTF32)
                                 : gemm_cuda(a32, b32, Addend{}, 1.0, 0.0);
  return scale_and_round(product, scale_a, scale_b, bias, out_dtype);
}

at::Tensor scaled_mm_cuda(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                          const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                          c10::optional<at::ScalarType> out_dtype) {
  const at::ScalarType out = check_scaled_mm_args(a, b, scale_a, scale_b, bias, out_dtype);
  const c10::cuda::CUDAGuard guard(a.device());
  const at::Tensor fast = scaled_mm_hopper(a, b, scale_a, scale_b, bias, out);
  if (fast.defined()) return fast;
  return scaled_mm_widened(a, b, scale_a, scale_b, bias, out);
}

// scaled_mm_range: the Hopper kernel takes the range as it stores (see scaled_mm_hopper); elsewhere
// scaled_mm, then a pass over the output for its range.
std::tuple<at::Tensor, at::Tensor> scaled_mm_range_cuda(const at::Tensor& a, const at::Tensor& b,
                                                        const at::Tensor& scale_a,
                                                        const at::Tensor& scale_b,
                                                        const c10::optional<at::Tensor>& bias,
                                                        c10::optional<at::ScalarType> out_dtype) {
  const at::ScalarType out =
      check_scaled_mm_args(a, b, scale_a, scale_b, bias, out_dtype, kRangeOp);
  const c10::cuda::CUDAGuard guard(a.device());
  const at::Tensor range = at::empty({2}, a.options().dtype(at::kFloat));
  const at::Tensor fast = scaled_mm_hopper(a, b, scale_a, scale_b, bias, out, {}, &range);
  if (fast.defined()) return {fast, range};
  const at::Tensor product = scaled_mm_cuda(a, b, scale_a, scale_b, bias, out_dtype);
  return {product, range_with_zero(product)};
}

// ladder_scaled_mm: one form of the FP8 ladder, forced (bf16 output, no bias, as the report's
// rows): `widen_tf32` (the first form, above), `fp8_ws` (tc:fp8_ws: one CTA per 128 x 128 tile),
// `fp8_multicast` (tc:fp8_multicast: clusters of two CTAs sharing B) or `fp8_ws256` (tc:fp8_ws256:
// 256 x 128 tiles); the last three refused by name where they cannot run. For sweeps, not the
// report: `fp8_ws:st<L>`, L 1-4, tc:fp8_ws with its consumer warpgroups L k-tiles apart (a trial:
// HopperParams::stagger).
int scaled_mm_stagger(c10::string_view variant) {
  const c10::string_view prefix = "fp8_ws:st";
  if (variant.size() != prefix.size() + 1 || variant.substr(0, prefix.size()) != prefix) return 0;
  const char l = variant[prefix.size()];
  return l >= '1' && l <= '4' ? l - '0' : 0;
}

at::Tensor ladder_scaled_mm_cuda(const at::Tensor& a, const at::Tensor& b,
                                 const at::Tensor& scale_a, const at::Tensor& scale_b,
                                 c10::string_view variant) {
  constexpr const char* op = "ladder_scaled_mm";
  const int stagger = scaled_mm_stagger(variant);
  CUDASTEPS_CHECK(variant == "widen_tf32" || variant == "fp8_ws" || variant == "fp8_multicast" ||
                      variant == "fp8_ws256" || stagger > 0,
                  op,
                  "variant must be one of widen_tf32, fp8_ws, fp8_multicast, fp8_ws256 (or "
                  "fp8_ws:st<1-4>), got '",
                  variant, "'");
  check_scaled_mm_args(a, b, scale_a, scale_b, c10::nullopt, c10::nullopt);
  const c10::cuda::CUDAGuard guard(a.device());
  if (variant == "widen_tf32") {
    return scaled_mm_widened(a, b, scale_a, scale_b, c10::nullopt, at::kBFloat16);
  }
  TcTuning tuning;
  tuning.bm = variant == "fp8_ws256" ? 256 : 0;
  tuning.ctas = variant == "fp8_multicast" ? 2 : 1;
  tuning.stagger = stagger;
  const at::Tensor out =
      scaled_mm_hopper(a, b, scale_a, scale_b, c10::nullopt, at::kBFloat16, tuning);
  CUDASTEPS_CHECK(out.defined(), op, std::string(variant),
                  " needs a compute capability 9.0 GPU (and a build for it), b of type "
                  "Float8_e4m3fn and a non-empty product, got b ",
                  b.scalar_type(), " and shapes ", a.sizes(), " and ", b.sizes());
  return out;
}
#endif

// Autograd: not differentiable. Refuses inputs that require grad (by name), else calls the kernel
// below the Autograd key.
void refuse_grads(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                  const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                  const char* op) {
  const std::pair<const char*, bool> args[] = {
      {"a", needs_grad(a)}, {"b", needs_grad(b)}, {"scale_a", needs_grad(scale_a)},
      {"scale_b", needs_grad(scale_b)}, {"bias", needs_grad_opt(bias)}};
  for (const auto& [name, requires_grad] : args) {
    CUDASTEPS_CHECK(!requires_grad, op, name, " requires grad, but ", op,
                    " is not differentiable (as torch._scaled_mm): differentiate the "
                    "higher-precision tensors the FP8 operands were cast from");
  }
}

at::Tensor scaled_mm_autograd(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                              const at::Tensor& scale_b, const c10::optional<at::Tensor>& bias,
                              c10::optional<at::ScalarType> out_dtype) {
  refuse_grads(a, b, scale_a, scale_b, bias, kOp);
  static const auto op =
      typed_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, const c10::optional<at::Tensor>&,
                          c10::optional<at::ScalarType>)>("scaled_mm");
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a, b, scale_a, scale_b, bias, out_dtype);
}

std::tuple<at::Tensor, at::Tensor> scaled_mm_range_autograd(
    const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a, const at::Tensor& scale_b,
    const c10::optional<at::Tensor>& bias, c10::optional<at::ScalarType> out_dtype) {
  refuse_grads(a, b, scale_a, scale_b, bias, kRangeOp);
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const c10::optional<at::Tensor>&, c10::optional<at::ScalarType>)>(kRangeOp);
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  return op.call(a, b, scale_a, scale_b, bias, out_dtype);
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("scaled_mm", &gemm::scaled_mm_cpu);
  m.impl("scaled_mm_range", &gemm::scaled_mm_range_cpu);
}

#ifdef CUDASTEPS_WITH_CUDA
TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("scaled_mm", &gemm::scaled_mm_cuda);
  m.impl("scaled_mm_range", &gemm::scaled_mm_range_cuda);
  m.impl("ladder_scaled_mm", &gemm::ladder_scaled_mm_cuda);
}
#endif

TORCH_LIBRARY_IMPL(cudasteps, Autograd, m) {
  m.impl("scaled_mm", &gemm::scaled_mm_autograd);
  m.impl("scaled_mm_range", &gemm::scaled_mm_range_autograd);
}

}  // namespace cudasteps
