// The elementwise family's functors, shared by its CPU kernels (elementwise_cpu.cpp) and its CUDA
// kernels (kernels.cuh, binary_kernels.cuh): the activations (forward and derivative, evaluated in
// fp32, or fp64 for double inputs), the binary ops of add/mul and the adapters that feed them to the
// one-input kernels, so that both backends compute the same functions. Light on purpose (c10's
// Half and BFloat16, nothing of ATen): the CUDA kernel units include it, and ATen's headers would
// cost each of them about 20 s of compile time. The argument checks are host code, elementwise.h.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/strided.h"  // CUDASTEPS_HOST_DEVICE

namespace cudasteps {
namespace elementwise {

// The math type of data of type T, as ATen's at::opmath_type (ATen/OpMathType.h, whose header
// pulls in c10/core): float for fp16/bf16, T itself otherwise. Same name, so the same types and
// the same demangled kernel names; the host units check that both agree for every dispatched type.
template <typename T>
struct OpMathType {
  using type = T;
};
template <>
struct OpMathType<c10::Half> {
  using type = float;
};
template <>
struct OpMathType<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_type = typename OpMathType<T>::type;

// ---- math in the accumulation type (float for fp32/fp16/bf16, double for fp64) ------------------

CUDASTEPS_HOST_DEVICE float math_erf(float v) { return erff(v); }
CUDASTEPS_HOST_DEVICE double math_erf(double v) { return erf(v); }
CUDASTEPS_HOST_DEVICE float math_exp(float v) { return expf(v); }
CUDASTEPS_HOST_DEVICE double math_exp(double v) { return exp(v); }
CUDASTEPS_HOST_DEVICE float math_tanh(float v) { return tanhf(v); }
CUDASTEPS_HOST_DEVICE double math_tanh(double v) { return tanh(v); }
// a / b. On the GPU the fp32 division is __fdividef (2 ulp; no IEEE slow-path subroutine, which
// showed up in ptxas -v as a stack frame in the silu kernels). Its one deviation, 0 for
// 2^126 < |b|, is also the right answer where silu uses it: z / (1 + exp(-z)) with exp(-z) huge.
CUDASTEPS_HOST_DEVICE float math_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
CUDASTEPS_HOST_DEVICE double math_div(double a, double b) { return a / b; }
// a * b + c rounded once, the same on both backends (FFMA on the GPU).
CUDASTEPS_HOST_DEVICE float fma_f32(float a, float b, float c) { return fmaf(a, b, c); }

// The activations. Each has value(z) = act(z) and deriv(z) = act'(z). Constants are those of
// PyTorch's own kernels (aten/src/ATen/native/cuda/ActivationGeluKernel.cu), so results match
// F.gelu / F.silu / F.relu up to rounding.
enum class Act { kNone, kRelu, kGelu, kGeluTanh, kSilu };

template <Act A>
struct ActFn;

template <>
struct ActFn<Act::kNone> {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc value(Acc z) { return z; }
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc deriv(Acc) { return Acc(1); }
};

template <>
struct ActFn<Act::kRelu> {
  // `z < 0 ? 0 : z` keeps NaN (the comparison is false), like torch.relu.
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc value(Acc z) { return z < Acc(0) ? Acc(0) : z; }
  // threshold_backward: the gradient passes where z > 0.
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc deriv(Acc z) { return z > Acc(0) ? Acc(1) : Acc(0); }
};

template <>
struct ActFn<Act::kGelu> {
  // 0.5 * z * (1 + erf(z / sqrt(2)))
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc value(Acc z) {
    constexpr Acc kInvSqrt2 = Acc(0.70710678118654752440);
    return Acc(0.5) * z * (Acc(1) + math_erf(z * kInvSqrt2));
  }
  // Phi(z) + z * phi(z), phi the standard normal density.
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc deriv(Acc z) {
    constexpr Acc kInvSqrt2 = Acc(0.70710678118654752440);
    constexpr Acc kInvSqrt2Pi = Acc(0.39894228040143267794);
    const Acc cdf = Acc(0.5) * (Acc(1) + math_erf(z * kInvSqrt2));
    const Acc pdf = math_exp(Acc(-0.5) * z * z) * kInvSqrt2Pi;
    return cdf + z * pdf;
  }
};

// gelu and its derivative for fp16 and bf16 data, whose results are rounded to 11 and 8 bits (both
// backends). Both come from the upper tail Q(t) = 1 - Phi(t) of the standard normal, t = |z|:
//   gelu(z) = z * Phi(z) = max(z, 0) - t * Q(t),
//   gelu'(z) = Phi(z) + z * phi(z) = z > 0 ? 1 - R(t) : R(t),   R(t) = Q(t) - t * phi(t),
// with Q(t) = exp(-t^2 / 2) * s * G(s), s = 1 / (1 + kC t): G is the Mills ratio Q / phi times
// (1 + kC t) / sqrt(2 pi), a smooth function of s in (0, 1] that a 6th-degree polynomial fits to a
// relative error of 6.5e-7 for t in [0, 14] (beyond, exp(-t^2 / 2) underflows fp32);
// scripts/fit_gelu.py makes and checks the fit. Per element that is one reciprocal, one exp2 and
// 6 fmas, with no branch and no cancellation in either tail. In fp32 the value is within 8e-6 of
// float64 (relative; the rounding of the exp2 argument, at t = 12), 2.2e-6 for |z| < 6 and 9e-7
// for |z| < 1; the derivative within 7.3e-6, 1.6e-6 and 7.8e-7. torch's formula,
// 0.5 * z * (1 + erff(z / sqrt(2))), cancels to 0 for z < -5.5 in fp32, and erff costs two
// coefficient sets (a select per coefficient). The count matters most in the GEMM's fused epilogue
// (gemm/tc/sm90/epilogue.cuh), whose time there grows with its instructions: the value is 16
// instructions (8th-degree fit and a select: 19). Measured on an H100 (bf16 8192 x 8192, make
// bench): forward 0.095 ms (94% of copy bandwidth) against 0.102 ms with the 8th-degree fit and
// 0.107 ms with erff; forward + backward 0.243 ms, 0.248 ms with the 8th-degree fit, 0.268 ms
// with the fit before it (erfc as t exp(-a^2 + P(t)): two exponentials and a reciprocal).
// fp32 and fp64 data keep ActFn<kGelu>, torch's own formula.
struct FastGelu {
  // 1 / v for v >= 1 and 2^v, each one MUFU instruction on the GPU (rcp/ex2.approx.ftz, 1-2 ulp).
  // The library's 1 / v and exp2f add range checks and scalings (for denormal inputs and results)
  // that cost 4 instructions per element here: 2^v flushes to 0 below 2^-126, where Q(t) is
  // itself below fp32's normal range (t > 13.2).
  CUDASTEPS_HOST_DEVICE static float fast_rcp(float v) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return 1.0f / v;
#endif
  }
  CUDASTEPS_HOST_DEVICE static float fast_exp2(float v) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return exp2f(v);
#endif
  }
  // Q(t) = e * sg: e = exp(-t^2 / 2), sg = s * G(s), for N values of t at once, each step over
  // all N before the next (the GEMM epilogue passes the 8 values of one stmatrix). Measured there,
  // that order and one value's chain at a time took the same time: what the epilogue pays for is
  // its instruction count (gemm/tc/sm90/epilogue.cuh), not these chains' latency.
  template <int N>
  CUDASTEPS_HOST_DEVICE static void tails(const float (&t)[N], float (&e)[N], float (&sg)[N]) {
    constexpr float kC = 0.265f;
    constexpr int kTerms = 7;  // G's coefficients, highest power first (scripts/fit_gelu.py)
    constexpr float kG[kTerms] = {-6.778617203e-02f, 1.952697039e-01f, -6.635726988e-02f,
                                  1.424882859e-01f,  8.294910938e-02f, 1.078361273e-01f,
                                  1.055999026e-01f};
    float s[N], g[N];
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) s[i] = fast_rcp(fma_f32(kC, t[i], 1.0f));
    constexpr float kHalfLog2e = -0.72134752044448170368f;  // -log2(e) / 2
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) e[i] = fast_exp2(t[i] * t[i] * kHalfLog2e);
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) g[i] = kG[0];
    CUDASTEPS_UNROLL for (int c = 1; c < kTerms; ++c) {
      CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) g[i] = fma_f32(g[i], s[i], kG[c]);
    }
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) sg[i] = s[i] * g[i];
  }
  // gelu(z) for N values in place.
  template <int N>
  CUDASTEPS_HOST_DEVICE static void values(float (&z)[N]) {
    float t[N], e[N], sg[N];
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) t[i] = fabsf(z[i]);
    tails<N>(t, e, sg);
    // z (1 - Q) for z > 0 and z Q below are max(z, 0) - |z| Q: two min/max and an fma, not a
    // subtraction, a compare, a select and a product. |z| is capped at 16, where Q is 0 anyway, so
    // that gelu(inf) = inf (not inf * 0); gelu(-inf) = 0, its limit (torch's formula gives NaN).
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) {
      z[i] = fma_f32(-fminf(t[i], 16.0f), e[i] * sg[i], fmaxf(z[i], 0.0f));
    }
  }
  CUDASTEPS_HOST_DEVICE static float deriv(float z) {
    constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
    const float t[1] = {z < 0.0f ? -z : z};
    float e[1], sg[1];
    tails<1>(t, e, sg);
    const float r = e[0] * fma_f32(t[0], -kInvSqrt2Pi, sg[0]);  // Q(t) - t phi(t)
    return z > 0.0f ? 1.0f - r : r;
  }
};

