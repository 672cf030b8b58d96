// The Hopper kernels of the tensor-core ladder that read both operands from shared memory, each
// composed of the mainloop (mainloop.cuh), the scheduler (scheduler.cuh) and the epilogue
// (epilogue.cuh):
//   wgmma_cp_async_kernel   tc:wgmma          every thread loads with cp.async; block barriers
//   wgmma_tma_kernel        tc:wgmma_tma      + TMA loads issued by one thread, mbarriers
//   wgmma_ws_kernel<1>      tc:ws_persistent  + warp specialization, persistent CTAs, split-K
//                                             or the last wave's tiles split along K; 128 x
//                                             64/128/256 tiles, or 192 x 128 (3 consumers)
//   wgmma_ws_kernel<2>      tc:ws_multicast   + clusters of two CTAs sharing B by TMA multicast
//   wgmma_pingpong_kernel   tc:ws_pingpong    each consumer warpgroup owns a tile, in turns
//   wgmma_ws_kernel<FP8>    tc:fp8_ws         tc:ws_persistent for FP8 operands (scaled_mm), each
//                                             k-tile's sums promoted into fp32 registers
// tc:ws_tf32_rs, which reads one operand through registers, is rs_kernel.cuh. What each step
// changes and why it pays: hopper.cu.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/launch.cuh"  // wait_previous_grid_release_next
#include "gemm/tc/sm90/config.cuh"
#include "gemm/tc/sm90/epilogue.cuh"
#include "gemm/tc/sm90/mainloop.cuh"
#include "gemm/tc/sm90/ptx.cuh"
#include "gemm/tc/sm90/scheduler.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// ---- tc:wgmma: cp.async ring, every thread loads ----

template <TcType T, int BN, bool AK, bool BKm>
__global__ void __launch_bounds__(256, 1)
    wgmma_cp_async_kernel(const HopperParams p, const Epilogue<T> ep) {
  using Cfg = HopperCfg<T, BN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  int tm, tn;
  p.raster.coords(int(blockIdx.x), tm, tn);
  const int64_t m0 = int64_t(tm) * Cfg::BM, n0 = int64_t(tn) * BN;
  const int wg = threadIdx.x / 128;

  auto load = [&](int kt) {
    uint8_t* stage = ring + (kt % Cfg::kStages) * Cfg::kStageBytes;
    const int64_t k0 = int64_t(kt) * Cfg::BK;
    cp_async_tile<AK, Cfg::BM, Cfg::BK, Cfg::kElemBytes>(stage, p.a, p.lda, m0, p.M, k0, p.K);
    cp_async_tile<BKm, BN, Cfg::BK, Cfg::kElemBytes>(stage + Cfg::kABytes, p.b, p.ldb, n0, p.N, k0,
                                                     p.K);
  };
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < p.k_tiles) load(s);
    tc::cp_async_commit();  // empty groups keep the wait count uniform
  }
  float d[Cfg::kAccs];
  zero(d);
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    tc::cp_async_wait<Cfg::kStages - 2>();
    fence_proxy_async();
    __syncthreads();  // stage kt is complete for every thread; stage kt - 1 is no longer read
    if (kt + Cfg::kStages - 1 < p.k_tiles) load(kt + Cfg::kStages - 1);
    tc::cp_async_commit();
    const uint8_t* stage = ring + (kt % Cfg::kStages) * Cfg::kStageBytes;
    keep_live(d);
    wgmma_fence();
    wgmma_k_tile<T, BN, AK, BKm>(d, stage + wg * Cfg::kAHalfBytes, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
  }
  store_accumulators<T, BN>(ep, d, m0 + wg * 64, n0);
}

// ---- tc:wgmma_tma: TMA into the ring, one thread issues, block barrier to recycle a stage ----

