// CUDA transpose kernels: (..., M, N) -> contiguous (..., N, M), through a swizzled shared-memory
// tile.
//
// Final kernel (transpose_final_kernel). The matrix is moved in *words*: what one thread loads or
// stores in one global access.
//   - 8-byte elements: a word is one element.
//   - 4- and 2-byte elements: a word is 8 bytes holding K = 8 / elem_size elements of one row;
//     1-byte elements: 4-byte words, K = 4. A thread loads K words from K consecutive input rows
//     (a K x K micro-block), transposes the micro-block in registers (shifts and masks), and so
//     holds K words of K consecutive *output* rows.
//     This needs M, N, the input strides and both pointers to be multiples of the word; otherwise
//     the same kernel runs with narrower words (down to one element per word: still correct).
// A tile is kTileWordCols (32) words of input row, so that one warp reads one 128-byte (256-byte
// for 8-byte elements) row segment per load instruction, by kMicroRows micro-block rows. It sits
// in shared memory already transposed, as kTileWordCols * K output rows of kMicroRows words, so a
// warp writes 32 consecutive words of one output row per store instruction (128 / 256 bytes).
//
// Bank conflicts. Word (orow, wc) of the transposed tile is stored at column wc ^ (orow / K % 32).
// Rows are kMicroRows words (a multiple of 32), so a word's bank is (its physical column) mod 32:
//   - shared store (read phase): a warp holds one micro-block row mb and lanes 0..31, so lane l
//     writes orow = l * K + j, column mb ^ l: 32 different banks.
//   - shared load (write phase): a warp reads 32 consecutive columns wc of one orow; the XOR with
//     a per-row constant below 32 permutes them: 32 different banks.
// For 8-byte words each half-warp is one shared-memory wavefront, and 16 consecutive lanes still
// map to 16 distinct bank pairs. No padding is needed, so each row stays 16-byte aligned.
//
// Bytes in flight. Every thread issues all its loads (4 x K words: 64 bytes for 8-byte words with
// K = 2, 128 with K = 4) before its first shared store, well above the ~25 KiB per SM that Little's
// law asks of 3 TB/s at ~1 us DRAM latency.
//
// Tiles are numbered (matrix, tile row, tile column) along blockIdx.x with a grid-stride loop, so
// no grid dimension is limited to 65535 and there is no block-index swap to get wrong: each block
// computes its tile's input origin (row0, col0) and writes output rows col0.. and columns row0...
//
// Ladder (ladder_transpose, fp32, contiguous input):
//   naive_row  one thread per element, coalesced read, stride-M write     transpose_naive_row_kernel
//   naive_col  one thread per element, stride-N read (__ldg), coalesced write  ..._naive_col_kernel
//   smem       32x32 tile, 32x8 threads, tile[32][32]: 32-way conflicts on the column read
//   padded     same, tile[32][33]: row r starts at bank r, so the column read is conflict-free
//   final      the kernel above
//
// Device code only, and light (CUDA's runtime, nothing of ATen): its unit (launchers.cu) would
// otherwise pay about 20 s of compile time for ATen's headers. The launchers are launchers.cu's,
// the choice among them (word width, ladder step) transpose_cuda.cpp's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/launch.cuh"
#include "transpose/problem.h"