template <>
struct ActFn<Act::kGeluTanh> {
  // 0.5 * z * (1 + tanh(sqrt(2/pi) * (z + 0.044715 z^3)))
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc value(Acc z) {
    constexpr Acc kBeta = Acc(0.79788456080286535588);  // sqrt(2 / pi)
    constexpr Acc kKappa = Acc(0.044715);
    const Acc inner = kBeta * (z + kKappa * z * z * z);
    return Acc(0.5) * z * (Acc(1) + math_tanh(inner));
  }
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc deriv(Acc z) {
    constexpr Acc kBeta = Acc(0.79788456080286535588);
    constexpr Acc kKappa = Acc(0.044715);
    const Acc z2 = z * z;
    const Acc t = math_tanh(kBeta * (z + kKappa * z2 * z));
    const Acc left = Acc(0.5) * z;
    const Acc right = Acc(1) + t;
    const Acc inner_deriv = kBeta * (Acc(1) + Acc(3) * kKappa * z2);
    return Acc(0.5) * right + left * (Acc(1) - t * t) * inner_deriv;
  }
};

// gelu_tanh and its derivative for fp16 and bf16 data, as z * sigmoid(2u),
// u = sqrt(2/pi) (z + 0.044715 z^3): 0.5 (1 + tanh(u)) is sigmoid(2u) = 1 / (1 + e), e = exp(-2u),
// which is one exp2 and one reciprocal (MUFU instructions) and 5 fp32 operations, with no branch
// and no cancellation in the lower tail, where 1 + tanh(u) cancels (tanhf itself is ~20
// instructions with a branch). Within 1e-5 (relative) of float64 for |z| < 9 (1e-6 for |z| < 4),
// so fp16/bf16 results are those of torch's formula up to rounding.
// Derivative: s + z s (1 - s) 2u', with 1 - s = e s computed without cancellation.
struct FastGeluTanh {
  // -2 log2(e) sqrt(2/pi) and its multiple by 0.044715: 2^(z (kA + kB z^2)) = exp(-2u).
  static constexpr float kA = -2.3022082f;
  static constexpr float kB = -0.10294324f;
  template <int N>
  CUDASTEPS_HOST_DEVICE static void values(float (&z)[N]) {
    float e[N];
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) e[i] = z[i] * fma_f32(kB, z[i] * z[i], kA);
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) e[i] = FastGelu::fast_exp2(e[i]);
    // e = inf (z < -10): z * rcp(inf) = -0, as torch's formula gives there.
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) z[i] = z[i] * FastGelu::fast_rcp(1.0f + e[i]);
  }
  CUDASTEPS_HOST_DEVICE static float deriv(float z) {
    constexpr float kBeta2 = 1.5957691216057308f;  // 2 sqrt(2 / pi)
    constexpr float kBeta2Kappa3 = 0.21406445f;  // 2 sqrt(2 / pi) * 3 * 0.044715
    const float z2 = z * z;
    const float e = FastGelu::fast_exp2(z * fma_f32(kB, z2, kA));
    const float s = FastGelu::fast_rcp(1.0f + e);
    const float d = fma_f32(z * s * (e * s), fma_f32(kBeta2Kappa3, z2, kBeta2), s);
    // e = inf (z < -10) would make inf * 0 = NaN; the derivative is below 1e-35 there: 0, as
    // torch's formula gives. A NaN z keeps its NaN.
    return !(e > 3.0e38f) ? d : 0.0f;
  }
};

