// The tile scheduler of the persistent Hopper kernels: the work units a CTA takes (a tile, or a
// pair of tiles for a cluster, with a range of its k-tiles; UnitWalk), how many k ranges a small
// output is split into (split-K) or which tiles of the last wave are cut into k ranges (tail
// split), and the tile width. The tile order itself is tc::TileRaster (tc/common.cuh): grouped,
// so that consecutive tiles share rows of A in L2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

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

// Tail split where whole tiles leave SMs idle: when the tiles fill less than kTailMinBusyPct of
// their waves (3072 x 1024 in 128 x 128 tiles is 192 tiles, 1.45 waves of 132 SMs: 73%), the
// partial wave's r tiles (all of them below one wave) are cut into parts = sms / r k ranges, each
// at least kTailMinKTiles long, one CTA each: the last wave takes 1 / parts of a tile's time.
// Returns {tiles, parts}, {0, 0} for none. `forced` (a ladder variant's ts<0|1>, -1 if none): 0
// never, 1 wherever the parts are at least 2 whatever the waves.
// Measured on an H100 and not kept: stream-K proper, every SM taking an equal run of k-tiles
// across the last two waves' tiles (3072 x 1024 x 8192: 0.131 ms against 0.094 unsplit; 4096 x
// 1024 x 32768: 1.01 against 0.40): the SMs then work on k-tiles far apart, and the operands'
// reuse in L2 across tiles that share a row or a column is gone.
constexpr int kTailMinBusyPct = 85;
constexpr int kTailMinKTiles = 8;

inline std::pair<int, int> choose_tail_split(int tiles, int k_tiles, int sms, int forced) {
  if (forced == 0 || tiles == 0) return {0, 0};
  const int64_t waves = (int64_t(tiles) + sms - 1) / sms;
  const bool idle = int64_t(tiles) * 100 < waves * sms * kTailMinBusyPct;
  const int r = tiles % sms == 0 ? std::min(tiles, sms) : tiles % sms;
  const int parts = std::min({sms / r, k_tiles / kTailMinKTiles, kSplitMax});
  if (parts < 2 || (forced != 1 && !idle)) return {0, 0};
  return {r, parts};
}

// The tile width of tc:ws_persistent for a rows x cols output in 128-row tiles (k_tiles of K
// each): 256 when those wider tiles still give every SM one; below that, whichever width gives the
// shorter estimated time, in units of one 128 x 128 tile's time:
//   waves of whole tiles + the tail-split wave (choose_tail_split: 1 / parts, plus
//   kTailFixupCost for adding the parts up), or a whole wave where the tail is not split;
//   a 128 x 256 tile costing kWideTileCost. Measured on an H100 (bf16 weight gradients, operands
//   rotated out of L2, ladder variants tc:ws_persistent:bn<w>:ts1): 4096 x 1024 x 32768 ran
//   0.372 ms in 128 tiles of 128 x 256 (one wave) against 0.445 ms in 256 tiles of 128 x 128 (two
//   waves): a wide tile takes 1.68x a narrow one's time, not 2x (it loads 1.5x the bytes per
//   tile, not 2x). 3072 x 1024 x 8192: 96 wide tiles 0.082 ms against 192 narrow ones with the
//   last 60 cut in two 0.086 ms (estimates 1.70 and 1.75: the fixup's cost is what tips it).
//   1024 x 1024 x 8192 and 512 x 512 x 32768 stay narrow: 0.037 and 0.048 ms against 0.039 and
//   0.061 wide (estimates 0.75 against 0.85, 0.375 against 0.53). In the benchmark report after
//   the rule (make bench of 186bf8b) 4096 x 1024 x 32768 ran 1.00x cuBLAS (0.96x before) and
//   3072 x 1024 x 8192 the same as before within the noise (0.81x).
//   What cuBLAS runs there (ncu, H100, bf16 g^T @ x): 512 x 512 x 32768 in 128 x 64 tiles in
//   clusters of two CTAs, split along K in 4 (nvjet_sm90_tst_128x64_64x8_1x2 splitK, 128 CTAs,
//   29.9 us, DRAM 70%) and a separate split-K reduce (5.1 us); ours 128 x 128 tiles, the last
//   wave's 16 tiles cut in 8 parts (128 CTAs, 46.5 us, DRAM 45%, L2 75%). 1024 x 1024 x 8192:
//   the same 128 x 64 tiles in pairs, unsplit (128 CTAs, 27.3 us); ours the same tiles, single
//   CTAs (36.3 us). (cuBLAS's time for 512 x 512 x 32768 differs between processes, 34 or 51 us:
//   the committed report's 0.70x is the first, a rerun of the same build measured 1.04x against
//   the second; likewise 1024^2 x 8192, 27-30 or 41-46 us, with a bf16 or a float32 output.)
//   Tried on an H100 against that 128 x 64 kernel and not kept (2026-11-27; ncu durations, one
//   process each, and scripts/tile_sweep.py): cuBLAS's kernel (nvjet_sm90_tst_128x64_64x8_1x2,
//   8 stages, 384 threads, 168 registers, like ours) keeps the tensor pipe 77-78% busy where ours
//   manages 55%; our consumers wait on full stages while the producer waits on free ones (ncu
//   source counters), and its L2 reads are 0.83 of ours, what pairs sharing the B tile (4 of 24
//   KiB per k-tile) save. None of these closed any of it: (1) pairs of 128 x 64 tiles sharing the
//   A tile by multicast (8 of 24 KiB per k-tile): 39.5 us against 35.9 single, and no shape of the
//   sweep faster beyond noise (its L2 sectors read came out 1.25x single's, not the 2/3 expected);
//   (2) two accumulator sets on alternate k-tiles, as the skinny tiles have: 36.7 us; (3) each
//   consumer warpgroup taking alternate k-tiles of the whole 128-row tile, as cuBLAS's kernel does
//   (its SASS: 8 m64n64k16 wgmmas per k-tile per warpgroup), waiting for its wgmmas and freeing
//   the stage at once, the halves' sums exchanged through shared memory at the end: 40.7 us.
// 16-bit operands also have 128 x 64 tiles (`half_ok`), taken where the same estimate is shorter
// with a 128 x 64 tile costing kHalfTileCost, and where those tiles' schedule cuts K into at most
// two ranges: outputs that 128 x 128 tiles leave well short of a wave, as cuBLAS does (1024 x
// 1024 x 8192 weight gradients: 128 x 64 tiles, 128 of them in one wave). Measured on an H100
// (bf16, operands rotated out of L2, ladder variants tc:ws_persistent:bn<w>, us, 128 x 64 against
// 128 x 128 tiles): linears 256 x 4096 -> 4096 21.7 against 26.4, 1024 x 4096 -> 1024 21.9 / 25.2,
// 128 x 8192 -> 8192 54.1 / 60.8, 8192 x 8192 -> 128 56.0 / 61.6, 1000^3 21.8 / 24.2 (a 128 x 64
// tile took 0.62-0.68 of a 128 x 128 one's time); weight gradients 1024^2 x 8192 35.6 / 36.8, but
// 512^2 x 32768 57.2 / 47.1: there the 32 narrow tiles were cut into 4 k ranges each (tail split
// or split-K alike), and every range streamed its share of 64 MB of operands beside the others.
// Split-K against these small weight gradients, once more on the H200 (2026-11-28, tile_sweep.py,
// bf16 g^T @ x, us, torch.mm in brackets, its time in this process): 1024 x 1024 x 8192 the rule's
// 128 x 64 tiles 36.2, 128 x 128 35.2, bn128:s2 41.8, bn256:s4 48.4, the others with s2-s16 52-108,
// tc:ws_multicast:bn128:s2 53.2 [35.3]; 512 x 512 x 32768 the rule 43.9, bn128:s8 42.7, bn256:s16
// 51.1, bn128:s4 53.3 [39.7]; 3072 x 1024 x 8192 71.2, every split 125-302 [69.3]; 2048 x 1024 x
// 8192 51.1, bn128 50.4, every split 75-206 [47.1]. More k ranges only add partial sums' traffic.
// `forced` (a ladder variant's bn<64|128|256>) wins when non-zero. scripts/tile_sweep.py reruns
// the sweeps behind these constants.
constexpr double kWideTileCost = 1.7;
constexpr double kHalfTileCost = 0.65;
constexpr int kHalfMaxKRanges = 2;
constexpr double kTailFixupCost = 0.25;

