// CUDA mm / addmm / linear / linear_act / mm_bias_act_backward: the op layer of the gemm family.
// Checks the arguments (gemm.h), turns each op into one problem, out = alpha * a @ b + beta *
// addend, and sends it down one of two paths: tensor cores (tc/dispatch.cpp: bf16/fp16 always, and
// float32 when torch's TF32 switch is on) or the exact SIMT kernels (sgemm/dispatch.cpp: float32
// and float64). linear_act runs the bias and activation in the Hopper tensor-core GEMM's epilogue
// (tc:ws_pingpong's kernel) where it can, and linear then bias_act (linear_act.cpp) elsewhere.
//
// Tensor cores for float32: torch.backends.cuda.matmul.allow_tf32, or
// set_float32_matmul_precision "high"/"medium", read from at::globalContext() per call, as
// cuBLAS does through torch.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <tuple>

#include "common/launch.cuh"  // sm_count
#include "gemm/gemm_cuda.h"
#include "gemm/gemv/gemv.h"  // kGemvMaxTokens

namespace cudasteps {
namespace gemm {
namespace {

// The op-level choice: tensor cores for bf16/fp16, and for float32 when TF32 is allowed.
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                       double beta) {
  const auto dtype = a.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16 ||
      (dtype == at::kFloat && at::globalContext().allowTF32CuBLAS())) {
    return tc_gemm_cuda(a, b, add, alpha, beta, tc_type_of(dtype));
  }
  return gemm_cuda(a, b, add, alpha, beta);
}

at::Tensor mm_cuda(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm_pair(self, mat2, "mm", "self", "mat2");
  return matmul_cuda(self, mat2, Addend{}, 1.0, 0.0);
}

// mm.dtype: a float32 output of bf16/fp16 operands from the Hopper kernels' fp32 accumulators
// (tc_gemm_f32_out_cuda). Elsewhere the operands are widened to float32 and multiplied there:
// the products of 16-bit values are exact in float32 (and in TF32, which holds their mantissas),
// so the sums are float32 sums either way.
at::Tensor mm_dtype_cuda(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  check_mm_pair(self, mat2, "mm", "self", "mat2");
  check_mm_out_dtype(self, out_dtype);
  if (out_dtype == self.scalar_type()) return matmul_cuda(self, mat2, Addend{}, 1.0, 0.0);
  if (tc_f32_out_supported(self, mat2)) return tc_gemm_f32_out_cuda(self, mat2);
  return matmul_cuda(self.to(at::kFloat), mat2.to(at::kFloat), Addend{}, 1.0, 0.0);
}

at::Tensor addmm_cuda(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  check_mm_pair(mat1, mat2, "addmm", "mat1", "mat2");
  check_addmm_self(self, mat1, mat1.size(0), mat2.size(1));
  const double beta_d = beta.toDouble();
  Addend add;
  if (beta_d != 0.0) add = make_addend(self, mat1.size(0), mat2.size(1));
  return matmul_cuda(mat1, mat2, add, alpha.toDouble(), beta_d);
}

at::Tensor linear_cuda(const at::Tensor& input, const at::Tensor& weight,
                       const c10::optional<at::Tensor>& bias) {
  check_linear_args(input, weight, bias);
  const int64_t N = weight.size(0);
  const at::Tensor x = flatten_input(input);
  Addend add;
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) add = make_bias_addend(*bias, N);
  // weight.t() is a column-major (K-major) [K, N] view: read in place by every kernel.
  at::Tensor out = matmul_cuda(x, weight.t(), add, 1.0, has_bias ? 1.0 : 0.0);
  return out.view(linear_out_shape(input, N));
}

// Whether the Hopper kernels' fused stages (linear_act's, mm_bias_act_backward's) can read this
// bias beside a product of x's dtype: absent, or of x's dtype or float32, contiguous and aligned
// to two elements (the stages read it in pairs).
bool epilogue_bias_ok(const at::Tensor& x, const c10::optional<at::Tensor>& bias) {
  return !bias.has_value() || !bias->defined() ||
         ((bias->scalar_type() == x.scalar_type() || bias->scalar_type() == at::kFloat) &&
          bias->stride(0) == 1 &&
          reinterpret_cast<uintptr_t>(bias->const_data_ptr()) % (2 * bias->element_size()) == 0);
}

