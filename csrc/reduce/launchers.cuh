// The CUDA sum's launchers (declared in launch.h), defined for inst_sum.cu, which instantiates
// them: each picks its kernel's grid from the shape and the SM count, takes the second
// pass's partials from the caching allocator (scratch_buffer, on the current stream) where it
// needs one, and launches on the given stream. Included only by that unit (and kept light, as
// kernels.cuh, for its compile time); CUDASTEPS_INSTANTIATE_SUM_PASSES at the end instantiates
// the three launchers of one type triple.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "reduce/kernels.cuh"
#include "reduce/launch.h"

namespace cudasteps {
namespace reduce {

// ---- Full reduction ----------------------------------------------------------------------------

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_full(const in_t* x, int64_t n, out_t* out, cudaStream_t stream) {
  const auto kernel = sum_full_kernel<in_t, acc_t, out_t>;
  // 16-byte loads of an aligned input (a misaligned one has one fewer, plus the scalar head and
  // tail). The grid divides them exactly where it can: for 2^20 fp32, 128 blocks whose every lane
  // issues kLoadUnroll loads once, where one block more would leave lanes with fewer.
  const int64_t n_vec = ceil_div<int64_t>(n, kVec<in_t>);
  const int64_t per_block = int64_t(kFullThreads) * kLoadUnroll;  // 16-byte loads per block pass
  // A function-local static per instantiation: no lock on this, the latency-critical path.
  static const int blocks_per_sm_full = blocks_per_sm(kernel, kFullThreads);
  const int64_t resident = int64_t(sm_count()) * blocks_per_sm_full;
  const int64_t grid = std::max<int64_t>(1, std::min(ceil_div(n_vec, per_block), resident));
  acc_t* partials = nullptr;
  unsigned* ticket = nullptr;
  GridScratch scratch;
  if (grid > 1) {
    scratch = grid_scratch(grid, sizeof(acc_t), stream);
    partials = static_cast<acc_t*>(scratch.partials);
    ticket = scratch.ticket;
  }
  kernel<<<grid, kFullThreads, 0, stream>>>(x, n, partials, ticket, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- Row sums -----------------------------------------------------------------------------------

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_rows(const in_t* x, int64_t outer, int64_t inner, out_t* out,
                     cudaStream_t stream) {
  if (inner <= kWarpRowMax) {
    const auto kernel = sum_rows_warp_kernel<in_t, acc_t, out_t>;
    constexpr int64_t kWarps = kRowWarpThreads / kWarpSize;
    const int64_t cap = kRowWaves * sm_count() * cached_blocks_per_sm(kernel, kRowWarpThreads);
    const int64_t grid = std::min(ceil_div(outer, kWarps), cap);
    kernel<<<grid, kRowWarpThreads, 0, stream>>>(x, outer, inner, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const auto kernel_out = sum_rows_block_kernel<in_t, acc_t, out_t>;
  const int64_t resident = int64_t(sm_count()) * cached_blocks_per_sm(kernel_out, kRowBlockThreads);
  int64_t segments = 1;
  if (outer < resident) {
    segments = std::min(ceil_div(resident, outer), std::max<int64_t>(1, inner / kMinRowSegment));
  }
  // Segment starts at multiples of 16 elements keep them 16-byte aligned whenever the row is.
  const int64_t segment_len = ceil_div<int64_t>(ceil_div(inner, segments), 16) * 16;
  segments = ceil_div(inner, segment_len);
  const int64_t tasks = outer * segments;
  const int64_t grid = std::min<int64_t>(tasks, kRowWaves * resident);
  if (segments == 1) {
    kernel_out<<<grid, kRowBlockThreads, 0, stream>>>(x, outer, inner, 1, segment_len, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const ScratchBuffer partials = scratch_buffer(size_t(tasks * int64_t(sizeof(acc_t))));
  acc_t* p = reinterpret_cast<acc_t*>(partials.ptr);
  sum_rows_block_kernel<in_t, acc_t, acc_t>
      <<<grid, kRowBlockThreads, 0, stream>>>(x, outer, inner, segments, segment_len, p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // Second pass: the segment sums of each row, a short row each.
  const auto second = sum_rows_warp_kernel<acc_t, acc_t, out_t>;
  const int64_t grid2 = ceil_div<int64_t>(outer, kRowWarpThreads / kWarpSize);
  second<<<grid2, kRowWarpThreads, 0, stream>>>(p, outer, segments, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- Column sums --------------------------------------------------------------------------------

template <typename in_t, typename acc_t, typename res_t>
void launch_cols_pass(const in_t* x, int64_t batch, int64_t rows, int64_t cols, int64_t splits,
                      res_t* out, cudaStream_t stream) {
  constexpr int V = kVec<in_t>;
  const bool vec = cols % V == 0 && is_aligned(x, kVecBytes);
  const int64_t tile_cols = int64_t(kColThreadsX) * (vec ? V : 1);
  const int64_t tiles = batch * ceil_div(cols, tile_cols);
  const int64_t rows_per_split = ceil_div(rows, splits);
  splits = ceil_div(rows, rows_per_split);
  const int64_t grid_x = std::min<int64_t>(tiles, int64_t(1) << 30);
  const dim3 grid{unsigned(grid_x), unsigned(splits), 1u};
  const dim3 block{unsigned(kColThreadsX), unsigned(kColThreadsY), 1u};
  if (vec) {
    sum_cols_kernel<in_t, acc_t, res_t, V><<<grid, block, 0, stream>>>(x, batch, rows, cols,
                                                                        rows_per_split, out);
  } else {
    sum_cols_kernel<in_t, acc_t, res_t, 1><<<grid, block, 0, stream>>>(x, batch, rows, cols,
                                                                        rows_per_split, out);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The flat kernel wants enough outputs to give every resident thread one (then every load of the
// GPU is in flight at once); with fewer outputs the tile kernel, which also splits the rows
// across blocks, keeps the GPU busy instead.
constexpr int64_t kFlatColMinOutputsPerSm = 2048;

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_cols(const in_t* x, int64_t batch, int64_t rows, int64_t cols, out_t* out,
                     cudaStream_t stream) {
  if (batch > 1 && batch * cols >= kFlatColMinOutputsPerSm * sm_count()) {
    const int64_t grid = std::min<int64_t>(ceil_div<int64_t>(batch * cols, kFlatColThreads),
                                           int64_t(sm_count()) * 64);
    sum_cols_flat_kernel<in_t, acc_t, out_t><<<grid, kFlatColThreads, 0, stream>>>(x, batch, rows, cols, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  constexpr int V = kVec<in_t>;
  const bool vec = cols % V == 0 && is_aligned(x, kVecBytes);
  const int64_t tiles = batch * ceil_div<int64_t>(cols, int64_t(kColThreadsX) * (vec ? V : 1));
  const int64_t resident =
      int64_t(sm_count()) * cached_blocks_per_sm(sum_cols_kernel<in_t, acc_t, out_t, V>, kColThreads);
  // Split the rows only as far as one wave of blocks: a partial second wave would idle most SMs.
  int64_t splits = 1;
  if (tiles < resident) {
    splits = std::min({resident / tiles, ceil_div(rows, kMinRowsPerSplit), kMaxGridY});
    splits = std::max<int64_t>(splits, 1);
  }
  if (splits == 1) {
    launch_cols_pass<in_t, acc_t, out_t>(x, batch, rows, cols, 1, out, stream);
    return;
  }
  const int64_t rows_per_split = ceil_div(rows, splits);
  splits = ceil_div(rows, rows_per_split);
  const ScratchBuffer partials =
      scratch_buffer(size_t(batch * splits * cols * int64_t(sizeof(acc_t))));
  acc_t* p = reinterpret_cast<acc_t*>(partials.ptr);
  launch_cols_pass<in_t, acc_t, acc_t>(x, batch, rows, cols, splits, p, stream);
  // Second pass: [batch, splits, cols] -> [batch, cols], the splits in order.
  launch_cols_pass<acc_t, acc_t, out_t>(p, batch, splits, cols, 1, out, stream);
}

// Explicit instantiations of the three pass launchers of one (input, accumulator, result) triple.
#define CUDASTEPS_INSTANTIATE_SUM_PASSES(in_t, acc_t, out_t)                                     \
  template void launch_sum_full<in_t, acc_t, out_t>(const in_t*, int64_t, out_t*, cudaStream_t); \
  template void launch_sum_rows<in_t, acc_t, out_t>(const in_t*, int64_t, int64_t, out_t*,       \
                                                    cudaStream_t);                               \
  template void launch_sum_cols<in_t, acc_t, out_t>(const in_t*, int64_t, int64_t, int64_t,      \
                                                    out_t*, cudaStream_t)

}  // namespace reduce
}  // namespace cudasteps
