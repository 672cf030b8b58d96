// CPU elementwise kernels: bias_act (+ backward, and the _amax forms of both), add, mul,
// sum_leading.
//
// bias_act and sum_leading make their inputs contiguous and view them as (rows, cols) with cols the
// last dimension; per-feature vectors (bias) index by column. add/mul follow the plan of binary.h:
// flat, flat-with-value and row-vector loops for dense operands, a strided loop (0 strides on
// broadcast dims) for the rest, reading every operand in place. Math is in fp32 (fp64 for double inputs).
// Column sums (grad_bias, sum_leading) are parallel over column chunks, each chunk summing its rows
// in order, so the result is deterministic for any thread count.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <memory>

#include "common/strided_tensors.h"
#include "elementwise/binary.h"
#include "elementwise/elementwise.h"
#include "fp8/fp8.h"  // abs_max: the amax the _amax ops return

namespace cudasteps {
namespace elementwise {
namespace {

// Elements per parallel task: below this, thread start-up costs more than the work.
constexpr int64_t kMinElemsPerTask = 32 * 1024;
// Columns per task of a column sum: a chunk of 64 fp32 partials stays in L1 while rows stream.
constexpr int64_t kColsPerTask = 64;

// Reads element i of a per-feature vector that is either of type T or fp32.
template <typename T, typename Acc>
inline Acc load_vec(const void* v, bool v_is_float, int64_t i) {
  return v_is_float ? Acc(static_cast<const float*>(v)[i]) : Acc(static_cast<const T*>(v)[i]);
}

// The per-feature vector v (type T or fp32; null means zeros) converted to Acc once. (An array,
// not a std::vector: Acc may be bool.)
template <typename T, typename Acc>
std::unique_ptr<Acc[]> feature_values(const void* v, bool v_is_float, int64_t cols) {
  std::unique_ptr<Acc[]> vals(new Acc[cols]);
  for (int64_t c = 0; c < cols; ++c) vals[c] = v != nullptr ? load_vec<T, Acc>(v, v_is_float, c) : Acc(0);
  return vals;
}

// out[r, c] = op(a[r, c], v[c]) with v a per-feature vector (or 0 when v is null).
template <typename T, typename Op>
void rowvec_cpu(const T* a, const void* v, bool v_is_float, T* out, int64_t rows, int64_t cols,
                Op op) {
  using Acc = at::opmath_type<T>;
  if (v == nullptr) {  // no vector: parallel over elements, not rows
    at::parallel_for(0, rows * cols, kMinElemsPerTask, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = T(op(Acc(a[i]), Acc(0)));
    });
    return;
  }
  const std::unique_ptr<Acc[]> vals = feature_values<T, Acc>(v, v_is_float, cols);
  const Acc* vb = vals.get();
  at::parallel_for(0, rows, std::max<int64_t>(1, kMinElemsPerTask / cols), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* ar = a + r * cols;
      T* outr = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) outr[c] = T(op(Acc(ar[c]), vb[c]));
    }
  });
}

// out[i] = op(a[i], b[i]) over numel elements (same shape).
template <typename T, typename Op>
void flat_cpu(const T* a, const T* b, T* out, int64_t numel, Op op) {
  using Acc = at::opmath_type<T>;
  at::parallel_for(0, numel, kMinElemsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = T(op(Acc(a[i]), Acc(b[i])));
  });
}

// d[r, c] = op(g[r, c], a[r, c] (1 without a), v[c]); writes d to out when kWriteOut and, when
// sum_out is given, sum_out[c] = scale * sum_r d[r, c] rounded to SumT.
template <bool kHasA, bool kWriteOut, typename T, typename SumT, typename Op>
void grad_cpu(const T* g, const T* a, const void* v, bool v_is_float, T* out, SumT* sum_out,
              double scale, int64_t rows, int64_t cols, Op op) {
  using Acc = at::opmath_type<T>;
  // Without v, one chunk's worth of zeros serves every chunk.
  const std::unique_ptr<Acc[]> vals =
      feature_values<T, Acc>(v, v_is_float, v != nullptr ? cols : kColsPerTask);
  const int64_t n_chunks = (cols + kColsPerTask - 1) / kColsPerTask;
  const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / std::max<int64_t>(1, rows * kColsPerTask));
  at::parallel_for(0, n_chunks, grain, [&](int64_t cb, int64_t ce) {
    Acc acc[kColsPerTask];
    for (int64_t chunk = cb; chunk < ce; ++chunk) {
      const int64_t c0 = chunk * kColsPerTask;
      const int64_t width = std::min(kColsPerTask, cols - c0);
      const Acc* vb = vals.get() + (v != nullptr ? c0 : 0);
      for (int64_t k = 0; k < width; ++k) acc[k] = Acc(0);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * cols + c0;
        for (int64_t k = 0; k < width; ++k) {
          const Acc d = op(Acc(g[base + k]), kHasA ? Acc(a[base + k]) : Acc(1), vb[k]);
          if constexpr (kWriteOut) out[base + k] = T(d);
          acc[k] += d;
        }
      }
      if (sum_out != nullptr) {
        for (int64_t k = 0; k < width; ++k) sum_out[c0 + k] = SumT(acc[k] * Acc(scale));
      }
    }
  });
}

