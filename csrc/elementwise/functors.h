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
//   gelu(z) = z * Phi(z) = z * (z > 0 ? 1 - Q(t) : Q(t)),
//   gelu'(z) = Phi(z) + z * phi(z) = z > 0 ? 1 - R(t) : R(t),   R(t) = Q(t) - t * phi(t),
// with Q(t) = exp(-t^2 / 2) * s * G(s), s = 1 / (1 + kC t): G is the Mills ratio Q / phi times
// (1 + kC t) / sqrt(2 pi), a smooth function of s in (0, 1] that an 8th-degree polynomial fits to a
// relative error of 1.2e-8 for t in [0, 14] (beyond, exp(-t^2 / 2) underflows fp32);
// scripts/fit_gelu.py makes and checks the fit. Per element that is one reciprocal, one exp2 and
// 8 fmas, with no branch and no cancellation in either tail. In fp32 the value and the derivative
// are within 7.5e-6 of float64 (relative; the rounding of the exp2 argument, at t = 12), 1.8e-6
// for |z| < 6 and 4e-7 for |z| < 1. torch's formula, 0.5 * z * (1 + erff(z / sqrt(2))), cancels
// to 0 for z < -5.5 in fp32, and erff costs two coefficient sets (a select per coefficient).
// The forward kernel is 984 SASS instructions per 32 bf16 elements against 1520 with erff. Measured
// on an H100 (bf16 8192 x 8192, make bench): forward 0.102 ms against 0.107 ms with erff (88% of
// copy bandwidth), forward + backward 0.249 ms against 0.268 ms with the previous fit (erfc as
// t exp(-a^2 + P(t)): two exponentials and a reciprocal per element).
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
  // Q(t) = e * sg: e = exp(-t^2 / 2), sg = s * G(s).
  CUDASTEPS_HOST_DEVICE static void tail(float t, float& e, float& sg) {
    constexpr float kC = 0.265f;
    const float s = fast_rcp(fma_f32(kC, t, 1.0f));
    float g = 3.082272038e-02f;
    g = fma_f32(g, s, -1.442374587e-01f);
    g = fma_f32(g, s, 2.178327590e-01f);
    g = fma_f32(g, s, -1.163825095e-01f);
    g = fma_f32(g, s, 1.379665732e-01f);
    g = fma_f32(g, s, 6.030746177e-02f);
    g = fma_f32(g, s, 1.027024090e-01f);
    g = fma_f32(g, s, 1.052464694e-01f);
    g = fma_f32(g, s, 1.057415754e-01f);
    e = fast_exp2(t * t * -0.72134752044448170368f);  // -log2(e) / 2
    sg = s * g;
  }
  CUDASTEPS_HOST_DEVICE static float value(float z) {
    float e, sg;
    tail(z < 0.0f ? -z : z, e, sg);
    const float q = e * sg;
    return z * (z > 0.0f ? 1.0f - q : q);
  }
  CUDASTEPS_HOST_DEVICE static float deriv(float z) {
    constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
    const float t = z < 0.0f ? -z : z;
    float e, sg;
    tail(t, e, sg);
    const float r = e * fma_f32(t, -kInvSqrt2Pi, sg);  // Q(t) - t phi(t)
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

// The forward and backward ops with FastGelu (fp16/bf16 data, fp32 math).
struct BiasFastGeluOp {
  CUDASTEPS_HOST_DEVICE float operator()(float a, float v) const { return FastGelu::value(a + v); }
};
struct BiasFastGeluGradOp {
  CUDASTEPS_HOST_DEVICE float operator()(float g, float a, float v) const {
    return g * FastGelu::deriv(a + v);
  }
};

// The functors bias_act and its backward run for data of type T on both backends: FastGelu's
// value and derivative for fp16 and bf16 gelu (within those types' rounding in both tails, where
// the fp32 0.5 * (1 + erff(z / sqrt(2))) cancels), ActFn<A> otherwise.
template <Act A, typename T>
constexpr bool kUseFastGelu = A == Act::kGelu && sizeof(T) == 2;
template <Act A, typename T>
using BiasActOpFor = std::conditional_t<kUseFastGelu<A, T>, BiasFastGeluOp, BiasActOp<A>>;
template <Act A, typename T>
using BiasActGradOpFor = std::conditional_t<kUseFastGelu<A, T>, BiasFastGeluGradOp, BiasActGradOp<A>>;

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

}  // namespace elementwise
}  // namespace cudasteps
