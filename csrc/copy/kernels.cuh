// The copy family's CUDA kernels: 16-byte vectorized, grid sized from the SM count, with a scalar
// head and tail; the generic strided kernel; the ladder's first two steps. Device code and its
// constants only: instantiated and launched by copy_kernels_cuda.cu; rows.cuh builds on Word and
// kCopyThreads. Internal linkage: every unit owns the kernels it instantiates. Light on purpose (no
// ATen header): ATen's headers would cost every unit that includes it about 20 s of compile time.
//
// The final kernel (copy_vec16_kernel) moves bytes, so one kernel serves every dtype. SASS check
// (cuobjdump --dump-sass, sm_90): the aligned instantiation issues LDG.E.128 and STG.E.128.
//
// Alignment. The output is walked in 16-byte chunks aligned in the *output*; the first up to 15
// bytes (head) and the last up to 15 (tail) are copied byte by byte. When the input is misaligned
// relative to the output (a view with a storage offset, say x[1:] of fp32, which sits 4 bytes past
// a 16-byte boundary) each 16-byte chunk is loaded as the widest words the input address allows
// (4 x 4 bytes for that fp32 view) and still stored as one 16-byte access. The warp's loads then
// touch the same 128-byte lines as aligned loads would, so DRAM traffic is unchanged.
//
// Layouts (copy_cuda_impl, copy_cuda.cpp): equal dense layouts are one byte copy (above); a
// transposed view of a contiguous tensor goes to the transpose kernel (copy.h); other strided
// inputs copied into a contiguous output go to the row kernel (innermost dim contiguous) or the
// gather kernel (innermost dim strided), see "Strided views: rows" (rows.cuh); anything else (a
// strided output) to the generic strided kernel, one element per index step.
//
// Ladder (ladder_copy): scalar (one element per thread, one thread per element) -> grid_stride
// (a grid of one wave, each thread loops) -> vec16_persistent (16-byte accesses, still one wave
// of blocks looping) -> vec16 (the same kernel with one block per 8 KiB tile, in address order).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "common/launch.cuh"
#include "common/strided.h"
#include "common/vec.cuh"

namespace cudasteps {
namespace {

constexpr int kCopyThreads = 512;
// 16-byte chunks per thread per tile. One is enough: at 2048 resident threads per SM that is
// 32 KiB in flight per SM, above the ~25 KiB that Little's law asks of 3 TB/s at ~1 us DRAM
// latency. Measured on the H100 (1 GiB, one-shot grid, streaming hints): 1 chunk x 512 threads
// 3.01 TB/s, 2 x 256 3.00, 4 x 256 2.98, 8 x 256 2.92: bigger tiles only add wave-tail time.
constexpr int kCopyUnroll = 1;

// An unsigned word of exactly `Bytes` bytes.
template <int Bytes> struct Word;
// (Vector types for 8 and 16 bytes: the __ldcs/__stcs intrinsics have overloads for them.)
template <> struct Word<1> { using type = unsigned char; };
template <> struct Word<2> { using type = unsigned short; };
template <> struct Word<4> { using type = unsigned int; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

// Loads 16 bytes from `src`, which is aligned to SrcAlign bytes, as 16 / SrcAlign words. The
// streaming hint (ld.global.cs, evict-first) keeps a one-pass copy from flushing L2 of data
// that other kernels will reuse; measured +0.3% at 1 GiB on the H100.
template <int SrcAlign>
__device__ __forceinline__ uint4 load16(const uint8_t* src) {
  if constexpr (SrcAlign == 16) {
    return __ldcs(reinterpret_cast<const uint4*>(src));
  } else {
    using W = typename Word<SrcAlign>::type;
    constexpr int kWords = 16 / SrcAlign;
    W words[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) words[k] = __ldcs(reinterpret_cast<const W*>(src) + k);
    uint4 chunk;
    memcpy(&chunk, words, 16);
    return chunk;
  }
}

// Copies `nbytes` bytes. dst + head is 16-byte aligned; src + head is SrcAlign-aligned. Block 0
// also copies the head (first `head` bytes) and the tail (bytes past the last whole chunk).
//
// Work is cut into tiles of kCopyThreads x kCopyUnroll chunks (8 KiB); a block takes tiles
// blockIdx.x, blockIdx.x + gridDim.x, ... Launched with one block per tile ("one-shot"), the blocks
// sweep memory in address order, which keeps DRAM pages open; launched with one wave of blocks
// ("persistent", ladder step vec16_persistent) each block jumps gridDim.x tiles between
// iterations. Within a tile, pass u of the unrolled loop reads chunks u * kCopyThreads + tid, so each
// warp instruction covers 512 contiguous bytes. The one-shot grid is the faster of the two on the
// H100 (ladder rows vec16_persistent vs vec16 in benchmarks/results).
template <int SrcAlign>
__global__ void __launch_bounds__(kCopyThreads)
    copy_vec16_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t nbytes,
                      int head) {
  constexpr int64_t kTileChunks = int64_t(kCopyThreads) * kCopyUnroll;
  const int64_t n_chunks = (nbytes - head) / 16;
  const int64_t n_tiles = ceil_div(n_chunks, kTileChunks);
  const uint8_t* src_body = src + head;
  uint4* dst_body = reinterpret_cast<uint4*>(dst + head);

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t first = tile * kTileChunks + threadIdx.x;
    uint4 chunk[kCopyUnroll];
    if ((tile + 1) * kTileChunks <= n_chunks) {
      // Whole tile: all kCopyUnroll 16-byte loads issued before the first store.
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        chunk[u] = load16<SrcAlign>(src_body + (first + u * kCopyThreads) * 16);
      }
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) __stcs(dst_body + first + u * kCopyThreads, chunk[u]);
    } else {
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const int64_t i = first + u * kCopyThreads;
        if (i < n_chunks) chunk[u] = load16<SrcAlign>(src_body + i * 16);
      }
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const int64_t i = first + u * kCopyThreads;
        if (i < n_chunks) __stcs(dst_body + i, chunk[u]);
      }
    }
  }

  if (blockIdx.x == 0) {
    const int64_t tail_begin = head + n_chunks * 16;
    if (int(threadIdx.x) < head) dst[threadIdx.x] = src[threadIdx.x];
    const int64_t t = tail_begin + int64_t(threadIdx.x) - 16;
    if (threadIdx.x >= 16 && threadIdx.x < 32 && t < nbytes) dst[t] = src[t];
  }
}

// Non-contiguous input or output: one element per thread-step, offsets from the StridedPair.
template <int ElemBytes>
__global__ void __launch_bounds__(kCopyThreads)
    copy_strided_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                        StridedPair layout, int64_t numel) {
  using W = typename Word<ElemBytes>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    int64_t out_off, in_off;
    layout.offsets(i, out_off, in_off);
    reinterpret_cast<W*>(dst)[out_off] = reinterpret_cast<const W*>(src)[in_off];
  }
}

// ---- Ladder (ladder_copy): its first two steps ------------------------------------------------

// Step 1: one thread per element, one element per thread: a grid of numel / 512 blocks, each
// moving only 2 KiB of fp32 with 4-byte accesses.
template <int ElemBytes>
__global__ void copy_scalar_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                                   int64_t numel) {
  using W = typename Word<ElemBytes>::type;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel) reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src)[i];
}

// Step 2: a grid of one wave (sized from the SM count); each thread strides over the tensor.
template <int ElemBytes>
__global__ void __launch_bounds__(kCopyThreads)
    copy_grid_stride_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                            int64_t numel) {
  using W = typename Word<ElemBytes>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src)[i];
  }
}

}  // namespace
}  // namespace cudasteps
