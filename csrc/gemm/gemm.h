// Argument checks and operand layouts shared by the CPU and CUDA GEMM kernels (mm, addmm, linear),
// and the few helpers the FP8 linears share (linear_fp8.cpp, gemm_autograd.cpp).
//
// Every op reduces to one problem:  out[M, N] = alpha * (A[M, K] @ B[K, N]) + beta * C[m, n]
// where C is an optional strided (possibly broadcast, stride 0) addend: addmm's `self` (expanded
// to [M, N]) or linear's bias (strides {0, 1}). The addend is applied in the epilogue of the GEMM
// kernel, never as an extra pass.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/checks.h"
#include "common/typed_op.h"
#include "elementwise/elementwise.h"  // parse_act: linear_act's activation names
#include "fp8/fp8.h"                  // check_per_tensor: linear_fp8's input_amax

namespace cudasteps {
namespace gemm {

// torch's counterpart of each op, named in the dtype error.
inline const char* torch_counterpart(const char* op) {
  const std::string name(op);
  if (name == "addmm") return "torch.addmm";
  if (name == "linear") return "torch.nn.functional.linear";
  if (name == "linear_act" || name == "linear_act_aux" || name == "ladder_linear_act" ||
      name == "linear_act_linear") {
    return "torch.nn.functional.linear";
  }
  return "torch.mm";
}

// float32 (the exact SGEMM, or TF32 tensor cores when torch's allow_tf32 is on), float64 (a simple
// tiled kernel), float16 and bfloat16 (tensor cores, fp32 accumulation). Complex and integer
// matrices are torch's job.
inline bool is_gemm_dtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
         dtype == at::kBFloat16;
}

inline void check_gemm_dtype(const at::Tensor& t, const char* op, const char* arg) {
  CUDASTEPS_CHECK(is_gemm_dtype(t.scalar_type()), op, arg,
                  " must be float32, float64, float16 or bfloat16, got ", t.scalar_type(), " (use ",
                  torch_counterpart(op), " for other dtypes)");
}

// Checks for self @ mat2 style arguments (names passed in so addmm/linear say mat1/input).
inline void check_mm_pair(const at::Tensor& a, const at::Tensor& b, const char* op,
                          const char* a_name, const char* b_name) {
  check_defined(a, op, a_name);
  check_defined(b, op, b_name);
  check_dim(a, 2, op, a_name);
  check_dim(b, 2, op, b_name);
  check_gemm_dtype(a, op, a_name);
  check_gemm_dtype(b, op, b_name);
  check_same_dtype(b, a, op, b_name, a_name);
  check_same_device(b, a, op, b_name, a_name);
  CUDASTEPS_CHECK(b.size(0) == a.size(1), op, b_name, ".size(0) must equal ", a_name,
                  ".size(1) (", a.size(1), "), got ", b.size(0), " (shapes ", a.sizes(), " and ",
                  b.sizes(), ")");
}

// mm.dtype's out_dtype: self's dtype, or float32 for bf16/fp16 operands (as aten's mm.dtype).
inline void check_mm_out_dtype(const at::Tensor& self, at::ScalarType out_dtype) {
  const auto dtype = self.scalar_type();
  CUDASTEPS_CHECK(out_dtype == dtype ||
                      (out_dtype == at::kFloat && (dtype == at::kHalf || dtype == at::kBFloat16)),
                  "mm", "out_dtype must be self's dtype (", dtype,
                  ") or, for bfloat16 or float16 operands, Float, got ", out_dtype);
}

// The dtype of the .dtype overloads: one the product can run in.
inline void check_compute_dtype(at::ScalarType dtype, const char* op) {
  CUDASTEPS_CHECK(is_gemm_dtype(dtype), op,
                  "dtype must be float32, float64, float16 or bfloat16, got ", dtype);
}

// The arguments of the .dtype overloads (linear, linear_act, linear_act_linear) as given (their
// casts then meet the default overload's checks): each tensor defined and of a GEMM dtype, and
// dtype one the product can run in.
inline void check_cast_args(const char* op, at::ScalarType dtype,
                            std::initializer_list<std::pair<const at::Tensor*, const char*>> args) {
  for (const auto& [t, name] : args) {
    check_defined(*t, op, name);
    check_gemm_dtype(*t, op, name);
  }
  check_compute_dtype(dtype, op);
}

// t cast to dtype (autocast's cast: a copy where the dtype differs), or t itself.
inline at::Tensor cast_to(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : t.to(dtype);
}
inline c10::optional<at::Tensor> cast_to(const c10::optional<at::Tensor>& t,
                                         at::ScalarType dtype) {
  if (!t.has_value() || !t->defined()) return t;
  return cast_to(*t, dtype);
}

// addmm: self must broadcast to [M, N] and share dtype/device with mat1.
inline void check_addmm_self(const at::Tensor& self, const at::Tensor& mat1, int64_t M, int64_t N) {
  constexpr const char* op = "addmm";
  check_defined(self, op, "self");
  check_gemm_dtype(self, op, "self");
  check_same_dtype(self, mat1, op, "self", "mat1");
  check_same_device(self, mat1, op, "self", "mat1");
  bool ok = self.dim() <= 2;
  if (ok) {
    const int64_t target[2] = {M, N};
    for (int64_t i = 0; i < self.dim(); ++i) {
      const int64_t s = self.size(self.dim() - 1 - i);
      const int64_t t = target[1 - i];
      ok = ok && (s == t || s == 1);
    }
  }
  CUDASTEPS_CHECK(ok, op, "self must be broadcastable to [", M, ", ", N, "], got shape ",
                  self.sizes());
}

// linear: input [..., K], weight [N, K], bias [N] (or broadcastable to it) or None.
inline void check_linear_args(const at::Tensor& input, const at::Tensor& weight,
                              const c10::optional<at::Tensor>& bias, const char* op = "linear") {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  check_min_dim(input, 1, op, "input");
  check_dim(weight, 2, op, "weight");
  check_gemm_dtype(input, op, "input");
  check_gemm_dtype(weight, op, "weight");
  check_same_dtype(weight, input, op, "weight", "input");
  check_same_device(weight, input, op, "weight", "input");
  // Sizes read symbolically: linear_act_linear's Autograd kernel runs these checks on the tensors
  // torch.export traces, where reading a size as an integer fixes every size of the tensor.
  CUDASTEPS_CHECK(weight.sym_size(1) == input.sym_size(-1), op,
                  "weight.size(1) must equal input.size(-1) (", input.sym_size(-1), "), got ",
                  weight.sym_size(1), " (shapes ", input.sym_sizes(), " and ", weight.sym_sizes(),
                  ")");
  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_same_dtype(b, input, op, "bias", "input");
    check_same_device(b, input, op, "bias", "input");
    CUDASTEPS_CHECK(b.dim() <= 1 && (b.numel() == weight.size(0) || b.numel() == 1), op,
                    "bias must have shape [", weight.size(0), "] (or one element), got shape ",
                    b.sizes());
  }
}

