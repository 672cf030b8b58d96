// The main loop's two halves, shared by every Hopper kernel (kernels.cuh, rs_kernel.cuh):
//   * the producer's: an operand tile into a ring stage, by TMA (tma_tile: one thread issues, the
//     bytes counted on the stage's mbarrier; multicast to a cluster) or by cp.async from every
//     thread (cp_async_tile, the tc:wgmma step), both in the 128-byte swizzle; and produce_tiles,
//     the producer warpgroup's walk over a CTA's work units in the warp-specialized kernels;
//   * the consumer's: shared-memory matrix descriptors and wgmma_k_tile, one k-tile of wgmmas on a
//     stage. Each kernel keeps its own waits and stage releases: they are what the steps change.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "gemm/tc/sm90/config.cuh"
#include "gemm/tc/sm90/ptx.cuh"
#include "gemm/tc/sm90/scheduler.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// Shared-memory matrix descriptor of an operand tile in the 128-byte swizzle (TMA's
// CU_TENSOR_MAP_SWIZZLE_128B; the 1024-byte atoms start 1024-byte aligned, so base offset 0):
//   K-major:  rows of 128 bytes of K, 8-row groups 1024 bytes apart (stride byte offset); the
//             leading byte offset is unused. One k16 (bf16/fp16), k8 (tf32) or k32 (FP8) slice
//             is 32 bytes further along each row.
//   MN-major: blocks of 64 MN-elements x BK k-rows, each k-row 128 bytes; 8-k-row groups 1024
//             bytes apart (stride byte offset), 64-element MN blocks `block_bytes` apart (leading
//             byte offset). One k16 slice is 16 rows = 2048 bytes further.
template <bool KMajor>
__device__ __forceinline__ uint64_t sw128_desc(const void* tile, uint32_t block_bytes) {
  const uint64_t addr = smem_u32(tile);
  const uint64_t lbo = KMajor ? 1 : (block_bytes >> 4);
  return ((addr & 0x3FFFF) >> 4) | (lbo << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// Descriptor advance (in 16-byte units) from one MMA k-slice to the next.
template <bool KMajor, int kMmaK>
constexpr uint64_t desc_k_step() {
  return KMajor ? (32 >> 4) : (kMmaK * 128) >> 4;
}

// One k-tile (128 bytes of K per row) of this warpgroup's 64 x BN block: kKSteps wgmmas.
// a_tile: this warpgroup's 64 rows of A; b_tile: all BN columns of B. FP8 (T is A's type, TB B's,
// both K-major, BN 128): the first wgmma overwrites d (scale-d 0) when `overwrite`, so d holds
// this k-tile's sums alone, which the kernel then promotes into its fp32 accumulators.
template <TcType T, int BN, bool AK, bool BKm, TcType TB = T>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[BN / 2], const uint8_t* a_tile,
                                             const uint8_t* b_tile, bool overwrite = false) {
#ifdef CUDASTEPS_SM90A_DEVICE
  using Cfg = HopperCfg<T, BN>;
  static_assert(!tc_is_fp8(T) || (AK && BKm && BN == 128 && TB == TcType::kE4M3),
                "FP8 wgmma: K-major operands, 128-wide tiles, B e4m3");
  const uint64_t da = sw128_desc<AK>(a_tile, Cfg::kBlockBytes);
  const uint64_t db = sw128_desc<BKm>(b_tile, Cfg::kBlockBytes);
  constexpr int ta = AK ? 0 : 1, tb = BKm ? 0 : 1;
#pragma unroll
  for (int s = 0; s < Cfg::kKSteps; ++s) {
    const uint64_t sa = da + s * desc_k_step<AK, Cfg::kMmaK>();
    const uint64_t sb = db + s * desc_k_step<BKm, Cfg::kMmaK>();
    static_assert(BN >= 128 || T == TcType::kBF16 || T == TcType::kFP16,
                  "tiles narrower than 128: 16-bit operands only");
    if constexpr (T == TcType::kBF16 && BN == 16) wgmma_m64n16k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 16) wgmma_m64n16k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kBF16 && BN == 32) wgmma_m64n32k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 32) wgmma_m64n32k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kBF16 && BN == 64) wgmma_m64n64k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 64) wgmma_m64n64k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kBF16 && BN == 256) wgmma_m64n256k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kBF16 && BN == 128) wgmma_m64n128k16_bf16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 256) wgmma_m64n256k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kFP16 && BN == 128) wgmma_m64n128k16_fp16<ta, tb>(d, sa, sb);
    if constexpr (T == TcType::kTF32 && BN == 256) wgmma_m64n256k8_tf32(d, sa, sb);
    if constexpr (T == TcType::kTF32 && BN == 128) wgmma_m64n128k8_tf32(d, sa, sb);
    if constexpr (tc_is_fp8(T)) {
      // A k-slice moves only the descriptors' low words (2 16-byte units per k32 slice, never
      // carrying out of the 14-bit address field): 32-bit adds under the constant high words. The
      // 64-bit adds of sa and sb took an add with carry and register moves per descriptor: about 10
      // of the FP8 loop's 134 instructions per warp and k-tile (64 of them the FADDs of the
      // promotion; cuBLAS's loop has about 104). Measured on an H100, both forms in one build
      // (e4m3, bf16 out, interleaved with torch._scaled_mm, inputs rotated out of L2; two runs,
      // ratio to torch, before -> after): 4096^3 0.92 / 0.92 -> 0.95 / 1.04, 8192 x 2048 x 8192
      // 0.93 / 0.99 -> 0.97 / 1.05, 4096 x 11008 x 4096 0.91 / 0.91 -> 0.94 / 0.94, 4096 x 4096 x
      // 11008 0.89 / 0.92 -> 0.95 / 0.96, 8192 x 8192 x 2048 0.92 / 0.91 -> 0.94 / 0.93, 8192^3
      // 0.85 / 0.84 -> 0.85 / 0.85. Inside the FP8 FFN step no change showed: its six products
      // 1.386 ms of own kernel time against 1.363 before. The 16-bit types keep the 64-bit adds:
      // the same change there measured no difference (bf16 NN, 128 x 256 tiles, both forms in one
      // build, two runs: 8192 x 8192 x 2048, 8192 x 2048 x 8192, 4096^3, 8192^3 within 2% either
      // way but for one 4096^3 run, 9% in the 32-bit form's favour): a bf16 m64n256k16 wgmma runs
      // twice as long as an FP8 m64n128k32 one.
      auto advance_low = [](uint64_t desc, uint32_t units) {
        return (desc & ~uint64_t(0xFFFFFFFF)) | (uint32_t(desc) + units);
      };
      const uint64_t fa = advance_low(da, s * desc_k_step<AK, Cfg::kMmaK>());
      const uint64_t fb = advance_low(db, s * desc_k_step<BKm, Cfg::kMmaK>());
      const int scale_d = overwrite && s == 0 ? 0 : 1;
      if constexpr (T == TcType::kE4M3) wgmma_m64n128k32_e4m3_e4m3(d, fa, fb, scale_d);
      if constexpr (T == TcType::kE5M2) wgmma_m64n128k32_e5m2_e4m3(d, fa, fb, scale_d);
    }
  }