inline double persistent_waves(int64_t tiles, int k_tiles, int sms) {
  const auto [tail_tiles, parts] = choose_tail_split(int(tiles), k_tiles, sms, -1);
  if (tail_tiles == 0) return double((tiles + sms - 1) / sms);
  return double((tiles - tail_tiles) / sms) + 1.0 / parts + kTailFixupCost;
}

// The k ranges tc:ws_persistent cuts each of `tiles` tiles into (k_tiles each, rows of the output
// and K as given): the tail split's parts where it splits, else split-K's (choose_splits).
inline int persistent_k_ranges(int64_t tiles, int k_tiles, int64_t rows, int64_t K, int sms) {
  const int parts = choose_tail_split(int(tiles), k_tiles, sms, -1).second;
  return parts > 0 ? parts : choose_splits(int(tiles), k_tiles, rows, K, sms);
}

// `time` (if given) gets the chosen width's estimate (0 where the width was forced or the wide
// tiles fill a wave: persistent_bm then keeps 128-row tiles).
inline int persistent_bn(int64_t rows, int64_t cols, int64_t K, int k_tiles, int forced,
                         bool half_ok, double* time = nullptr) {
  if (time != nullptr) *time = 0.0;
  if (forced != 0) return forced;
  const int sms = sm_count();
  const int64_t tiles_m = ceil_div<int64_t>(rows, 128);
  const int64_t wide = tiles_m * ceil_div<int64_t>(cols, 256);
  if (wide >= sms) return 256;
  const int64_t half = tiles_m * ceil_div<int64_t>(cols, 64);
  const double t128 = persistent_waves(tiles_m * ceil_div<int64_t>(cols, 128), k_tiles, sms);
  const double t256 = kWideTileCost * persistent_waves(wide, k_tiles, sms);
  const bool half_fits =
      half_ok && persistent_k_ranges(half, k_tiles, rows, K, sms) <= kHalfMaxKRanges;
  const double t64 = half_fits ? kHalfTileCost * persistent_waves(half, k_tiles, sms) : t128;
  const int bn = t256 < t128 && t256 < t64 ? 256 : t64 < t128 ? 64 : 128;
  if (time != nullptr) *time = bn == 256 ? t256 : bn == 64 ? t64 : t128;
  return bn;
}

// The tile rows of tc:ws_persistent for 16-bit operands (launch_layout): 192 (192 x 128 tiles,
// three consumer warpgroups) where those tiles need no split-K and their whole waves, a tile
// costing kTallTileCost (its products 1.5x a 128 x 128 tile's, its loads 1.25x), take less than
// `bn_time`, persistent_bn's estimate for its width; else 128. 3072 x 1024: 128 tiles of 192 x
// 128, one wave (1.5), against 96 of 128 x 256 (1.7) or 192 of 128 x 128, the last 60 cut in two
// (1.75).
constexpr double kTallTileCost = 1.5;

inline int persistent_bm(int64_t rows, int64_t cols, double bn_time) {
  const int sms = sm_count();
  const int64_t tall = ceil_div<int64_t>(rows, 192) * ceil_div<int64_t>(cols, 128);
  // Few enough tall tiles for split-K to cut them: that case stays with the 128-row kernels.
  if (bn_time <= 0.0 || tall * 2 <= sms) return 128;
  return kTallTileCost * double((tall + sms - 1) / sms) < bn_time ? 192 : 128;
}

// Outputs of at most 64 rows (linears of 17-64 tokens; 16 and fewer take the few-row path, gemv/)
// fill half of each 128-row tile and are memory-bound on B, the weight. Where their 128 x 128
// tiles leave at least half the SMs idle, those tiles in split-K's k ranges (choose_splits: 4 for
// 32 tiles against K >= 4096) beat what persistent_bn's estimate picks for them (128 x 64 tiles
// with the tail split's fixup, the estimates 0.49 against 0.50). Measured on an H100 (bf16
// linears, CUDA-graph replays, weight out of L2, us: the estimate's choice / 128 x 128 tiles in 4
// k ranges / cuBLAS): 32 x (4096 -> 4096) 27.8 / 19.5 / 14.6, 64 x (4096 -> 4096) 24.9 / 21.9 /
// 14.9, 32 x (14336 -> 4096) 61.8 / 47.7 / 45.6, 64 x (14336 -> 4096) 56.6 / 50.6 / 47.0.
// (cuBLAS runs these as the weight times the tokens: 64-row weight tiles by 16 or 32 tokens,
// 1 x 2 clusters sharing the weight tile, 16 stages.)
inline bool few_rows_split_k(int64_t rows, int64_t cols, int sms) {
  return rows <= 64 && ceil_div<int64_t>(cols, 128) * 2 <= sms;
}