// Whether linear_act can run fused for x [M, K] @ weight^T: where the dispatcher's product would
// run a Hopper persistent kernel anyway (bf16/fp16 on a Hopper GPU; more than kGemvMaxTokens rows
// and columns, fewer go to the few-row path; TMA's 32-bit coordinates), the output rows are a
// 16-byte multiple (the fused stage runs in the kernel's staged TMA stores), the bias has x's
// dtype or float32 (autocast's) and is contiguous with its pairs aligned, and K is not 0 (the
// product is then just the bias). Elsewhere the two-pass form runs: the same GEMM, then bias_act.
// Called under the device guard of x's device.
bool linear_act_fuses(const at::Tensor& x, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias) {
  if (!epilogue_bias_ok(x, bias)) return false;
  // 16-bit types only: the fp32 products the FFN targets run the SGEMM (TF32 off), and the TF32
  // kernels are not built with the stage.
  const auto dtype = x.scalar_type();
  const bool tc = dtype == at::kHalf || dtype == at::kBFloat16;
  const int64_t M = x.size(0), N = weight.size(0), K = weight.size(1);
  return tc && tc_hopper_available() && M > kGemvMaxTokens && N > kGemvMaxTokens && K > 0 &&
         (N * x.element_size()) % 16 == 0 && std::max({M, N, K}) < INT_MAX;
}

// Whether linear_act runs the fused epilogue where it can run, in tc:ws_pingpong's kernel.
// Measured on an H100 (scripts/bench_cases.py gemm.run_linear_act, bf16, bias + gelu_tanh, the
// product written too), at 8192 x 2048 -> 8192 and 4096 x 4096 -> 11008: linear then bias_act
// 0.519 / 0.628 ms, the stage in tc:ws_persistent's epilogue 0.580 / 0.699 ms (both consumer
// warpgroups leave the main loop for it), in tc:ws_pingpong's 0.508 / 0.596 ms (one warpgroup's
// epilogue runs under the other's main loop); without the product (inference) the stage wins
// clearly (make bench of 011bf32: 0.431 ms against 0.516 two-pass at 8192 x 2048 -> 8192).
constexpr bool kFuseByDefault = true;

// Whether linear_act_aux (the training forward: the product is kept for the backward) fuses too.
// It does not: inside a training step the fused kernel's 4-byte stores of the product cost more
// than the separate pass. On an H100 (bf16 autocast, the benchmark's FFN 8192 x 2048 -> 8192 ->
// 2048 and GPT block steps, the two forms interleaved in one process): the FFN's forward kernel
// took 542 us fused against 364 + ~95 us for linear then bias_act, and the whole FFN step ran
// 3.196-3.286 ms two-pass against 3.340-3.343 fused (torch.nn 3.291-3.344), the block step
// 6.407-6.462 against 6.509-6.524 (torch.nn 6.401-6.469). The fused stage rounds the product
// before the activation, so both forms give the same bits (act none, which needs no product in
// its backward, stays fused: linear's single rounding of product + bias in both modes).
// Again on an H200 (2026-11-28) with the stage in tc:ws_pingpong's epilogue, which hides it under
// the other consumer warpgroup's main loop (the forward kernel of a profiled FFN step, us, then
// the FFN and block steps' speedups over torch.nn, two runs each, interleaved with torch): 458
// fused against 369 + 83 for linear then bias_act; FFN 1.077x / 1.095x fused against 1.083x /
// 1.076x, block 1.074x / 1.058x against 1.076x / 1.057x. No gain beyond the noise: the stage's
// cost under the ping-pong schedule matches the pass it saves.
constexpr bool kFuseWithAux = false;

// How linear_act_impl computes: kAuto (the ops: fused where kFuseByDefault and it can run), or a
// ladder step's form, forced.
// kFused runs the stage in tc:ws_persistent's epilogue (both consumer warpgroups stop their main
// loop for it), kFusedPingPong in tc:ws_pingpong's (one warpgroup's epilogue under the other's main
// loop).
enum class LinearActForm { kAuto, kTwoPass, kFused, kFusedPingPong };