#else
  (void)d, (void)a_tile, (void)b_tile, (void)overwrite;
  hopper_only();
#endif
}

// ---- operand tiles: TMA boxes and cp.async chunks in the 128-byte swizzle ----

// TMA: one stage tile of an operand with `Rows` rows along M (or N) starting at mn0, k-tile kt.
// K-major: one box of BK x Rows. MN-major: Rows / BK boxes of BK (MN, 128 bytes) x BK, one block
// each.
// cta_mask != 0: multicast to those CTAs of the cluster (tma_load_2d_multicast); else, with
// policy != 0, the loads carry that L2 cache policy (tma_load_2d_hinted).
template <bool KMajor, int Rows, int BK>
__device__ __forceinline__ void tma_tile(uint8_t* dst, const CUtensorMap* map, uint64_t* bar,
                                         int mn0, int kt, uint16_t cta_mask = 0,
                                         uint64_t policy = 0) {
  auto box = [&](uint8_t* to, int inner, int outer) {
    if (cta_mask) {
      tma_load_2d_multicast(to, map, bar, inner, outer, cta_mask);
    } else if (policy) {
      tma_load_2d_hinted(to, map, bar, inner, outer, policy);
    } else {
      tma_load_2d(to, map, bar, inner, outer);
    }
  };
  if constexpr (KMajor) {
    box(dst, kt * BK, mn0);
  } else {
    static_assert(Rows % BK == 0, "MN-major tiles are whole 128-byte (BK-element) blocks");
#pragma unroll
    for (int blk = 0; blk < Rows / BK; ++blk) box(dst + blk * BK * 128, mn0 + blk * BK, kt * BK);
  }
}

