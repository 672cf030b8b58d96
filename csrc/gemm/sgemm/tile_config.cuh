// The SGEMM's compile-time tile configuration (TileConfig: block, warp and thread tiles, pipeline
// stages, copy grouping, FFMA order) and its run-time parameters (SgemmParams, StreamKParams),
// shared by the loaders, the kernel, the epilogue and the configs that instantiate them
// (configs.cuh). Plain C++ (no device code, no ATen): host units fill the parameters too
// (dispatch.cpp, through launch.h).
#pragma once

#include <cstdint>

namespace cudasteps {
namespace gemm {

// Floats of padding per shared-memory row. A multiple of 4 keeps every row 16-byte aligned for
// LDS.128 / STS.128; it also shifts consecutive k rows by 4 banks, so the transposed scalar stores
// of a K-contiguous operand (4 consecutive k of 8 different m per warp) hit at most 2 ways.
constexpr int kSmemPad = 4;
// Output tiles are visited in groups of kGroupM tile rows (Triton's grouped order): consecutive
// blocks share B column panels and A row panels while they are still in L2.
constexpr int kGroupM = 8;

// TileConfig::SerpentineFma's bit for an instantiation: the layout (ALayoutK: A contiguous along K,
// BLayoutK: B contiguous along K), and the kernel (sgemm_kernel, or stream-K's tail kernel).
constexpr unsigned fma_order_bit(bool a_layout_k, bool b_layout_k, bool stream_k) {
  return 1u << ((a_layout_k ? 2 : 0) + (b_layout_k ? 1 : 0) + (stream_k ? 4 : 0));
}

// The compile-time shape of one kernel instantiation.
//   BM x BN  block tile (outputs per block)        BK  K-depth of one shared-memory slice
//   WM x WN  warp tile (outputs per warp)          TM x TN  thread tile (accumulators per thread)
//   Stages   1: single buffer, 2: double buffer, 3..6: cp.async ring (sm_80+, warp tiles only)
//   WarpTile  false: threads laid out row-major over the block tile, each owning one contiguous
//            TM x TN block (the `vectorized` ladder step, whose Bs reads are 4-way bank
//            conflicted); true: the warp-tiled layout above.
//   MinBlocks  __launch_bounds__ occupancy target (caps registers at 64K / (Threads * MinBlocks)).
//   KUnroll  unroll factor of the per-k loop over a slice. Full unrolling (BK) lets ptxas hoist
//            shared loads of later k steps, which at the 128-register cap of 2 blocks/SM spills
//            (ptxas -v: 96-136 bytes for 128x128x16, 8x8); 1 keeps 8x8 tiles spill-free at ~3
//            loop instructions per 64 FFMA, the other warps of the SM covering the LDS latency.
//   CopyGroup  cp.async ring: copies of the next slice issued per k step (A's first, then B's);
//            CopyGroupKK when both operands are K-contiguous (every copy 4-byte: 12 per thread at
//            256x128x8 against 9 for a row-major B), CopyGroupUnaligned for the Vec = false
//            instantiation. No one rule fits ptxas's schedules: on an H100 at 4096^3, 256x128x8
//            NN ran 0.97x of cuBLAS with 1 or 2 per step, 0.98x with 3, 0.84x with all 9 at
//            once, NT 0.99x with 2 and 0.96x with 3; 128x256x8 NN 0.87x with 1, 0.93x with 4.
//   SerpentineFma  which instantiations issue a k step's TM x TN FFMAs in serpentine order (rows
//            of the thread tile alternately left to right and right to left) instead of row by
//            row: a bit per layout and kernel, fma_order_bit above; aligned (Vec) only. The
//            results are the same bit for bit (each accumulator gets the same FFMAs in the same
//            k order); what changes is ptxas's register assignment, so which operands share a
//            register bank. No order wins everywhere (256x128x8 on an H100, against row order:
//            TN +3%, NT +2%, TT +1.4%, the stream-K kernel NN better, sgemm_kernel NN 0.8%
//            worse; 128x256x8: +2-9% in every layout).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int Stages_, bool WarpTile_,
          int MinBlocks_, int KUnroll_ = BK_, int CopyGroup_ = 1, int CopyGroupKK_ = CopyGroup_,
          int CopyGroupUnaligned_ = CopyGroup_, unsigned SerpentineFma_ = 0>
struct TileConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
  static constexpr int Stages = Stages_;
  static constexpr bool WarpTile = WarpTile_;
  static constexpr int MinBlocks = MinBlocks_;
  static constexpr int KUnroll = KUnroll_;
  static constexpr int kSubM = TM / 4, kSubN = TN / 4;  // 4x4 sub-tiles per thread
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = WarpTile ? (BM / WM) * (BN / WN) * 32 : (BM / TM) * (BN / TN);
  // Warp-tiled layout: lanes along N and M inside a warp tile.
  static constexpr int kLanesN = WN / kSubN / 4;
  static constexpr int kLanesM = WM / kSubM / 4;
  static constexpr int kStrideA = BM + kSmemPad;  // floats per As row (one k)
  static constexpr int kStrideB = BN + kSmemPad;
  static constexpr int kStageFloats = BK * (kStrideA + kStrideB);
  static constexpr size_t kSmemBytes = size_t(Stages) * kStageFloats * sizeof(float);
  // The blocked sums' running totals (the ring only), past the ring's stages.
  static constexpr size_t kSumBytes = size_t(BM) * BN * sizeof(float);
  static constexpr int CopyGroup = CopyGroup_, CopyGroupKK = CopyGroupKK_;
  static constexpr int CopyGroupUnaligned = CopyGroupUnaligned_;
  static constexpr unsigned SerpentineFma = SerpentineFma_;

  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tile is made of 4x4 sub-tiles");
  static_assert(BK % 4 == 0, "BK holds whole 16-byte chunks");
  static_assert(Stages >= 1 && Stages <= 6, "one or two buffers, or a ring of 3 to 6");
  static_assert(Stages <= 2 || (WarpTile && BK % 8 == 0 && (BM * BK) % kThreads == 0 &&
                                (BN * BK) % kThreads == 0 && BM % 32 == 0 && BN % 32 == 0),
                "the cp.async ring copies whole 8-deep k groups, one float per thread per copy");
  static_assert(!WarpTile || (BM % WM == 0 && BN % WN == 0), "warp tiles cover the block tile");
  static_assert(!WarpTile || kLanesM * kLanesN == 32, "a warp tile is WM*WN = 32*TM*TN outputs");
  static_assert(WarpTile || (BM % TM == 0 && BN % TN == 0), "thread tiles cover the block tile");
  static_assert((BM * BK / 4) % kThreads == 0 && (BN * BK / 4) % kThreads == 0,
                "each thread loads a whole number of 16-byte chunks per slice");
};

struct SgemmParams {
  const float* a;
  const float* b;
  int64_t lda, ldb;
  float* out;               // row-major, leading dimension N (OutT: column-major, M)
  int64_t out_split_stride;  // elements between the partial outputs of split-K blocks
  const float* addend;      // nullptr: none
  int64_t add_s0, add_s1;
  float alpha, beta;
  int64_t M, N, K;
  int64_t k_per_split;  // multiple of BK; >= K when not split
  int tiles_m, tiles_n;
  // The ring: slices per block of the blocked sums (0: one running sum; else the kernel is
  // launched with kSumBytes more shared memory).
  int sum_block_slices;
};

// The stream-K tail's parameters (scheduler.cuh tells the story): which tiles sgemm_kernel runs
// and how sgemm_streamk_kernel's blocks share the rest.
struct StreamKParams {
  int dp_tiles;        // tiles [0, dp_tiles) are sgemm_kernel's; the tail is [dp_tiles, T)
  int blocks;          // blocks sharing the tail: from the tail's tile count up to iters (so
                       // that no block's range is empty)
  int iters_per_tile;  // ceil(K / BK)
  int64_t iters;       // tail * iters_per_tile
  float* workspace;    // blocks * 2 slots of BM * BN floats
  int* counters;       // parts written, one per tail tile, zero before the launch
};

}  // namespace gemm
}  // namespace cudasteps