// linear_act (want_aux false: the product is not returned), linear_act_aux, ladder_linear_act.
std::tuple<at::Tensor, at::Tensor> linear_act_impl(
    const at::Tensor& input, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
    c10::string_view act_name, bool want_aux, const char* op,
    LinearActForm form = LinearActForm::kAuto) {
  const elementwise::Act act = check_linear_act_args(input, weight, bias, act_name, op);
  const c10::cuda::CUDAGuard guard(input.device());
  const at::Tensor x = flatten_input(input);
  const bool can_fuse = linear_act_fuses(x, weight, bias);
  const bool forced_fused = form == LinearActForm::kFused || form == LinearActForm::kFusedPingPong;
  CUDASTEPS_CHECK(!forced_fused || can_fuse, op,
                  "the fused epilogue needs a compute capability 9.0 GPU (and a build for it), "
                  "bfloat16 or float16 operands, more than ",
                  kGemvMaxTokens, " rows and output features, output rows of a 16-byte multiple "
                  "and a contiguous bias of the input's dtype or float32 aligned to two elements; "
                  "got input ",
                  input.sizes(), " ", input.scalar_type(), " and weight ", weight.sizes());
  // act "none" with a bias linear takes is linear (tc:final's kernel, the bias in its epilogue).
  const bool is_linear = !want_aux && linear_act_is_linear(input, bias, act_name);
  const bool fused_form = !want_aux || kFuseWithAux || act == elementwise::Act::kNone;
  const bool fused = forced_fused || (form == LinearActForm::kAuto && kFuseByDefault && can_fuse &&
                                      !is_linear && fused_form);
  if (!fused && !want_aux) return {linear_act_unfused(input, weight, bias, act_name), at::Tensor()};
  if (!fused) return linear_act_two_pass(input, weight, bias, act_name);
  const int64_t N = weight.size(0);
  const bool has_bias = bias.has_value() && bias->defined();
  Addend add;
  if (has_bias) add = make_bias_addend(*bias, N);
  TcFusion fusion;
  fusion.act = act;
  fusion.want_aux = want_aux;
  // kFusedPingPong and kAuto: tc:ws_pingpong (kFuseByDefault's measurements), but where
  // tc:ws_persistent's kernel cuts the last wave's tiles into k ranges (few tiles: the epilogue's
  // overlap matters less than the idle SMs), which keeps the product bitwise linear's.
  const int64_t M = x.size(0), K = x.size(1);
  const bool tail_split = tc_hopper_tail_split_wanted(M, N, K, tc_type_of(x.scalar_type()));
  const TcKernel kernel =
      form == LinearActForm::kFused || (form == LinearActForm::kAuto && tail_split)
          ? TcKernel::kWsPersistent
          : TcKernel::kWsPingPong;
  const at::Tensor out = tc_gemm_cuda(x, weight.t(), add, 1.0, has_bias ? 1.0 : 0.0,
                                      tc_type_of(x.scalar_type()), kernel, -1, {}, &fusion);
  const auto shape = linear_out_shape(input, N);
  return {out.view(shape), want_aux ? fusion.aux.view(shape) : at::Tensor()};
}

at::Tensor linear_act_cuda(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias, c10::string_view act) {
  return std::get<0>(linear_act_impl(input, weight, bias, act, false, "linear_act"));
}

std::tuple<at::Tensor, at::Tensor> linear_act_aux_cuda(const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       const c10::optional<at::Tensor>& bias,
                                                       c10::string_view act) {
  return linear_act_impl(input, weight, bias, act, true, "linear_act_aux");
}

// The ladder of linear_act's forms, each returning (out, product): "two_pass" (linear, then
// bias_act), "fused" (the bias and activation in tc:ws_persistent's epilogue, which also writes
// the product) and "fused_pingpong" (the same stage in tc:ws_pingpong's epilogue, which runs under
// the other consumer warpgroup's main loop). The fused steps are Hopper only, and refused where
// they cannot run.
std::tuple<at::Tensor, at::Tensor> ladder_linear_act_cuda(const at::Tensor& input,
                                                          const at::Tensor& weight,
                                                          const c10::optional<at::Tensor>& bias,
                                                          c10::string_view act,
                                                          c10::string_view variant) {
  constexpr const char* op = "ladder_linear_act";
  CUDASTEPS_CHECK(variant == "two_pass" || variant == "fused" || variant == "fused_pingpong", op,
                  "variant must be one of two_pass, fused, fused_pingpong, got '",
                  std::string(variant), "'");
  const LinearActForm form = variant == "fused"            ? LinearActForm::kFused
                             : variant == "fused_pingpong" ? LinearActForm::kFusedPingPong
                                                           : LinearActForm::kTwoPass;
  return linear_act_impl(input, weight, bias, act, true, op, form);
}

