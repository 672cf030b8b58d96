// The amax (largest |x|) of a tensor as its kernels take it, shared by the fp8 family's casts and
// the elementwise kernels that emit the amax of what they write (bias_act_amax and its backward,
// which feed an FP8 cast its dynamic scale without a pass of its own):
//
// * an amax is carried as the bits of a non-negative float32, an unsigned: such bits order as the
//   floats do (and a NaN's bits, sign cleared, lie above +inf's, so a NaN anywhere wins), so the
//   maximum is an integer max, exact and the same whatever the order: an atomicMax into one word
//   is bitwise reproducible, unlike a floating-point atomic sum;
// * MaxBitsOp is that max as a reduction operator (warp_reduce.cuh, block_reduce.cuh);
// * fold_block_amax folds a block's values into the device word with at most one atomic (the word
//   zeroed by the caller);
// * grid_max_bits takes a grid's largest without a zeroed word: per-block partials and a ticket,
//   the last block folding them (the casts' amax, which then costs no fill launch before them).
#pragma once

#include <cuda_runtime.h>

#include "common/block_reduce.cuh"
#include "common/warp_reduce.cuh"

namespace cudasteps {

struct MaxBitsOp {
  __device__ __forceinline__ unsigned operator()(unsigned a, unsigned b) const { return max(a, b); }
  template <typename U>
  __device__ __forceinline__ static U identity() {
    return 0;  // the bits of +0: below every |x|
  }
};

// The bits of |v| (a NaN stays a NaN, above every number).
__device__ __forceinline__ unsigned abs_bits(float v) { return __float_as_uint(fabsf(v)); }

// Raises *amax_bits to the largest `bits` of the block's BlockThreads threads (a 1-D block; every
// thread calls it: it holds barriers). Thread 0 skips the atomic when the word already holds as
// much: the word only grows, so a value read at any time is a lower bound of the final one, and
// most blocks of a large grid find the maximum already there (one-shot grids of thousands of
// blocks would otherwise queue thousands of atomics on one address).
template <int BlockThreads>
__device__ __forceinline__ void fold_block_amax(unsigned bits, unsigned* scratch,
                                                unsigned* amax_bits) {
  bits = block_allreduce<BlockThreads, unsigned, MaxBitsOp>(bits, scratch);
  if (threadIdx.x == 0 && bits > *static_cast<volatile unsigned*>(amax_bits)) {
    atomicMax(amax_bits, bits);
  }
}

// The largest `bits` of a block of Threads threads (1-D, or 32 x Threads / 32), valid in its
// thread 0. `warp_max` holds Threads / 32 words; every thread calls it (it holds a barrier).
template <int Threads>
__device__ __forceinline__ unsigned block_max_bits(unsigned bits, unsigned* warp_max) {
  static_assert(Threads % 32 == 0, "a block of whole warps");
  const int tid = threadIdx.x + blockDim.x * threadIdx.y;
  bits = warp_allreduce<unsigned, MaxBitsOp>(bits);
  if (tid % 32 == 0) warp_max[tid / 32] = bits;
  __syncthreads();
  unsigned m = 0;
  if (tid == 0) {
    for (int w = 0; w < Threads / 32; ++w) m = max(m, warp_max[w]);
  }
  return m;
}

// The grid's largest `bits` with no word zeroed before the launch: each block's largest goes to
// partials[blockIdx.x], and the last block to take the ticket folds them all, then leaves the
// ticket at 0 for the next launch on the stream (a max: the same result whatever the order).
// Every thread of every block calls it with its own bits (blocks as block_max_bits takes them).
// Returns true in thread 0 of the last block, whose `bits` then hold the grid's largest, and
// false in every other thread. partials: gridDim.x words (untouched with one block); ticket: 0 on
// entry.
template <int Threads>
__device__ __forceinline__ bool grid_max_bits(unsigned& bits, unsigned* partials,
                                              unsigned* ticket) {
  __shared__ unsigned warp_max[Threads / 32];
  __shared__ bool is_last;
  const int tid = threadIdx.x + blockDim.x * threadIdx.y;
  bits = block_max_bits<Threads>(bits, warp_max);
  if (gridDim.x == 1) return tid == 0;
  if (tid == 0) {
    partials[blockIdx.x] = bits;
    __threadfence();  // the partial is visible device-wide before the ticket is taken
    is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return false;
  __threadfence();  // every other block's partial, seen through their fences
  unsigned m = 0;
  for (int b = tid; b < int(gridDim.x); b += Threads) m = max(m, __ldcg(partials + b));
  bits = block_max_bits<Threads>(m, warp_max);
  if (tid == 0) *ticket = 0u;
  return tid == 0;
}

}  // namespace cudasteps