namespace cudasteps {
namespace transpose {

constexpr int kWarp = 32;
// Block of 32 x 8 threads: x is the lane (one word column), y steps over micro-block rows.
constexpr int kThreadsX = kWarp;
constexpr int kThreadsY = 8;
constexpr int kThreads = kThreadsX * kThreadsY;
// Words per input-row segment of a tile: one per lane, so a warp's load is one 128 B (E <= 4) or
// 256 B (E = 8) contiguous segment.
constexpr int kTileWordCols = kWarp;
// Largest grid.x; the grid-stride loop covers any number of tiles beyond it.
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1;

template <int Bytes> struct UInt;
template <> struct UInt<1> { using type = uint8_t; };
template <> struct UInt<2> { using type = uint16_t; };
template <> struct UInt<4> { using type = uint32_t; };
template <> struct UInt<8> { using type = uint64_t; };

// q = a / b, r = a - q * b for a >= 0, b > 0, in 32-bit arithmetic when both fit (a 64-bit
// division is a ~70-instruction subroutine; tile and element indices of tensors below 2^32 elements
// never need it). The branch is uniform across a warp whenever the sizes are.
__device__ __forceinline__ void div_mod(int64_t a, int64_t b, int64_t& q, int64_t& r) {
  if (((a | b) >> 32) == 0) {
    const uint32_t q32 = uint32_t(a) / uint32_t(b);
    q = q32;
    r = int64_t(uint32_t(a) - q32 * uint32_t(b));
  } else {
    q = a / b;
    r = a - q * b;
  }
}

// out[j] holds element j of each in[i], at element position i: the K x K micro-block transposed.
template <typename Word, int K>
__device__ __forceinline__ void transpose_micro(const Word (&in)[K], Word (&out)[K]) {
  if constexpr (K == 1) {
    out[0] = in[0];
  } else {
    constexpr int kBits = 8 * int(sizeof(Word)) / K;
    constexpr Word kMask = Word((Word(1) << kBits) - 1);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      Word v = 0;
#pragma unroll
      for (int i = 0; i < K; ++i) v |= Word(((in[i] >> (kBits * j)) & kMask) << (kBits * i));
      out[j] = v;
    }
  }
}

// Elem: the element as an unsigned integer of its size. Word: what a thread moves per access
// (Elem itself, or uint32_t packing K = 4 / sizeof(Elem) elements). kMicroRows: micro-block rows
// per tile (a multiple of kThreadsY and of 32).
template <typename Elem, typename Word, int kMicroRows>
__global__ void __launch_bounds__(kThreads)
    transpose_final_kernel(const Elem* __restrict__ in, Elem* __restrict__ out, TransposeProblem p,
                           int64_t tiles_rows, int64_t tiles_cols) {
  constexpr int K = int(sizeof(Word) / sizeof(Elem));
  constexpr int kTileRows = kMicroRows * K;      // input rows per tile
  constexpr int kTileCols = kTileWordCols * K;   // input columns per tile = output rows
  constexpr int kLoadsPerThread = kMicroRows / kThreadsY;
  constexpr int kStoresPerThread = kTileCols * kMicroRows / kThreads;
  static_assert(kMicroRows % kWarp == 0, "rows of the shared tile must span all 32 banks");
  static_assert(kMicroRows % kThreadsY == 0, "each thread loads whole micro-block rows");
  static_assert((kTileCols * kMicroRows) % kThreads == 0, "each thread stores whole words");
  // The transposed tile: output row orow (input column), word column wc (micro-block row), stored at
  // column wc ^ swizzle(orow).
  __shared__ Word tile[kTileCols][kMicroRows];

  const int lane = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t tiles_per_matrix = tiles_rows * tiles_cols;
  const int64_t n_tiles = tiles_per_matrix * p.batch;
  const int64_t M = p.rows;
  const int64_t N = p.cols;

  for (int64_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    int64_t b, in_matrix, tile_r, tile_c;
    div_mod(t, tiles_per_matrix, b, in_matrix);
    div_mod(in_matrix, tiles_cols, tile_r, tile_c);
    const int64_t row0 = tile_r * kTileRows;  // first input row = first output column
    const int64_t col0 = tile_c * kTileCols;  // first input column = first output row
    const Elem* src = in + b * p.in_batch_stride;
    Elem* dst = out + b * M * N;

    // Read phase: K words of lane's column from K rows of each of this thread's micro-block rows.
    // N is a multiple of K here, so a word is either wholly inside the matrix or wholly outside.
    const int64_t c = col0 + int64_t(lane) * K;
    const bool col_in = c < N;
    Word w[kLoadsPerThread][K];
#pragma unroll
    for (int q = 0; q < kLoadsPerThread; ++q) {
      const int mb = ty + q * kThreadsY;
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const int64_t r = row0 + int64_t(mb) * K + i;
        w[q][i] = (col_in && r < M) ? *reinterpret_cast<const Word*>(src + r * p.in_row_stride + c)
                                    : Word(0);
      }
    }
#pragma unroll
    for (int q = 0; q < kLoadsPerThread; ++q) {
      const int mb = ty + q * kThreadsY;
      Word tw[K];
      transpose_micro<Word, K>(w[q], tw);
#pragma unroll
      for (int j = 0; j < K; ++j) tile[lane * K + j][mb ^ lane] = tw[j];  // swizzle(l*K+j) = l
    }
    __syncthreads();

    // Write phase: each warp writes 32 consecutive words of one output row.
#pragma unroll
    for (int s = 0; s < kStoresPerThread; ++s) {
      const int flat = s * kThreads + ty * kThreadsX + lane;
      const int orow = flat / kMicroRows;
      const int wc = flat % kMicroRows;
      const int64_t o = col0 + orow;                // output row
      const int64_t m = row0 + int64_t(wc) * K;     // output column (first element of the word)
      const Word v = tile[orow][wc ^ ((orow / K) % kWarp)];
      if (o < N && m < M) *reinterpret_cast<Word*>(dst + o * M + m) = v;
    }
    __syncthreads();  // the next tile overwrites `tile`
  }
}