// Linears of 17-128 tokens in the layout x @ weight^T (16-bit, both operands K-major) run the
// skinny tiles (launch_skinny: the weight's rows times the tokens, 64 x bt per tile, no split),
// cuBLAS's form for them. skinny_tiles says which:
//   * small weights (15 to 44 64-row tiles on an H100: a ninth to a third of the SMs): the SMs,
//     not DRAM, bound these (each CTA pulls its operands at a limited rate, and a third of the SMs
//     busy pull fewer bytes per second than DRAM gives), so the tiles are split along K over
//     clusters of two CTAs (k_parts 2: each CTA half the k-tiles, the halves added in the first
//     CTA's shared memory) wherever that stays within one wave: bt 32 if its tiles' halves fit
//     (fewest bytes per CTA), else (33-64 tokens) the next rule, else bt 64 (not over 65-96
//     tokens, whose last 64-token tile repeats 32 or more of the first's); else, for 65-128
//     tokens, bt 32 unsplit where its tiles fit one wave;
//   * 33-64 tokens, any weight: bt 32 unsplit (two token tiles per weight tile) where its tiles
//     take at most seven eighths of the SMs;
//   * otherwise bt 32 up to 32 tokens, bt 64 up to 64 (DRAM-bound there: splitting K or more
//     token tiles only adds CTAs, measured below); for 65-128 tokens bt 64, one CTA per tile;
//   * on GPUs with more DRAM bandwidth per SM (kFastDramPerSm, below: the H200), 17-64 tokens
//     past the small-weight split: bt 32 up to 32 tokens, bt 64 up to 64, split along K (k2)
//     where the halves fill the waves better (split_fills_waves);
//   * every skinny launch in raster group 1 (launch_skinny): the token tiles of one weight tile
//     on consecutive CTAs.
//   * none (bt 0: few_rows_split_k and persistent_bn decide) where the weight has fewer tiles than
//     a ninth of the SMs, or for 65-128 tokens more than half the SMs' worth (128 x 128 tiles).
// The split along K measured on an H100 (2026-11-27, bf16, K = 4096, CUDA-graph replays, weight
// out of L2, tile_sweep.py --graph; ratio cuBLAS / ours, the rule's choice marked *): 64 x (4096
// -> 1024): bt32 0.68x, bt64 0.61x, *bt32:k2 1.00x, bt64:k2 0.85x, 128 x 128 tiles split along K
// (the rule before) 0.77x; 128 x (-> 1024): bt32 0.71x, *bt32:k2 0.94x, bt64:k2 0.88x, the rule
// before 0.57x; 64 x (-> 2048): bt32 0.84x, bt64 0.75x, *bt32:k2 0.93x, bt64:k2 0.94x, the rule
// before 0.79x; 32 x (-> 2560): bt32 0.94x, *bt32:k2 0.95x; 48 x: bt32 0.82x, bt64 0.86x,
// *bt64:k2 0.88x; 64 x: bt32 0.78x, bt64 0.71x, *bt64:k2 0.73x; 96 x: *bt32 0.86x, bt64 0.57x,
// bt64:c2 0.70x, bt32:k2 0.71x; 128 x: bt32 0.45x, *bt64 0.69x, bt64:c2 0.64x, bt64:k2 0.53x;
// 128 x (-> 1088), 17 weight tiles: bt32 0.68x, bt64 0.61x, *bt64:k2 0.79x, bt32:k2 0.59x; 128 x
// (-> 2048): bt32 0.83x / 0.76x (two runs), *bt64:k2 0.81x / 0.74x, bt32:k2 0.69x; 96 x:
// *bt32 0.77x, bt64:k2 0.68x; 100 x (-> 2000): bt32 0.55x, *bt64:k2 0.65x; 128 x (-> 1536): bt32
// 0.68x, *bt64:k2 0.72x; 96 x (-> 1024) *bt32:k2 0.99x, bt64:k2 0.80x; 64 x (-> 1536) *bt32:k2
// 1.01x, bt64:k2 0.92x; 96 x (-> 3072): bt64 0.60x, *bt64:c2 0.73x; 128 x: bt64 0.76x, *bt64:c2
// 0.73x. Where the weight is larger, splitting lost or tied: 32 x (4096 -> 4096) *bt32 0.94x,
// bt32:k2 0.91x; 64 x *bt64 0.89x, bt64:k2 0.85x, bt32 0.83x; 128 x *bt64:c2 0.83x, bt64:k2
// 0.70x; 64 x (4096 -> 14336) *bt64 0.94x, bt64:k2 0.88x; 64 x (14336 -> 4096) *bt64 0.99x,
// bt64:k2 1.03x (one run).
// bt 64 over 65-96 tokens (a partial second token tile) ran slower than over 128 (96 x (4096 ->
// 2560) 21.5 against 16.4 us; 80 x (4096 -> 4096) 23.9 against 19.6 in bt64 alone) while that
// tile's TMA boxes reached past the tokens; with the tile moved back inside them (b_tile_origin,
// mainloop.cuh) 16.2 and 19.7 us, and over 96 x (4096 -> 2048) bt64:k2 13.8 against 15.3 us
// (bt32 13.4: the rule's choice), 100 x (4096 -> 2000) 14.7 against 15.4.
// Still short against 2560-row weights (0.68-0.86x): under ncu (H100, 2026-11-27) cuBLAS runs 64,
// 96 and 128 tokens x (4096 -> 2560) in 11.9-12.4 us as 64 x 32 or 64 x 64 tiles on 80-120 CTAs
// in clusters of 8 (4 weight tiles x 2 token tiles: nvjet_sm90_tst_64x32_64x16_4x2) or 4 (4 x 1),
// each operand tile multicast to the CTAs that share it, DRAM 53-54% busy; the skinny tiles on
// as many CTAs take 17-20 us at 33-38%. Clusters multicasting the token tile too: not built.
// Three trials against that gap, none kept (H100, 2026-11-27, graph replays, us; tile_sweep.py):
//   * 64 x 128 tiles (bt128, 8 stages; the whole 128 tokens per weight tile, so the weight is read
//     once and the tokens 40 rather than 80 times at 2560 rows): 128 x (4096 -> 2560) bt64 16.7,
//     bt128 18.7, bt128 split along K in pairs 18.3 (torch 11.2); 128 x (4096 -> 4096) 19.9 /
//     20.9 / 20.9; 128 x (14336 -> 4096) 67.2 / 55.7 / 66.0 (the dispatcher's 128 x 128 tiles
//     46.6). Fewer bytes out of L2 (61 against 82 MB) did not run faster: L2 does not bound them.
//   * Two consumer warpgroups on the tile's 64 rows, each over every other k-tile (four chains of
//     sums in flight, cuBLAS's 384 threads): 128 x (-> 2560) bt64 16.0, 64 x (4096 -> 4096)
//     17.0 (unchanged), the pairs 3-10% slower. The wgmma chains do not bound them either.
//   * The producer also prefetching the weight's k-tile 4 or 8 ahead into L2
//     (cp.async.bulk.prefetch.tensor): 20-25% slower (128 x (-> 2560) 16.9 -> 20.6), the
//     tokens' k-tile too up to 1.7x slower; L2 promotion none, 128 or 256 bytes: no change. The
//     loads are not starved of latency cover, and every TMA instruction the one producer thread
//     issues costs time.
// Under ncu (base clocks, cold L2) at 128 x (4096 -> 2560) cuBLAS ran 64 x 64 tiles on 80 CTAs of
// 384 threads in clusters of 8 (nvjet_sm90_tst_64x64_64x13_4x2): 14.0 us, DRAM 47% busy; bt64 on
// the same 80 CTAs 23.2 us, DRAM 28-37%. Same tiles, same grid: what differs is that each of
// cuBLAS's CTAs loads half the weight tile and a quarter of the token tile (multicast), 48 of
// the 128 rows of 128 bytes a bt64 CTA fetches per k-tile. That fitted each SM's TMA unit being
// what bounds the skinny tiles (the prefetch trial above too); the next trials (H100, 2026-11-27,
// graph replays, us) did not bear it out:
//   * Clusters multicasting both operands (ClusterGrid, mainloop.cuh; the ladder's bt<32|64>:w4
//     [:c2], kept for sweeps; 2 x 1 clusters, w2, not kept): each CTA issues 48 of the 128 rows at
//     4 x 2, yet 128 x (4096 -> 2560) bt64 16.7, c2 17.8, w2 18.0, w4 17.3, w4:c2 19.1 (cuBLAS
//     11.2); 64 x (4096 -> 4096) bt64 17.0, w4 18.3, w4:c2 35.5 (16 clusters of 8 do not fit at
//     once on 132 SMs: two waves).
//   * Kernels built with parts of the work taken out, to see which half bounds: at 128 x (4096 ->
//     2560) the loads alone (no wgmma) 16.3, the wgmmas alone (no loads) 13.7, both 16.7; 64 x
//     (4096 -> 4096) 16.4 / 13.4 / 17.0. The loads bound, and the wgmma chains do not (four
//     accumulator chains interleaved within each k-tile: 16.7 and 17.2, no faster). Against K:
//     64 x (4096 -> 4096) 17.0 and 64 x (14336 -> 4096) 47.2, so 0.19 us per k-tile and about
//     4.9 us fixed; cuBLAS 14.9 and 47.0, 0.20 us and about 2.1 us fixed. The steady state is
//     cuBLAS's; the fixed part was not.
//   * Of the fixed part, the stores took about 3 us: no store at all, 64 x (4096 -> 64) 1.8
//     against 4.7 (cuBLAS 2.7), 64 x (4096 -> 4096) 13.8 against 17.0. Element by element (2-byte
//     stores, 16 bytes of 4 rows per warp store) they now go through shared memory as 16-byte
//     rows (store_accumulators_transposed): 3.7 and 16.1. Prefetching the tensor maps
//     (prefetch.tensormap before the grid dependency wait): no change.
// So at 2560-row weights (two token tiles on 80 SMs), where the loads alone take 16.3 against
// cuBLAS's 11.2 in all, the loads' rate is what is left: each SM receives 16 KiB per k-tile at
// about 88 GB/s with 80 CTAs (126 GB/s with 40), cuBLAS's 126 GB/s with 80; DRAM gives the weight
// at 1.3 TB/s there, 2.8 TB/s to 64 CTAs over K = 14336. Then untried: L2 cache hints on the loads
// (evict-first for the weight, read once per token tile; evict-last for the tokens, read by every
// weight tile), two 128-byte boxes of K per stage (256 contiguous bytes of each weight row per
// request), and a raster that puts the two CTAs of one weight tile side by side.
// The first and last of those, and a staggered k order, tried (H100, 2026-11-27, bf16,
// tile_sweep.py --graph, us, two runs each; cuBLAS in brackets):
//   * Raster group 1 (the ladder's g1; g8 the order before): kept, the default. Single CTAs,
//     bt64 g8 -> g1: 128 x (4096 -> 2560) 15.1-15.6 -> 14.2-14.4 [11.0-11.1]; 128 x (-> 3072)
//     15.9 -> 14.7 [12.3]; 128 x (-> 4096) 18.5-18.9 -> 17.8-18.2 [14.9-15.1]; 96 x (-> 4096)
//     18.2 -> 17.5; 80 x (-> 4096) 18.2-18.7 -> 17.6-18.1; 128 x (14336 -> 4096) 53.6-55.8 ->
//     50.8-52.3 [52.0]. bt32 96 x (-> 2560) 13.5 -> 13.1 [11.5-12.2], bt32 64 x (-> 4096) 17.3 ->
//     16.5. Split along K (k2), bt64: g1 faster on 7 of 9 shapes (128 x (14336 -> 4096) 59.5 ->
//     57.0), slower on 128 x (4096 -> 1088) 10.2 -> 10.4-10.5 [8.9]; kept there too, for one rule.
//     With group 1, single CTAs beat the pairs sharing the weight tile (bt64:c2, the rule's choice
//     before for weights of more than a third of the SMs' tiles) everywhere: 128 x (-> 4096) 17.8
//     against 18.2-18.5, 96 x 17.5 / 18.6-18.8, 128 x (-> 3072) 14.7 / 17.3, 128 x (14336 ->
//     4096) 50.9 / 58.9-59.4. So the pairs left the rule.
//   * L2 cache hints (bt<32|64>:h1: weight loads evict-first, token loads evict-last; a ladder
//     variant, not the default): 128 x (4096 -> 4096) 16.7-17.0 against 17.8 (group 1 both), 96 x
//     16.9 / 17.5, 80 x 16.8-16.9 / 17.6; but 128 x (-> 2560) 16.2 / 14.4, 128 x (-> 3072) 16.2
//     / 14.7, 128 x (14336 -> 4096) 55.1-55.3 / 50.8-51.4, 96 x (-> 2560) bt64 16.1 / 14.3.
//     A gain on one weight size and a loss on its neighbours is no rule.
//   * A staggered k order: each tile's k-tiles from (tile row % n) / n of K, wrapping around, so
//     that the CTAs sharing a token tile read different k-tiles of it at a time (bt64, n = 4 / 8,
//     group 1 and 8): slower everywhere, 128 x (-> 2560) 15.3 -> 18.6 / 20.8, 128 x (-> 4096)
//     18.9 -> 20.0 / 21.0, 128 x (14336 -> 4096) 55.0 -> 59.0 / 62.7. Not kept: the skinny
//     tiles run best with every CTA at the same k, which group 1 carries further, to the CTAs
//     of one weight tile side by side.
//   Under ncu (base clocks, cold L2, 128 x (4096 -> 2560)): cuBLAS 14.3 us, bt64 22.0-22.2 (g8)
//   / 22.0 (g1) / w4:c2 27.1-27.6; every kernel moved the same 83.9 MB from L2 into the SMs and
//   read 22.0-22.1 MB from DRAM, cuBLAS with 45.6 MB of L2 traffic against 84-86 (g8), 68-70
//   (g1), 59.5 (w4:c2), DRAM 46% busy against 24-30%, L2 47% against 30-43%: no unit near its
//   peak, so what bounds the skinny tiles is still latency, not bandwidth. Untried: two 128-byte
//   boxes of K per stage.
// 33-64 tokens in two unsplit 32-token tiles (H100, 2026-11-28, bf16, K = 4096, tile_sweep.py
// --graph, us, two runs alike; bt32 / bt64 / bt64:k2, the rule's choice before marked *; cuBLAS):
// 33 x (4096 -> 2560) 12.5 / 14.3 / *15.2 [12.6]; 40 x 12.5 / 14.0 / *14.4 [12.5]; 48 x 12.5 /
// 14.1 / *13.8 [12.5]; 56 x 12.5 / 14.0 / *13.8 [10.6]; 64 x 12.5 / 14.1 / *13.8 [10.7]; 64 x (->
// 3072) 13.0 / *14.4 / 14.5 [11.9]; 64 x (-> 3584), 112 bt32 tiles: 14.3 / *14.8 / 15.5 [13.1];
// 48 x (-> 4096), 128: 16.6 / *15.9 / 16.6 [14.7]; 64 x (-> 4096) 16.5 / *16.0 / 16.7 [15.0].
// Where one wave holds their halves, split bt 32 tiles stay ahead: 48 and 64 x (-> 2048) bt32:k2
// 11.3-11.4 against 12.2 unsplit [11.1]. (The old entries below, bt32 behind bt64:k2 at 48 x (->
// 2560), were measured before raster group 1.)
// Two more trials against the 65-128-token gap, not kept (H100, 2026-11-28, graph replays, us,
// two runs alike): the ring's depth (the unused TMA-store staging given to the ring: bt64 13
// stages, as cuBLAS's kernel has, or 8; bt32 18 or 10): 128 x (4096 -> 2560) bt64 14.2 / q13 14.2
// / q8 14.6, 128 x (-> 4096) 18.3 / 18.2 / 17.8, 64 x (-> 4096) 16.1 / 16.0 / 17.0, bt32 64 x (->
// 2560) 12.6 / q18 12.7 / q10 12.6: the bytes in flight per CTA do not bound them. And in the
// clusters sharing the weight tile (c2) or both operands (w4:c2), one release arrive per CTA
// after a named barrier of its consumer warps instead of one per consumer warp: 128 x (-> 2560)
// c2 16.8 -> 16.7, w4:c2 18.0 -> 19.3; 128 x (-> 4096) c2 17.8 -> 17.7, w4:c2 33.3 -> 35.6: the
// release round trip is not what holds the clusters back.
// Before the split (H100, bf16, CUDA-graph replays, weight out of L2, us: bt32 / bt64 / 128 x 128
// tiles in split-K's ranges / cuBLAS; two runs where they disagree): 32 x (4096 -> 4096) 15.7-16.4
// / 17.9-18.1 / 19.5 / 14.6; 48 x 18.9 / 16.2 / 20.0 / 14.7; 64 x 16.4-17.9 / 16.3-16.9 / 21.9 /
// 14.8; 32 x (4096 -> 14336) 44.6-44.8 / 45.8-47.9 / 51.3 / 43.9; 64 x 55.6-58.9 / 46.0-46.1 /
// 50.0 / 43.9; 32 x (14336 -> 4096) 45.2-46.5 / 51.4-52.2 / 47.8 / 45.7; 64 x 46.9-52.5 /
// 47.5-48.2 / 51.1 / 47.2; 32 x (4096 -> 2048) - / - / 12.6 / 10.8. (Before the skinny tiles'
// two sets of sums, kernels.cuh, which then took 32 / 64 / 128 x (4096 -> 4096) to 14.9 / 15.4 /
// 18.4 us.) 65-128 tokens (with the two sets; bt64 / bt64:c2 / 64 x 128 tiles, a
// ladder-only trial not kept / cuBLAS): 128 x (4096 -> 4096) 18.4 / 17.1 / 18.5 / 15.5; 96 x 22.0
// / 18.7 / 19.3 / 15.0; 128 x (14336 -> 4096) 54.1 / 49.4 / 54.0 / 53.0; 128 x (4096 -> 14336),
// 448 tiles of 64 x 64 (none: 128 x 128 tiles) 46.8, bt64 61.6, bt64:c2 61.3, 64 x 128 50.8,
// cuBLAS 46.1; 100 x (4096 -> 2048), 32 weight tiles: 13.5 / 15.9-16.0 (pairs on half the SMs),
// 128 x 128 tiles split along K 20.6, cuBLAS 9.6-9.9; 128 x (4096 -> 2560), 40 tiles: 15.1 / 16.2
// / - / 11.3; 128 x (4096 -> 1088), 17 tiles: 13.2 / 15.8 / - / 8.9. Pairs lose where the tokens
// fit one tile (64 x (4096 -> 4096): bt64:c2 19.6, bt32:c2 16.2 against bt64's 15.6): the pair's
// second CTA has no tokens. Pairs the other way round, cuBLAS's 2 x 1 clusters for 128 tokens
// (two adjacent weight tiles sharing the token tile: each CTA loads its whole weight tile and half
// the tokens, multicast), lost to pairs sharing the weight tile (a ladder-only trial, H100,
// 2026-11-27, graph replays, ratio to cuBLAS, bt64:c2 / the other pairs): 128 x (4096 -> 4096)
// 0.84x / 0.77x, 96 x 0.76x / 0.62x, 128 x (14336 -> 4096) 0.94x / 0.98x, 128 x (4096 ->
// 14336) 0.71x / 0.68x (bt64 alone 0.69x; the dispatcher's 128 x 128 tiles 0.98x), 64 x (4096
// -> 4096) bt64 alone 0.88x against 0.84x. Not kept.
// The rules' choices against forced variants on the H200 (2026-11-28, gemv_sweep.py, graph replays,
// us; bt32, bt64, bt32:k2, bt64:k2, bn64, bn128, bn64:s2-s4, bn128:s3-s6, ts1 on both widths): the
// choice was the fastest or within 2% on 8 of 9 shapes (64 x (14336 -> 4096) 33.7 [35.9]), and no
// variant reached cuBLAS on the others: 64 x (4096 -> 2560) 12.4 [9.6], 96 x 12.8 [10.3], 128 x
// 14.5 (bn64 14.8) [10.1], 64 x (4096 -> 4096) 13.6 [12.0], 128 x 16.2 (bn64 17.7) [14.1], 64 x
// (4096 -> 14336) 36.9 [33.2], 128 x 36.5 [34.6]. The ninth: 128 x (14336 -> 4096) 43.7 (bn128,
// few_rows_bn128) against bn64's 41.3-41.4 [37.9]; bn64 lost at 80 tokens (below), so no rule.
// cuBLAS's kernels there (ncu, the same day): 64 x (4096 -> 2560) nvjet_sm90_tst_64x32_64x16_4x2
// (64 x 32 tiles in clusters of 4 x 2, 80 CTAs), 128 x nvjet_..._64x64_64x13_4x2 (80 CTAs), 64 x
// (4096 -> 4096) ..._64x32_64x16_1x2 and 128 x ..._64x64_64x13_2x1 (128 CTAs each), 64 x (14336 ->
// 4096) ..._96x64_64x10_2x1 split along K (132 CTAs) and a separate split-K reduce: each operand
// tile multicast over its cluster, the forms the w4 and c2 trials above did not match.
struct SkinnyTiles {
  int bt = 0;       // tokens per tile (16, 32 or 64); 0: no skinny tiles
  int ctas = 1;     // token tiles per cluster (2: two CTAs sharing the weight tile)
  int k_parts = 0;  // 2: clusters of two CTAs splitting each tile's k-tiles
  int weight_ctas = 1;  // weight tiles per cluster (4: that many CTAs sharing a token tile)
  bool l2_hints = false;  // the loads' L2 policies: the weight evict-first, the tokens evict-last
};

