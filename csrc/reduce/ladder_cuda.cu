// The sum ladder (ladder_sum, fp32, contiguous): each step a classic way to reduce, up to the
// kernel sum() runs. smem_tree -> syncwarp -> shfl -> coop_groups -> grid_stride_vec ->
// single_pass (launch_sum_full, inst_sum.cu). The step's choice by name and the op are
// reduce_cuda.cpp's; the kernels and their launchers are here.
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "reduce/kernels.cuh"
#include "reduce/launch.h"

namespace cudasteps {
namespace reduce {
namespace {

namespace cg = cooperative_groups;

// Steps 1-4 share one kernel shape (Harris's "first add during load"): 256 threads, each adding two
// elements 256 apart, one partial per block, and as many passes as it takes to reach one value.
// They differ only in how the block reduces its 256 values.
constexpr int kLadderThreads = 256;
constexpr int kLadderWarps = kLadderThreads / kWarpSize;

template <BlockReduce kind>
__device__ __forceinline__ float ladder_block_reduce(float v, float* sdata) {
  const int tid = threadIdx.x;
  if constexpr (kind == BlockReduce::SmemTree) {
    // Halving tree in shared memory, a barrier per level: 8 barriers, and half the threads idle
    // at every level.
    sdata[tid] = v;
    __syncthreads();
    for (int s = kLadderThreads / 2; s > 0; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }
    return sdata[0];
  } else if constexpr (kind == BlockReduce::SyncWarp) {
    // Down to 64 values with block barriers, then the last warp alone, ordered by __syncwarp
    // (each lane reads before any lane writes, then writes before any lane reads again).
    sdata[tid] = v;
    __syncthreads();
    for (int s = kLadderThreads / 2; s > kWarpSize; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }
    float x = 0.0f;
    if (tid < kWarpSize) {
      x = sdata[tid];
#pragma unroll
      for (int s = kWarpSize; s > 0; s >>= 1) {
        x += sdata[tid + s];
        __syncwarp();
        sdata[tid] = x;
        __syncwarp();
      }
    }
    return x;  // valid in thread 0
  } else if constexpr (kind == BlockReduce::Shfl) {
    // The common primitives: register shuffles inside each warp, one barrier for the warp sums.
    return block_sum<kLadderThreads>(v, sdata);
  } else {
    // cooperative_groups: the same two-level shape written with thread_block_tile and cg::reduce.
    const cg::thread_block block = cg::this_thread_block();
    const cg::thread_block_tile<kWarpSize> warp = cg::tiled_partition<kWarpSize>(block);
    const float warp_total = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) sdata[warp.meta_group_rank()] = warp_total;
    block.sync();
    float total = 0.0f;
    if (warp.meta_group_rank() == 0) {
      const float mine = warp.thread_rank() < kLadderWarps ? sdata[warp.thread_rank()] : 0.0f;
      total = cg::reduce(warp, mine, cg::plus<float>());
    }
    return total;  // valid in warp 0
  }
}

template <BlockReduce kind>
__global__ void __launch_bounds__(kLadderThreads)
    ladder_pass_kernel(const float* __restrict__ in, int64_t n, float* __restrict__ out) {
  __shared__ float sdata[kLadderThreads];
  const int64_t i = int64_t(blockIdx.x) * (2 * kLadderThreads) + threadIdx.x;
  float v = 0.0f;
  if (i < n) v = in[i];
  if (i + kLadderThreads < n) v += in[i + kLadderThreads];
  v = ladder_block_reduce<kind>(v, sdata);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Step 5: a grid of one wave; each thread first sums many float4s (grid stride, 4 loads in
// flight), then the shuffle block reduce; a second one-block kernel adds the block partials.
__global__ void __launch_bounds__(kLadderThreads)
    ladder_grid_stride_vec_kernel(const float* __restrict__ x, int64_t n, float* __restrict__ out) {
  __shared__ float scratch[kLadderWarps];
  float v = strided_share<float, float>(x, n, int64_t(blockIdx.x) * kLadderThreads + threadIdx.x,
                                        int64_t(gridDim.x) * kLadderThreads);
  v = block_sum<kLadderThreads>(v, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

}  // namespace

template <BlockReduce kind>
void ladder_multi_pass(const float* x, int64_t n, float* out, cudaStream_t stream) {
  const float* cur = x;
  ScratchBuffer current;  // holds `cur` while the pass reading it is launched
  int64_t m = n;
  while (true) {
    const int64_t blocks = ceil_div<int64_t>(m, 2 * kLadderThreads);
    float* dst = out;
    ScratchBuffer next;
    if (blocks > 1) {
      next = scratch_buffer(size_t(blocks) * sizeof(float));
      dst = static_cast<float*>(next.ptr);
    }
    ladder_pass_kernel<kind><<<blocks, kLadderThreads, 0, stream>>>(cur, m, dst);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (blocks == 1) return;
    // Freeing `current` now is safe: the caching allocator reuses it only for work queued later
    // on this stream, which runs after the pass that reads it.
    current = next;
    cur = dst;
    m = blocks;
  }
}

template void ladder_multi_pass<BlockReduce::SmemTree>(const float*, int64_t, float*, cudaStream_t);
template void ladder_multi_pass<BlockReduce::SyncWarp>(const float*, int64_t, float*, cudaStream_t);
template void ladder_multi_pass<BlockReduce::Shfl>(const float*, int64_t, float*, cudaStream_t);
template void ladder_multi_pass<BlockReduce::CoopGroups>(const float*, int64_t, float*,
                                                         cudaStream_t);

void ladder_grid_stride_vec(const float* x, int64_t n, float* out, cudaStream_t stream) {
  const auto kernel = ladder_grid_stride_vec_kernel;
  const int64_t resident = int64_t(sm_count()) * cached_blocks_per_sm(kernel, kLadderThreads);
  const int64_t grid = std::max<int64_t>(
      1, std::min(ceil_div<int64_t>(n / 4 + 1, int64_t(kLadderThreads) * kLoadUnroll), resident));
  const ScratchBuffer partials = scratch_buffer(size_t(grid) * sizeof(float));
  float* p = static_cast<float*>(partials.ptr);
  kernel<<<grid, kLadderThreads, 0, stream>>>(x, n, p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  kernel<<<1, kLadderThreads, 0, stream>>>(p, grid, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace reduce
}  // namespace cudasteps