// linear_act / linear_act_aux: linear's input and weight, a bias that is bias_act's ([N], the
// input's dtype or float32: an fp32 parameter under autocast stays fp32, as with BiasAct), and an
// activation name; returns the activation.
inline elementwise::Act check_linear_act_args(const at::Tensor& input, const at::Tensor& weight,
                                              const c10::optional<at::Tensor>& bias,
                                              c10::string_view act, const char* op) {
  check_linear_args(input, weight, c10::nullopt, op);
  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_same_device(b, input, op, "bias", "input");
    CUDASTEPS_CHECK(b.dim() == 1 && b.sym_size(0) == weight.sym_size(0), op,
                    "bias must have shape [", weight.sym_size(0), "], got shape ", b.sym_sizes());
    CUDASTEPS_CHECK(b.scalar_type() == input.scalar_type() || b.scalar_type() == at::kFloat, op,
                    "bias must have the dtype of input (", input.scalar_type(), ") or Float, got ",
                    b.scalar_type());
  }
  return elementwise::parse_act(act, op);
}

// linear_act with act "none" is linear (one GEMM, the bias in its epilogue) wherever linear takes
// the bias: absent, or in the input's dtype (an fp32 bias of a bf16 input is bias_act's alone).
inline bool linear_act_is_linear(const at::Tensor& input, const c10::optional<at::Tensor>& bias,
                                 c10::string_view act) {
  return act == "none" &&
         (!bias.has_value() || !bias->defined() || bias->scalar_type() == input.scalar_type());
}

