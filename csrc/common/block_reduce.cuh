// Block-level reduction built on warp_reduce.cuh: each warp reduces its lanes, warp leaders park
// their partials in shared memory, and warp 0 reduces those. Two shuffle trees and one barrier.
#pragma once

#include "common/warp_reduce.cuh"

namespace cudasteps {

// Reduces `value` over all threads of a block of exactly `BlockThreads` threads (a multiple of 32).
// The result is valid in every thread. `scratch` holds BlockThreads / 32 values of T; the trailing
// barrier makes it safe to reuse scratch straight after the call.
template <int BlockThreads, typename T, typename Op = SumOp>
__device__ __forceinline__ T block_allreduce(T value, T* scratch, Op op = Op{}) {
  static_assert(BlockThreads % kWarpSize == 0, "block size must be a whole number of warps");
  constexpr int kWarps = BlockThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  value = warp_allreduce(value, op);
  if constexpr (kWarps == 1) {
    return value;
  } else {
    if (lane == 0) scratch[warp] = value;
    __syncthreads();
    // Every warp reduces the kWarps partials (lanes past them hold the identity), so every thread
    // gets the total without a second barrier-and-broadcast, in the same order in every warp.
    T total = lane < kWarps ? scratch[lane] : Op::template identity<T>();
    total = warp_allreduce(total, op);
    __syncthreads();
    return total;
  }
}

template <int BlockThreads, typename T>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
  return block_allreduce<BlockThreads, T, SumOp>(value, scratch);
}

}  // namespace cudasteps
