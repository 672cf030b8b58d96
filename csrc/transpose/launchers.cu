// The CUDA transpose's launchers (launch.h), and with them every kernel instantiation of the
// family (kernels.cuh): the final kernel for each (element, word) pair transpose_cuda.cpp picks,
// and the ladder's four kernels. One unit: the family's 12 kernels take ptxas under a second.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/launch.cuh"
#include "transpose/kernels.cuh"
#include "transpose/launch.h"

namespace cudasteps {
namespace transpose {

template <typename Elem, typename Word, int kMicroRows>
void launch_final(const void* in, void* out, const TransposeProblem& p, cudaStream_t stream) {
  constexpr int K = int(sizeof(Word) / sizeof(Elem));
  const int64_t tiles_rows = ceil_div<int64_t>(p.rows, int64_t(kMicroRows) * K);
  const int64_t tiles_cols = ceil_div<int64_t>(p.cols, int64_t(kTileWordCols) * K);
  const int64_t n_tiles = tiles_rows * tiles_cols * p.batch;
  const dim3 block(kThreadsX, kThreadsY);
  const unsigned grid = unsigned(std::min(n_tiles, kMaxGridX));
  transpose_final_kernel<Elem, Word, kMicroRows><<<grid, block, 0, stream>>>(
      static_cast<const Elem*>(in), static_cast<Elem*>(out), p, tiles_rows, tiles_cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The (element, word) pairs transpose_cuda.cpp picks from (run_cuda_kernel).
#define CUDASTEPS_INSTANTIATE_FINAL(Elem, Word)                                                   \
  template void launch_final<Elem, Word, kMicroRows>(const void*, void*, const TransposeProblem&, \
                                                     cudaStream_t)
CUDASTEPS_INSTANTIATE_FINAL(uint8_t, uint32_t);
CUDASTEPS_INSTANTIATE_FINAL(uint8_t, uint8_t);
CUDASTEPS_INSTANTIATE_FINAL(uint16_t, uint64_t);
CUDASTEPS_INSTANTIATE_FINAL(uint16_t, uint32_t);
CUDASTEPS_INSTANTIATE_FINAL(uint16_t, uint16_t);
CUDASTEPS_INSTANTIATE_FINAL(uint32_t, uint64_t);
CUDASTEPS_INSTANTIATE_FINAL(uint32_t, uint32_t);
CUDASTEPS_INSTANTIATE_FINAL(uint64_t, uint64_t);
#undef CUDASTEPS_INSTANTIATE_FINAL

void launch_ladder_step(LadderStep step, const float* in, float* out, int64_t batch, int64_t M,
                        int64_t N, int64_t numel, cudaStream_t stream) {
  if (step == LadderStep::NaiveRow || step == LadderStep::NaiveCol) {
    const unsigned grid = unsigned(std::min(ceil_div<int64_t>(numel, kNaiveThreads), kMaxGridX));
    if (step == LadderStep::NaiveRow) {
      transpose_naive_row_kernel<<<grid, kNaiveThreads, 0, stream>>>(in, out, M, N, numel);
    } else {
      transpose_naive_col_kernel<<<grid, kNaiveThreads, 0, stream>>>(in, out, M, N, numel);
    }
  } else {
    const int64_t tiles = ceil_div<int64_t>(M, kTile) * ceil_div<int64_t>(N, kTile) * batch;
    const unsigned grid = unsigned(std::min(tiles, kMaxGridX));
    const dim3 block(kTile, kThreadsY);
    if (step == LadderStep::Smem) {
      transpose_smem_kernel<<<grid, block, 0, stream>>>(in, out, batch, M, N);
    } else {
      transpose_padded_kernel<<<grid, block, 0, stream>>>(in, out, batch, M, N);
    }
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace transpose
}  // namespace cudasteps