#define CUDASTEPS_FLOAT_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, NAME, __VA_ARGS__)

at::Tensor bias_act_cpu_op(const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
                           c10::string_view act_name, const char* op_name) {
  const Act act = check_bias_act_args(x_in, bias_in, act_name, op_name);
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.has_value() ? bias_in->contiguous() : at::Tensor();
  const void* v = bias.defined() ? bias.const_data_ptr() : nullptr;
  const bool v_is_float = bias.defined() && bias.scalar_type() == at::kFloat;
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_cpu", [&] {
    dispatch_act(act, [&](auto a) {
      rowvec_cpu<scalar_t>(x.const_data_ptr<scalar_t>(), v, v_is_float, out.data_ptr<scalar_t>(),
                           num_rows(x), num_cols(x),
                           BiasActOpFor<decltype(a)::value, scalar_t>{});
    });
  });
  return out;
}

at::Tensor bias_act_cpu(const at::Tensor& x, const c10::optional<at::Tensor>& bias,
                        c10::string_view act) {
  return bias_act_cpu_op(x, bias, act, "bias_act");
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_cpu_op(
    const at::Tensor& grad_in, const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
    c10::string_view act_name, const char* op_name) {
  const Act act = check_bias_act_backward_args(grad_in, x_in, bias_in, act_name, op_name);
  at::Tensor grad_x =
      at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  c10::optional<at::Tensor> grad_bias;
  if (bias_in.has_value()) grad_bias = at::zeros(bias_in->sizes(), bias_in->options());
  if (x_in.numel() == 0) return {grad_x, grad_bias};
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor bias = bias_in.has_value() ? bias_in->contiguous() : at::Tensor();
  const void* v = bias.defined() ? bias.const_data_ptr() : nullptr;
  const bool v_is_float = bias.defined() && bias.scalar_type() == at::kFloat;
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_backward_cpu", [&] {
    dispatch_act(act, [&](auto a) {
      const BiasActGradOpFor<decltype(a)::value, scalar_t> op{};
      const int64_t rows = num_rows(x), cols = num_cols(x);
      if (!grad_bias.has_value()) {
        grad_cpu<true, true, scalar_t, float>(grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                                  nullptr, false, grad_x.data_ptr<scalar_t>(), nullptr, 1.0, 1,
                                  x.numel(), op);  // no column sum: one long row
      } else if (v_is_float) {
        grad_cpu<true, true, scalar_t, float>(grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), v,
                                  true, grad_x.data_ptr<scalar_t>(), grad_bias->data_ptr<float>(),
                                  1.0, rows, cols, op);
      } else {
        grad_cpu<true, true, scalar_t, scalar_t>(grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                                     v, false, grad_x.data_ptr<scalar_t>(),
                                     grad_bias->data_ptr<scalar_t>(), 1.0, rows, cols, op);
      }
    });
  });
  return {grad_x, grad_bias};
}

std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_cpu(
    const at::Tensor& grad, const at::Tensor& x, const c10::optional<at::Tensor>& bias,
    c10::string_view act) {
  return bias_act_backward_cpu_op(grad, x, bias, act, "bias_act_backward");
}

// The _amax forms: the op, then the amax of its first output (the reference the CUDA kernels,
// which take it in the same pass, match bit for bit: the max of the values written is exact).
std::tuple<at::Tensor, at::Tensor> bias_act_amax_cpu(const at::Tensor& x,
                                                     const c10::optional<at::Tensor>& bias,
                                                     c10::string_view act) {
  constexpr const char* op = "bias_act_amax";
  check_amax_input(x, op);
  at::Tensor out = bias_act_cpu_op(x, bias, act, op);
  at::Tensor amax = fp8::abs_max(out);
  return {out, amax};
}