// Decode-sized linears, 2-16 tokens (x @ weight^T, both operands K-major), take the few-row path
// (gemv/'s mma step: no TMA, each warp's loads in its registers) except where the skinny tiles with
// 16 tokens per tile (bt16: TMA and wgmma, cuBLAS's form for them) run faster:
//   * 2-16 tokens where the weight's tiles fit half the SMs and K >= 8192: bt16 split along K in
//     clusters of two (k2), every tile's halves in one wave;
//   * 9-16 tokens against a weight of at least two fifths of the SMs' worth of 64-row tiles (the
//     mma step's loads of the tokens, as many bytes as the weight's at 16, hold it back there):
//     bt16 where its last wave of tiles keeps at least 9/20 of the SMs busy, else k2 where the
//     halves' last wave does, else neither. A CTA streams its tile at a limited rate, so a last
//     wave of few CTAs reads the weight far below DRAM's rate: 16 x (4096 -> 11008) on an H100,
//     172 tiles on 132 SMs (a last wave of 40), bt16 36.7 us, the mma step 35.1, k2 (a last wave
//     of 80 halves) 34.2 [cuBLAS 35.4]; 4096 -> 14336, 224 tiles (92), bt16 43.4, k2 44.8;
//   * on GPUs with more DRAM bandwidth per SM (kFastDramPerSm, below: the H200), 8-16 tokens
//     against a weight of at least two fifths of the SMs' tiles: bt16, split along K (k2) where
//     the halves fill the waves better (split_fills_waves).
// Measured (2026-11-28, bf16, gemv_sweep.py, CUDA-graph replays, weight out of L2, us; mma step /
// bt16 / bt16:k2 [cuBLAS]): H100: 16 x (4096 -> 4096) 14.9 / 14.5 / 15.1 [16.6]; 16 x (4096 ->
// 14336) 45.0 / 43.4 / 44.8 [42.3]; 12 x 43.7 / 43.3 / 44.8 [43.1]; 8 x 41.3 / 43.0 / 44.3 [41.9];
// 16 x (14336 -> 4096) 43.3 / 42.8 / 42.8 [45.2]; 8 x 43.4 / 42.6 / 42.6 [44.5]; 4 x 42.8 / 42.4
// / 42.8; 2 x 42.8 / 42.4 / 42.6; 16 x (11008 -> 4096) 36.6 / 36.3 / 34.2 [36.4]; 4 x 36.0 / 36.6
// / 34.1 [35.7]; 4 x (4096 -> 11008) 31.8 / 36.2 / 34.1 [34.9]; 16 x (4096 -> 2560), 40 tiles,
// 11.4 / 11.7 / 12.3 [12.2]; 16 x (8192 -> 1024) 10.4 / 20.5 / 12.6 [11.0]. H200: 16 x (4096 ->
// 4096) 13.1 / 12.3 / 11.8 [13.3]; 16 x (4096 -> 14336) 41.1 / 34.2 / 34.0 [30.7]; 8 x 35.0 /
// 33.9 / 33.9 [30.4]; 16 x (14336 -> 4096) 36.6 / 36.0 / 31.5 [32.7]; 8 x 33.7 / 35.4 / 31.7
// [32.2]; 4 x 32.9 / 35.5 / 31.6 [32.1]. (The H200 would take bt16 over 8 tokens as well, and k2
// at K = 4096; the H100 loses 2-4% there.)

