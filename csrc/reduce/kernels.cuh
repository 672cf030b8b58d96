// The CUDA sum's kernels, on the warp -> block primitives of common/*_reduce.cuh:
//
//   sum_full_kernel  all elements, one launch: each block reduces a grid-stride share (16-byte
//                    loads) to a partial in its stream's scratch slot; the last block to finish (a
//                    ticket from an integer atomic, used for ordering only) adds the partials in a
//                    fixed order.
//   sum_rows_kernel  [outer, inner] reducing inner: a warp per row for short rows, a block per row
//                    (or per row segment, plus a second pass over the segments) for long ones.
//   sum_cols_kernel  [batch, rows, cols] reducing rows: threads walk columns (a warp reads 512
//                    contiguous bytes per row), row ranges split across blocks when the columns
//                    alone cannot fill the GPU, then a second pass over the splits.
//   sum_cols_flat_kernel  the same shape with many outputs (batch * cols): a thread per output.
// Any dim set is a sequence of these passes over the input in place (reduce.h). Their launchers
// are launchers.cuh's; the loads here (strided_share) also serve the ladder (ladder_cuda.cu).
//
// Determinism: every grid, split and combine order depends only on the shape, the dtype and the
// SM count, and no floating-point atomics are used, so a result is bitwise reproducible on a
// given GPU model. Accuracy: each thread keeps a few independent running sums over its share,
// above which the block and grid combine in balanced trees.
//
// Device code only, and light (CUDA's runtime, c10's Half and BFloat16, nothing of ATen): every
// kernel unit of the family includes it, and ATen's headers would cost each about 20 s of
// compile time.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "reduce/launch.h"

namespace cudasteps {
namespace reduce {

// ---- Loads ------------------------------------------------------------------------------------

// Elements of T in one 16-byte load.
template <typename T>
constexpr int kVec = elems_per_vec16<T>();

// Element k of the 16 bytes in `words`, extracted with shifts so that everything stays in
// registers (a memcpy of the whole vector into a char or half array put it on the stack).
template <typename T>
__device__ __forceinline__ T element_of(const uint32_t (&words)[4], int k) {
  T v;
  if constexpr (sizeof(T) == 8) {
    const uint64_t bits = uint64_t(words[2 * k]) | (uint64_t(words[2 * k + 1]) << 32);
    memcpy(&v, &bits, 8);
  } else if constexpr (sizeof(T) == 4) {
    memcpy(&v, &words[k], 4);
  } else if constexpr (sizeof(T) == 2) {
    const uint16_t bits = uint16_t(words[k / 2] >> (16 * (k % 2)));
    memcpy(&v, &bits, 2);
  } else {
    const uint8_t bits = uint8_t(words[k / 4] >> (8 * (k % 4)));
    memcpy(&v, &bits, 1);
  }
  return v;
}

// N elements from p: one 16-byte load when N elements are 16 bytes (p then 16-byte aligned).
template <typename T, int N>
__device__ __forceinline__ void load_pack(const T* p, T (&vals)[N]) {
  if constexpr (N * sizeof(T) == kVecBytes) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < N; ++k) vals[k] = element_of<T>(words, k);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) vals[k] = p[k];
  }
}

// v[0] = v[0] + ... + v[2W - 1] as a balanced tree. A template recursion rather than a halving
// loop: every index is a compile-time constant, so v stays in registers (the loop form left a
// 16 x int64 array on the stack).
template <int W, typename A>
__device__ __forceinline__ void tree_fold(A* v) {
  if constexpr (W > 0) {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] += v[k + W];
    tree_fold<W / 2>(v);
  }
}

// Sum of a pack, as a balanced tree.
template <typename acc_t, typename T, int N>
__device__ __forceinline__ acc_t pack_sum(const T (&vals)[N]) {
  acc_t v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = static_cast<acc_t>(vals[k]);
  tree_fold<N / 2>(v);
  return v[0];
}

// Elements before p reaches a 16-byte boundary (p is element-aligned, as every tensor is).
template <typename T>
__host__ __device__ __forceinline__ int64_t head_elems(const T* p, int64_t n) {
  const int64_t bytes = (kVecBytes - int64_t(reinterpret_cast<uintptr_t>(p) % kVecBytes)) % kVecBytes;
  const int64_t elems = bytes / int64_t(sizeof(T));
  return elems < n ? elems : n;
}

