// The CUDA sum's launchers as the host side (reduce_cuda.cpp) calls them: raw pointers, element
// counts and the stream to launch on. Each computes its grid, allocates what its extra passes
// need and launches. The sum launchers are instantiated, per (input, accumulator, result) type
// triple, in inst_sum.cu; the ladder's in ladder_cuda.cu. Also the two host services
// the launchers ask of reduce_cuda.cpp (a grid's scratch for its partials and an occupancy cache).
//
// Light on purpose (CUDA's runtime and nothing of ATen): the kernel units include it, and ATen's
// headers would cost each of them about 20 s of compile time.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/launch.cuh"  // ScratchBuffer

namespace cudasteps {
namespace reduce {

// ---- Host services (reduce_cuda.cpp) -----------------------------------------------------------

// 512 threads: 16 warps to hide latency per block, 4 blocks per SM at full occupancy. The grid is
// at most one wave, so the last block adds at most a few hundred partials. Here rather than with
// the kernel (kernels.cuh) because reduce_cuda.cpp sizes the scratch slots by it.
constexpr int kFullThreads = 512;

// Room for one launch's per-block partials (`blocks` of `partial_bytes` each) and a ticket at 0,
// for kernels whose last block to take the ticket folds the partials and leaves it at 0 again (the
// full sum; the fp8 casts' amax, common/amax.cuh's grid_max_bits): the current device and stream's
// scratch slot where they fit it (no allocation, no memset; reduce_cuda.cpp), else a workspace
// from the caching allocator whose ticket is zeroed by a memset on `stream` (the current stream,
// the launch's; a graph node under capture). `workspace` owns that: keep it until the launch.
struct GridScratch {
  void* partials = nullptr;
  unsigned* ticket = nullptr;
  ScratchBuffer workspace;
};
GridScratch grid_scratch(int64_t blocks, size_t partial_bytes, cudaStream_t stream);

// Resident blocks per SM of `kernel` at `threads` threads, asked once per kernel (the occupancy
// query costs host time; every GPU of a process is assumed to be one model).
int cached_occupancy(const void* kernel, int threads);
// The same for a kernel as the launchers name it (a typed function pointer).
template <typename Kernel>
int cached_blocks_per_sm(Kernel kernel, int threads) {
  return cached_occupancy(reinterpret_cast<const void*>(kernel), threads);
}

// ---- Sum passes (inst_sum.cu), one per SumKind of reduce.h ------------------------------------
// in_t: the elements read (the input, or the previous pass's accumulators); acc_t: the
// accumulator; out_t: the elements written. Temporaries (second-pass partials) come from the
// caching allocator on the current device and stream, which must be `stream`.

// out[0] = sum of x[0, n).
template <typename in_t, typename acc_t, typename out_t>
void launch_sum_full(const in_t* x, int64_t n, out_t* out, cudaStream_t stream);

// out[r] = sum of row r of [outer, inner].
template <typename in_t, typename acc_t, typename out_t>
void launch_sum_rows(const in_t* x, int64_t outer, int64_t inner, out_t* out, cudaStream_t stream);

// out[b, c] = sum over r of [batch, rows, cols].
template <typename in_t, typename acc_t, typename out_t>
void launch_sum_cols(const in_t* x, int64_t batch, int64_t rows, int64_t cols, out_t* out,
                     cudaStream_t stream);

// ---- Ladder (ladder_cuda.cu): fp32, contiguous -------------------------------------------------

// How the ladder's steps 1-4 reduce a block's 256 values (ladder_cuda.cu).
enum class BlockReduce { SmemTree, SyncWarp, Shfl, CoopGroups };

// Steps 1-4: passes of one partial per 512 elements until one value is left, written to out[0].
template <BlockReduce kind>
void ladder_multi_pass(const float* x, int64_t n, float* out, cudaStream_t stream);

// Step 5: a grid-stride pass of one wave, then one block over its partials.
void ladder_grid_stride_vec(const float* x, int64_t n, float* out, cudaStream_t stream);

}  // namespace reduce
}  // namespace cudasteps
