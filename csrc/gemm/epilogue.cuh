// The epilogue stage of the tensor-core GEMMs: what each output element gets on its way out of the
// accumulators. One interface for every kernel of tc/sm80/ and tc/sm90/:
//
//   Epilogue<T>::from(problem)        the stage's parameters (output, alpha, beta, the addend)
//   value(m, n, acc)                  alpha * acc + beta * addend[m * s0 + n * s1], in fp32
//   store_one(m, n, acc)              value(), cast to the output type (Elem<T>), bounds-checked
//   store_pair(m, n, acc0, acc1)      two neighbours (n even): one 32/64-bit store where it can
//   fused() / activated<A>(p, add)    linear_act's activation: out = act(alpha * acc + beta * C),
//                                     aux = alpha * acc, C a bias row of the output's type or
//                                     float32 (the Hopper kernels apply it as they stage
//                                     its TMA stores, tc/sm90/epilogue.cuh; store_one_fused for
//                                     single elements: split-K's reduce)
//   act_grad()                        mm_bias_act_backward's: out = g * act'(x + C) for the
//                                     product g rounded to the output type and the saved x,
//                                     and the column sums of out (tc/sm90/epilogue.cuh only)
//
// The Hopper kernels also stage outputs through shared memory for TMA stores
// (tc/sm90/epilogue.cuh); they take each element's value from value(), so every path computes the
// same numbers. Fused epilogues (activation, bias gradients, FP8 outputs) belong here: one place,
// every kernel. The activation is bias_act's own functor (elementwise/functors.h: BiasActOpFor,
// FastGelu for 16-bit outputs) applied to the product as linear writes it (rounded to the output
// type, as aux holds it), so linear_act fused gives the bits of linear followed by bias_act, the
// form its training forward runs (act none keeps linear's single rounding). The SGEMM's epilogue
// (sgemm/epilogue.cuh) computes the same alpha * acc + beta * addend in fp32 with its own 16-byte
// stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "elementwise/functors.h"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace tc {

// ---- element traits: storage type of a, b, out and addend per TcType ----
template <TcType T>
struct Elem;

template <>
struct Elem<TcType::kBF16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ float to_float(type v) { return __bfloat162float(v); }
  static __device__ __forceinline__ type from_float(float v) { return __float2bfloat16_rn(v); }
  // Two outputs as one 32-bit word (the lower address holds `lo`).
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  // pack2's word back as two floats (exact).
  static __device__ __forceinline__ float2 unpack2(uint32_t w) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
  }
};