// cp.async (tc:wgmma): the same tile and layout as tma_tile writes, by every thread of the block.
// 16-byte chunk c of a 128-byte row r lands at chunk c ^ (r % 8): 8 consecutive rows of one chunk
// column hit 8 different 16-byte bank groups, so neither the stores nor the tensor cores' reads
// conflict. Chunks past the matrix edge are zero-filled (cp_async_16_bytes), as TMA does.
template <bool KMajor, int Rows, int BK, int kElemBytes>
__device__ __forceinline__ void cp_async_tile(uint8_t* dst, const uint8_t* src, int64_t ld,
                                              int64_t mn0, int64_t mn_total, int64_t k0,
                                              int64_t K) {
  static_assert(BK * kElemBytes == 128, "a k-tile is one 128-byte swizzle row");
  constexpr int kElemsPerChunk = 16 / kElemBytes;
  // K-major: Rows rows (mn) of 8 chunks along k. MN-major: Rows / BK blocks of BK rows (k) of 8
  // chunks along mn.
  constexpr int kChunks = Rows * 8;
  for (int i = threadIdx.x; i < kChunks; i += blockDim.x) {
    int r, c, blk;
    int64_t row_mn, k, left;
    if constexpr (KMajor) {
      r = i / 8, c = i % 8, blk = 0;
      row_mn = mn0 + r;
      k = k0 + int64_t(c) * kElemsPerChunk;
      left = row_mn < mn_total ? (K - k) * kElemBytes : 0;
    } else {
      blk = i / (BK * 8), r = (i / 8) % BK, c = i % 8;
      row_mn = mn0 + blk * BK + int64_t(c) * kElemsPerChunk;
      k = k0 + r;
      left = k < K ? (mn_total - row_mn) * kElemBytes : 0;
    }
    const int bytes = left <= 0 ? 0 : (left >= 16 ? 16 : int(left));
    const uint8_t* g = bytes == 0 ? src
                       : KMajor   ? src + (row_mn * ld + k) * kElemBytes
                                  : src + (k * ld + row_mn) * kElemBytes;
    tc::cp_async_16_bytes(dst + blk * BK * 128 + r * 128 + ((c ^ (r % 8)) * 16), g, bytes);
  }
}

// A cluster's CTAs as a grid of kCtasM x kCtasN tiles (Ctas = kCtasM kCtasN): rank r takes tile
// row r % kCtasM and tile column r / kCtasM of its group. The kCtasN CTAs of one tile row share
// its A tile, the kCtasM of one tile column its B tile; each loads a slice of the shared tiles and
// multicasts it to the CTAs that share them. Clusters of two: kCtasN 1 (tc:ws_multicast,
// vertically adjacent tiles sharing B) or 2 (the skinny tiles' c2: two token tiles sharing the
// weight tile); the skinny tiles' larger clusters share both (w4:c2: 4 weight tiles by 2 token
// tiles, cuBLAS's 4 x 2 clusters for these products).
template <int Ctas, int kCtasN>
struct ClusterGrid {
  static_assert(Ctas % kCtasN == 0, "a whole number of tile rows per cluster");
  static constexpr int kRows = Ctas / kCtasN;  // kCtasM: tile rows (A tiles) per group
  static constexpr int kCols = kCtasN;         // tile columns (B tiles) per group
  // This CTA's row (which of the group's A tiles) and column (which B tile).
  __device__ __forceinline__ static int row(uint32_t rank) { return int(rank) % kRows; }
  __device__ __forceinline__ static int col(uint32_t rank) { return int(rank) / kRows; }
  // The CTAs whose loads land in `rank`'s stages, and into whose stages `rank`'s land (the same
  // set): its tile row and its tile column. Each must release a stage before any of them refills
  // it.
  __device__ __forceinline__ static bool shares_stages(uint32_t rank, uint32_t other) {
    return row(rank) == row(other) || col(rank) == col(other);
  }
  static constexpr int kSharers = kRows + kCols - 1;  // shares_stages's CTAs, rank's own too
  // Multicast masks: rank's tile row (A's slices go there) and tile column (B's).
  __device__ __forceinline__ static uint16_t row_mask(uint32_t rank) {
    uint16_t mask = 0;
#pragma unroll
    for (int c = 0; c < kCtasN; ++c) mask |= uint16_t(1u << (row(rank) + c * kRows));
    return mask;
  }
  __device__ __forceinline__ static uint16_t col_mask(uint32_t rank) {
    return uint16_t(((1u << kRows) - 1) << (col(rank) * kRows));
  }
};

// The tile (tm, tn) of a cluster's CTA `rank` in the tile group at raster position (tg, tgn): a
// group is kCtasM x kCtasN adjacent tiles (ClusterGrid), the raster counting groups.
template <int Ctas, int kCtasN>
__device__ __forceinline__ void cluster_tile(int tg, int tgn, uint32_t rank, int& tm, int& tn) {
  using Grid = ClusterGrid<Ctas, kCtasN>;
  tm = tg * Grid::kRows + Grid::row(rank);
  tn = tgn * Grid::kCols + Grid::col(rank);
}

