// The copy family's strided-view kernels, shared by copy_rows_cuda.cu (contiguous rows) and
// copy_gather_cuda.cu (gathered rows): the row layout, both kernels and their launch helpers. How
// they work: the section below. Each unit instantiates the kernels it launches. Light on purpose
// (no ATen header): ATen's headers would cost both units about 20 s of compile time each.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/launch.cuh"
#include "common/strided.h"
#include "common/vec.cuh"
#include "copy/kernels.cuh"

namespace cudasteps {

// ---- Strided views: rows ------------------------------------------------------------------------
//
// A contiguous output and a strided input, seen as rows: the innermost dim (after merging the dims
// that are contiguous in both, make_strided_pair) is a row of `inner` elements, and the row index
// splits into the outer dims (sizes and input strides). A row-sliced view (x[::2], x[:, 1:, :])
// has input rows that are contiguous (inner stride 1); a column-strided view (x[:, ::2]) gathers
// each row element by element (inner stride > 1, or 0 for an expanded dim).
//
// Both kernels cut every output row into chunks of ChunkBytes (16 when the output row starts and
// the row length allow it) and work on tiles of chunks: col_threads = the chunks of a row rounded
// up to a power of two, at most the block, so a warp covers 32 consecutive chunks of one row (512
// contiguous bytes) or several whole short rows; the other threads of the block take further rows.
// Each thread has kStridedRowUnroll chunks in flight before its first store: chunk tx of
// kStridedRowUnroll rows (row_threads apart) when rows are short, or of fewer rows and several
// chunks along each (col_threads apart) when a row has more chunks than the block has threads (a
// column-strided view of a contiguous tensor is often a single row after merging dims). A row's
// input offset is computed once per row and chunk (a division per outer dim, in 32 bits where the
// row count allows), never per element.
constexpr int kStridedRowUnrollLog2 = 2;
constexpr int kStridedRowUnroll = 1 << kStridedRowUnrollLog2;

struct RowLayout {
  int outer_dims = 0;                       // dims before the row dim (0: one row)
  int col_log2 = 0;                         // log2 of col_threads
  int along_log2 = 0;                       // log2 of the chunks in flight along one row
  bool index32 = false;                     // rows < 2^32: the row split in 32-bit arithmetic
  int64_t outer_sizes[kMaxStridedDims];
  int64_t outer_strides[kMaxStridedDims];   // input strides in bytes
  int64_t rows = 0;
  int64_t row_bytes = 0;                    // output bytes per row (contiguous rows)
  int64_t inner_stride = 0;                 // input bytes between consecutive row elements
  int64_t chunks = 0;                       // chunks per row
  int64_t col_tiles = 0;                    // tiles across a row
  int64_t n_tiles = 0;

  // Byte offset of row `row` in the input.
  __device__ __forceinline__ int64_t row_offset(int64_t row) const {
    if (outer_dims == 0) return 0;
    int64_t off = 0;
    if (index32) {
      uint32_t q = static_cast<uint32_t>(row);
      for (int d = outer_dims - 1; d > 0; --d) {
        const uint32_t size = static_cast<uint32_t>(outer_sizes[d]);
        const uint32_t next = q / size;
        off += int64_t(q - next * size) * outer_strides[d];
        q = next;
      }
      return off + int64_t(q) * outer_strides[0];
    }
    int64_t q = row;
    for (int d = outer_dims - 1; d > 0; --d) {
      const int64_t next = q / outer_sizes[d];
      off += (q - next * outer_sizes[d]) * outer_strides[d];
      q = next;
    }
    return off + q * outer_strides[0];
  }
};

// A thread's kStridedRowUnroll chunks in a tile: slot u is chunk chunk0 + (u % along) * col_threads
// of row row0 + (u / along) * row_threads, along = 1 << L.along_log2.
struct TileCoords {
  int64_t row0;
  int64_t chunk0;
  int64_t row_threads;
  int64_t col_threads;
  int along_log2;