// linear_act's two-pass form, (bias_act(linear(input, weight), bias, act), that product): the CPU
// kernel, and the CUDA kernel where the fused epilogue does not run (linear_act.cpp). Arguments
// checked by the caller.
std::tuple<at::Tensor, at::Tensor> linear_act_two_pass(const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       const c10::optional<at::Tensor>& bias,
                                                       c10::string_view act);
// linear_act's output alone, without the fused epilogue: linear where linear_act_is_linear, else
// the two-pass form's first output (linear_act.cpp). Arguments checked by the caller.
at::Tensor linear_act_unfused(const at::Tensor& input, const at::Tensor& weight,
                              const c10::optional<at::Tensor>& bias, c10::string_view act);

// mm_bias_act_backward: grad [..., D] (the output gradient of a linear whose weight is `weight`,
// [D, N]), x [..., N] with grad's leading sizes (bias_act's input, the product it added the bias
// to), a bias that is bias_act's ([N], x's dtype or float32) or None, and an activation name;
// grad, weight and x of one GEMM dtype on one device. Returns the activation.
inline elementwise::Act check_mm_bias_act_backward_args(const at::Tensor& grad,
                                                        const at::Tensor& weight,
                                                        const at::Tensor& x,
                                                        const c10::optional<at::Tensor>& bias,
                                                        c10::string_view act) {
  constexpr const char* op = "mm_bias_act_backward";
  check_defined(grad, op, "grad");
  check_defined(weight, op, "weight");
  check_defined(x, op, "x");
  check_min_dim(grad, 1, op, "grad");
  check_dim(weight, 2, op, "weight");
  check_gemm_dtype(grad, op, "grad");
  check_same_dtype(weight, grad, op, "weight", "grad");
  check_same_dtype(x, grad, op, "x", "grad");
  check_same_device(weight, grad, op, "weight", "grad");
  check_same_device(x, grad, op, "x", "grad");
  CUDASTEPS_CHECK(weight.size(0) == grad.size(-1), op, "weight.size(0) must equal grad.size(-1) (",
                  grad.size(-1), "), got ", weight.size(0), " (shapes ", grad.sizes(), " and ",
                  weight.sizes(), ")");
  std::vector<int64_t> x_shape(grad.sizes().begin(), grad.sizes().end());
  x_shape.back() = weight.size(1);
  CUDASTEPS_CHECK(x.sizes() == at::IntArrayRef(x_shape), op, "x must have shape ",
                  at::IntArrayRef(x_shape), " (grad's leading sizes, then weight.size(1)), got ",
                  x.sizes());
  if (bias.has_value() && bias->defined()) {
    elementwise::check_feature_vector(*bias, x, op, "bias", "x");
  }
  return elementwise::parse_act(act, op);
}

// bias_act_backward(grad @ weight, x, bias, act) as two passes, the GEMM then the elementwise
// pass: the CPU kernel, and the CUDA kernel where the fused stage does not run
// (linear_act.cpp). Arguments checked by the caller.
std::tuple<at::Tensor, c10::optional<at::Tensor>> mm_bias_act_backward_two_pass(
    const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& x,
    const c10::optional<at::Tensor>& bias, c10::string_view act);