template <>
struct ActFn<Act::kSilu> {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc value(Acc z) { return math_div(z, Acc(1) + math_exp(-z)); }
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE static Acc deriv(Acc z) {
    const Acc s = math_div(Acc(1), Acc(1) + math_exp(-z));
    return s * (Acc(1) + z * (Acc(1) - s));
  }
};

// silu and its derivative for fp16 and bf16 data: z * s, s = 1 / (1 + e), e = exp(-z), as one
// exp2 and one reciprocal (MUFU) and 3 fp32 operations, where expf and the division take about 12
// (expf's range reduction). Derivative s (1 + z (1 - s)) with 1 - s = e s, no cancellation. Where
// 1 + e passes 2^126 (z < -87) the reciprocal flushes to 0, as ActFn<kSilu>'s __fdividef does.
struct FastSilu {
  static constexpr float kNegLog2e = -1.44269504088896340736f;
  template <int N>
  CUDASTEPS_HOST_DEVICE static void values(float (&z)[N]) {
    float e[N];
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) e[i] = FastGelu::fast_exp2(z[i] * kNegLog2e);
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) z[i] = z[i] * FastGelu::fast_rcp(1.0f + e[i]);
  }
  CUDASTEPS_HOST_DEVICE static float deriv(float z) {
    const float e = FastGelu::fast_exp2(z * kNegLog2e);
    const float s = FastGelu::fast_rcp(1.0f + e);
    // e = inf (z < -88.7) would make inf * 0 = NaN; the derivative is 0 there in fp32.
    return !(e > 3.0e38f) ? fma_f32(z * s, e * s, s) : 0.0f;
  }
};