// 16-byte loads each thread issues before adding any of them: with 2048 resident threads per SM,
// 4 x 16 B each is 128 KiB in flight per SM, several times what Little's law asks for ~3 TB/s.
constexpr int kLoadUnroll = 4;

// This thread's share (lane `lane` of a group of `group` threads) of the sum of x[0, n): the
// aligned body in 16-byte loads, the unaligned head and tail element by element.
template <typename in_t, typename acc_t>
__device__ __forceinline__ acc_t strided_share(const in_t* __restrict__ x, int64_t n, int64_t lane,
                                               int64_t group) {
  constexpr int V = kVec<in_t>;
  const int64_t head = head_elems(x, n);
  const int64_t n_vec = (n - head) / V;
  const in_t* body = x + head;
  acc_t acc[kLoadUnroll];
#pragma unroll
  for (int u = 0; u < kLoadUnroll; ++u) acc[u] = acc_t(0);
  int64_t i = lane;
  for (; i + (kLoadUnroll - 1) * group < n_vec; i += kLoadUnroll * group) {
    in_t vals[kLoadUnroll][V];
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) load_pack(body + (i + u * group) * V, vals[u]);
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) acc[u] += pack_sum<acc_t>(vals[u]);
  }
  // Fewer than kLoadUnroll loads left (the grid rarely divides the input): still all in flight
  // before the first add. A loop over them would wait a full memory latency per load, and the
  // lanes that drew the remainder would finish that many round trips after the others: for a
  // small sum, whose every lane loads once, that tail is most of the kernel's time.
  // The raw 16 bytes are held until the adds (4 registers each, where unpacked 1-byte elements
  // widened to int64 took 16 x 2).
  if (i < n_vec) {
    uint4 raw[kLoadUnroll - 1];
#pragma unroll
    for (int u = 0; u < kLoadUnroll - 1; ++u) {
      if (i + u * group < n_vec) {
        raw[u] = *reinterpret_cast<const uint4*>(body + (i + u * group) * V);
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadUnroll - 1; ++u) {
      if (i + u * group < n_vec) {
        const uint32_t words[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
        in_t vals[V];
#pragma unroll
        for (int k = 0; k < V; ++k) vals[k] = element_of<in_t>(words, k);
        acc[u] += pack_sum<acc_t>(vals);
      }
    }
  }
  // head < V and tail < V elements: lanes 0..V-1 take one of each.
  const int64_t tail_begin = head + n_vec * V;
  if (lane < head) acc[0] += static_cast<acc_t>(x[lane]);
  if (lane < n - tail_begin) acc[1 % kLoadUnroll] += static_cast<acc_t>(x[tail_begin + lane]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}
static_assert(kLoadUnroll == 4, "strided_share combines exactly four accumulators");

// ---- Full reduction: single pass ----------------------------------------------------------------

// kFullThreads, the block size, is in launch.h (reduce_cuda.cpp sizes the scratch slots by it).

template <typename in_t, typename acc_t, typename out_t>
__global__ void __launch_bounds__(kFullThreads)
    sum_full_kernel(const in_t* __restrict__ x, int64_t n, acc_t* __restrict__ partials,
                    unsigned* __restrict__ ticket, out_t* __restrict__ out) {
  __shared__ acc_t scratch[kFullThreads / kWarpSize];
  __shared__ bool is_last;
  const acc_t mine = strided_share<in_t, acc_t>(x, n, int64_t(blockIdx.x) * kFullThreads + threadIdx.x,
                                                int64_t(gridDim.x) * kFullThreads);
  const acc_t block_total = block_sum<kFullThreads>(mine, scratch);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) *out = static_cast<out_t>(block_total);
    return;
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_total;
    __threadfence();  // the partial is visible device-wide before the ticket is taken
    is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // Fixed order: thread t adds partials t, t + 512, ...; then the block tree. Volatile loads skip
  // L1, which may hold nothing of these lines anyway but is not coherent across SMs.
  const volatile acc_t* vp = partials;
  acc_t acc = acc_t(0);
  for (int b = threadIdx.x; b < int(gridDim.x); b += kFullThreads) acc += vp[b];
  acc = block_sum<kFullThreads>(acc, scratch);
  if (threadIdx.x == 0) {
    *out = static_cast<out_t>(acc);
    *ticket = 0u;  // ready for the next launch on this stream
  }
}

// ---- Row sums -----------------------------------------------------------------------------------

// Rows up to this many elements get one warp each (8 warps, 8 rows, per block); longer rows get a
// block of kRowBlockThreads.
constexpr int64_t kWarpRowMax = 2048;
constexpr int kRowWarpThreads = 256;
constexpr int kRowBlockThreads = 256;
// A row is split into segments (second pass over the segment sums) only when there are too few
// rows to fill the GPU, and never into segments shorter than this.
constexpr int64_t kMinRowSegment = 16384;
// Blocks of the warp-per-row kernel: rows are walked grid-stride beyond this many waves.
constexpr int64_t kRowWaves = 32;

// out[r] = sum of row r of [outer, inner] (leading dimension inner), one warp per row.
template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kRowWarpThreads)
    sum_rows_warp_kernel(const in_t* __restrict__ x, int64_t outer, int64_t inner,
                         res_t* __restrict__ out) {
  constexpr int kWarps = kRowWarpThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; row < outer;
       row += int64_t(gridDim.x) * kWarps) {
    acc_t acc = strided_share<in_t, acc_t>(x + row * inner, inner, lane, kWarpSize);
    acc = warp_sum(acc);
    if (lane == 0) out[row] = static_cast<res_t>(acc);
  }
}

