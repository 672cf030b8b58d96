// The tile scheduler of the persistent Hopper kernels: the work units a CTA takes (a tile, or a
// pair of tiles for a cluster, with a range of its k-tiles), how many k ranges a small output is
// split into, and the tile width. The tile order itself is tc::TileRaster (tc/common.cuh): grouped,
// so that consecutive tiles share rows of A in L2.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/launch.cuh"
#include "gemm/tc/sm90/config.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Split-K for outputs too small to give every SM a tile: as many k ranges as fill one wave, each
// at least kSplitMinKTiles k-tiles long, and no more than keep the fp32 partials (written and
// read back: 8 * splits * M * N bytes) under a quarter of the operand bytes (2 * K * N, mostly the
// weight): splits <= K / (16 M). Measured on an H100 (bf16, 16-256 rows against 4096 x 4096,
// 8192 x 2048 and 2048 x 8192 weights; ladder variants tc:ws_persistent:bn<w>:s<k>): 16-64 rows
// ran fastest with 4-8 splits, 128 rows against K = 4096 with 1-2 (4 splits: 20% slower), 128 rows
// against K = 2048 with none.
constexpr int kSplitMinKTiles = 8;
constexpr int kSplitMax = 16;

inline int choose_splits(int tiles, int k_tiles, int64_t M, int64_t K, int sms) {
  if (tiles * 2 > sms) return 1;
  const int64_t want = std::min<int64_t>({sms / tiles, kSplitMax, K / (16 * std::max<int64_t>(M, 1))});
  return int(std::max<int64_t>(1, std::min<int64_t>(want, k_tiles / kSplitMinKTiles)));
}

// The tile width of the persistent kernels for a rows x cols output in 128-row tiles: 256 when
// those wider tiles still give every SM one, else 128 (twice the tiles). `forced` (a ladder
// variant's bn<128|256>) wins when non-zero.
inline int persistent_bn(int64_t rows, int64_t cols, int forced) {
  if (forced != 0) return forced;
  return ceil_div<int64_t>(rows, 128) * ceil_div<int64_t>(cols, 256) >= sm_count() ? 256 : 128;
}

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// The k-tiles [kb, ke) of work unit `unit` (its tile is unit / p.splits, its k range unit % splits).
__device__ __forceinline__ void unit_k_range(const HopperParams& p, int unit, int& kb, int& ke) {
  kb = (unit % p.splits) * p.k_tiles_per_split;
  ke = min(p.k_tiles, kb + p.k_tiles_per_split);
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