// True when the last wave of `units` CTAs, one per SM at a time, keeps at least 9/20 of the SMs
// busy.
inline bool last_wave_full_enough(int64_t units, int sms) {
  const int64_t last = units - (ceil_div<int64_t>(units, sms) - 1) * sms;
  return 20 * last >= 9 * int64_t(sms);
}

// GPUs whose DRAM gives each SM more than the H100's 25 GB/s (the H200: 36): there a skinny CTA,
// which streams its tile at a limited rate, leaves a share of the DRAM's rate unused wherever a
// short last wave leaves SMs idle, and filling the waves pays more than a split's extra CTAs
// cost. So from 8 to 64 tokens, on such GPUs, the skinny tiles are split along K in clusters of
// two (k2) wherever the halves fill the SMs' waves better by a tenth or more (split_fills_waves),
// and run unsplit elsewhere (bt 16 up to 16 tokens, 32 up to 32, 64 up to 64; decode_skinny_tiles
// and skinny_tiles). Measured (H200, 2026-11-28, bf16, gemv_sweep.py, CUDA-graph replays, weight
// out of L2, us; unsplit / k2 / the rule before, cuBLAS in brackets; weights N x K, 64-row
// tiles):
//   * 14336 x 4096, 224 tiles (a last wave of 92 either way): 8 x bt16 33.9 / 33.8 / mma step
//     34.7 [29.9]; 16 x 34.2 / 34.0 / bt16 [30.2]; 32 x bt32 34.8 / 35.0 / bt32 [31.3]; 64 x
//     bt64 37.0 / 38.1 / bt64 [33.3]: unsplit (no last wave filled; still short of cuBLAS);
//   * 11008 x 4096, 172 tiles (40 -> 80): 8 x bt16 29.4 / 26.5 / mma step 28.5 [24.7]; 32 x
//     bt32 30.5 / 27.5 / bt32 [25.2]; 64 x bt64 33.9 / 29.8 / bt64 [25.9];
//   * 4096 x 4096, 64 tiles (one wave of 64 -> 128): 8 x bt16 12.2 / 11.8 / mma step 12.1 [13.1];
//     16 x 12.3 / 11.9 / bt16 [13.3]; 32 x bt32 12.9 / 12.4 / bt32 [13.7]; 64 x bt64 14.8 / 13.5
//     / bt64 [12.1]; 4096 x 14336 (64 tiles): 32 x bt32 36.9 / 32.2 / bt32 [32.9]; 64 x bt64 42.9
//     / 33.8 / bt64 [35.6];
//   * 2560 x 4096, 40 tiles: 48 and 64 x bt64 14.3 / 12.3 / bt32 12.7 [11.0, 9.5].
// On the H100 the split lost at one wave of 64 tiles (16 x (4096 -> 4096) bt16 14.5, k2 15.1;
// 32 x bt32 0.94x, k2 0.91x of cuBLAS; 64 x bt64 0.89x, k2 0.85x), so there the rules above stay.
// The split in clusters of four (bt16 and bt32 in k4, a trial, not kept) filled 224 tiles'
// waves (896 quarters on 32 clusters of four) yet ran slower everywhere on the H200: 16 x (14336
// x 4096) 34.8 against bt16's 34.2, 32 x bt32 36.8 / 34.8, 16 x (4096 x 4096) 13.6 / 12.3. So a
// short last wave is not what keeps 14336 x 4096 at 80-82% of the copy bandwidth where cuBLAS
// reads it at 90-93%. Nor are the tokens' loads (2 of each SM's 10 KiB per k-tile at bt 16):
// pairs of weight tiles sharing the token tile by multicast (bt16:w2, cuBLAS's 2 x 1 clusters
// for these products; a trial, not kept) ran 8 x (14336 x 4096) 34.4 against bt16's 34.2 us, 16
// x (11008 x 4096) 30.5 / 29.6, 16 x (4096 x 4096) 13.8 / 12.3 (H200, 2026-11-28).
constexpr double kFastDramPerSm = 30e9;  // bytes per second per SM

