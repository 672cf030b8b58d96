// NaN-propagating max and min on the GPU (PTX's max.NaN / min.NaN, sm_80 and newer): where either
// operand is a NaN the result is one, unlike fmaxf / fminf, which return the other operand. For
// ranges and bounds that must say so when a tensor holds a NaN (scaled_mm_range's range, the FP8
// MLP's amax bounds: the scale taken from a NaN is then 1, as for a NaN amax).
#pragma once

#include <cstdint>

namespace cudasteps {

__device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else  // (the portable units are also built for older GPUs)
  return a != a ? a : b != b ? b : fmaxf(a, b);
#endif
}

__device__ __forceinline__ float min_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return a != a ? a : b != b ? b : fminf(a, b);
#endif
}

// The same on two packed bf16 (kBf16) or fp16 values, lane by lane (sm_80 and newer only: the
// Hopper kernels use it).
template <bool kBf16>
__device__ __forceinline__ uint32_t max_nan_x2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (kBf16) {
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  } else {
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

template <bool kBf16>
__device__ __forceinline__ uint32_t min_nan_x2(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (kBf16) {
    asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  } else {
    asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

}  // namespace cudasteps
