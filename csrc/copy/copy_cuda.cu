// CUDA copy: 16-byte vectorized, grid sized from the SM count, with a scalar head and tail.
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
void copy_bytes_cuda(const void* src_ptr, void* dst_ptr, int64_t nbytes, cudaStream_t stream,
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
int pow2_divisor(int64_t v) {
  int a = kVecBytes;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}

// The tile shape for L.chunks chunks per row (see above): chunks in flight along a row only when
// a row has more chunks than the block has threads, as many as it has blocks' worth (up to all).
void set_row_tiles(RowLayout& L) {
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

// copy_gather_kernel<ElemBytes, chunk_bytes>; chunk_bytes is a power of two in [ElemBytes, 16].
template <int ElemBytes>
void launch_copy_gather(int chunk_bytes, const uint8_t* src, uint8_t* dst, const RowLayout& L,
                        cudaStream_t stream) {
  if (chunk_bytes >= 16) {
    return launch_row_tiles(copy_gather_kernel<ElemBytes, 16>, src, dst, L, stream);
  }
  if constexpr (ElemBytes <= 8) {
    if (chunk_bytes >= 8) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 8>, src, dst, L, stream);
    }
  }
  if constexpr (ElemBytes <= 4) {
    if (chunk_bytes >= 4) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 4>, src, dst, L, stream);
    }
  }
  if constexpr (ElemBytes <= 2) {
    if (chunk_bytes >= 2) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 2>, src, dst, L, stream);
    }
  }
  return launch_row_tiles(copy_gather_kernel<ElemBytes, ElemBytes>, src, dst, L, stream);
}

// A contiguous `out` from a strided `in` by rows (see "Strided views: rows"). Returns false
// (nothing launched) when the output is not element-aligned, which no tensor of PyTorch's
// allocator is.
bool copy_strided_rows(at::Tensor& out, const at::Tensor& in, cudaStream_t stream) {
  const StridedPair p = make_strided_pair(out, in, "copy");
  const int64_t elem = in.element_size();
  const int last = p.ndim - 1;
  RowLayout L;
  L.outer_dims = last;
  L.rows = 1;
  for (int d = 0; d < last; ++d) {
    L.outer_sizes[d] = p.sizes[d];
    L.outer_strides[d] = p.in_strides[d] * elem;
    L.rows *= p.sizes[d];
  }
  L.index32 = L.rows <= int64_t(std::numeric_limits<uint32_t>::max());
  L.row_bytes = p.sizes[last] * elem;
  L.inner_stride = p.in_strides[last] * elem;
  const auto* src = static_cast<const uint8_t*>(in.const_data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  // Output rows are contiguous one after another: chunks as wide as the output address and the
  // row length allow, so that no chunk straddles two rows.
  const int chunk_bytes = std::min(alignment_of(dst), pow2_divisor(L.row_bytes));
  if (chunk_bytes < elem) return false;
  L.chunks = L.row_bytes / chunk_bytes;
  set_row_tiles(L);
  if (p.in_strides[last] == 1) {
    if (last == 0) {  // a single contiguous run (the input differs only in size-1 dims' strides)
      copy_bytes_cuda(src, dst, L.row_bytes, stream);
      return true;
    }
    // Every input row start must allow the load width: the base address and each outer stride.
    int load_align = std::min(chunk_bytes, alignment_of(src));
    for (int d = 0; d < last; ++d) {
      load_align = std::min(load_align, pow2_divisor(L.outer_strides[d]));
    }
    switch (chunk_bytes) {
      case 16: launch_copy_rows<16>(load_align, src, dst, L, stream); break;
      case 8: launch_copy_rows<8>(load_align, src, dst, L, stream); break;
      case 4: launch_copy_rows<4>(load_align, src, dst, L, stream); break;
      case 2: launch_copy_rows<2>(load_align, src, dst, L, stream); break;
      default: launch_copy_rows<1>(load_align, src, dst, L, stream); break;
    }
    return true;
  }
  switch (elem) {
    case 1: launch_copy_gather<1>(chunk_bytes, src, dst, L, stream); return true;
    case 2: launch_copy_gather<2>(chunk_bytes, src, dst, L, stream); return true;
    case 4: launch_copy_gather<4>(chunk_bytes, src, dst, L, stream); return true;
    case 8: launch_copy_gather<8>(chunk_bytes, src, dst, L, stream); return true;
    case 16: launch_copy_gather<16>(chunk_bytes, src, dst, L, stream); return true;
    default: return false;
  }
}

// Both tensors dense with the same strides: their bytes line up one to one.
bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense() &&
         a.strides() == b.strides();
}

void copy_cuda_impl(at::Tensor& out, const at::Tensor& in) {
  if (in.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(out.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (same_dense_layout(out, in)) {
    copy_bytes_cuda(in.const_data_ptr(), out.data_ptr(), in.numel() * in.element_size(), stream);
  } else if (out.is_contiguous() && is_transposed_contiguous(in)) {
    copy_transposed_view(out, in);
  } else if (!(out.is_contiguous() && copy_strided_rows(out, in, stream))) {
    dispatch_elem_bytes<StridedCopy>(in.element_size(), "copy", in, out, stream);
  }
}

at::Tensor copy_cuda(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  copy_cuda_impl(out, self);
  return out;
}

void copy__cuda(at::Tensor& out, const at::Tensor& src) {
  if (check_copy_args(out, src)) copy_cuda_impl(out, src);
}

// ---- Ladder -------------------------------------------------------------------------------------

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

template <int ElemBytes>
struct LadderScalar {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    const int64_t grid = ceil_div<int64_t>(numel, kCopyThreads);
    copy_scalar_kernel<ElemBytes><<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

template <int ElemBytes>
struct LadderGridStride {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    const auto kernel = copy_grid_stride_kernel<ElemBytes>;
    const int64_t grid = persistent_grid(kernel, kCopyThreads, numel, kCopyThreads);
    kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

at::Tensor ladder_copy_cuda(const at::Tensor& self, c10::string_view variant) {
  constexpr const char* op = "ladder_copy";
  CUDASTEPS_CHECK(self.is_contiguous(), op, "self must be contiguous, got strides ",
                  self.strides());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (self.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const auto* src = static_cast<const uint8_t*>(self.const_data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  if (variant == "scalar") {
    dispatch_elem_bytes<LadderScalar>(self.element_size(), op, src, dst, self.numel(), stream);
  } else if (variant == "grid_stride") {
    dispatch_elem_bytes<LadderGridStride>(self.element_size(), op, src, dst, self.numel(), stream);
  } else if (variant == "vec16_persistent") {
    copy_bytes_cuda(src, dst, self.numel() * self.element_size(), stream, CopyGrid::kPersistent);
  } else if (variant == "vec16") {
    copy_bytes_cuda(src, dst, self.numel() * self.element_size(), stream, CopyGrid::kOneShot);
  } else {
    CUDASTEPS_CHECK(false, op, "variant must be one of scalar, grid_stride, vec16_persistent, vec16, got '",
                    std::string(variant), "'");
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("copy", &copy_cuda);
  m.impl("copy_", &copy__cuda);
  m.impl("ladder_copy", &ladder_copy_cuda);
}

}  // namespace cudasteps