// linear_act_linear: linear_act's input, weight1 and bias1 (check_linear_act_args), then a linear
// of the hidden activation: weight2 [D, weight1.size(0)] and bias2 [D] (or None) of input's dtype
// and device. Sizes read symbolically (the Autograd kernel runs these checks: check_linear_args).
inline elementwise::Act check_linear_act_linear_args(const at::Tensor& input,
                                                     const at::Tensor& weight1,
                                                     const c10::optional<at::Tensor>& bias1,
                                                     const at::Tensor& weight2,
                                                     const c10::optional<at::Tensor>& bias2,
                                                     c10::string_view act) {
  constexpr const char* op = "linear_act_linear";
  const elementwise::Act a = check_linear_act_args(input, weight1, bias1, act, op);
  check_defined(weight2, op, "weight2");
  check_dim(weight2, 2, op, "weight2");
  check_same_dtype(weight2, input, op, "weight2", "input");
  check_same_device(weight2, input, op, "weight2", "input");
  CUDASTEPS_CHECK(weight2.sym_size(1) == weight1.sym_size(0), op,
                  "weight2.size(1) must equal weight1.size(0) (", weight1.sym_size(0), "), got ",
                  weight2.sym_size(1), " (shapes ", weight1.sym_sizes(), " and ",
                  weight2.sym_sizes(), ")");
  if (bias2.has_value() && bias2->defined()) {
    check_same_dtype(*bias2, input, op, "bias2", "input");
    check_same_device(*bias2, input, op, "bias2", "input");
    CUDASTEPS_CHECK(bias2->dim() == 1 && bias2->sym_size(0) == weight2.sym_size(0), op,
                    "bias2 must have shape [", weight2.sym_size(0), "], got shape ",
                    bias2->sym_sizes());
  }
  return a;
}

// linear_act_linear's CPU and CUDA kernel (linear_act.cpp): the checks, then linear(linear_act(
// input, weight1, bias1, act), weight2, bias2), the op's forward without autograd.
at::Tensor linear_act_linear_kernel(const at::Tensor& input, const at::Tensor& weight1,
                                    const c10::optional<at::Tensor>& bias1,
                                    const at::Tensor& weight2,
                                    const c10::optional<at::Tensor>& bias2, c10::string_view act);

// The CPU and CUDA kernels of linear.dtype, linear_act.dtype and linear_act_linear.dtype
// (linear_act.cpp): the arguments cast to dtype (check_cast_args), then the op's default overload.
at::Tensor linear_dtype_kernel(const at::Tensor& input, const at::Tensor& weight,
                               const c10::optional<at::Tensor>& bias, at::ScalarType dtype);
at::Tensor linear_act_dtype_kernel(const at::Tensor& input, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, c10::string_view act,
                                   at::ScalarType dtype);
at::Tensor linear_act_linear_dtype_kernel(const at::Tensor& input, const at::Tensor& weight1,
                                          const c10::optional<at::Tensor>& bias1,
                                          const at::Tensor& weight2,
                                          const c10::optional<at::Tensor>& bias2,
                                          c10::string_view act, at::ScalarType dtype);

// ---- the FP8 linears' shared pieces (linear_fp8.cpp, gemm_autograd.cpp) ----

// An FP8 linear's bias `arg` for `weight`: 1-D, one per output feature, float32 / bf16 / fp16, on
// input's device (linear_fp8's bias, linear_act_linear_fp8's two).
inline void check_fp8_bias(const at::Tensor& bias, const at::Tensor& weight,
                           const at::Tensor& input, const char* op, const char* arg) {
  check_dim(bias, 1, op, arg);
  CUDASTEPS_CHECK(bias.sym_size(0) == weight.sym_size(0), op, arg, " must have shape [",
                  weight.sym_size(0), "], got shape ", bias.sym_sizes());
  check_dtype(bias, op, arg, {at::kFloat, at::kBFloat16, at::kHalf});
  check_same_device(bias, input, op, arg, "input");
}