template <TcType T, int BN, bool AK, bool BKm>
__global__ void __launch_bounds__(256, 1)
    wgmma_tma_kernel(const __grid_constant__ CUtensorMap map_a,
                     const __grid_constant__ CUtensorMap map_b, const HopperParams p,
                     const Epilogue<T> ep) {
  using Cfg = HopperCfg<T, BN>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + Cfg::kStages * Cfg::kStageBytes);
  int tm, tn;
  p.raster.coords(int(blockIdx.x), tm, tn);
  const int m0 = tm * Cfg::BM, n0 = tn * BN;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) mbar_init(&full[s], 1);
    fence_barrier_init();
  }
  __syncthreads();
  auto load = [&](int kt) {
    const int s = kt % Cfg::kStages;
    uint8_t* stage = ring + s * Cfg::kStageBytes;
    mbar_arrive_expect_tx(&full[s], Cfg::kStageBytes);
    tma_tile<AK, Cfg::BM, Cfg::BK>(stage, &map_a, &full[s], m0, kt);
    tma_tile<BKm, BN, Cfg::BK>(stage + Cfg::kABytes, &map_b, &full[s], n0, kt);
  };
  if (threadIdx.x == 0) {
    for (int kt = 0; kt < Cfg::kStages - 1 && kt < p.k_tiles; ++kt) load(kt);
  }
  float d[Cfg::kAccs];
  zero(d);
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int s = kt % Cfg::kStages;
    mbar_wait(&full[s], (kt / Cfg::kStages) & 1);
    const uint8_t* stage = ring + s * Cfg::kStageBytes;
    keep_live(d);
    wgmma_fence();
    wgmma_k_tile<T, BN, AK, BKm>(d, stage + wg * Cfg::kAHalfBytes, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
    __syncthreads();  // both warpgroups are done with stage kt - 1, which the next load refills
    if (threadIdx.x == 0 && kt + Cfg::kStages - 1 < p.k_tiles) load(kt + Cfg::kStages - 1);
  }
  store_accumulators<T, BN>(ep, d, int64_t(m0) + wg * 64, n0);
}

// ---- tc:ws_persistent and tc:ws_multicast: a producer warpgroup and 2 consumer warpgroups, persistent tiles ----

// The hardware barrier of the FP8 stagger (HopperParams::stagger); 0 is __syncthreads', 1-3 the
// consumer warpgroups' epilogue barriers (1 + its index).
constexpr int kStaggerBar = 5;

// Ctas = 2 (tc:ws_multicast): the kernel runs in clusters of two CTAs on vertically adjacent tiles
// (2t, n) and (2t + 1, n), which need the same B tile. Each CTA's producer loads its own A tile and
// one half of the B tile, multicast into both CTAs' rings, so every CTA pulls 2/3 of the bytes per
// stage out of L2 (A + B/2 instead of A + B), the remedy when L2 bandwidth limits a GEMM (on an
// H100 it did not limit ours: see tc_hopper_final_launch). A stage may be refilled only when the
// consumers of both CTAs are done with it, so every consumer warp releases it in both CTAs (remote
// mbarrier arrives), and each CTA's empty barrier counts both CTAs' warps.
//
// FP8 (tc:fp8_ws, scaled_mm; T is A's type e4m3 or e5m2, TB = e4m3 B's, TOut the output's): the
// same kernel with 128 x 128 tiles and k32 wgmmas, and two-level accumulation. The FP8 tensor
// cores add their products with fewer bits than fp32; over a long K those truncations pile up. So
// each k-tile's 4 wgmmas sum into registers of their own (the first overwrites them), and the
// consumer adds those into its fp32 accumulators once they complete: every sum past 128 products
// is a true fp32 add. That is what cuBLAS does by default (torch._scaled_mm without fast
// accumulation): on an H100 the two gave identical outputs. Two sets of k-tile sums alternate,
// so k-tile i + 1's wgmmas run while k-tile i's are added (64 x 3 accumulator registers per
// thread; they fit at 128 columns, not at 256). Measured on an H100 (e4m3, bf16 out, TFLOP/s at
// 4096^3 / 8192^3): one set, waited for before each promotion, 1058 / 1031; promoting every 4
// k-tiles instead, 1228 / 1135 but up to 1.17x torch's error; the two sets, 1256 / 1168 with
// torch's error. The ladder's kernels do not take FP8 (not built for it). Its staged stores read a
// bias row in pairs (the fused stage's act-none form: kAddend's load per value cost linear 8%),
// loaded when the tile's unit starts (BiasAhead), and, for scaled_mm_range, keep the range of the
// values they store (OutRange, flush_range).
//
// BM 192 (tc:ws_persistent's tall tiles, one CTA per cluster, 16-bit operands, 128 columns): three
// consumer warpgroups of 64 rows each (512 threads), for outputs whose 192 x 128 tiles fill a wave
// where 128-row tiles leave it part idle (3072 x 1024: 128 tiles against 96 of 128 x 256 or 192 of
// 128 x 128 on 132 SMs). No tail split: launch_tall never asks for one.
//
// kTransposedOut (BM 64, the skinny tiles of launch_skinny): the kernel runs the swapped product
// W x^T of a few-row linear, 64 rows of the weight by 16-64 tokens per tile with one consumer
// warpgroup, and stores each element at the output's transposed place
// (store_accumulators_transposed). In clusters of kCtasM x kCtasN CTAs (ClusterGrid, mainloop.cuh;
// Ctas = kCtasM kCtasN) sharing operand tiles: kCtasN 2 token tiles of one weight tile (each CTA
// loading half the weight tile and multicasting it), kCtasM 2 or 4 weight tiles of one token tile
// (each CTA loading that share of the token tile), or both (4 x 2: cuBLAS's clusters for 64-128
// tokens). Or in clusters of two splitting each tile along K (kClusterK, below: more CTAs for
// outputs of few tiles, no extra bytes loaded, the halves added in k order in rank 0's shared
// memory).
template <TcType T, int BN, bool AK, bool BKm, int Ctas, TcType TB = T, TcType TOut = T,
          int BM = 128, bool kTransposedOut = false, int kCtasN = 1, bool kClusterK = false,
          bool kL2Hints = false>
