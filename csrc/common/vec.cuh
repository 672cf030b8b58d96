// Aligned vector types for 16-byte global memory accesses (LDG.E.128 / STG.E.128).
#pragma once

#include <cstdint>

namespace cudasteps {

// Widest access a single thread can issue: 16 bytes.
constexpr int kVecBytes = 16;

// N elements of T packed so that the compiler may move them as one access of sizeof(T) * N bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T val[N];
};

// Elements of T in one 16-byte access.
template <typename T>
constexpr int elems_per_vec16() {
  return kVecBytes / static_cast<int>(sizeof(T));
}

__host__ __device__ inline bool is_aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// Largest power of two <= 16 that divides the address (the widest access it allows).
__host__ __device__ inline int alignment_of(const void* ptr) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  int a = kVecBytes;
  while (a > 1 && p % a != 0) a >>= 1;
  return a;
}

}  // namespace cudasteps