  __device__ __forceinline__ int64_t row(int u) const {
    return row0 + (u >> along_log2) * row_threads;
  }
  __device__ __forceinline__ int64_t chunk(int u) const {
    return chunk0 + (u & ((1 << along_log2) - 1)) * col_threads;
  }
};

// Gathered rows (copy_gather_cuda.cu): copy_gather_kernel<elem_bytes, chunk_bytes> over L.
void copy_gather_rows(int elem_bytes, int chunk_bytes, const uint8_t* src, uint8_t* dst,
                      const RowLayout& L, cudaStream_t stream);

namespace {

__device__ __forceinline__ TileCoords tile_coords(const RowLayout& L, int64_t tile) {
  TileCoords t;
  t.col_threads = int64_t(1) << L.col_log2;
  t.row_threads = kCopyThreads >> L.col_log2;
  t.along_log2 = L.along_log2;
  const int64_t row_group = tile / L.col_tiles;
  const int tx = int(threadIdx.x) & int(t.col_threads - 1);
  const int ty = int(threadIdx.x) >> L.col_log2;
  t.chunk0 = ((tile - row_group * L.col_tiles) << L.along_log2) * t.col_threads + tx;
  t.row0 = ((row_group * t.row_threads) << (kStridedRowUnrollLog2 - L.along_log2)) + ty;
  return t;
}

// Loads ChunkBytes from `src`, aligned to LoadAlign bytes, as ChunkBytes / LoadAlign words.
template <int ChunkBytes, int LoadAlign>
__device__ __forceinline__ typename Word<ChunkBytes>::type load_chunk(const uint8_t* src) {
  using C = typename Word<ChunkBytes>::type;
  if constexpr (LoadAlign == ChunkBytes) {
    return __ldcs(reinterpret_cast<const C*>(src));
  } else {
    using W = typename Word<LoadAlign>::type;
    constexpr int kWords = ChunkBytes / LoadAlign;
    W words[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k) words[k] = __ldcs(reinterpret_cast<const W*>(src) + k);
    C chunk;
    memcpy(&chunk, words, ChunkBytes);
    return chunk;
  }
}

// Rows contiguous in the input (inner stride 1). Chunk `c` of row `r` is a byte-for-byte copy of
// input bytes [row_offset(r) + c * ChunkBytes, ...): every output chunk is ChunkBytes-aligned and
// every input chunk LoadAlign-aligned (the host picks both from the addresses, the row length and
// the strides).
template <int ChunkBytes, int LoadAlign>
__global__ void __launch_bounds__(kCopyThreads)
    copy_rows_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                     const RowLayout L) {
  using C = typename Word<ChunkBytes>::type;
  for (int64_t tile = blockIdx.x; tile < L.n_tiles; tile += gridDim.x) {
    const TileCoords t = tile_coords(L, tile);
    C v[kStridedRowUnroll];
#pragma unroll
    for (int u = 0; u < kStridedRowUnroll; ++u) {
      const int64_t r = t.row(u), c = t.chunk(u);
      if (r < L.rows && c < L.chunks) {
        v[u] = load_chunk<ChunkBytes, LoadAlign>(src + L.row_offset(r) + c * ChunkBytes);
      }
    }
#pragma unroll
    for (int u = 0; u < kStridedRowUnroll; ++u) {
      const int64_t r = t.row(u), c = t.chunk(u);
      if (r < L.rows && c < L.chunks) {
        __stcs(reinterpret_cast<C*>(dst + r * L.row_bytes + c * ChunkBytes), v[u]);
      }
    }
  }
}

// ChunkBytes of output from its ChunkBytes / ElemBytes elements. 1- and 2-byte elements are
// shifted into 32-bit words first: a byte-wise memcpy into a 16-byte vector went through the stack.
template <int ElemBytes, int ChunkBytes>
__device__ __forceinline__ typename Word<ChunkBytes>::type pack_chunk(
    const typename Word<ElemBytes>::type (&e)[ChunkBytes / ElemBytes]) {
  typename Word<ChunkBytes>::type chunk;
  if constexpr (ElemBytes < 4 && ChunkBytes >= 4) {
    constexpr int kPerWord = 4 / ElemBytes;
    uint32_t words[ChunkBytes / 4];
#pragma unroll
    for (int w = 0; w < ChunkBytes / 4; ++w) {
      words[w] = 0;
#pragma unroll
      for (int k = 0; k < kPerWord; ++k) {
        words[w] |= uint32_t(e[w * kPerWord + k]) << (8 * ElemBytes * k);
      }
    }
    memcpy(&chunk, words, ChunkBytes);
  } else {
    memcpy(&chunk, e, ChunkBytes);
  }
  return chunk;
}

// Rows gathered element by element (inner stride != 1): each thread builds ChunkBytes of output
// from ChunkBytes / ElemBytes element loads and stores them as one access. The loads of a warp
// instruction are 32 elements `inner_stride` bytes apart, and the chunk's next element load reads
// the same lines again, so they go through L1 (__ldg), not the streaming hint.
template <int ElemBytes, int ChunkBytes>
__global__ void __launch_bounds__(kCopyThreads)
    copy_gather_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                       const RowLayout L) {
  using E = typename Word<ElemBytes>::type;
  using C = typename Word<ChunkBytes>::type;
  constexpr int kElems = ChunkBytes / ElemBytes;
  for (int64_t tile = blockIdx.x; tile < L.n_tiles; tile += gridDim.x) {
    const TileCoords t = tile_coords(L, tile);
    E e[kStridedRowUnroll][kElems];
#pragma unroll
    for (int u = 0; u < kStridedRowUnroll; ++u) {
      const int64_t r = t.row(u), c = t.chunk(u);
      if (r < L.rows && c < L.chunks) {
        const uint8_t* p = src + L.row_offset(r) + c * kElems * L.inner_stride;
#pragma unroll
        for (int k = 0; k < kElems; ++k) {
          e[u][k] = __ldg(reinterpret_cast<const E*>(p + k * L.inner_stride));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kStridedRowUnroll; ++u) {
      const int64_t r = t.row(u), c = t.chunk(u);
      if (r < L.rows && c < L.chunks) {
        __stcs(reinterpret_cast<C*>(dst + r * L.row_bytes + c * ChunkBytes),
               pack_chunk<ElemBytes, ChunkBytes>(e[u]));
      }
    }
  }
}

// Largest power of two <= 16 that divides v (16 for 0).
inline int pow2_divisor(int64_t v) {
  int a = kVecBytes;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}

// The tile shape for L.chunks chunks per row (see above): chunks in flight along a row only when
// a row has more chunks than the block has threads, as many as it has blocks' worth (up to all).
inline void set_row_tiles(RowLayout& L) {
  int col_log2 = 0;
  while ((int64_t(1) << col_log2) < L.chunks && (1 << col_log2) < kCopyThreads) ++col_log2;
  int along_log2 = 0;
  while (along_log2 < kStridedRowUnrollLog2 && (int64_t(kCopyThreads) << along_log2) < L.chunks) {
    ++along_log2;
  }
  L.col_log2 = col_log2;
  L.along_log2 = along_log2;
  const int64_t row_threads = kCopyThreads >> col_log2;
  const int64_t tile_rows = row_threads << (kStridedRowUnrollLog2 - along_log2);
  L.col_tiles = ceil_div<int64_t>(L.chunks, int64_t(1) << (col_log2 + along_log2));
  L.n_tiles = ceil_div<int64_t>(L.rows, tile_rows) * L.col_tiles;
}

// One block per tile, as the contiguous path: tiles are numbered in output address order, so the
// blocks sweep the output in order, and the block scheduler balances the last wave tile by tile.
// The kernels loop over tiles only beyond 2^31 - 1 of them.
template <typename Kernel>
void launch_row_tiles(Kernel kernel, const uint8_t* src, uint8_t* dst, const RowLayout& L,
                      cudaStream_t stream) {
  const int64_t grid = std::min<int64_t>(L.n_tiles, std::numeric_limits<int32_t>::max());
  kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, L);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// copy_rows_kernel<ChunkBytes, widest load <= ChunkBytes that `load_align` allows>.
template <int ChunkBytes>
void launch_copy_rows(int load_align, const uint8_t* src, uint8_t* dst, const RowLayout& L,
                      cudaStream_t stream) {
  if constexpr (ChunkBytes >= 16) {
    if (load_align >= 16) {
      return launch_row_tiles(copy_rows_kernel<ChunkBytes, 16>, src, dst, L, stream);
    }
  }
  if constexpr (ChunkBytes >= 8) {
    if (load_align >= 8) {
      return launch_row_tiles(copy_rows_kernel<ChunkBytes, 8>, src, dst, L, stream);
    }
  }
  if constexpr (ChunkBytes >= 4) {
    if (load_align >= 4) {
      return launch_row_tiles(copy_rows_kernel<ChunkBytes, 4>, src, dst, L, stream);
    }
  }
  if constexpr (ChunkBytes >= 2) {
    if (load_align >= 2) {
      return launch_row_tiles(copy_rows_kernel<ChunkBytes, 2>, src, dst, L, stream);
    }
  }
  return launch_row_tiles(copy_rows_kernel<ChunkBytes, 1>, src, dst, L, stream);
}

}  // namespace
}  // namespace cudasteps