template <>
struct Elem<TcType::kFP16> {
  using type = __half;
  static __device__ __forceinline__ float to_float(type v) { return __half2float(v); }
  static __device__ __forceinline__ type from_float(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  static __device__ __forceinline__ float2 unpack2(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
};

// TF32: float storage; the tensor cores read the upper 19 bits. The operands are rounded to TF32
// to nearest first: by the TMA loads of the Hopper kernels (TFLOAT32 tensor maps), with
// cvt.rna.tf32.f32 where the sm80 kernels stage operands through registers.
template <>
struct Elem<TcType::kTF32> {
  using type = float;
  static __device__ __forceinline__ float to_float(type v) { return v; }
  static __device__ __forceinline__ type from_float(float v) { return v; }
};

// The activation known only at run time, dispatched once (elementwise/functors.h).
using elementwise::with_act;

// ---- epilogue: out[m, n] = alpha * acc + beta * addend[m, n], converted, bounds-checked ----
template <TcType T>
struct Epilogue {
  using E = typename Elem<T>::type;
  E* out;
  int64_t ldo;
  int64_t M, N;
  float alpha, beta;
  const E* addend;  // nullptr: none
  int64_t add_s0, add_s1;
  elementwise::Act act;   // linear_act's activation (TcProblem::act)
  E* aux;                 // nullptr: none (TcProblem::aux)
  const float* bias_f32;  // the fused stage's float32 bias row (TcProblem::addend_fp32; addend is
                          // then nullptr), else nullptr
  const float* scale_a;   // FP8 per-tensor scales on the device (TcProblem), both or neither
  const float* scale_b;
  const E* act_input;     // mm_bias_act_backward's saved product (TcProblem), else nullptr
  float* col_partials;    // its bias gradient's column sums per 32 rows, or nullptr
  unsigned* range_bits;   // scaled_mm_range's workspace (TcProblem::range_bits), or nullptr
  float* range_out;       // its (max, min) of the output (TcProblem::range_out)

  static Epilogue from(const TcProblem& p) {
    Epilogue e;
    e.out = static_cast<E*>(p.out);
    e.ldo = p.ldo;
    e.M = p.M;
    e.N = p.N;
    e.alpha = p.alpha;
    e.beta = p.beta;
    e.addend = p.beta != 0.f && !p.addend_fp32 ? static_cast<const E*>(p.addend) : nullptr;
    e.bias_f32 = p.beta != 0.f && p.addend_fp32 ? static_cast<const float*>(p.addend) : nullptr;
    e.add_s0 = p.add_s0;
    e.add_s1 = p.add_s1;
    e.act = p.act;
    e.aux = static_cast<E*>(p.aux);
    e.scale_a = p.scale_a;
    e.scale_b = p.scale_b;
    e.act_input = static_cast<const E*>(p.act_input);
    e.col_partials = p.col_partials;
    e.range_bits = p.range_bits;
    e.range_out = p.range_out;
    return e;
  }

  // This epilogue with the FP8 scales folded into alpha, read once per thread on the device.
  __device__ __forceinline__ Epilogue with_device_scales() const {
    Epilogue e = *this;
    if (scale_a != nullptr) e.alpha = alpha * __ldg(scale_a) * __ldg(scale_b);
    return e;
  }

  // The fused stage runs for an activation, an aux output, or a float32 bias (which only it reads),
  // but where the activation is mm_bias_act_backward's (act_grad).
  __host__ __device__ __forceinline__ bool fused() const {
    return act_input == nullptr &&
           (act != elementwise::Act::kNone || aux != nullptr || bias_f32 != nullptr);
  }

  // mm_bias_act_backward's stage: out = g * act'(act_input + bias) (tc/sm90/epilogue.cuh).
  __host__ __device__ __forceinline__ bool act_grad() const { return act_input != nullptr; }

  // The addend is a row the fused stage reads in pairs (a bias: broadcast over rows, contiguous,
  // 4-byte aligned, N even), as it reads linear_act's: act(alpha * acc + beta * addend) with
  // act = none is then the plain stage's value, the same fp32 operations.
  __host__ __device__ __forceinline__ bool addend_is_pair_row() const {
    return addend != nullptr && add_s0 == 0 && add_s1 == 1 && N % 2 == 0 &&
           reinterpret_cast<uintptr_t>(addend) % 4 == 0;
  }

  // act(product + add) in fp32, with bias_act's functor for this output type.
  template <elementwise::Act A>
  static __device__ __forceinline__ float activated(float product, float add) {
    return elementwise::BiasActOpFor<A, E>()(product, add);  // the Fast* forms for 16-bit E
  }

  // One element of the fused stage (split-K's reduce, the skinny tiles' transposed store; the
  // Hopper kernel stages whole fragments, tc/sm90/epilogue.cuh): aux = alpha * acc, out =
  // act(aux + beta * addend), aux rounded to the output type first where there is an activation
  // (act none: alpha * acc + beta * addend, one rounding, linear's value). A is `act`: callers
  // storing many elements dispatch on it once (with_act) and call this form.
  template <elementwise::Act A>
  __device__ __forceinline__ void store_one_fused_as(int64_t m, int64_t n, float acc) const {
    if (m >= M || n >= N) return;
    if (aux != nullptr) aux[m * ldo + n] = Elem<T>::from_float(alpha * acc);
    out[m * ldo + n] = Elem<T>::from_float(fused_value_as<A>(m, n, acc));
  }

  // store_one_fused_as's output value (before its cast), for (m, n) inside the output.
  template <elementwise::Act A>
  __device__ __forceinline__ float fused_value_as(int64_t m, int64_t n, float acc) const {
    const float exact = alpha * acc;
    const float product =
        A == elementwise::Act::kNone ? exact : Elem<T>::to_float(Elem<T>::from_float(exact));
    const float add = bias_f32 != nullptr ? beta * bias_f32[m * add_s0 + n * add_s1]
                      : addend != nullptr
                          ? beta * Elem<T>::to_float(addend[m * add_s0 + n * add_s1])
                          : 0.f;
    return activated<A>(product, add);
  }

  __device__ __forceinline__ void store_one_fused(int64_t m, int64_t n, float acc) const {
    with_act(act, [&](auto a) { store_one_fused_as<decltype(a)::value>(m, n, acc); });
  }

  __device__ __forceinline__ float value(int64_t m, int64_t n, float acc) const {
    float v = alpha * acc;
    if (addend != nullptr) v += beta * Elem<T>::to_float(addend[m * add_s0 + n * add_s1]);
    return v;
  }

  __device__ __forceinline__ void store_one(int64_t m, int64_t n, float acc) const {
    if (m < M && n < N) out[m * ldo + n] = Elem<T>::from_float(value(m, n, acc));
  }

  // Elements (m, n) and (m, n + 1), n even: one 32-bit store (16-bit types) or 64-bit store
  // (float) when both are inside and the address is aligned, else element by element.
  __device__ __forceinline__ void store_pair(int64_t m, int64_t n, float acc0, float acc1) const {
    if (m >= M || n >= N) return;
    E* dst = out + m * ldo + n;
    if (n + 1 < N && (reinterpret_cast<uintptr_t>(dst) % (2 * sizeof(E))) == 0) {
      const float v0 = value(m, n, acc0), v1 = value(m, n + 1, acc1);
      if constexpr (T == TcType::kTF32) {
        *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
      } else {
        *reinterpret_cast<uint32_t*>(dst) = Elem<T>::pack2(v0, v1);
      }
    } else {
      store_one(m, n, acc0);
      store_one(m, n + 1, acc1);
    }
  }
};

}  // namespace tc
}  // namespace gemm
}  // namespace cudasteps