// Whether `units` CTAs split in halves (2 units, one SM each at a time) keep the SMs' waves busier
// by a tenth or more: 2u / (r2 sms) >= u / (r1 sms) + 1/10, with r the waves of each.
inline bool split_fills_waves(int64_t units, int sms) {
  const int64_t r1 = ceil_div<int64_t>(units, sms), r2 = ceil_div<int64_t>(2 * units, sms);
  return 20 * units * r1 >= 10 * units * r2 + r1 * r2 * int64_t(sms);
}

inline SkinnyTiles decode_skinny_tiles(int64_t rows, int64_t cols, int64_t k, int sms,
                                       double dram_per_sm) {
  const int64_t weight_tiles = ceil_div<int64_t>(cols, 64);
  if (rows < 2 || rows > 16 || 5 * weight_tiles < 2 * int64_t(sms)) return {};
  if (2 * weight_tiles <= sms && k >= 8192) return {16, 1, 2};
  if (dram_per_sm >= kFastDramPerSm && rows >= 8) {
    return {16, 1, split_fills_waves(weight_tiles, sms) ? 2 : 0};
  }
  if (rows <= 8) return {};
  if (last_wave_full_enough(weight_tiles, sms)) return {16, 1, 0};
  if (last_wave_full_enough(2 * weight_tiles, sms)) return {16, 1, 2};
  return {};
}