// linear_fp8's and linear_act_fp8's arguments (the CPU and CUDA kernels, and the Autograd kernel
// of linear_act_fp8, whose inner ops would name themselves in a message).
inline void check_linear_fp8_args(const at::Tensor& input, const at::Tensor& weight,
                           const c10::optional<at::Tensor>& bias,
                           c10::optional<at::ScalarType> out_dtype,
                           const c10::optional<at::Tensor>& input_amax, const char* op) {
  check_defined(input, op, "input");
  check_defined(weight, op, "weight");
  check_min_dim(input, 1, op, "input");
  check_dim(weight, 2, op, "weight");
  check_dtype(input, op, "input", {at::kFloat, at::kBFloat16, at::kHalf});
  check_dtype(weight, op, "weight", {at::kFloat, at::kBFloat16, at::kHalf});
  check_same_device(weight, input, op, "weight", "input");
  // Sizes read symbolically: linear_act_fp8's Autograd kernel runs these checks on the tensors
  // torch.export traces, where reading input's sizes as integers would fix its batch dimension.
  CUDASTEPS_CHECK(weight.sym_size(1) == input.sym_size(-1), op,
                  "weight.size(1) must equal input.size(-1) (", input.sym_size(-1), "), got ",
                  weight.sym_size(1));
  if (bias.has_value() && bias->defined()) check_fp8_bias(*bias, weight, input, op, "bias");
  if (out_dtype.has_value()) {
    const at::ScalarType o = *out_dtype;
    CUDASTEPS_CHECK(o == at::kFloat || o == at::kBFloat16 || o == at::kHalf, op,
                    "out_dtype must be Float or BFloat16 or Half, got ", o);
  }
  if (input_amax.has_value()) {
    fp8::check_per_tensor(*input_amax, input, op, "input_amax", "input's amax", "input");
  }
}

// An FP8 linear's bias in its output's dtype, as F.linear under autocast casts it: what scaled_mm's
// FP8 epilogue adds (linear_fp8.cpp says what a float32 bias cost); none where there is none.
inline c10::optional<at::Tensor> fp8_out_bias(const c10::optional<at::Tensor>& bias,
                                              at::ScalarType out_type) {
  if (!bias.has_value() || !bias->defined()) return c10::nullopt;
  return bias->to(out_type);
}

// The bias of linear_act_fp8 as bias_act_amax takes it beside a product of type out_type: a
// float32 bias as it is (the pass adds it in float32, as under autocast), any other as
// fp8_out_bias casts it (bias_act takes x's dtype or Float).
inline c10::optional<at::Tensor> fp8_act_bias(const c10::optional<at::Tensor>& bias,
                                              at::ScalarType out_type) {
  if (bias.has_value() && bias->defined() && bias->scalar_type() == at::kFloat) return bias;
  return fp8_out_bias(bias, out_type);
}

// scaled_mm through the dispatcher (the FP8 linears' products).
inline at::Tensor scaled_mm_call(const at::Tensor& a, const at::Tensor& b,
                                 const at::Tensor& scale_a, const at::Tensor& scale_b,
                                 const c10::optional<at::Tensor>& bias, at::ScalarType out_dtype) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&, const at::Tensor&,
                                             const at::Tensor&, const at::Tensor&,
                                             const c10::optional<at::Tensor>&,
                                             c10::optional<at::ScalarType>)>("scaled_mm");
  return op.call(a, b, scale_a, scale_b, bias, out_dtype);
}

// bias_act_amax through the dispatcher: (act(x + bias), max |that|).
inline std::tuple<at::Tensor, at::Tensor> bias_act_amax_call(const at::Tensor& x,
                                                             const c10::optional<at::Tensor>& bias,
                                                             c10::string_view act) {
  static const auto op = typed_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const c10::optional<at::Tensor>&, c10::string_view)>("bias_act_amax");
  return op.call(x, bias, act);
}

// One GEMM operand as the kernels see it: element (r, c) of a rows x cols matrix sits at
//   ptr[r * ld + c]  (row-major, col_major == false)   or   ptr[c * ld + r]  (col_major == true).
// `holder` keeps a contiguous copy alive when the input's strides fit neither layout.
struct Operand {
  at::Tensor holder;
  int64_t ld = 1;
  bool col_major = false;
  const void* ptr = nullptr;
};