// Whether mm_bias_act_backward's fused form can run for grad [M, D] @ weight [D, N] and the saved
// x [M, N]: bf16/fp16 on a Hopper GPU, more than kGemvMaxTokens rows and columns, N a multiple of
// 8 (output rows 16-byte aligned for the TMA stores, x read in aligned pairs), x contiguous, D
// positive, a bias the stage reads (epilogue_bias_ok), and an output whose 128 x 128 tiles busy
// more than half the SMs: the stage runs unsplit, and below that the GEMM alone would be cut along
// K (choose_splits, tc/sm90/scheduler.cuh), faster than the fusion could save.
bool mm_bias_act_backward_fuses(const at::Tensor& grad, const at::Tensor& weight,
                                const at::Tensor& x, const c10::optional<at::Tensor>& bias) {
  if (!epilogue_bias_ok(x, bias)) return false;
  const auto dtype = x.scalar_type();
  const int64_t M = grad.size(0), D = weight.size(0), N = weight.size(1);
  const int64_t sms = sm_count();
  return (dtype == at::kHalf || dtype == at::kBFloat16) && tc_hopper_available() &&
         M > kGemvMaxTokens && N > kGemvMaxTokens && D > 0 && N % 8 == 0 && x.is_contiguous() &&
         std::max({M, N, D}) < INT_MAX && ((M + 127) / 128) * ((N + 127) / 128) * 2 > sms;
}

// How mm_bias_act_backward computes: kAuto (the op: the fused form where kFuseActGradByDefault
// and it can run, else the two passes), or a ladder step's form, forced: kTwoPass (mm, then
// bias_act_backward) or kFused (the derivative and the bias gradient's column sums in
// tc:ws_persistent's epilogue).
enum class MmActGradForm { kAuto, kTwoPass, kFused };

// Whether mm_bias_act_backward runs the fused stage where it can. It does not: the stage costs
// more than the pass it saves. Measured on an H100 (bf16, gelu, a bias; us, interleaved, CUDA
// events; mm alone / two passes / fused in tc:ws_persistent / fused in tc:ws_pingpong):
// 8192 x (2048 -> 8192) 372-386 / 521-529 / 572-579 / 646; 4096 x (4096 -> 11008) 540-567 /
// 628-662 / 668-707 / 761-765; 8192 x (1024 -> 4096) 100-103 / 181-183 / 232-242 / 249-256; the
// FFN step (8192 x 2048 -> 8192 -> 2048, bf16 autocast) 3.313 ms with the ping-pong form against
// 3.218 layer by layer (torch.nn 3.204). The stage is bound by its instruction count: ncu (base
// clocks, 8192 x 2048 -> 8192) 61M warp instructions and 453 us with act none and no bias (the
// plain epilogue), 99M and 573 us with relu, 140M and 653 us with gelu; tc:ws_persistent's
// epilogue stops both consumer warpgroups (its cost is exposed), and tc:ws_pingpong, which hides
// an epilogue under the other warpgroup's main loop, runs this layout (B row-major) 25-35% slower
// than tc:ws_persistent to begin with (mm 372 / 499 us), so it is not built with the stage.
// Bringing x into L2 as each tile's main loop starts (prefetch.global.L2) changed nothing
// (579 -> 572 us). The separate pass runs the same arithmetic at full occupancy, under its memory
// time (92% of copy bandwidth).
constexpr bool kFuseActGradByDefault = false;