// ---- binary functors: out = f(a, v), a an element of x/self, v of bias/other -------------------

// bias_act forward: act(a + v).
template <Act A>
struct BiasActOp {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc a, Acc v) const { return ActFn<A>::value(a + v); }
};

// Integer arithmetic of add/mul wraps around as torch's does, computed in an unsigned type of at
// least 32 bits: signed overflow would be undefined behaviour, and unsigned types narrower than
// int would be promoted to (signed) int first.
template <typename T>
using WrapInt = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;

// add: a + alpha * v (as torch.add: alpha scales `other`). Bool: a or (alpha and v).
template <typename Acc>
struct AddOp {
  Acc alpha;
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc a, Acc v) const {
    if constexpr (std::is_same<Acc, bool>::value) {
      return a || (alpha && v);
    } else if constexpr (std::is_integral<Acc>::value) {
      using U = WrapInt<Acc>;
      return static_cast<Acc>(static_cast<U>(a) + static_cast<U>(alpha) * static_cast<U>(v));
    } else {
      return a + alpha * v;
    }
  }
};

// mul: a * v. Bool: a and v.
struct MulOp {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc a, Acc v) const {
    if constexpr (std::is_same<Acc, bool>::value) {
      return a && v;
    } else if constexpr (std::is_integral<Acc>::value) {
      using U = WrapInt<Acc>;
      return static_cast<Acc>(static_cast<U>(a) * static_cast<U>(v));
    } else {
      return a * v;
    }
  }
};