inline SkinnyTiles skinny_tiles(int64_t rows, int64_t cols, int64_t k, int sms,
                                double dram_per_sm) {
  const int64_t weight_tiles = ceil_div<int64_t>(cols, 64);
  if (rows <= 16) return decode_skinny_tiles(rows, cols, k, sms, dram_per_sm);
  if (rows > 128 || weight_tiles * 9 < sms) return {};
  const int64_t bt32_tiles = weight_tiles * ceil_div<int64_t>(rows, 32);
  const int64_t bt64_tiles = weight_tiles * ceil_div<int64_t>(rows, 64);
  // A small weight: split along K where one wave holds the halves.
  const bool small_weight = weight_tiles * 3 <= sms;
  if (small_weight && 2 * bt32_tiles <= sms) return {32, 1, 2};
  // Fast DRAM per SM, 17-64 tokens: split where the halves fill the waves (above).
  if (dram_per_sm >= kFastDramPerSm && rows <= 64) {
    const int bt = rows <= 32 ? 32 : 64;
    return {bt, 1, split_fills_waves(bt == 32 ? bt32_tiles : bt64_tiles, sms) ? 2 : 0};
  }
  // 33-64 tokens: two 32-token tiles per weight tile, unsplit, up to seven eighths of the SMs
  // (beyond that a 64-token tile's fewer CTAs win).
  if (rows > 32 && rows <= 64 && 8 * bt32_tiles <= 7 * sms) return {32, 1, 0};
  if (small_weight) {
    // bt 64 over 65-96 tokens loads a second, mostly repeated token tile (b_tile_origin).
    const bool bt64_half_empty = rows > 64 && rows % 64 != 0 && rows % 64 <= 32;
    if (2 * bt64_tiles <= sms && !bt64_half_empty) return {64, 1, 2};
    if (bt32_tiles <= sms) return {32, 1, 0};
  }
  if (rows <= 64) return rows <= 32 ? SkinnyTiles{32, 1, 0} : SkinnyTiles{64, 1, 0};
  // 65-128 tokens (two 64-token tiles per weight tile): more than one wave of pairs takes 128 x
  // 128 tiles, and with fast DRAM per SM so does K >= 8192 (few_rows_bn128).
  if (2 * weight_tiles > sms || (dram_per_sm >= kFastDramPerSm && k >= 8192)) return {};
  return {64, 1, 0};
}

