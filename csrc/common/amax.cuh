// The amax (largest |x|) of a tensor as its kernels take it, shared by the fp8 family's casts and
// the elementwise kernels that emit the amax of what they write (bias_act_amax and its backward,
// which feed an FP8 cast its dynamic scale without a pass of its own):
//
// * an amax is carried as the bits of a non-negative float32, an unsigned: such bits order as the
//   floats do (and a NaN's bits, sign cleared, lie above +inf's, so a NaN anywhere wins), so the
//   maximum is an integer max, exact and the same whatever the order: an atomicMax into one word
//   is bitwise reproducible, unlike a floating-point atomic sum;
// * MaxBitsOp is that max as a reduction operator (warp_reduce.cuh, block_reduce.cuh);
// * fold_block_amax folds a block's values into the device word with at most one atomic.
#pragma once

#include <cuda_runtime.h>

#include "common/block_reduce.cuh"

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

}  // namespace cudasteps