std::tuple<at::Tensor, c10::optional<at::Tensor>, at::Tensor> bias_act_backward_amax_cpu(
    const at::Tensor& grad, const at::Tensor& x, const c10::optional<at::Tensor>& bias,
    c10::string_view act) {
  constexpr const char* op = "bias_act_backward_amax";
  check_amax_input(x, op);
  auto [grad_x, grad_bias] = bias_act_backward_cpu_op(grad, x, bias, act, op);
  at::Tensor amax = fp8::abs_max(grad_x);
  return {grad_x, grad_bias, amax};
}

// out[i] = op(x[i], unused) over numel elements (a dense operand and a host value).
template <typename T, typename Op>
void flat_value_cpu(const T* x, T* out, int64_t numel, Op op) {
  using Acc = at::opmath_type<T>;
  at::parallel_for(0, numel, kMinElemsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = T(op(Acc(x[i]), Acc(0)));
  });
}

// out (contiguous, shape `shape`) = op(a, b) for two strided views of that shape (0 strides on
// broadcast dims). Each task decomposes its first index once and then steps a multi-index.
template <typename T, typename Op>
void strided_cpu(const at::Tensor& a_view, const at::Tensor& b_view, T* out, Op op, const char* name) {
  using Acc = at::opmath_type<T>;
  const StridedPair p = make_strided_pair(a_view, b_view, name);
  const T* a = a_view.const_data_ptr<T>();
  const T* b = b_view.const_data_ptr<T>();
  const int64_t numel = a_view.numel();
  const int nd = p.ndim;
  const int64_t inner = p.sizes[nd - 1];
  const int64_t sa = p.out_strides[nd - 1], sb = p.in_strides[nd - 1];
  at::parallel_for(0, numel, kMinElemsPerTask, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxStridedDims];
    int64_t rest = begin;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rest % p.sizes[d];
      rest /= p.sizes[d];
    }
    int64_t i = begin;
    while (i < end) {
      int64_t oa = 0, ob = 0;
      for (int d = 0; d < nd - 1; ++d) {
        oa += idx[d] * p.out_strides[d];
        ob += idx[d] * p.in_strides[d];
      }
      const int64_t run = std::min(inner - idx[nd - 1], end - i);
      for (int64_t k = 0; k < run; ++k) {
        const int64_t c = idx[nd - 1] + k;
        out[i + k] = T(op(Acc(a[oa + c * sa]), Acc(b[ob + c * sb])));
      }
      i += run;
      idx[nd - 1] = 0;
      for (int d = nd - 2; d >= 0; --d) {  // carry into the outer dims
        if (++idx[d] < p.sizes[d]) break;
        idx[d] = 0;
      }
    }
  });
}

// Every dtype add/mul take: floating (fp32 math for half/bf16), integers and bool.
#define CUDASTEPS_BINARY_TYPES(TYPE, NAME, ...)                                                 \
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, TYPE, NAME, __VA_ARGS__)

// Runs `op` (a functor over the math type Acc) on the plan's operands into a new contiguous
// tensor of the broadcast shape and result dtype.
template <typename MakeOp>
at::Tensor run_binary_cpu(const BinaryPlan& plan, const char* name, MakeOp make_op) {
  at::Tensor out = at::empty(plan.shape, at::TensorOptions().dtype(plan.dtype).device(plan.device));
  if (plan.path == BinaryPath::kEmpty) return out;
  const at::Tensor& a = plan.self.tensor;
  const at::Tensor& b = plan.other.tensor;
  CUDASTEPS_BINARY_TYPES(plan.dtype, "binary_cpu", [&] {
    using Acc = at::opmath_type<scalar_t>;
    const auto op = make_op(Acc{});
    scalar_t* o = out.data_ptr<scalar_t>();
    switch (plan.path) {
      case BinaryPath::kFlat:
        flat_cpu<scalar_t>(a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), o, plan.numel, op);
        return;
      case BinaryPath::kFlatValue:
        if (plan.other.is_value()) {
          flat_value_cpu<scalar_t>(a.const_data_ptr<scalar_t>(), o, plan.numel,
                                   ValueRightOp<decltype(op), Acc>{op, scalar_to<Acc>(plan.other.value)});
        } else {
          flat_value_cpu<scalar_t>(b.const_data_ptr<scalar_t>(), o, plan.numel,
                                   ValueLeftOp<decltype(op), Acc>{op, scalar_to<Acc>(plan.self.value)});
        }
        return;
      case BinaryPath::kRowVec:
        rowvec_cpu<scalar_t>(a.const_data_ptr<scalar_t>(), b.const_data_ptr(), false, o, plan.rows,
                             plan.cols, op);
        return;
      case BinaryPath::kVecRow:
        rowvec_cpu<scalar_t>(b.const_data_ptr<scalar_t>(), a.const_data_ptr(), false, o, plan.rows,
                             plan.cols, SwappedOp<decltype(op)>{op});
        return;
      case BinaryPath::kFlatDeviceOther:  // CUDA paths (choose_path): any other plan is strided
      case BinaryPath::kFlatDeviceSelf:
      case BinaryPath::kStrided:
        if (plan.other.is_value()) {
          strided_cpu<scalar_t>(
              a, a, o, ValueRightOp<decltype(op), Acc>{op, scalar_to<Acc>(plan.other.value)}, name);
        } else if (plan.self.is_value()) {
          strided_cpu<scalar_t>(
              b, b, o, ValueLeftOp<decltype(op), Acc>{op, scalar_to<Acc>(plan.self.value)}, name);
        } else {
          strided_cpu<scalar_t>(a, b, o, op, name);
        }
        return;
      case BinaryPath::kEmpty: return;
    }
  });
  return out;
}