// ---- Ladder (fp32, contiguous (..., M, N)) ------------------------------------------------------

constexpr int kNaiveThreads = 256;
// The textbook tile: 32 x 32 floats, 32 x 8 threads, each thread moving 4 elements.
constexpr int kTile = 32;

// Step 1: thread i reads input element i (coalesced) and writes it M elements apart from its
// neighbour's (every 4-byte store its own 32-byte sector).
__global__ void __launch_bounds__(kNaiveThreads)
    transpose_naive_row_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t M,
                               int64_t N, int64_t numel) {
  const int64_t mn = M * N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, rem, r, c;
    div_mod(i, mn, b, rem);
    div_mod(rem, N, r, c);
    out[b * mn + c * M + r] = in[i];
  }
}

// Step 2: thread j writes output element j (coalesced) and reads N elements apart through the
// read-only (texture) path, whose cache catches part of the reuse of each fetched sector.
__global__ void __launch_bounds__(kNaiveThreads)
    transpose_naive_col_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t M,
                               int64_t N, int64_t numel) {
  const int64_t mn = M * N;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < numel;
       j += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, rem, n, m;
    div_mod(j, mn, b, rem);
    div_mod(rem, M, n, m);
    out[j] = __ldg(in + b * mn + m * N + n);
  }
}

// Steps 3 and 4: the shared-memory tile, with kPad floats of padding per row.
template <int kPad>
__device__ __forceinline__ void transpose_tile32(const float* __restrict__ in, float* __restrict__ out,
                                                 int64_t batch, int64_t M, int64_t N) {
  __shared__ float tile[kTile][kTile + kPad];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t tiles_rows = ceil_div<int64_t>(M, kTile);
  const int64_t tiles_cols = ceil_div<int64_t>(N, kTile);
  const int64_t per_matrix = tiles_rows * tiles_cols;
  const int64_t mn = M * N;
  for (int64_t t = blockIdx.x; t < per_matrix * batch; t += gridDim.x) {
    int64_t b, in_matrix, tr, tc;
    div_mod(t, per_matrix, b, in_matrix);
    div_mod(in_matrix, tiles_cols, tr, tc);
    const int64_t row0 = tr * kTile;
    const int64_t col0 = tc * kTile;
    const float* src = in + b * mn;
    float* dst = out + b * mn;
#pragma unroll
    for (int j = 0; j < kTile; j += kThreadsY) {
      const int64_t r = row0 + ty + j;
      const int64_t c = col0 + tx;
      if (r < M && c < N) tile[ty + j][tx] = src[r * N + c];
    }
    __syncthreads();
    // Output row col0 + ty + j holds input column col0 + ty + j: read it down the tile's column.
#pragma unroll
    for (int j = 0; j < kTile; j += kThreadsY) {
      const int64_t o = col0 + ty + j;
      const int64_t m = row0 + tx;
      if (o < N && m < M) dst[o * M + m] = tile[tx][ty + j];
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    transpose_smem_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch,
                          int64_t M, int64_t N) {
  // Rows of 32 floats: tile[tx][k] sits in bank k for every tx, so the column read is 32-way.
  transpose_tile32<0>(in, out, batch, M, N);
}

__global__ void __launch_bounds__(kThreads)
    transpose_padded_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch,
                            int64_t M, int64_t N) {
  // Rows of 33 floats: tile[tx][k] sits in bank (tx + k) % 32: 32 lanes, 32 banks.
  transpose_tile32<1>(in, out, batch, M, N);
}

}  // namespace transpose
}  // namespace cudasteps