// On GPUs with fast DRAM per SM (kFastDramPerSm), 65-128 tokens in the layout x @ weight^T that
// skinny_tiles leaves to the 128-row tiles run them 128 wide: persistent_bn's estimate, made for
// tiles that the tensor cores bound, picks 64- or 256-wide tiles there, which stream the weight
// slower. Measured (H200, 2026-11-28, bf16, gemv_sweep.py, us; the estimate's choice / bn64 /
// bn128 / bn256 / bt64 [cuBLAS]): 80 x (4096 -> 11008) 47.2 / 47.1 / 41.9 / 47.4 / 42.3 [25.5];
// 128 x 41.1 / 34.1 / 33.5 / 40.9 / 44.0 [26.2]; 80 x (14336 -> 4096) - / 51.7 / 44.3 / 57.5 /
// 51.6 [36.9]; 128 x - / 41.8 / 43.5 / 52.0 / 53.4 [38.7] (skinny_tiles' bt64 before); 80 x
// (4096 -> 14336) 44.2 / 60.1 / 44.1 / 53.3 / 57.9 [31.5]; 128 x 38.2 / 42.0 / 37.3 / 47.1 /
// 62.0 [35.4]. Still short of cuBLAS (0.6-0.9x); against 4096 -> 4096 the skinny tiles stay
// (bt64 15.9 and 16.3 us, bn128 22.6 and 20.7 [12.4, 13.9]). Weights of fewer tiles than a ninth
// of the SMs, which skinny_tiles never takes, keep persistent_bn's choice (not measured here).
inline bool few_rows_bn128(int64_t rows, int64_t cols, int sms, double dram_per_sm) {
  return dram_per_sm >= kFastDramPerSm && rows > 64 && rows <= 128 &&
         9 * ceil_div<int64_t>(cols, 64) >= sms;
}

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// The k-tiles [kb, ke) of split-K work unit `unit` (its tile is unit / p.splits, its k range
// unit % splits).
__device__ __forceinline__ void unit_k_range(const HopperParams& p, int unit, int& kb, int& ke) {
  kb = (unit % p.splits) * p.k_tiles_per_split;
  ke = min(p.k_tiles, kb + p.k_tiles_per_split);
}

// One work unit: k-tiles [kb, ke) of raster tile `tile` (k range `split` of split-K); `part` -1
// for a unit that finishes its tile alone, else its k range's index in a tail-split tile.
struct WorkUnit {
  int tile, split, kb, ke, part;
};

// A CTA's work units in order, the same walk for its producer and its consumers: the
// data-parallel (or split-K) units first_unit, first_unit + unit_step, ... of the tiles before the
// tail-split ones (each tile's k ranges consecutive units), then, for CTA b < tiles * parts of a
// tail split, part b % parts of tail tile b / parts.
struct UnitWalk {
  int unit, unit_step, units;
  int tail_unit;  // -1 once taken, or when the CTA has none

  __device__ UnitWalk(const HopperParams& p, int first_unit, int step)
      : unit(first_unit),
        unit_step(step),
        units((p.raster.count() - p.tail.tiles) * p.splits),
        tail_unit(int(blockIdx.x) < p.tail.tiles * p.tail.parts ? int(blockIdx.x) : -1) {}

  __device__ __forceinline__ bool next(const HopperParams& p, WorkUnit& u) {
    if (unit < units) {
      u.tile = unit / p.splits;
      u.split = unit % p.splits;
      unit_k_range(p, unit, u.kb, u.ke);
      u.part = -1;
      unit += unit_step;
      return true;
    }
    if (tail_unit < 0) return false;
    u.tile = p.raster.count() - p.tail.tiles + tail_unit / p.tail.parts;
    u.split = 0;
    u.part = tail_unit % p.tail.parts;
    u.kb = int(int64_t(u.part) * p.k_tiles / p.tail.parts);
    u.ke = int(int64_t(u.part + 1) * p.k_tiles / p.tail.parts);
    tail_unit = -1;
    return true;
  }
};

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