__global__ void __launch_bounds__(128 * (1 + BM / 64), 1)
    wgmma_ws_kernel(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_out, const HopperParams p,
                    const Epilogue<TOut> ep_in) {
  static_assert(Ctas == 1 || Ctas == 2 || (kTransposedOut && (Ctas == 4 || Ctas == 8)),
                "clusters of one or two CTAs; the skinny tiles' of up to 8");
  constexpr bool kFp8 = tc_is_fp8(T);
  static_assert(!kFp8 || BN == 128, "FP8: 128 x 128 tiles");
  static_assert(BM == 128 || !kFp8, "FP8: 128-row tiles");
  static_assert(BM != 192 || Ctas == 1, "192-row tiles: one CTA per cluster");
  static_assert(kTransposedOut == (BM == 64), "64-row tiles: the skinny tiles, stored transposed");
  static_assert(kCtasN == 1 || kTransposedOut, "A shared: the skinny tiles only");
  // kClusterK: the skinny tiles in clusters of two that split each tile along K: both CTAs take
  // the same tile, each loading its own operands over its half of the k-tiles (p.splits 2: unit
  // 2 c + rank of cluster c), and rank 1's sums are added into rank 0's (combine_cluster_k_parts).
  static_assert(!kClusterK || (kTransposedOut && Ctas == 2 && kCtasN == 1),
                "split along K: the skinny tiles in clusters of two");
  // The CTAs that load a stage together (each its slices of the shared tiles), and the grid they
  // form (ClusterGrid).
  constexpr int kLoadCtas = kClusterK ? 1 : Ctas;
  using Grid = ClusterGrid<kLoadCtas, kCtasN>;  // kClusterK: 1 x 1, each CTA loading alone
  static_assert(kTransposedOut || Grid::kSharers <= 2, "pairs outside the skinny tiles");
  using Cfg = HopperCfg<T, BN, BM>;
  constexpr int S = Cfg::kStages;
  constexpr int kConsumerWarps = 4 * Cfg::kConsumers;
  static_assert(!kClusterK || Cfg::kStoreBytes >= 64 * BN * 4, "rank 1's sums fit the staging");
  // mm_bias_act_backward's stage (grad @ weight: A row-major, B row-major; 16-bit, single CTAs of
  // 128-row tiles, 128 or 256 wide) is built into this kernel.
  constexpr bool kActGradBuilt =
      Ctas == 1 && AK && !BKm && T == TOut && T != TcType::kTF32 && BN != 64 && BM == 128;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint8_t* staging = ring + S * Cfg::kStageBytes;  // kStoreBytes, 1024-byte aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + Cfg::kStoreBytes);
  uint64_t* empty = full + S;
  const uint32_t rank = Ctas == 1 ? 0 : cluster_rank();
  const uint32_t load_rank = kClusterK ? 0 : rank;  // this CTA's slice of a stage's shared loads
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive (plus the TMA bytes of every CTA)
      // Each consumer warp of each CTA whose loads land in this one's stages (its tile row and
      // column: Grid::shares_stages), this one's own included.
      mbar_init(&empty[s], kConsumerWarps * Grid::kSharers);
    }
    if constexpr (kClusterK) {
      mbar_init(empty + S, 1);        // part_full (rank 0): its expect_tx, then rank 1's sums' bytes
      mbar_init(empty + S + 1, 128);  // part_empty (rank 1): rank 0's consumer threads, sums read
    }
    fence_barrier_init();
  }
  // The peer CTA's multicasts and arrives land on these barriers: they must be initialised first.
  if constexpr (Ctas == 1) {
    __syncthreads();
  } else {
    cluster_sync();
  }
  wait_previous_grid_release_next();
  // Work units (UnitWalk): (tile group, k range); consecutive units are the k ranges of one tile
  // group. A tile group is Ctas vertically adjacent tiles, one per CTA of a cluster (the raster
  // counts groups: its tiles_m is ceil(tiles / Ctas)). Then, with Ctas 1, a tail-split part.
  const int first_unit = int(blockIdx.x) / kLoadCtas, unit_step = int(gridDim.x) / kLoadCtas;
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // Producer: one thread issues every TMA; the warpgroup's other registers go to the consumers.
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<T, BN, AK, BKm, kLoadCtas, Cfg, Grid::kCols, kTransposedOut, kL2Hints>(
          &map_a, &map_b, p, ring, full, empty, load_rank, first_unit, unit_step);
    }
  } else {
    consumer_registers<Cfg::kConsumers>();
    // FP8: alpha times the per-tensor scales, read on the device.
    const Epilogue<TOut> ep = kFp8 ? ep_in.with_device_scales() : ep_in;
    const int cwg = wg - 1;  // which 64-row slice of the tile
    const bool releaser = threadIdx.x % 32 == 0;
    auto release = [&](int s) {
      if (!releaser) return;
      if constexpr (kLoadCtas == 1) {
        mbar_arrive(&empty[s]);
      } else {
#pragma unroll
        for (int c = 0; c < kLoadCtas; ++c) {
          if (Grid::shares_stages(rank, uint32_t(c))) mbar_arrive_cluster(&empty[s], uint32_t(c));
        }
      }
    };
    int stage = 0, phase = 0;
    int part_phase = 0;  // kClusterK: the phase of the sums' hand-over (combine_cluster_k_parts)
    // FP8 with p.stagger L > 0 (a trial): warpgroup 1 waits before its first k-tile until
    // warpgroup 0 has issued L k-tiles (or all of its own, if fewer), once per CTA. Both then walk
    // the same units L k-tiles apart, so that each one's epilogue (its tensor-core idle time, both
    // at once without the stagger) falls in the other's main loop. The lag holds by itself: while
    // one is in its epilogue the other runs alone, and the ring (L < kStages) bounds it. The sums,
    // and so the outputs, are the same bits either way.
    int stagger_issued = 0;  // warpgroup 0's k-tiles issued until it signals (then -1)
    bool stagger_waited = false;  // warpgroup 1's
    float d[Cfg::kAccs];
    OutRange<TOut> range;  // FP8 with ep.range_bits (scaled_mm_range): what this thread stored
    UnitWalk walk(p, first_unit, unit_step);
    WorkUnit u;
    while (walk.next(p, u)) {
      int tg, tgn, tm, tn;
      p.raster.coords(u.tile, tg, tgn);
      cluster_tile<kLoadCtas, Grid::kCols>(tg, tgn, load_rank, tm, tn);
      const int kb = u.kb, ke = u.ke;
      zero(d);
      // FP8 with a 16-bit output: the tile's bias pairs (where there is a bias row), read now for
      // the epilogue, so their latency passes under the main loop (BiasAhead).
      constexpr bool kBiasPairs = kFp8 && TOut != TcType::kTF32;
      BiasAheadIf<kBiasPairs, TOut, BN> bias_ahead;
      if constexpr (kBiasPairs) bias_ahead.load(ep, int64_t(tn) * BN);
      if constexpr (kFp8) {
        // Two sets of k-tile sums, alternately: k-tile i + 1's wgmmas run while k-tile i's sums
        // are promoted, so the tensor cores never wait for a promotion.
        float sums0[Cfg::kAccs], sums1[Cfg::kAccs];
        auto issue = [&](float (&sums)[Cfg::kAccs]) {
          if (p.stagger > 0 && cwg == 1 && !stagger_waited) {
            named_barrier_sync(kStaggerBar, 256);
            stagger_waited = true;
          }
          mbar_wait(&full[stage], phase);
          const uint8_t* src = ring + stage * Cfg::kStageBytes;
          keep_live(sums);
          wgmma_fence();
          wgmma_k_tile<T, BN, AK, BKm, TB>(sums, src + cwg * Cfg::kAHalfBytes,
                                           src + Cfg::kABytes, /*overwrite=*/true);
          wgmma_commit();
          if (p.stagger > 0 && cwg == 0 && stagger_issued >= 0 && ++stagger_issued == p.stagger) {
            named_barrier_arrive(kStaggerBar, 256);
            stagger_issued = -1;
          }
          const int issued = stage;
          if (++stage == S) stage = 0, phase ^= 1;
          return issued;
        };
        auto promote = [&](float (&sums)[Cfg::kAccs], int from_stage) {
          keep_live(sums);
          release(from_stage);
#pragma unroll
          for (int i = 0; i < Cfg::kAccs; ++i) d[i] += sums[i];
        };
        // The unit's n >= 1 k-tiles (launch_fp8 needs K > 0): the first into sums0, then pairs
        // (sums1, sums0) each promoting the set issued before it, then the last one or two.
        const int n = ke - kb;
        int st0 = issue(sums0), st1 = 0;
        for (int i = 1; i + 1 < n; i += 2) {
          st1 = issue(sums1);
          wgmma_wait<1>();
          promote(sums0, st0);
          st0 = issue(sums0);
          wgmma_wait<1>();
          promote(sums1, st1);
        }
        if (n % 2 == 0) {
          st1 = issue(sums1);
          wgmma_wait<1>();
          promote(sums0, st0);
          wgmma_wait<0>();
          promote(sums1, st1);
        } else {
          wgmma_wait<0>();
          promote(sums0, st0);
        }
      } else if constexpr (kTransposedOut) {
        // The skinny tiles' wgmmas are small (m64n16-64), so one accumulator chain through the
        // unit's k-tiles, each wgmma waiting for the one before to finish writing d, is what
        // bounds them (ncu, H100, 32 x 4096 x 4096: the SMs busy, DRAM at 47% against cuBLAS's
        // 61%). Two sets of sums on alternate k-tiles let one k-tile's wgmmas run while the
        // other's finish; the tile is their sum, d + d_odd, the same on every run.
        float d_odd[Cfg::kAccs];
        zero(d_odd);
        int prev = -1;
        auto step = [&](float (&acc)[Cfg::kAccs]) {
          mbar_wait(&full[stage], phase);
          const uint8_t* src = ring + stage * Cfg::kStageBytes;
          keep_live(acc);
          wgmma_fence();
          wgmma_k_tile<T, BN, AK, BKm>(acc, src + cwg * Cfg::kAHalfBytes, src + Cfg::kABytes);
          wgmma_commit();
          wgmma_wait<1>();  // the k-tile before this one is done: its stage goes back
          keep_live(d);
          keep_live(d_odd);
          if (prev >= 0) release(prev);
          prev = stage;
          if (++stage == S) stage = 0, phase ^= 1;
        };
        int kt = kb;
        for (; kt + 1 < ke; kt += 2) {
          step(d);
          step(d_odd);
        }
        if (kt < ke) step(d);
        wgmma_wait<0>();
        keep_live(d);
        keep_live(d_odd);
        if (prev >= 0) release(prev);
#pragma unroll
        for (int i = 0; i < Cfg::kAccs; ++i) d[i] += d_odd[i];
      } else {
        int prev = -1;
        for (int kt = kb; kt < ke; ++kt) {
          mbar_wait(&full[stage], phase);
          const uint8_t* src = ring + stage * Cfg::kStageBytes;
          keep_live(d);
          wgmma_fence();
          wgmma_k_tile<T, BN, AK, BKm>(d, src + cwg * Cfg::kAHalfBytes, src + Cfg::kABytes);
          wgmma_commit();
          // Keep this k-tile's wgmmas in flight while the previous k-tile's stage is handed back:
          // the tensor cores never wait for the release round trip. The wait is warp-wide, so one
          // lane releases for its warp.
          wgmma_wait<1>();
          keep_live(d);
          if (prev >= 0) release(prev);
          prev = stage;
          if (++stage == S) stage = 0, phase ^= 1;
        }
        wgmma_wait<0>();
        keep_live(d);
        if (prev >= 0) release(prev);
      }
      // A tail-split part that does not complete its tile leaves its sums for the one that does.
      // (Not built into tc:fp8_ws: with the fixup in it, the kernel ran 10% slower on every shape,
      // 4096^3 0.124 against 0.115 ms on an H100; launch_split_k_tiles never asks for the split.)
      if constexpr (Ctas == 1 && !kFp8 && BM == 128) {
        if (u.part >= 0 && !tail_split_fixup<BN>(p, u, cwg, d, 1 + cwg)) continue;
      }
      // A CTA whose tile lies past the matrix (a cluster's group at its edge) still loaded its
      // slices for its peers; its stores are clipped (TMA) or skipped (bounds checks).
      const int64_t m0 = int64_t(tm) * Cfg::BM + cwg * 64, n0 = int64_t(tn) * BN;
      if constexpr (kTransposedOut) {
        if constexpr (kClusterK) {
          // Staging (unused by the transposed stores) holds rank 1's sums; the two barriers follow
          // the ring's.
          if (!combine_cluster_k_parts<BN>(d, reinterpret_cast<float*>(staging), empty + S,
                                           empty + S + 1, rank, part_phase)) {
            continue;
          }
        }
        // launch_skinny: the last token tile may have been moved back (b_tile_origin). Its staging
        // follows the barriers, k2's two included (HopperCfg::kSkinnySmemBytes).
        store_accumulators_transposed<TOut, BN>(ep, d, m0, b_tile_origin<BN, true>(p, tn), n0,
                                                reinterpret_cast<uint8_t*>(empty + S + 2));
      } else if (p.splits == 1 && p.tma_store) {
        // For 16-bit operands in the layout of linear's x @ weight^T (both K-major), Ctas == 1
        // (the kernel tc:final runs) in 128- or 256-wide tiles also takes linear_act's fused
        // stage, which needs the TMA stores (launch_typed checks; other types, layouts and widths
        // are not built with it: about 4 s of compile time per unit).
        // mm_bias_act_backward's stage (kActGradBuilt) likewise.
        constexpr bool kFusable =
            Ctas == 1 && AK && BKm && T == TOut && T != TcType::kTF32 && BN != 64 && BM == 128;
        uint8_t* my_staging = staging + cwg * Cfg::kStoreBytesPerConsumer;
        if constexpr (kFp8) {
          // A bias row read in pairs (kBiasPairs: 16-bit outputs), read ahead, and
          // scaled_mm_range's range.
          const BiasAhead<TOut, BN>* ahead = nullptr;
          if constexpr (kBiasPairs) ahead = &bias_ahead;
          if (ep.range_bits != nullptr) {
            store_accumulators_tma<TOut, BN, false, false, false, kBiasPairs, true>(
                ep, &map_out, d, m0, n0, my_staging, 1 + cwg, &range, ahead);
          } else {
            store_accumulators_tma<TOut, BN, false, false, false, kBiasPairs>(
                ep, &map_out, d, m0, n0, my_staging, 1 + cwg, nullptr, ahead);
          }
        } else {
          store_accumulators_tma<TOut, BN, kFusable, false, kActGradBuilt>(ep, &map_out, d, m0, n0,
                                                                           my_staging, 1 + cwg);
        }
      } else if (p.splits == 1) {
        store_accumulators<TOut, BN>(ep, d, m0, n0);
      } else {
        store_partial<BN>(p.partial + int64_t(u.split) * p.M * p.N, p.M, p.N, d, m0, n0);
      }
    }
    if constexpr (kFp8) {
      // A stagger whose warpgroup 0 issued fewer than L k-tiles in all signals at its end.
      if (p.stagger > 0 && cwg == 0 && stagger_issued > 0) named_barrier_arrive(kStaggerBar, 256);
      if (ep.range_bits != nullptr) {
        flush_range(range, ep.range_bits, ep.range_out, gridDim.x * unsigned(kConsumerWarps));
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait();  // the last tile's stores are complete
  }
  // No CTA may leave while its peer can still multicast into its ring or arrive on its barriers.
  if constexpr (Ctas > 1) cluster_sync();
}

// ---- tc:fp8_ws256: FP8 in 256 x 128 tiles ----

// The FP8 kernel with twice the rows per tile (Fp8WideCfg): each stage's B tile feeds 256 rows
// instead of 128, so a tile's operands cost a quarter fewer bytes of L2 traffic per product, and
// half as many epilogues interrupt the tensor cores. Each consumer warpgroup owns 128 rows as two
// 64-row halves: per k-tile it issues the first half's 4 wgmmas into its one set of k-tile sums,
// waits for them, adds them into the first half's fp32 accumulators, then does the same for the
// second half; the stage is released once the second half's wgmmas are done. While one
// warpgroup waits and adds, the other's wgmmas keep the tensor cores busy (the warp schedulers
// interleave them; no barrier orders the two). Every output element gets the sums tc:fp8_ws gives
// it, in the same order (the same bits, unsplit). TA: A's type (e4m3 or e5m2), B e4m3, both
// K-major.
template <TcType TA, TcType TOut>
__global__ void __launch_bounds__(384, 1)
    wgmma_fp8_wide_kernel(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b,
                          const __grid_constant__ CUtensorMap map_out, const HopperParams p,
                          const Epilogue<TOut> ep_in) {
  using Cfg = Fp8WideCfg<TA>;
  constexpr int S = Cfg::kStages;
  constexpr int kAccs = Cfg::kAccs;  // 64: a 64 x 128 half of a warpgroup's rows
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint8_t* staging = ring + S * Cfg::kStageBytes;  // kStoreBytes, 1024-byte aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + Cfg::kStoreBytes);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive (plus the TMA bytes)
      mbar_init(&empty[s], 8);  // each consumer warp, once both its halves' wgmmas are done
    }
    fence_barrier_init();
  }
  __syncthreads();
  wait_previous_grid_release_next();
  const int units = p.raster.count() * p.splits;
  const int first_unit = int(blockIdx.x), unit_step = int(gridDim.x);
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<TA, 128, true, true, 1, Cfg>(&map_a, &map_b, p, ring, full, empty, 0,
                                                  first_unit, unit_step);
    }
  } else {
    consumer_registers();
    const Epilogue<TOut> ep = ep_in.with_device_scales();  // alpha times the per-tensor scales
    const int cwg = wg - 1;  // rows 128 cwg .. 128 cwg + 127 of the tile
    const bool releaser = threadIdx.x % 32 == 0;
    int stage = 0, phase = 0;
    float d0[kAccs], d1[kAccs], sums[kAccs];
    // One k-tile's 4 wgmmas of the 64-row half at a_half into sums (overwritten), waited for.
    auto k_tile_sums = [&](const uint8_t* a_half, const uint8_t* b_tile) {
      keep_live(sums);
      wgmma_fence();
      wgmma_k_tile<TA, 128, true, true, TcType::kE4M3>(sums, a_half, b_tile, /*overwrite=*/true);
      wgmma_commit();
      wgmma_wait<0>();
      keep_live(sums);
    };
    for (int unit = first_unit; unit < units; unit += unit_step) {
      int tm, tn;
      p.raster.coords(unit / p.splits, tm, tn);
      const int split = unit % p.splits;
      int kb, ke;
      unit_k_range(p, unit, kb, ke);
      zero(d0);
      zero(d1);
      for (int kt = kb; kt < ke; ++kt) {
        mbar_wait(&full[stage], phase);
        const uint8_t* src = ring + stage * Cfg::kStageBytes;
        const uint8_t* a_rows = src + cwg * 2 * Cfg::kAHalfBytes;  // this warpgroup's 128 rows
        k_tile_sums(a_rows, src + Cfg::kABytes);
#pragma unroll
        for (int i = 0; i < kAccs; ++i) d0[i] += sums[i];
        k_tile_sums(a_rows + Cfg::kAHalfBytes, src + Cfg::kABytes);
        if (releaser) mbar_arrive(&empty[stage]);  // both halves have read the stage
#pragma unroll
        for (int i = 0; i < kAccs; ++i) d1[i] += sums[i];
        if (++stage == S) stage = 0, phase ^= 1;
      }
      const int64_t m0 = int64_t(tm) * Cfg::BM + cwg * 128, n0 = int64_t(tn) * 128;
      if (p.splits == 1 && p.tma_store) {
        uint8_t* my_staging = staging + cwg * (Cfg::kStoreBytes / 2);
        store_accumulators_tma<TOut, 128>(ep, &map_out, d0, m0, n0, my_staging, 1 + cwg);
        store_accumulators_tma<TOut, 128>(ep, &map_out, d1, m0 + 64, n0, my_staging, 1 + cwg);
      } else if (p.splits == 1) {
        store_accumulators<TOut, 128>(ep, d0, m0, n0);
        store_accumulators<TOut, 128>(ep, d1, m0 + 64, n0);
      } else {
        float* partial = p.partial + int64_t(split) * p.M * p.N;
        store_partial<128>(partial, p.M, p.N, d0, m0, n0);
        store_partial<128>(partial, p.M, p.N, d1, m0 + 64, n0);
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait();  // the last tile's stores are complete
  }
}

// ---- tc:ws_pingpong: the two consumer warpgroups take turns, one tile each ----

// Named barriers of the ping-pong schedule (0 is __syncthreads's; 1 and 2 are the consumer
// warpgroups' epilogue barriers): kTurnBar + c is where consumer warpgroup c waits for its turn.
constexpr int kTurnBar = 3;

// In tc:ws_persistent both consumer warpgroups work on one 128 x BN tile, so they reach the
// epilogue together and the tensor cores idle while they store it (a fifth of the consumer warps'
// ncu samples at K = 2048 before that epilogue lost its per-element checks and took stmatrix; a
// few percent after). Here each consumer warpgroup owns a whole
// 128 x 128 tile (two 64 x 128 accumulator blocks, the same 128 registers per thread) and the
// CTA's tiles alternate between them: tile i goes to warpgroup i % 2. Their main loops take turns
// (tile i's starts once tile i - 1's has consumed its last stage, signalled through a named
// barrier), so one warpgroup's epilogue runs under the other's main loop. The producer fills the
// ring in tile order, as before; each consumer walks the same sequence of stages and skips the
// other's. The turn order also keeps the mbarrier parity waits exact: a stage's previous fill has
// always been waited for (by either warpgroup) before anyone waits for its next one.
template <TcType T, bool AK, bool BKm>
__global__ void __launch_bounds__(384, 1)
    wgmma_pingpong_kernel(const __grid_constant__ CUtensorMap map_a,
                          const __grid_constant__ CUtensorMap map_b,
                          const __grid_constant__ CUtensorMap map_out, const HopperParams p,
                          const Epilogue<T> ep) {
  constexpr int BN = 128;
  using Cfg = HopperCfg<T, BN>;
  constexpr int S = Cfg::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint8_t* staging = ring + S * Cfg::kStageBytes;  // kStoreBytes, 1024-byte aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + Cfg::kStoreBytes);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);  // the producer's arrive (plus the TMA bytes)
      mbar_init(&empty[s], 4);  // each warp of the consuming warpgroup, once read
    }
    fence_barrier_init();
  }
  __syncthreads();
  wait_previous_grid_release_next();
  const int units = p.raster.count() * p.splits;
  const int first_unit = int(blockIdx.x), unit_step = int(gridDim.x);
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      produce_tiles<T, BN, AK, BKm, 1>(&map_a, &map_b, p, ring, full, empty, 0, first_unit, unit_step);
    }
  } else {
    consumer_registers();
    const int c = wg - 1;  // this warpgroup takes the CTA's tiles c, c + 2, c + 4, ...
    const bool releaser = threadIdx.x % 32 == 0;
    int stage = 0, phase = 0;  // the ring position of the next k-tile in the CTA's sequence
    float d0[Cfg::kAccs], d1[Cfg::kAccs];  // rows 0-63 and 64-127 of the tile
    int i = 0;
    for (int unit = first_unit; unit < units; unit += unit_step, ++i) {
      int kb, ke;
      unit_k_range(p, unit, kb, ke);
      if (i % 2 != c) {  // the other warpgroup's tile: skip its stages
        stage += ke - kb;
        phase ^= (stage / S) & 1;
        stage %= S;
        continue;
      }
      int tm, tn;
      p.raster.coords(unit / p.splits, tm, tn);
      if (i > 0) named_barrier_sync(kTurnBar + c, 256);  // tile i - 1 has taken its last stage
      zero(d0);
      zero(d1);
      int prev = -1;
      for (int kt = kb; kt < ke; ++kt) {
        mbar_wait(&full[stage], phase);
        const uint8_t* src = ring + stage * Cfg::kStageBytes;
        keep_live(d0);
        keep_live(d1);
        wgmma_fence();
        wgmma_k_tile<T, BN, AK, BKm>(d0, src, src + Cfg::kABytes);
        wgmma_k_tile<T, BN, AK, BKm>(d1, src + Cfg::kAHalfBytes, src + Cfg::kABytes);
        wgmma_commit();
        // As in tc:ws_persistent: this k-tile's wgmmas stay in flight while the previous k-tile's
        // stage is handed back.
        wgmma_wait<1>();
        keep_live(d0);
        keep_live(d1);
        if (prev >= 0 && releaser) mbar_arrive(&empty[prev]);
        prev = stage;
        if (++stage == S) stage = 0, phase ^= 1;
      }
      // Every stage of this tile has been waited for: the next tile's main loop may start (its
      // wgmmas queue behind this tile's last ones).
      if (unit + unit_step < units) named_barrier_arrive(kTurnBar + 1 - c, 256);
      wgmma_wait<0>();
      keep_live(d0);
      keep_live(d1);
      if (prev >= 0 && releaser) mbar_arrive(&empty[prev]);
      const int64_t m0 = int64_t(tm) * Cfg::BM, n0 = int64_t(tn) * BN;
      const int split = unit % p.splits;
      uint8_t* my_staging = staging + c * (Cfg::kStoreBytes / 2);
      if (p.splits == 1 && p.tma_store) {
        // linear_act's fused stage, as in tc:ws_persistent (16-bit K-major operands only), here
        // under the other warpgroup's main loop. (Not mm_bias_act_backward's: built here for bf16
        // in its layout, it measured slower than in tc:ws_persistent; gemm_cuda.cpp.)
        constexpr bool kFusable = AK && BKm && T != TcType::kTF32;
        store_accumulators_tma<T, BN, kFusable, true>(ep, &map_out, d0, m0, n0, my_staging, 1 + c);
        store_accumulators_tma<T, BN, kFusable, true>(ep, &map_out, d1, m0 + 64, n0, my_staging,
                                                      1 + c);
      } else if (p.splits == 1) {
        store_accumulators<T, BN>(ep, d0, m0, n0);
        store_accumulators<T, BN>(ep, d1, m0 + 64, n0);
      } else {
        float* partial = p.partial + int64_t(split) * p.M * p.N;
        store_partial<BN>(partial, p.M, p.N, d0, m0, n0);
        store_partial<BN>(partial, p.M, p.N, d1, m0 + 64, n0);
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait();  // the last tile's stores are complete
  }
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
