// The copy family's launchers, as the host code (copy_cuda.cpp) calls them: raw pointers, byte and
// element counts, a StridedPair and a stream; each launches its kernels on that stream and checks
// the launch. Defined in the .cu units named beside each. Light on purpose (CUDA's runtime types
// and strided.h, nothing of ATen): the .cu units include it too, and ATen's headers would cost each
// of them about 20 s of compile time under nvcc.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/strided.h"

namespace cudasteps {

// How a byte copy runs: kAuto (the ops) picks cudaMemcpyAsync for small copies and the one-shot
// kernel above that (copy_kernels_cuda.cu says why); the ladder forces copy_vec16_kernel with one
// block per tile (kOneShot) or one wave of blocks (kPersistent, step vec16_persistent).
enum class CopyGrid { kAuto, kOneShot, kPersistent };

// Contiguous byte copy, any alignment (copy_kernels_cuda.cu).
void copy_bytes_cuda(const void* src_ptr, void* dst_ptr, int64_t nbytes, cudaStream_t stream,
                     CopyGrid grid_kind = CopyGrid::kAuto);

// Non-contiguous input or output: one element per thread-step, offsets from `layout`
// (copy_kernels_cuda.cu). ElemBytes: 1, 2, 4, 8 or 16.
template <int ElemBytes>
void launch_copy_strided(const uint8_t* src, uint8_t* dst, const StridedPair& layout,
                         int64_t numel, cudaStream_t stream);

// Copies a strided view into a contiguous `dst` row by row (innermost dim contiguous) or by
// gathering (innermost dim strided) when the layout allows (copy_rows_cuda.cu). `layout` is
// make_strided_pair(out, in) of the two tensors, `elem` their element size in bytes. false: not
// taken, nothing was launched.
bool copy_strided_rows(const StridedPair& layout, int64_t elem, const void* src_ptr, void* dst_ptr,
                       cudaStream_t stream);

// The ladder's first two steps (copy_kernels_cuda.cu), both over `numel` contiguous elements of
// ElemBytes (1, 2, 4, 8 or 16): scalar, one thread per element; grid_stride, a grid of one wave.
template <int ElemBytes>
void launch_copy_scalar(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream);
template <int ElemBytes>
void launch_copy_grid_stride(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream);

}  // namespace cudasteps