// mm_bias_act_backward in the form asked for (kAuto: the op's choice). The fused form: grad @
// weight in tc:ws_persistent's kernel with the derivative in its epilogue, which also writes the
// bias gradient's column sums per 32 rows, added up in order by sum_leading (deterministic).
std::tuple<at::Tensor, c10::optional<at::Tensor>> mm_bias_act_backward_impl(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act_name, const char* op,
    MmActGradForm form) {
  const elementwise::Act act = check_mm_bias_act_backward_args(grad, weight, x, bias, act_name);
  // (The op's two passes need none of what follows: while kFuseActGradByDefault is false, a
  // training step's backward goes straight to them.)
  if (form == MmActGradForm::kTwoPass || (form == MmActGradForm::kAuto && !kFuseActGradByDefault)) {
    return mm_bias_act_backward_two_pass(grad, weight, x, bias, act_name);
  }
  const c10::cuda::CUDAGuard guard(grad.device());
  const int64_t D = weight.size(0), N = weight.size(1);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < grad.dim(); ++d) rows *= grad.size(d);
  const at::Tensor g = grad.reshape({rows, D});
  const at::Tensor x2d = x.reshape({rows, N});
  const bool can_fuse = mm_bias_act_backward_fuses(g, weight, x2d, bias);
  if (form == MmActGradForm::kAuto && !can_fuse) {
    return mm_bias_act_backward_two_pass(grad, weight, x, bias, act_name);
  }
  CUDASTEPS_CHECK(can_fuse, op,
                  "the fused backward needs a compute capability 9.0 GPU (and a build for it), "
                  "bfloat16 or float16 operands, more than ", kGemvMaxTokens,
                  " rows, N a multiple of 8 (and more than ", kGemvMaxTokens,
                  "), a contiguous x, an output of at least half a wave of 128 x 128 tiles and a "
                  "contiguous bias of x's dtype or float32 aligned to two elements; got grad ",
                  grad.sizes(), " ", grad.scalar_type(), " and weight ", weight.sizes());
  const bool has_bias = bias.has_value() && bias->defined();
  Addend add;
  if (has_bias) add = make_bias_addend(*bias, N);
  TcFusion fusion;
  fusion.act = act;
  fusion.act_input = x2d;
  fusion.want_col_partials = has_bias;
  const at::Tensor out = tc_gemm_cuda(g, weight, add, 1.0, has_bias ? 1.0 : 0.0,
                                      tc_type_of(x.scalar_type()), TcKernel::kWsPersistent, -1, {},
                                      &fusion);
  c10::optional<at::Tensor> grad_bias;
  if (has_bias) {
    static const auto sum_leading_op =
        typed_op<at::Tensor(const at::Tensor&, const c10::optional<at::Tensor>&, double,
                            c10::optional<at::ScalarType>)>("sum_leading");
    grad_bias = sum_leading_op.call(fusion.col_partials, c10::nullopt, 1.0, bias->scalar_type());
  }
  return {out.view(x.sizes()), grad_bias};
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> mm_bias_act_backward_cuda(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act) {
  return mm_bias_act_backward_impl(grad, weight, x, bias, act, "mm_bias_act_backward",
                                   MmActGradForm::kAuto);
}

// The ladder of mm_bias_act_backward's forms: "two_pass" (mm, then bias_act_backward: what the op
// runs) and "fused" (the derivative and the column sums in tc:ws_persistent's epilogue; Hopper
// only, and refused where it cannot run).
std::tuple<at::Tensor, c10::optional<at::Tensor>> ladder_mm_bias_act_backward_cuda(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act, c10::string_view variant) {
  constexpr const char* op = "ladder_mm_bias_act_backward";
  CUDASTEPS_CHECK(variant == "two_pass" || variant == "fused", op,
                  "variant must be one of two_pass, fused, got '", std::string(variant), "'");
  const MmActGradForm form = variant == "fused" ? MmActGradForm::kFused : MmActGradForm::kTwoPass;
  return mm_bias_act_backward_impl(grad, weight, x, bias, act, op, form);
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("mm", &gemm::mm_cuda);
  m.impl("addmm", &gemm::addmm_cuda);
  m.impl("linear", &gemm::linear_cuda);
  m.impl("linear_act", &gemm::linear_act_cuda);
  m.impl("linear_act_aux", &gemm::linear_act_aux_cuda);
  m.impl("ladder_linear_act", &gemm::ladder_linear_act_cuda);
  m.impl("mm_bias_act_backward", &gemm::mm_bias_act_backward_cuda);
  m.impl("ladder_mm_bias_act_backward", &gemm::ladder_mm_bias_act_backward_cuda);
  m.impl("linear_act_linear", &gemm::linear_act_linear_kernel);
  m.impl("mm.dtype", &gemm::mm_dtype_cuda);
  m.impl("linear.dtype", &gemm::linear_dtype_kernel);
  m.impl("linear_act.dtype", &gemm::linear_act_dtype_kernel);
  m.impl("linear_act_linear.dtype", &gemm::linear_act_linear_dtype_kernel);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