// A row-major or column-major description of `t` (2-D) without copying when one stride is 1 and
// the other is at least the extent it jumps over; otherwise a contiguous copy made by
// cudasteps::copy (through the dispatcher, so it runs our kernel on the tensor's device).
inline Operand make_operand(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  const int64_t s0 = t.stride(0), s1 = t.stride(1);
  Operand op;
  // Size-1 dimensions may carry any stride: they are never stepped over.
  const bool unit_c = s1 == 1 || cols <= 1;
  const bool unit_r = s0 == 1 || rows <= 1;
  if (unit_c && (rows <= 1 || s0 >= std::max<int64_t>(cols, 1))) {
    op.holder = t;
    op.col_major = false;
    // rows <= 1: ld is never used to step, so pick one that keeps 16-byte accesses legal.
    op.ld = rows <= 1 ? std::max<int64_t>((cols + 3) / 4 * 4, 4) : s0;
  } else if (unit_r && (cols <= 1 || s1 >= std::max<int64_t>(rows, 1))) {
    op.holder = t;
    op.col_major = true;
    op.ld = cols <= 1 ? std::max<int64_t>((rows + 3) / 4 * 4, 4) : s1;
  } else {
    static const auto copy_op = c10::Dispatcher::singleton()
                                    .findSchemaOrThrow("cudasteps::copy", "")
                                    .typed<at::Tensor(const at::Tensor&)>();
    op.holder = copy_op.call(t);
    op.col_major = false;
    op.ld = std::max<int64_t>(cols, 1);
  }
  op.ptr = op.holder.const_data_ptr();
  return op;
}

// The epilogue addend: C[m, n] at ptr[m * s0 + n * s1] (strides may be 0 for broadcasts).
struct Addend {
  at::Tensor holder;
  const void* ptr = nullptr;  // nullptr: no addend
  int64_t s0 = 0, s1 = 0;
};

// addmm's self expanded to [M, N] (a view: broadcast dims get stride 0).
inline Addend make_addend(const at::Tensor& self, int64_t M, int64_t N) {
  Addend add;
  add.holder = self.expand({M, N});
  add.ptr = add.holder.const_data_ptr();
  add.s0 = add.holder.stride(0);
  add.s1 = add.holder.stride(1);
  return add;
}

// linear's bias as a row vector broadcast over the M rows.
inline Addend make_bias_addend(const at::Tensor& bias, int64_t N) {
  Addend add;
  add.holder = bias.reshape({-1});
  add.ptr = add.holder.const_data_ptr();
  add.s0 = 0;
  add.s1 = add.holder.numel() == 1 ? 0 : add.holder.stride(0);
  (void)N;
  return add;
}

// input [..., K] as a 2-D [M, K] matrix: a view when possible, a cudasteps::copy otherwise.
inline at::Tensor flatten_input(const at::Tensor& input) {
  if (input.dim() == 2) return input;
  const int64_t K = input.size(-1);
  if (input.dim() == 1) return input.view({1, K});
  at::Tensor src = input;
  if (!input.is_contiguous()) {
    static const auto copy_op = c10::Dispatcher::singleton()
                                    .findSchemaOrThrow("cudasteps::copy", "")
                                    .typed<at::Tensor(const at::Tensor&)>();
    src = copy_op.call(input);
  }
  const int64_t M = K == 0 ? 0 : src.numel() / K;
  if (K == 0) {
    int64_t rows = 1;
    for (int64_t d = 0; d < input.dim() - 1; ++d) rows *= input.size(d);
    return src.reshape({rows, 0});
  }
  return src.view({M, K});
}

// The shape of linear's output: input.shape[:-1] + [N].
inline std::vector<int64_t> linear_out_shape(const at::Tensor& input, int64_t N) {
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end() - 1);
  shape.push_back(N);
  return shape;
}

}  // namespace gemm
}  // namespace cudasteps