// Where B's tile `tn` (BN columns) starts. kShiftLast (the skinny tiles, whose B is the tokens): a
// last tile that only partly covers B's columns is moved back to end at the last one, so that its
// TMA boxes lie inside the tokens; its first columns repeat the tile before's, and its store skips
// them (store_accumulators_transposed's first column). Boxes partly past the tokens ran slow: 96
// tokens x (4096 -> 2560) in 64-token tiles took 21.5 us against 16.4 for 128 tokens; moved back,
// 16.2 (H100, CUDA-graph replays; scheduler.cuh has more).
template <int BN, bool kShiftLast>
__device__ __forceinline__ int64_t b_tile_origin(const HopperParams& p, int tn) {
  const int64_t n0 = int64_t(tn) * BN;
  if constexpr (kShiftLast) {
    if (p.N > BN && n0 < p.N && n0 + BN > p.N) return p.N - BN;
  }
  return n0;
}

// The producer thread of the persistent kernels: walks the CTA's work units (first_unit,
// first_unit + unit_step, ...) and fills the ring stage by stage, each once its consumers (and
// those of every CTA its loads land in) have released it. A unit covers a cluster's group of
// tiles (ClusterGrid, one per CTA). An operand tile that kCtasN CTAs (A) or kCtasM CTAs (B) share
// is loaded in that many slices, each CTA its own slice multicast to the sharers; an operand tile
// no other CTA shares is loaded whole. A slice sits at the same place in every CTA's stage.
// Cfg: the tile configuration (HopperCfg, or tc:fp8_ws256's Fp8WideCfg: 256 rows of A per stage).
template <TcType T, int BN, bool AK, bool BKm, int Ctas, typename Cfg = HopperCfg<T, BN>,
          int kCtasN = 1, bool kShiftLastB = false, bool kL2Hints = false>
__device__ __forceinline__ void produce_tiles(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                              const HopperParams& p, uint8_t* ring, uint64_t* full,
                                              uint64_t* empty, uint32_t rank, int first_unit,
                                              int unit_step) {
  using Grid = ClusterGrid<Ctas, kCtasN>;
  // Rows of A (along M) and of B (along N) this CTA loads per stage, and where its slices start:
  // whole 8-row groups of the swizzle, so that every slice starts on a 1024-byte atom.
  constexpr int kARows = Cfg::BM / kCtasN;
  constexpr int kBRows = BN / Grid::kRows;
  static_assert(kARows % 8 == 0 && kBRows % 8 == 0, "slices of whole 8-row swizzle groups");
  const int a_slice = Grid::col(rank) * kARows;
  const int b_slice = Grid::row(rank) * kBRows;
  const uint16_t a_mask = kCtasN == 1 ? 0 : Grid::row_mask(rank);
  const uint16_t b_mask = Grid::kRows == 1 ? 0 : Grid::col_mask(rank);
  // kL2Hints (the skinny tiles' h1, unclustered): A, the weight, is read once per token tile and
  // goes first; B, the tokens, is read by every weight tile and stays.
  const uint64_t a_policy = kL2Hints ? l2_policy<true>() : 0;
  const uint64_t b_policy = kL2Hints ? l2_policy<false>() : 0;
  int stage = 0, phase = 0;
  UnitWalk walk(p, first_unit, unit_step);
  WorkUnit u;
  while (walk.next(p, u)) {
    int tg, tgn, tm, tn;
    p.raster.coords(u.tile, tg, tgn);
    cluster_tile<Ctas, kCtasN>(tg, tgn, rank, tm, tn);
    const int b_origin = int(b_tile_origin<BN, kShiftLastB>(p, tn));
    for (int kt = u.kb; kt < u.ke; ++kt) {
      mbar_wait(&empty[stage], phase ^ 1);
      uint8_t* dst = ring + stage * Cfg::kStageBytes;
      mbar_arrive_expect_tx(&full[stage], Cfg::kStageBytes);
      tma_tile<AK, kARows, Cfg::BK>(dst + a_slice * 128, map_a, &full[stage],
                                    tm * Cfg::BM + a_slice, kt, a_mask, a_policy);
      tma_tile<BKm, kBRows, Cfg::BK>(dst + Cfg::kABytes + b_slice * 128, map_b, &full[stage],
                                     b_origin + b_slice, kt, b_mask, b_policy);
      if (++stage == Cfg::kStages) stage = 0, phase ^= 1;
    }
  }
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