// out[task] = sum of segment (task % segments) of row (task / segments), one block per task.
template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kRowBlockThreads)
    sum_rows_block_kernel(const in_t* __restrict__ x, int64_t outer, int64_t inner, int64_t segments,
                          int64_t segment_len, res_t* __restrict__ out) {
  __shared__ acc_t scratch[kRowBlockThreads / kWarpSize];
  const int64_t tasks = outer * segments;
  // The loop bound is uniform across the block, so every thread reaches block_sum's barriers.
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t row = task / segments;
    const int64_t begin = (task % segments) * segment_len;
    const int64_t len = std::min(segment_len, inner - begin);
    acc_t acc = strided_share<in_t, acc_t>(x + row * inner + begin, len, threadIdx.x, kRowBlockThreads);
    acc = block_sum<kRowBlockThreads>(acc, scratch);
    if (threadIdx.x == 0) out[task] = static_cast<res_t>(acc);
  }
}

// ---- Column sums --------------------------------------------------------------------------------

// A block is kColThreadsX x kColThreadsY: x walks columns (32 threads x 16 bytes = 512 contiguous
// bytes of a row per warp, four whole 128-byte lines), y walks rows 8 apart.
constexpr int kColThreadsX = 32;
constexpr int kColThreadsY = 8;
constexpr int kColThreads = kColThreadsX * kColThreadsY;
// Rows each thread loads before adding (loads in flight).
constexpr int kColUnroll = 4;
// Splits never cover fewer rows than this (each thread then still has kColUnroll rows or more).
constexpr int64_t kMinRowsPerSplit = kColThreadsY * kColUnroll;
constexpr int64_t kMaxGridY = 65535;

