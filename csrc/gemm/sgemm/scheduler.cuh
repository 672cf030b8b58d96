// The SGEMM's tile scheduler: the grouped order in which blocks take output tiles (tile_origin),
// and the stream-K tail, which shares the last, partial wave's K iterations over all SMs
// (the range of each block; StreamKParams is in tile_config.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gemm/sgemm/tile_config.cuh"

namespace cudasteps {
namespace gemm {

// First output row and column of output tile `tile`. Grouped order: kGroupM tile rows at a time,
// column by column inside the group, so that consecutive tiles share panels of A and B in L2.
template <class Cfg>
__device__ __forceinline__ void tile_origin(const SgemmParams& p, int tile, int64_t& m0,
                                            int64_t& n0) {
  const int tiles_per_group = kGroupM * p.tiles_n;
  const int first_m = (tile / tiles_per_group) * kGroupM;
  const int group_rows = min(p.tiles_m - first_m, kGroupM);
  const int in_group = tile % tiles_per_group;
  m0 = int64_t(first_m + in_group % group_rows) * Cfg::BM;
  n0 = int64_t(in_group / group_rows) * Cfg::BN;
}

// ---- stream-K tail ----
//
// A product of T tiles on S SMs (one block per SM) runs floor(T / S) full waves and a last wave
// of `tail` = T % S tiles that leaves the other SMs idle (8192^3 at 256x128: 15 waves + 68 of
// 132). With the stream-K tail, sgemm_kernel runs the full waves (tiles [0, dp_tiles)) and
// sgemm_streamk_kernel shares the tail tiles' K iterations (slices of BK, iters_per_tile per
// tile) evenly over `blocks` blocks, one per SM: block b takes iterations
// [b * I / blocks, (b + 1) * I / blocks) of the tail's I = tail * iters_per_tile, tile by tile.
// With tail <= blocks that is a part of at most two tiles: the end of one and the start of the
// next. Each part's partial sums go to one of the block's two workspace slots; the block that
// writes a tile's last part adds up the tile's parts in block order (deterministic: the same order
// whichever block comes last; no floating-point atomics; no block waits on another) and stores it.
// Its parameters, StreamKParams, are in tile_config.cuh beside SgemmParams (host code fills them).

// First tail iteration of block b's range.
__host__ __device__ __forceinline__ int64_t streamk_begin(const StreamKParams& sk, int b) {
  return int64_t(b) * sk.iters / sk.blocks;
}

// The block whose range holds tail iteration `it` (no range is empty: blocks <= iters).
__device__ __forceinline__ int streamk_block_of(const StreamKParams& sk, int64_t it) {
  int b = int(it * sk.blocks / sk.iters);
  while (b > 0 && streamk_begin(sk, b) > it) --b;
  while (streamk_begin(sk, b + 1) <= it) ++b;
  return b;
}

}  // namespace gemm
}  // namespace cudasteps