// Adapters that turn a binary functor f(a, v) into the f(x, unused) shape of the one-input
// kernels: a host value on the right (tensor op value) or on the left (value op tensor), or the
// operands swapped (a per-feature `self` with a full `other`).
template <typename Op, typename Acc>
struct ValueRightOp {
  Op op;
  Acc value;
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc x, Acc) const { return op(x, value); }
};

template <typename Op, typename Acc>
struct ValueLeftOp {
  Op op;
  Acc value;
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc x, Acc) const { return op(value, x); }
};

// The other operand as one element in GPU memory (a 0-dim CUDA tensor), on the right (kRight) or
// the left of op. Kernels bind it (kernels.cuh, bind_operand: one load per thread) into
// ValueRightOp / ValueLeftOp before their loops.
template <typename Op, typename T, bool kRight>
struct DeviceValueOp {
  Op op;
  const T* value;
};

template <typename Op>
struct SwappedOp {
  Op op;
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc x, Acc v) const { return op(v, x); }
};

// ---- backward functors: d = f(g, a, v); written to grad_x (when the op has one) and summed per
// column into grad_bias ------------------------------------------------------------------------

// bias_act backward: g * act'(a + v).
template <Act A>
struct BiasActGradOp {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc g, Acc a, Acc v) const {
    return g * ActFn<A>::deriv(a + v);
  }
};

// The forward and backward ops with FastGelu, FastGeluTanh or FastSilu (fp16/bf16 data, fp32
// math): one value is their values<1>.
template <typename Fast>
struct BiasFastOp {
  CUDASTEPS_HOST_DEVICE float operator()(float a, float v) const {
    float z[1] = {a + v};
    Fast::template values<1>(z);
    return z[0];
  }
};
template <typename Fast>
struct BiasFastGradOp {
  CUDASTEPS_HOST_DEVICE float operator()(float g, float a, float v) const {
    return g * Fast::deriv(a + v);
  }
};

// The functors bias_act and its backward run for data of type T on both backends: for fp16 and bf16
// data FastGelu's value and derivative for gelu (within those types' rounding in both tails, where
// the fp32 0.5 * (1 + erff(z / sqrt(2))) cancels), FastGeluTanh's for gelu_tanh and FastSilu's for
// silu (FastActFor: void for the others), ActFn<A> otherwise.
template <Act A, typename T>
using FastActFor = std::conditional_t<
    sizeof(T) != 2, void,
    std::conditional_t<A == Act::kGelu, FastGelu,
                       std::conditional_t<A == Act::kGeluTanh, FastGeluTanh,
                                          std::conditional_t<A == Act::kSilu, FastSilu, void>>>>;
template <Act A, typename T>
constexpr bool kUseFastAct = !std::is_void<FastActFor<A, T>>::value;
template <Act A, typename T>
using BiasActOpFor =
    std::conditional_t<kUseFastAct<A, T>, BiasFastOp<FastActFor<A, T>>, BiasActOp<A>>;
template <Act A, typename T>
using BiasActGradOpFor =
    std::conditional_t<kUseFastAct<A, T>, BiasFastGradOp<FastActFor<A, T>>, BiasActGradOp<A>>;