// Sums rows [split * rows_per_split, ...) of [batch, rows, cols] for a tile of kColThreadsX * VC
// columns. VC columns per thread: kVec (one 16-byte load) when every row start is 16-byte aligned,
// else 1. out is [batch, gridDim.y, cols] (gridDim.y == 1: the final [batch, cols]).
template <typename in_t, typename acc_t, typename res_t, int VC>
__global__ void __launch_bounds__(kColThreads)
    sum_cols_kernel(const in_t* __restrict__ x, int64_t batch, int64_t rows, int64_t cols,
                    int64_t rows_per_split, res_t* __restrict__ out) {
  // [y][column within thread][x]: the stores and the loads of the final add are conflict-free
  // (consecutive x, consecutive words).
  __shared__ acc_t partial[kColThreadsY][VC][kColThreadsX];
  constexpr int64_t kTileCols = int64_t(kColThreadsX) * VC;
  const int64_t tiles_per_batch = ceil_div(cols, kTileCols);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t split = blockIdx.y;
  const int64_t r_begin = split * rows_per_split;
  const int64_t r_end = std::min(rows, r_begin + rows_per_split);
  for (int64_t tile = blockIdx.x; tile < batch * tiles_per_batch; tile += gridDim.x) {
    const int64_t b = tile / tiles_per_batch;
    const int64_t col = (tile % tiles_per_batch) * kTileCols + int64_t(tx) * VC;
    // col < cols means all VC columns exist: when VC > 1, cols is a multiple of VC.
    const bool active = col < cols;
    const in_t* base = x + b * rows * cols + col;
    acc_t acc[VC];
#pragma unroll
    for (int c = 0; c < VC; ++c) acc[c] = acc_t(0);
    if (active) {
      int64_t r = r_begin + ty;
      for (; r + (kColUnroll - 1) * kColThreadsY < r_end; r += kColUnroll * kColThreadsY) {
        in_t vals[kColUnroll][VC];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) load_pack(base + (r + u * kColThreadsY) * cols, vals[u]);
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) {
#pragma unroll
          for (int c = 0; c < VC; ++c) acc[c] += static_cast<acc_t>(vals[u][c]);
        }
      }
      for (; r < r_end; r += kColThreadsY) {
        in_t vals[VC];
        load_pack(base + r * cols, vals);
#pragma unroll
        for (int c = 0; c < VC; ++c) acc[c] += static_cast<acc_t>(vals[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < VC; ++c) partial[ty][c][tx] = acc[c];
    __syncthreads();
    if (ty == 0 && active) {
      res_t* dst = out + (b * gridDim.y + split) * cols + col;
#pragma unroll
      for (int c = 0; c < VC; ++c) {
        // Balanced tree over the 8 row phases.
        acc_t s[kColThreadsY];
#pragma unroll
        for (int y = 0; y < kColThreadsY; ++y) s[y] = partial[y][c][tx];
        tree_fold<kColThreadsY / 2>(s);
        dst[c] = static_cast<res_t>(s[0]);
      }
    }
    __syncthreads();  // partial is rewritten by the next tile
  }
}

// Column sums with many batches of narrow rows ([4096, 33, 517] summed over dim 1): one thread
// per output (b, c), walking its column down the rows with kFlatColUnroll loads in flight. A warp
// covers 32 adjacent outputs, so each of its loads is 32 adjacent elements of one row (or two
// rows at a batch boundary): coalesced whatever cols is, with no idle lanes in partial tiles,
// which the tile kernel has when cols is not a multiple of its 32 x 16-byte tile.
constexpr int kFlatColThreads = 256;
constexpr int kFlatColUnroll = 8;

template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kFlatColThreads)
    sum_cols_flat_kernel(const in_t* __restrict__ x, int64_t batch, int64_t rows, int64_t cols,
                         res_t* __restrict__ out) {
  const int64_t n = batch * cols;
  const int64_t stride = int64_t(gridDim.x) * kFlatColThreads;
  for (int64_t o = int64_t(blockIdx.x) * kFlatColThreads + threadIdx.x; o < n; o += stride) {
    const int64_t b = o / cols;
    const in_t* col = x + b * rows * cols + (o - b * cols);
    acc_t acc[4] = {acc_t(0), acc_t(0), acc_t(0), acc_t(0)};
    int64_t r = 0;
    for (; r + kFlatColUnroll <= rows; r += kFlatColUnroll) {
      in_t v[kFlatColUnroll];
#pragma unroll
      for (int u = 0; u < kFlatColUnroll; ++u) v[u] = col[(r + u) * cols];
#pragma unroll
      for (int u = 0; u < kFlatColUnroll; ++u) acc[u % 4] += static_cast<acc_t>(v[u]);
    }
    for (; r < rows; ++r) acc[0] += static_cast<acc_t>(col[r * cols]);  // constant index: registers
    out[o] = static_cast<res_t>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

}  // namespace reduce
}  // namespace cudasteps
