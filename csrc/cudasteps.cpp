// The op surface of cudasteps: every schema in one place (like vLLM's torch_bindings.cpp).
//
// Implementations register themselves at the bottom of their own files:
//   csrc/<family>/<family>_cpu.cpp       TORCH_LIBRARY_IMPL(cudasteps, CPU, m)
//   csrc/<family>/<family>_cuda.cu       TORCH_LIBRARY_IMPL(cudasteps, CUDA, m)
//   csrc/<family>/<family>_autograd.cpp  TORCH_LIBRARY_IMPL(cudasteps, Autograd, m)
// Fake (meta) kernels live in Python: torch_ops/cudasteps/<family>.py.
//
// ladder_* ops run one named step of a family's optimization ladder (CUDA only). They exist for
// the benchmarks and tests that show what each step buys; models use the plain ops.

#include <Python.h>
#include <torch/library.h>

TORCH_LIBRARY(cudasteps, m) {
  // ---- copy (csrc/copy) ----
  m.def("copy(Tensor self) -> Tensor");
  // Mutating ops return nothing: functionalization (torch.compile, opcheck) rejects custom ops
  // whose outputs alias an input. The Python wrappers return the mutated tensor. The mutated
  // argument is `out`, not `self`: torch.library warns that a `self` argument of a custom op can
  // be parsed ambiguously (the method-call self of a Tensor method).
  m.def("copy_(Tensor(a!) out, Tensor src) -> ()");
  m.def("ladder_copy(Tensor self, str variant) -> Tensor");

  // ---- transpose (csrc/transpose) ----
  m.def("transpose(Tensor self) -> Tensor");
  m.def("transpose_(Tensor(a!) out, Tensor src) -> ()");
  m.def("ladder_transpose(Tensor self, str variant) -> Tensor");

  // ---- reduce (csrc/reduce) ----
  m.def("sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  m.def("ladder_sum(Tensor self, str variant) -> Tensor");

  // ---- gemm (csrc/gemm) ----
  m.def("mm(Tensor self, Tensor mat2) -> Tensor");
  // As aten's mm.dtype: out_dtype self's dtype, or float32 for bf16/fp16 operands (the fp32
  // accumulators written unrounded).
  m.def("mm.dtype(Tensor self, Tensor mat2, ScalarType out_dtype) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  // linear with input, weight and bias cast to `dtype` first (what autocast runs: its kernel calls
  // this with the parameters uncast), the output in `dtype`; the gradients come back in each
  // argument's own dtype, a float32 weight's and input's written so by the backward's GEMMs
  // (mm.dtype), with no cast pass after them.
  m.def("linear.dtype(Tensor input, Tensor weight, Tensor? bias, ScalarType dtype) -> Tensor");
  m.def("ladder_mm(Tensor self, Tensor mat2, str variant) -> Tensor");
  // act(input @ weight.t() + bias); _aux also returns input @ weight.t() (before the bias), what
  // the backward reads: the op autograd records for linear_act. The ladder's steps return both.
  m.def("linear_act(Tensor input, Tensor weight, Tensor? bias=None, str act=\"gelu\") -> Tensor");
  m.def("linear_act_aux(Tensor input, Tensor weight, Tensor? bias, str act) -> (Tensor, Tensor)");
  // input and weight cast to `dtype` first (bias as given: it may stay float32), as linear.dtype:
  // what autocast runs.
  m.def(
      "linear_act.dtype(Tensor input, Tensor weight, Tensor? bias, str act, ScalarType dtype) -> "
      "Tensor");
  m.def(
      "ladder_linear_act(Tensor input, Tensor weight, Tensor? bias, str act, str variant) -> "
      "(Tensor, Tensor)");
  // bias_act_backward(grad @ weight, x, bias, act): the gradient of bias_act's input x where its
  // output fed a linear of `weight`; not differentiable.
  m.def(
      "mm_bias_act_backward(Tensor grad, Tensor weight, Tensor x, Tensor? bias, str act) -> "
      "(Tensor, Tensor?)");
  // One step of mm_bias_act_backward's ladder (two_pass; fused: the derivative and the bias
  // gradient's column sums in the Hopper GEMM's epilogue), CUDA.
  m.def(
      "ladder_mm_bias_act_backward(Tensor grad, Tensor weight, Tensor x, Tensor? bias, str act, "
      "str variant) -> (Tensor, Tensor?)");
  // linear(linear_act(input, weight1, bias1, act), weight2, bias2): an FFN block as one autograd
  // node, whose backward runs mm_bias_act_backward.
  m.def(
      "linear_act_linear(Tensor input, Tensor weight1, Tensor? bias1, Tensor weight2, "
      "Tensor? bias2, str act=\"gelu\") -> Tensor");
  // The same with input, weight1, weight2 and bias2 cast to `dtype` first (bias1 as given: it may
  // stay float32, as linear_act's), as linear.dtype: what autocast runs.
  m.def(
      "linear_act_linear.dtype(Tensor input, Tensor weight1, Tensor? bias1, Tensor weight2, "
      "Tensor? bias2, str act, ScalarType dtype) -> Tensor");
  // (scale_a * a) @ (scale_b * b) + bias for float8 a and b, as torch._scaled_mm, any shape.
  m.def(
      "scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias=None, "
      "ScalarType? out_dtype=None) -> Tensor");
  // scaled_mm's output and its range: float32 [max(0, max out), min(0, min out)], taken by the
  // kernel as it stores (what the FP8 MLP's hidden casts take their scales from).
  m.def(
      "scaled_mm_range(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias=None, "
      "ScalarType? out_dtype=None) -> (Tensor, Tensor)");
  // One step of scaled_mm's ladder (widen_tf32, fp8_ws), bf16 output (CUDA).
  m.def(
      "ladder_scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, str variant) -> "
      "Tensor");
  // input @ weight.t() + bias with both operands cast to FP8 (e4m3, per-tensor scales from their
  // amax), the output in out_dtype (default: input's); _aux also returns what the backward reads
  // (the FP8 transposes of input and weight, and their dequantization scales 1 / scale).
  // input_amax: input's amax where its producer took it (linear_act_fp8): input is read once.
  m.def(
      "linear_fp8(Tensor input, Tensor weight, Tensor? bias=None, ScalarType? out_dtype=None, *, "
      "Tensor? input_amax=None) -> Tensor");
  m.def(
      "linear_fp8_aux(Tensor input, Tensor weight, Tensor? bias, ScalarType? out_dtype, "
      "Tensor? input_amax) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
  // act(linear_fp8(input, weight) + bias) and its amax (what the next linear_fp8 takes as
  // input_amax), the amax taken in the bias-and-activation pass; the backward takes the output
  // gradient's amax in the pass of the activation's derivative the same way.
  m.def(
      "linear_act_fp8(Tensor input, Tensor weight, Tensor? bias=None, str act=\"gelu\", "
      "ScalarType? out_dtype=None, *, Tensor? input_amax=None) -> (Tensor, Tensor)");

  // An FP8 FFN block as one autograd node (linear_act_fp8, then linear_fp8), whose hidden tensors
  // stay in FP8: z and its range from scaled_mm_range, then act_cast_fp8; backward the same way.
  m.def(
      "linear_act_linear_fp8(Tensor input, Tensor weight1, Tensor? bias1, Tensor weight2, "
      "Tensor? bias2, str act=\"gelu\", ScalarType? out_dtype=None, *, Tensor? input_amax=None) "
      "-> Tensor");

  // ---- fp8 (csrc/fp8) ----
  // x cast to FP8 with a scale (saturating), its FP8 transpose (transpose=True), and max |x|.
  m.def(
      "cast_fp8(Tensor x, Tensor scale, ScalarType dtype, bool transpose=False) -> "
      "(Tensor, Tensor?, Tensor)");
  // x cast with its own dynamic scale (fp8 max / amax(x)): out, out_t as cast_fp8's, the
  // dequantization scale 1 / scale, and amax; amax, where given (x's producer took it), is used
  // instead of a pass over x.
  m.def(
      "cast_fp8_dynamic(Tensor x, ScalarType dtype, bool transpose=False, Tensor? amax=None) -> "
      "(Tensor, Tensor?, Tensor, Tensor)");
  // The FP8 MLP's hidden casts, one pass each (csrc/fp8/act_cast.cpp): act(x), and
  // grad * act'(x) with its column sums, cast with a scale bounded from the range of x (of grad)
  // that scaled_mm_range took: (out, out_t, scale_inv[, grad_bias]).
  m.def("act_cast_fp8(Tensor x, Tensor x_range, str act, ScalarType dtype) -> (Tensor, Tensor, Tensor)");
  m.def(
      "act_grad_cast_fp8(Tensor grad, Tensor grad_range, Tensor x, str act, ScalarType dtype, "
      "bool bias_grad) -> (Tensor, Tensor, Tensor, Tensor?)");
  // One step of cast_fp8's ladder (tile32, vec16, vec16_prefetch), CUDA.
  m.def(
      "ladder_cast_fp8(Tensor x, Tensor scale, ScalarType dtype, bool transpose, str variant) -> "
      "(Tensor, Tensor?, Tensor)");

  // ---- elementwise (csrc/elementwise) ----
  m.def("bias_act(Tensor x, Tensor? bias, str act=\"none\") -> Tensor");
  m.def("bias_act_backward(Tensor grad, Tensor x, Tensor? bias, str act) -> (Tensor, Tensor?)");
  // The same, each also returning the amax (max |.|, float32) of its first output, taken in the
  // same pass: what an FP8 cast of that output needs for its dynamic scale (linear_act_fp8).
  m.def("bias_act_amax(Tensor x, Tensor? bias, str act) -> (Tensor, Tensor)");
  m.def(
      "bias_act_backward_amax(Tensor grad, Tensor x, Tensor? bias, str act) -> "
      "(Tensor, Tensor?, Tensor)");
  // add/mul follow torch.add/torch.mul (aten's add.Tensor / add.Scalar ...): broadcasting, type
  // promotion, 0-dim CPU tensors with tensors of any device.
  m.def("add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  m.def("add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor");
  m.def("mul(Tensor self, Tensor other) -> Tensor");
  m.def("mul.Scalar(Tensor self, Scalar other) -> Tensor");
  m.def("ladder_bias_act(Tensor x, Tensor? bias, str act, str variant) -> Tensor");
  // alpha * sum over all dims but the last of self (* other): the per-feature gradient of add/mul.
  m.def("sum_leading(Tensor self, Tensor? other=None, *, float alpha=1., ScalarType? dtype=None) -> Tensor");
}

// `import cudasteps._C` runs the static initialisers above (the registrations). The module itself
// is empty; it uses only the limited C API so that one build serves every CPython >= 3.9 (abi3).
extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef cudasteps_module = {
      PyModuleDef_HEAD_INIT,
      "_C",     // name
      nullptr,  // doc
      -1,       // no per-interpreter state
      nullptr,  // no methods: everything is reached through torch.ops.cudasteps
      nullptr,  // slots
      nullptr,  // traverse
      nullptr,  // clear
      nullptr,  // free
  };
  return PyModule_Create(&cudasteps_module);
}
