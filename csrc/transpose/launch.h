// The CUDA transpose's launchers as the host side (transpose_cuda.cpp) calls them: data pointers,
// the problem (problem.h) or the ladder's sizes, and the stream to launch on. Each computes its
// grid and launches; all are defined, and instantiated, in launchers.cu.
//
// Light on purpose (CUDA's runtime and nothing of ATen): the kernel unit includes it, and ATen's
// headers would cost it about 20 s of compile time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "transpose/problem.h"

namespace cudasteps {
namespace transpose {

// Micro-block rows per tile: 32, so each thread issues 4 x K word loads before its first shared
// store.
constexpr int kMicroRows = 32;

// transpose(in) into the contiguous `out` (both data pointers of Elem, the element as an unsigned
// integer of its size) with transpose_final_kernel (kernels.cuh), moving Word per access: Elem
// itself, or a wider word packing K = sizeof(Word) / sizeof(Elem) elements, which the caller has
// checked the layout allows. Instantiated for Elem of 1, 2, 4 and 8 bytes, each with every wider
// Word the host picks (transpose_cuda.cpp), and kMicroRows.
template <typename Elem, typename Word, int kMicroRows>
void launch_final(const void* in, void* out, const TransposeProblem& p, cudaStream_t stream);

// The ladder's steps before the final kernel (ladder_transpose; kernels.cuh says what each does).
enum class LadderStep { NaiveRow, NaiveCol, Smem, Padded };

// One ladder step over a contiguous fp32 (batch, M, N) `in` (numel = batch * M * N elements) into
// the contiguous (batch, N, M) `out`.
void launch_ladder_step(LadderStep step, const float* in, float* out, int64_t batch, int64_t M,
                        int64_t N, int64_t numel, cudaStream_t stream);

}  // namespace transpose
}  // namespace cudasteps
