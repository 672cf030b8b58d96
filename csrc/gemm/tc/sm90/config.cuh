// The Hopper kernels' tile configuration (HopperCfg: tile sizes, ring stages, the shared-memory
// layout) and run-time parameters (HopperParams: operands, tile order, split-K), shared by every
// part of sm90/: the mainloop, the epilogue, the scheduler and the kernels that compose them.
#pragma once

#include <cstdint>

#include "gemm/tc/common.cuh"

// Device code that uses sm_90a instructions (wgmma, setmaxnreg, TMA): only nvcc's sm_90a pass
// defines it; elsewhere the wrappers compile to nothing (and tc_hopper_available() keeps such a
// build from launching these kernels).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUDASTEPS_SM90A_DEVICE 1
#endif

namespace cudasteps {
namespace gemm {
namespace sm90 {

using elementwise::Act;
using tc::Epilogue;
using tc::smem_u32;
using tc::TileRaster;

// ---- tile configuration ----
// BM_ 192 (tc:ws_persistent's tall tiles, 16-bit operands and 128-wide tiles only): three
// consumer warpgroups of 64 rows each instead of two, for outputs whose 192-row tiles fill a wave
// that 128-row ones leave part idle (persistent_bm, scheduler.cuh). BM_ 64 (the skinny tiles of
// few-row linears, 16-bit operands, 16, 32 or 64 wide): one consumer warpgroup, 64 rows of the
// weight by a few tokens, a deep ring of small stages.
template <TcType T, int BN_, int BM_ = 128>
struct HopperCfg {
  static constexpr int BM = BM_, BN = BN_;
  static_assert(BM == 128 || (BM == 192 && BN == 128) || (BM == 64 && BN <= 64),
                "128-row tiles, 192 x 128, or 64 x 16/32/64");
  static constexpr int kConsumers = BM / 64;  // consumer warpgroups, 64 rows each
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kElemBytes = tc_elem_bytes(T);  // of the operands
  static constexpr int BK = 128 / kElemBytes;  // one 128-byte swizzle row of K
  static constexpr int kMmaK = 32 / kElemBytes;  // k8 (tf32), k16 (bf16, fp16), k32 (FP8)
  static constexpr int kKSteps = BK / kMmaK;          // wgmmas per k-tile, 32 bytes of K each
  static constexpr int kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // As many stages as fit beside the barriers and tc:ws_persistent's staging in 227 KiB: 4 for
  // 128 x 256, 6 for 128 x 128, 8 for 128 x 64 (16-bit operands only: the tiles for outputs that
  // 128 x 128 tiles leave short of a wave; persistent_bn, scheduler.cuh), 4 for 192 x 128.
  static constexpr int kStages = BM == 64     ? (BN == 64 ? 12 : 16)
                                 : BM == 192  ? 4
                                 : BN == 256  ? 4
                                 : BN == 128  ? 6
                                              : 8;
  static constexpr int kAccs = BN / 2;  // fp32 accumulators per thread of a consumer warpgroup
  // An MN-major operand tile is stored as blocks of 128 bytes of MN (64 bf16/fp16, 32 tf32) by BK
  // k-rows.
  static constexpr int kBlockBytes = BK * 128;
  // Offset of consumer warpgroup w's 64 rows of A: 64 K-major rows, or one MN-major block (the
  // same 8 KiB either way).
  static constexpr int kAHalfBytes = 64 * 128;
  // 1024 bytes of slack to align the ring to the 1024-byte swizzle atom, then the barriers.
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;
  // tc:ws_persistent stages its output through shared memory for TMA stores: per consumer
  // warpgroup, up to kStoreBoxes boxes of 64 rows x 128 bytes at a time (16 KiB), after the ring
  // (one box where the tile's 64 x BN block is narrower: 128 x 64 tiles of a 16-bit output).
  static constexpr int kStoreBoxes = 2;
  static constexpr int kStoreBytesPerConsumer = kStoreBoxes * 64 * 128;
  static constexpr int kStoreBytes = kConsumers * kStoreBytesPerConsumer;
  static constexpr int kWsSmemBytes = kSmemBytes + kStoreBytes;
  static_assert(kWsSmemBytes <= 227 * 1024, "a Hopper block has 227 KiB of shared memory");
  // The skinny tiles (BM 64, launch_skinny): after the barriers, the two of their split along K
  // (combine_cluster_k_parts), then their transposed store's staging
  // (store_accumulators_transposed): BN token rows of the tile's 64 features, each row padded by
  // 16 bytes so that the 4 rows one warp's 2-byte writes reach at a time fall in different banks.
  static constexpr int kTransposeRowBytes = 64 * kElemBytes + 16;
  static constexpr int kSkinnySmemBytes = kWsSmemBytes + 2 * 8 + BN * kTransposeRowBytes;
  static_assert(BM != 64 || kSkinnySmemBytes <= 227 * 1024, "the skinny tiles fit shared memory");
};

// tc:fp8_ws256 (FP8 only): 256 x 128 tiles. Each consumer warpgroup takes 128 rows as two 64-row
// halves, one after the other, with one set of k-tile sums for both (its two halves' fp32
// accumulators and that set: the 192 registers tc:fp8_ws spends on a 128-row tile's half and two
// alternating sets); a stage holds 256 rows of A and 128 of B (48 KiB), four of them.
template <TcType T>
struct Fp8WideCfg : HopperCfg<T, 128> {
  static_assert(tc_is_fp8(T), "the wide tiles are FP8's");
  using Base = HopperCfg<T, 128>;
  static constexpr int BM = 2 * Base::BM;
  static constexpr int kABytes = BM * 128, kStageBytes = kABytes + Base::kBBytes;
  static constexpr int kStages = 4;
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;
  static constexpr int kWsSmemBytes = kSmemBytes + Base::kStoreBytes;
  static_assert(kWsSmemBytes <= 227 * 1024, "a Hopper block has 227 KiB of shared memory");
};

// Tail split (tc:ws_persistent in clusters of one CTA): where whole tiles leave the last wave
// partly idle, the raster's last `tiles` tiles (those of the partial wave, or all of them below
// one wave) are cut into `parts` k ranges each, one CTA per range, so the last wave is `parts`
// times shorter (scheduler.cuh). A cut tile is summed by the last of its parts to arrive
// (tail_split_fixup, epilogue.cuh).
struct TailSplit {
  int tiles = 0;  // 0: no tail split
  int parts = 0;  // tiles * parts <= the grid's CTAs
  // Each CTA's part, per consumer warpgroup: (tiles * parts) x 2 x (64 x BN) floats.
  float* workspace = nullptr;
  int* arrived = nullptr;  // parts summed into the workspace, per (tile, warpgroup); zeroed first
};

struct HopperParams {
  const uint8_t* a;  // tc:wgmma only (the TMA kernels read through tensor maps)
  const uint8_t* b;
  int64_t lda, ldb;  // elements
  int64_t M, N, K;
  int k_tiles;
  TileRaster raster;
  // Split-K (tc:ws_persistent): each tile's k-tiles are cut into `splits` ranges of
  // `k_tiles_per_split`; with splits > 1 every range writes its fp32 sums to
  // partial[split][M][N] and splitk_reduce_kernel adds them in a fixed order (deterministic).
  int splits;
  int k_tiles_per_split;
  float* partial;
  // The output is TMA-describable (16-byte aligned rows): staged TMA stores, else direct stores.
  bool tma_store;
  TailSplit tail;  // (with splits == 1 only)
  // tc:fp8_ws:st<L> (the ladder's, a trial): consumer warpgroup 1 issues its first k-tile only once
  // warpgroup 0 has issued L (wgmma_ws_kernel's FP8 loop); 0: no stagger.
  int stagger = 0;
};

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