at::Tensor add_plan_cpu(const BinaryPlan& plan, const at::Scalar& alpha) {
  check_alpha(alpha, plan.dtype, "add");
  return run_binary_cpu(plan, "add", [&](auto acc) {
    using Acc = decltype(acc);
    return AddOp<Acc>{scalar_to<Acc>(alpha)};
  });
}

at::Tensor add_cpu(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return add_plan_cpu(plan_binary(self, other, "add"), alpha);
}

at::Tensor add_scalar_cpu(const at::Tensor& self, const at::Scalar& other, const at::Scalar& alpha) {
  return add_plan_cpu(plan_binary(self, other, "add"), alpha);
}

at::Tensor mul_cpu(const at::Tensor& self, const at::Tensor& other) {
  return run_binary_cpu(plan_binary(self, other, "mul"), "mul", [](auto) { return MulOp{}; });
}

at::Tensor mul_scalar_cpu(const at::Tensor& self, const at::Scalar& other) {
  return run_binary_cpu(plan_binary(self, other, "mul"), "mul", [](auto) { return MulOp{}; });
}

at::Tensor sum_leading_cpu(const at::Tensor& self_in, const c10::optional<at::Tensor>& other_in,
                           double alpha, c10::optional<at::ScalarType> dtype) {
  check_sum_leading_args(self_in, other_in);
  const at::ScalarType out_dtype = sum_leading_dtype(self_in, dtype);
  const int64_t cols = self_in.size(-1);
  at::Tensor out = at::zeros({cols}, self_in.options().dtype(out_dtype));
  if (self_in.numel() == 0) return out;
  const at::Tensor self = self_in.contiguous();
  const at::Tensor other = other_in.has_value() ? other_in->contiguous() : at::Tensor();
  at::Tensor sum32 = at::empty({cols}, self.options().dtype(at::toOpMathType(self.scalar_type())));
  CUDASTEPS_FLOAT_TYPES(self.scalar_type(), "sum_leading_cpu", [&] {
    using Acc = at::opmath_type<scalar_t>;
    const int64_t rows = num_rows(self);
    if (other.defined()) {
      grad_cpu<true, false, scalar_t, Acc>(self.const_data_ptr<scalar_t>(), other.const_data_ptr<scalar_t>(),
                              nullptr, false, nullptr, sum32.data_ptr<Acc>(), alpha, rows, cols,
                              ProductOp<true>{});
    } else {
      grad_cpu<false, false, scalar_t, Acc>(self.const_data_ptr<scalar_t>(), nullptr, nullptr, false, nullptr,
                              sum32.data_ptr<Acc>(), alpha, rows, cols, ProductOp<false>{});
    }
  });
  out.copy_(sum32);
  return out;
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("bias_act", &elementwise::bias_act_cpu);
  m.impl("bias_act_backward", &elementwise::bias_act_backward_cpu);
  m.impl("bias_act_amax", &elementwise::bias_act_amax_cpu);
  m.impl("bias_act_backward_amax", &elementwise::bias_act_backward_amax_cpu);
  m.impl("add", &elementwise::add_cpu);
  m.impl("add.Scalar", &elementwise::add_scalar_cpu);
  m.impl("mul", &elementwise::mul_cpu);
  m.impl("mul.Scalar", &elementwise::mul_scalar_cpu);
  m.impl("sum_leading", &elementwise::sum_leading_cpu);
}

}  // namespace cudasteps
