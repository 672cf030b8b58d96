// The copy family's CUDA kernels: 16-byte vectorized, grid sized from the SM count, with a scalar
// head and tail; and the generic strided kernel. Shared by copy_cuda.cu (the ops, the ladder),
// copy_rows_cuda.cu and copy_gather_cuda.cu (strided views row by row). Internal linkage: every
// unit owns the kernels it instantiates.
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
// Layouts (copy_cuda_impl): equal dense layouts are one byte copy (above); a transposed view of a
// contiguous tensor goes to the transpose kernel (copy.h); other strided inputs copied into a
// contiguous output go to the row kernel (innermost dim contiguous) or the gather kernel
// (innermost dim strided), see "Strided views: rows"; anything else (a strided output) to the
// generic strided kernel, one element per index step.
//
// Ladder (ladder_copy): scalar (one element per thread, one thread per element) -> grid_stride
// (a grid of one wave, each thread loops) -> vec16_persistent (16-byte accesses, still one wave
// of blocks looping) -> vec16 (the same kernel with one block per 8 KiB tile, in address order).
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "common/launch.cuh"
#include "common/strided.h"
#include "common/vec.cuh"
#include "copy/copy.h"

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

// How many blocks copy_vec16_kernel gets: one per tile, or one wave (ladder step vec16_persistent).
enum class CopyGrid { kOneShot, kPersistent };

template <int SrcAlign>
void launch_copy_vec16(const uint8_t* src, uint8_t* dst, int64_t nbytes, int head,
                       CopyGrid grid_kind, cudaStream_t stream) {
  const auto kernel = copy_vec16_kernel<SrcAlign>;
  const int64_t n_tiles =
      std::max<int64_t>(1, ceil_div<int64_t>((nbytes - head) / 16, int64_t(kCopyThreads) * kCopyUnroll));
  const int64_t grid = grid_kind == CopyGrid::kPersistent
                           ? persistent_grid(kernel, kCopyThreads, n_tiles, 1)
                           : std::min<int64_t>(n_tiles, std::numeric_limits<int32_t>::max());
  kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, nbytes, head);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Contiguous byte copy, any alignment.
inline void copy_bytes_cuda(const void* src_ptr, void* dst_ptr, int64_t nbytes, cudaStream_t stream,
                     CopyGrid grid_kind = CopyGrid::kOneShot) {
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  // Head: bytes until dst reaches a 16-byte boundary (all of them for a copy under 16 bytes).
  const int head = int(std::min<int64_t>(nbytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16));
  switch (alignment_of(src + head)) {
    case 16: return launch_copy_vec16<16>(src, dst, nbytes, head, grid_kind, stream);
    case 8: return launch_copy_vec16<8>(src, dst, nbytes, head, grid_kind, stream);
    case 4: return launch_copy_vec16<4>(src, dst, nbytes, head, grid_kind, stream);
    case 2: return launch_copy_vec16<2>(src, dst, nbytes, head, grid_kind, stream);
    default: return launch_copy_vec16<1>(src, dst, nbytes, head, grid_kind, stream);
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

template <int ElemBytes>
void launch_copy_strided(const at::Tensor& in, at::Tensor& out, cudaStream_t stream) {
  const StridedPair layout = make_strided_pair(out, in, "copy");
  const auto kernel = copy_strided_kernel<ElemBytes>;
  const int64_t grid = persistent_grid(kernel, kCopyThreads, in.numel(), kCopyThreads);
  kernel<<<grid, kCopyThreads, 0, stream>>>(static_cast<const uint8_t*>(in.const_data_ptr()),
                                            static_cast<uint8_t*>(out.data_ptr()), layout,
                                            in.numel());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Dispatches on the element size: copy moves bytes, so dtypes of equal size share a kernel.
template <template <int> class Launcher, typename... Args>
void dispatch_elem_bytes(int64_t elem_bytes, const char* op, Args&&... args) {
  switch (elem_bytes) {
    case 1: return Launcher<1>::run(std::forward<Args>(args)...);
    case 2: return Launcher<2>::run(std::forward<Args>(args)...);
    case 4: return Launcher<4>::run(std::forward<Args>(args)...);
    case 8: return Launcher<8>::run(std::forward<Args>(args)...);
    case 16: return Launcher<16>::run(std::forward<Args>(args)...);
    default: CUDASTEPS_CHECK(false, op, "unsupported element size ", elem_bytes);
  }
}

template <int ElemBytes>
struct StridedCopy {
  static void run(const at::Tensor& in, at::Tensor& out, cudaStream_t stream) {
    launch_copy_strided<ElemBytes>(in, out, stream);
  }
};

}  // namespace
}  // namespace cudasteps
