// Warp-level reduction: the bottom layer of the reduce stack (warp -> block -> device).
#pragma once

#include <cuda_runtime.h>

namespace cudasteps {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// A reduction operator: operator() is associative, identity() is its neutral element.
struct SumOp {
  template <typename T>
  __device__ __forceinline__ static T identity() {
    return T(0);
  }
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Butterfly (xor) tree: after log2(32) = 5 steps every lane holds the reduction of all 32 lanes, in
// the same order on every lane, so the result is deterministic and needs no broadcast.
template <typename T, typename Op = SumOp>
__device__ __forceinline__ T warp_allreduce(T value, Op op = Op{}) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  return value;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
  return warp_allreduce<T, SumOp>(value);
}

}  // namespace cudasteps