// act(z) in place for N values of data type T, the function BiasActOpFor<A, T> applies to one.
template <Act A, typename T, int N>
CUDASTEPS_HOST_DEVICE void act_values(float (&z)[N]) {
  if constexpr (kUseFastAct<A, T>) {
    FastActFor<A, T>::template values<N>(z);
  } else {
    CUDASTEPS_UNROLL for (int i = 0; i < N; ++i) z[i] = ActFn<A>::value(z[i]);
  }
}

// sum_leading: g * a (a is 1 when there is no second operand; v is unused).
template <bool kHasOther>
struct ProductOp {
  template <typename Acc>
  CUDASTEPS_HOST_DEVICE Acc operator()(Acc g, Acc a, Acc) const {
    if constexpr (kHasOther) {
      return g * a;
    } else {
      return g;
    }
  }
};

// ---- act dispatch (host code of both backends) -------------------------------------------------

// Calls fn(std::integral_constant<Act, A>{}) for the runtime act.
template <typename Fn>
void dispatch_act(Act act, Fn&& fn) {
  switch (act) {
    case Act::kNone: return fn(std::integral_constant<Act, Act::kNone>{});
    case Act::kRelu: return fn(std::integral_constant<Act, Act::kRelu>{});
    case Act::kGelu: return fn(std::integral_constant<Act, Act::kGelu>{});
    case Act::kGeluTanh: return fn(std::integral_constant<Act, Act::kGeluTanh>{});
    case Act::kSilu: return fn(std::integral_constant<Act, Act::kSilu>{});
  }
}

// Bounds of each activation, for an FP8 scale taken from the range [lo, hi] of its input instead
// of from the amax of its output (act_cast_fp8, act_grad_cast_fp8: the FP8 MLP's hidden tensors,
// whose range the GEMM that writes them takes). Every activation here is increasing above its one
// minimum (gelu's at z = -0.7518, value -0.16997; silu's at -1.2785, -0.27846; none and relu have
// none on their negative side), so max |act(z)| over [lo, hi] is at most
// max(|act(hi)|, |act(lo)|, and kLobe where lo < kLobeBelow): kLobeBelow lies above the minimum and
// kLobe above its depth (with room for the fp16/bf16 forms' rounding). kDerivMax bounds |act'|
// (gelu's 1.1289 at z = 1.414, silu's 1.0998 at 2.40), so |g * act'(x)| <= max |g| * kDerivMax.
template <Act A>
struct ActBounds {
  static constexpr float kLobeBelow = -INFINITY;  // no negative lobe
  static constexpr float kLobe = 0.0f;
  static constexpr float kDerivMax = 1.0f;
};
template <>
struct ActBounds<Act::kGelu> {
  static constexpr float kLobeBelow = -0.75f;
  static constexpr float kLobe = 0.171875f;
  static constexpr float kDerivMax = 1.13f;
};
template <>
struct ActBounds<Act::kGeluTanh> : ActBounds<Act::kGelu> {};
template <>
struct ActBounds<Act::kSilu> {
  static constexpr float kLobeBelow = -1.25f;
  static constexpr float kLobe = 0.28125f;
  static constexpr float kDerivMax = 1.1f;
};

// f(std::integral_constant<Act, A>()) for the activation `act` known only at run time: one
// branch, each activation's code compiled once (its own template instantiation). Host and device
// (the GEMM epilogues, the FP8 MLP's casts).
template <typename F>
CUDASTEPS_HOST_DEVICE decltype(auto) with_act(Act act, F&& f) {
  switch (act) {
    case Act::kRelu: return f(std::integral_constant<Act, Act::kRelu>());
    case Act::kGelu: return f(std::integral_constant<Act, Act::kGelu>());
    case Act::kGeluTanh: return f(std::integral_constant<Act, Act::kGeluTanh>());
    case Act::kSilu: return f(std::integral_constant<Act, Act::kSilu>());
    default: return f(std::integral_constant<Act, Act::kNone>());
  }
}

}  // namespace elementwise
}  // namespace cudasteps
