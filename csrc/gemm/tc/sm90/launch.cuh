// Host side of the Hopper kernels: a problem's tensor maps, cluster launches, and the launch
// templates that set up HopperParams and start one kernel of a (type, tile width, layout). The
// templates are instantiated in the inst_*.cu units, one (type, layout) each, so that a parallel
// build compiles the kernels side by side (instances.h lists them; hopper.cu dispatches to them).
// Light on purpose: no ATen header (each costs an instantiation unit about 20 s of compile time);
// device queries and scratch memory come from common/launch.cuh.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>

#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "common/launch.cuh"
#include "gemm/tc/sm90/config.cuh"
#include "gemm/tc/sm90/kernels.cuh"
#include "gemm/tc/sm90/rs_kernel.cuh"
#include "gemm/tc/sm90/scheduler.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// An operand as a 2-D tensor map whose box is what tma_tile loads: K-major (rows x K, element
// (r, k) at base[r * ld + k]) boxes of BK x box_rows; MN-major (element (r, k) at base[k * ld + r])
// boxes of BK x BK (128 bytes of MN by BK k-rows). Out-of-bounds box elements arrive as zeros.
// (tensor_map.cu)
CUtensorMap operand_tensor_map(const void* base, bool k_major, int64_t rows, int64_t K, int64_t ld,
                               TcType type, int box_rows);

// The output (row-major M x N, leading dimension ldo) as the TMA stores of tc:ws_persistent see
// it: boxes of 64 rows x 128 bytes, written from the 128-byte-swizzled staging buffer.
// (tensor_map.cu)
CUtensorMap output_tensor_map(void* out, int64_t M, int64_t N, int64_t ldo, TcType type);

enum class HopperKernel { kCpAsync, kTma, kWarpSpecialized, kMulticast, kPingPong };

// Clusters of `ctas` CTAs of `kernel` that can be resident at once (the persistent grid's size).
template <typename Kernel>
int max_active_clusters(Kernel kernel, int ctas, int threads, size_t smem_bytes) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> known;  // (kernel, device) -> clusters
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel),
                                        current_device()};
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  const KernelLaunch query(dim3(unsigned(ctas)), ctas, dim3(unsigned(threads)), smem_bytes, nullptr,
                           false);
  int clusters = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &query.config));
  TORCH_CHECK(clusters > 0, "cudasteps.mm: no cluster of ", ctas, " CTAs with ", smem_bytes,
              " bytes of shared memory each fits on this GPU");
  known.emplace(key, clusters);
  return clusters;
}

// Whether the ladder-only kernels (every HopperKernel but kWarpSpecialized, which tc:final runs)
// are built for a (type, layout). The dispatcher never runs them, so they are built for bf16 in
// one layout, NN (A row-major, B row-major: mm of two row-major matrices, the layout the
// benchmark's ladder runs), and the tc dispatcher transposes other layouts' operands into it
// (is_hopper_ladder_only, tc/dispatch.cpp). Building the other three layouts' ladder kernels too
// put 7 of the 9 kernels in each of 6 units: about 5 s of compile time per unit (11.2 against
// 6.0 s for inst_bf16_tn.cu alone on a 2-core machine). fp16 and TF32 have none of them (their
// ladder rows are not in the report; the dispatcher refuses them by name), but fp16's
// tc:ws_pingpong (pingpong_built): the NN unit of fp16 took 27.8 s of a 2-core CI build with
// them, TF32's NT unit 5.8 s more than without.
template <TcType T, bool AK, bool BKm>
constexpr bool ladder_kernels_built() {
  return T == TcType::kBF16 && AK && !BKm;
}

// tc:ws_pingpong is also built for 16-bit K-major operands (x @ weight^T): with linear_act's fused
// stage, its epilogue runs under the other consumer warpgroup's main loop. fp16's ladder runs it
// there too (the dispatcher transposes other layouts into K-major).
template <TcType T, bool AK, bool BKm>
constexpr bool pingpong_built() {
  return ladder_kernels_built<T, AK, BKm>() ||
         ((T == TcType::kBF16 || T == TcType::kFP16) && AK && BKm);
}

// The kernels' parameters for a problem in tiles of Cfg, one split along K (launch_typed and
// launch_fp8 choose split-K after), TMA stores where the output (elements of out_bytes) allows.
template <typename Cfg>
HopperParams problem_params(const TcProblem& pr, int out_bytes) {
  HopperParams p;
  p.a = static_cast<const uint8_t*>(pr.a);
  p.b = static_cast<const uint8_t*>(pr.b);
  p.lda = pr.lda;
  p.ldb = pr.ldb;
  p.M = pr.M;
  p.N = pr.N;
  p.K = pr.K;
  p.k_tiles = int(ceil_div<int64_t>(pr.K, Cfg::BK));
  const int64_t tiles_m = ceil_div<int64_t>(pr.M, Cfg::BM);
  const int64_t tiles_n = ceil_div<int64_t>(pr.N, Cfg::BN);
  TORCH_CHECK(tiles_m * tiles_n <= INT_MAX / kSplitMax, "cudasteps.mm: the output [", pr.M, ", ",
              pr.N, "] has too many tiles of ", Cfg::BM, " x ", Cfg::BN);
  p.raster.tiles_m = int(tiles_m);
  p.raster.tiles_n = int(tiles_n);
  // Groups of 8 tile rows (TileRaster). Groups of 2, 4, 16 and 32 (a session-local sweep field,
  // not kept) ran no faster beyond the noise (2%: cudasteps.mm and the same 8-row variant apart)
  // on the bf16 FFN step's six products, 4096^3 and 8192^3 in 128 x 256 tiles (H200, 2026-11-28,
  // tile_sweep.py, operands cold and warm); 8192 x 2048 x 8192 TN took 397 us at 8 against
  // 405-415 at the others.
  p.raster.group = 8;
  p.splits = 1;
  p.k_tiles_per_split = p.k_tiles;
  p.partial = nullptr;
  p.tma_store = reinterpret_cast<uintptr_t>(pr.out) % 16 == 0 && (pr.ldo * out_bytes) % 16 == 0;
  return p;
}

// Split-K: the ranges' fp32 partial sums in a scratch buffer (held by the caller until the
// reduce is enqueued), when p.splits > 1.
inline ScratchBuffer split_k_scratch(const TcProblem& pr, HopperParams& p) {
  if (p.splits <= 1) return ScratchBuffer();
  p.k_tiles_per_split = ceil_div(p.k_tiles, p.splits);
  p.splits = ceil_div(p.k_tiles, p.k_tiles_per_split);  // no empty range
  ScratchBuffer partial =
      scratch_buffer(sizeof(float) * size_t(p.splits) * size_t(pr.M) * size_t(pr.N));
  p.partial = static_cast<float*>(partial.ptr);
  return partial;
}

// The tail split for tc:ws_persistent's kernel in BN-wide tiles (choose_tail_split; not with a
// forced split-K): p.tail and its workspace (held by the caller until the kernel is enqueued),
// the arrival counts zeroed on `stream` first (a memset node in a CUDA graph: every replay starts
// from zero).
template <int BN>
ScratchBuffer tail_split_scratch(const TcProblem& pr, HopperParams& p, int tiles, int sms,
                                 cudaStream_t stream) {
  if (pr.tuning.splits > 0) return ScratchBuffer();
  const auto [tail_tiles, parts] = choose_tail_split(tiles, p.k_tiles, sms, pr.tuning.tail_split);
  if (tail_tiles == 0) return ScratchBuffer();
  p.tail.tiles = tail_tiles;
  p.tail.parts = parts;
  const size_t count_bytes = (sizeof(int) * 2 * size_t(tail_tiles) + 255) / 256 * 256;
  const size_t part_bytes = sizeof(float) * 2 * 64 * BN;  // both consumer warpgroups' sums
  ScratchBuffer space =
      scratch_buffer(count_bytes + part_bytes * size_t(tail_tiles) * size_t(parts));
  p.tail.arrived = static_cast<int*>(space.ptr);
  p.tail.workspace = reinterpret_cast<float*>(static_cast<uint8_t*>(space.ptr) + count_bytes);
  C10_CUDA_CHECK(cudaMemsetAsync(p.tail.arrived, 0, sizeof(int) * 2 * size_t(tail_tiles), stream));
  return space;
}

// CTAs of a persistent kernel for its units: one per unit, up to one per SM (a tail split's units
// are its data-parallel tiles, a whole number of waves, and its parts).
inline int persistent_units(const HopperParams& p, int tiles) {
  return p.tail.tiles > 0 ? std::max(tiles - p.tail.tiles, p.tail.tiles * p.tail.parts)
                          : tiles * p.splits;
}

// out = the epilogue of the splits' partial sums, added in order; with `pdl` (the GEMM kernel's
// choice) a programmatic dependent launch that starts under the GEMM kernel's tail.
template <TcType TOut>
void launch_splitk_reduce(const HopperParams& p, const Epilogue<TOut>& ep, cudaStream_t stream,
                          bool pdl) {
  constexpr int kThreads = 256;
  auto reduce = splitk_reduce_kernel<TOut>;
  const int64_t blocks = persistent_grid(reduce, kThreads, p.M * p.N, kThreads);
  launch_dependent(pdl, reduce, dim3(unsigned(blocks)), dim3(kThreads), 0, stream, p.partial,
                   p.splits, ep);
}

// The split-K factor of a persistent kernel's problem: forced by the ladder's tuning field, else
// choose_splits for the tiles and k-tiles.
inline int persistent_splits(const TcProblem& pr, const HopperParams& p, int tiles, int sms) {
  return pr.tuning.splits > 0 ? std::min(pr.tuning.splits, std::min(p.k_tiles, kSplitMax))
                              : choose_splits(tiles, p.k_tiles, pr.M, pr.K, sms);
}

// A single-CTA persistent kernel: one block per SM (at most one per work unit), each walking its
// work units; 384 threads (a producer and two consumer warpgroups) but where told. With `pdl`
// (TcTuning::pdl: all but the ladder's pdl0) a programmatic dependent launch (KernelLaunch,
// common/launch.cuh): back to back, a kernel's launch and set-up hide under the one before it.
template <typename Kernel, typename Ep>
void launch_persistent(Kernel kernel, int units, int sms, const CUtensorMap& map_a,
                       const CUtensorMap& map_b, const CUtensorMap& map_out, const HopperParams& p,
                       const Ep& ep, size_t smem_bytes, cudaStream_t stream, bool pdl,
                       int threads = 384) {
  tc::configure_smem_once(kernel, smem_bytes);
  const KernelLaunch launch(dim3(unsigned(std::min(units, sms))), 1, dim3(unsigned(threads)),
                            smem_bytes, stream, pdl);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, map_out, p, ep));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Launches `kernel` in clusters of `ctas` CTAs: `clusters_wanted` clusters, at most as many as fit
// on the GPU at once (the kernel walks its work units persistently). launch_pairs and the skinny
// tiles' clusters (launch_skinny) launch through it.
template <typename Kernel, typename Ep>
void launch_clusters(Kernel kernel, int ctas, int clusters_wanted, const HopperParams& p,
                     const CUtensorMap& map_a, const CUtensorMap& map_b,
                     const CUtensorMap& map_out, const Ep& ep, size_t smem_bytes,
                     cudaStream_t stream, bool pdl, int threads) {
  tc::configure_smem_once(kernel, smem_bytes);
  const int clusters =
      std::min(clusters_wanted, max_active_clusters(kernel, ctas, threads, smem_bytes));
  const KernelLaunch launch(dim3(unsigned(ctas * clusters)), ctas, dim3(unsigned(threads)),
                            smem_bytes, stream, pdl);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, map_out, p, ep));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// A persistent kernel in clusters of two CTAs (wgmma_ws_kernel<..., Ctas = 2>: tc:ws_multicast,
// tc:fp8_multicast), one cluster per pair of vertically adjacent tiles (and k range), up to as
// many clusters as fit at once. The raster walks the pairs; a group of 4 pairs keeps the 8 tile
// rows of A in L2 that the single-CTA raster's group of 8 does. The B map's box must be half a
// tile tall (each CTA loads and multicasts its half).
// `pdl` as launch_persistent's. (The skinny tiles' clusters, which may share A, launch through
// launch_skinny.)
template <typename Kernel, typename Ep>
void launch_pairs(Kernel kernel, HopperParams p, const CUtensorMap& map_a,
                  const CUtensorMap& map_b, const CUtensorMap& map_out, const Ep& ep,
                  size_t smem_bytes, cudaStream_t stream, bool pdl, int threads = 384) {
  p.raster.tiles_m = int(ceil_div<int64_t>(p.raster.tiles_m, 2));
  p.raster.group = 4;
  launch_clusters(kernel, 2, p.raster.count() * p.splits, p, map_a, map_b, map_out, ep,
                  smem_bytes, stream, pdl, threads);
}

// TOut: the output's type, the operands' but for mm.dtype's float32 output of 16-bit operands
// (kTF32; launch_layout_f32_out), which tc:ws_persistent's kernel alone is built for, with no
// fused stage.
template <TcType T, int BN, bool AK, bool BKm, TcType TOut = T>
void launch_typed(const TcProblem& pr, HopperKernel which, cudaStream_t stream) {
  constexpr bool kSameOut = TOut == T;
  // 128 x 64 tiles: tc:ws_persistent's kernel alone.
  constexpr bool kLadder = kSameOut && ladder_kernels_built<T, AK, BKm>() && BN != 64;
  constexpr bool kPingPongBuilt = kSameOut && pingpong_built<T, AK, BKm>() && BN != 64;
  TORCH_CHECK(kLadder || which == HopperKernel::kWarpSpecialized ||
                  (kPingPongBuilt && which == HopperKernel::kPingPong),
              "cudasteps.mm: this Hopper ladder kernel is built for bf16 row-major A and B only "
              "(the dispatcher transposes other layouts into it)");
  using Cfg = HopperCfg<T, BN>;
  HopperParams p = problem_params<Cfg>(pr, tc_elem_bytes(TOut));
  const Epilogue<TOut> ep = Epilogue<TOut>::from(pr);
  TORCH_CHECK(kSameOut || (!ep.fused() && !ep.act_grad()),
              "cudasteps.mm: a float32 output of 16-bit operands takes no fused stage");
  // The fused stage runs in tc:ws_pingpong's and tc:ws_persistent's staged TMA stores (or
  // split-K's reduce), built for 16-bit K-major operands. Its addend is linear_act's bias: a row (stride 0 along M, 1 along N)
  // of the output's type or float32, read in aligned pairs.
  const int bias_pair_bytes = pr.addend_fp32 ? 8 : 2 * Cfg::kElemBytes;
  const bool bias_row = pr.addend == nullptr ||
                        (pr.add_s0 == 0 && pr.add_s1 == 1 &&
                         reinterpret_cast<uintptr_t>(pr.addend) % bias_pair_bytes == 0);
  TORCH_CHECK(!ep.fused() || (T != TcType::kTF32 && AK && BKm &&
                              (which == HopperKernel::kWarpSpecialized ||
                               which == HopperKernel::kPingPong) &&
                              p.tma_store && bias_row),
              "cudasteps.linear_act: the fused epilogue runs in tc:ws_persistent's and "
              "tc:ws_pingpong's kernels, for 16-bit K-major operands, an output whose rows are "
              "16-byte aligned and an aligned bias row, only");
  // mm_bias_act_backward's stage: tc:ws_persistent's kernel for 16-bit operands in grad @ weight's
  // layout (A row-major, B row-major), 128- or 256-wide tiles, unsplit (tc_gemm_cuda forces
  // tuning.splits 1: split-K's reduce does not apply it), TMA stores and an aligned bias row.
  TORCH_CHECK(!ep.act_grad() || (T != TcType::kTF32 && AK && !BKm && BN != 64 &&
                                 which == HopperKernel::kWarpSpecialized && p.tma_store &&
                                 pr.tuning.splits == 1 && pr.N % 8 == 0 && bias_row),
              "cudasteps.mm_bias_act_backward: the fused stage runs in tc:ws_persistent's kernel "
              "for 16-bit operands, grad row-major and weight row-major, unsplit, an output whose "
              "rows are 16-byte aligned and an aligned bias row, only");
  const int tiles = p.raster.count();
  if constexpr (kLadder) {
    if (which == HopperKernel::kCpAsync) {
      auto kernel = wgmma_cp_async_kernel<T, BN, AK, BKm>;
      tc::configure_smem_once(kernel, Cfg::kSmemBytes);
      kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(p, ep);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
  }
  const CUtensorMap map_a = operand_tensor_map(pr.a, AK, pr.M, pr.K, pr.lda, T, Cfg::BM);
  if constexpr (kLadder) {
    if (which == HopperKernel::kTma) {
      const CUtensorMap map_b = operand_tensor_map(pr.b, BKm, pr.N, pr.K, pr.ldb, T, BN);
      auto kernel = wgmma_tma_kernel<T, BN, AK, BKm>;
      tc::configure_smem_once(kernel, Cfg::kSmemBytes);
      kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(map_a, map_b, p, ep);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
  }
  const int sms = sm_count();
  const ScratchBuffer tail_space = which == HopperKernel::kWarpSpecialized
                                       ? tail_split_scratch<BN>(pr, p, tiles, sms, stream)
                                       : ScratchBuffer();
  if (p.tail.tiles == 0) p.splits = persistent_splits(pr, p, tiles, sms);
  const int ctas = which == HopperKernel::kMulticast ? 2 : 1;
  // With clusters each CTA loads BN / 2 rows of B (and multicasts them): the box is that tall.
  const CUtensorMap map_b = operand_tensor_map(pr.b, BKm, pr.N, pr.K, pr.ldb, T, BN / ctas);
  const ScratchBuffer partial = split_k_scratch(pr, p);
  // Without TMA stores the output map is never read; the operand map stands in for it.
  const CUtensorMap map_out =
      p.tma_store ? output_tensor_map(pr.out, pr.M, pr.N, pr.ldo, TOut) : map_a;
  const int units = persistent_units(p, tiles);
  if (ctas == 1 && which != HopperKernel::kPingPong) {
    launch_persistent(wgmma_ws_kernel<T, BN, AK, BKm, 1, T, TOut>, units, sms, map_a, map_b,
                      map_out, p, ep, Cfg::kWsSmemBytes, stream, pr.tuning.pdl);
  } else if (which == HopperKernel::kPingPong) {
    if constexpr (kPingPongBuilt) {
      TORCH_CHECK(BN == 128, "cudasteps.mm: tc:ws_pingpong runs 128 x 128 tiles");
      launch_persistent(wgmma_pingpong_kernel<T, AK, BKm>, units, sms, map_a, map_b, map_out, p,
                        ep, Cfg::kWsSmemBytes, stream, pr.tuning.pdl);
    }
  } else if constexpr (!kLadder) {
    // Unreachable (checked on entry); the multicast kernel below is not instantiated here.
  } else {
    launch_pairs(wgmma_ws_kernel<T, BN, AK, BKm, 2>, p, map_a, map_b, map_out, ep,
                 Cfg::kWsSmemBytes, stream, pr.tuning.pdl);
  }
  if (p.splits > 1) launch_splitk_reduce<TOut>(p, ep, stream, pr.tuning.pdl);
}

// A persistent kernel over its tiles of Cfg, in clusters of Ctas CTAs, that splits K only by
// split-K's rule (choose_splits; these kernels do not build the tail split's fixup): the FP8
// kernels (tc:fp8_ws, tc:fp8_multicast, tc:fp8_ws256) and tc:ws_persistent's 192 x 128 tiles.
// A of type TA and B of TB in the layouts AK / BKm, the output of type TOut.
template <typename Cfg, TcType TA, TcType TB, TcType TOut, bool AK, bool BKm, int Ctas,
          typename Kernel>
void launch_split_k_tiles(const TcProblem& pr, Kernel kernel, cudaStream_t stream) {
  HopperParams p = problem_params<Cfg>(pr, tc_elem_bytes(TOut));
  const Epilogue<TOut> ep = Epilogue<TOut>::from(pr);
  const int sms = sm_count();
  const int tiles = p.raster.count();
  p.splits = persistent_splits(pr, p, tiles, sms);
  p.stagger = pr.tuning.stagger;  // (tc:fp8_ws alone reads it; launch_fp8 checks)
  const CUtensorMap map_a = operand_tensor_map(pr.a, AK, pr.M, pr.K, pr.lda, TA, Cfg::BM);
  // In clusters each CTA loads (and multicasts) its share of the B tile: the box is that tall.
  const CUtensorMap map_b =
      operand_tensor_map(pr.b, BKm, pr.N, pr.K, pr.ldb, TB, Cfg::BN / Ctas);
  const ScratchBuffer partial = split_k_scratch(pr, p);
  const CUtensorMap map_out =
      p.tma_store ? output_tensor_map(pr.out, pr.M, pr.N, pr.ldo, TOut) : map_a;
  // scaled_mm_range's range is kept by the staged TMA stores of single CTAs (scaled_mm_hopper asks
  // only where they run): a split or a direct store would leave values out of it.
  TORCH_CHECK(pr.range_bits == nullptr || (Ctas == 1 && p.splits == 1 && p.tma_store),
              "cudasteps.scaled_mm_range: the range needs the unsplit kernel with TMA stores");
  if constexpr (Ctas == 1) {
    launch_persistent(kernel, tiles * p.splits, sms, map_a, map_b, map_out, p, ep,
                      Cfg::kWsSmemBytes, stream, pr.tuning.pdl, Cfg::kThreads);
  } else {
    launch_pairs(kernel, p, map_a, map_b, map_out, ep, Cfg::kWsSmemBytes, stream, pr.tuning.pdl);
  }
  if (p.splits > 1) launch_splitk_reduce<TOut>(p, ep, stream, pr.tuning.pdl);
}

// scaled_mm's Hopper kernel: tc:fp8_ws (wgmma_ws_kernel, 128 x 128 tiles) with A of type TA (e4m3
// or e5m2), B e4m3, both K-major, the output of type TOut (bf16, or kTF32 for float32). The ladder
// also asks for (bf16 outputs only) tc:fp8_multicast (tuning.ctas 2: the same kernel in clusters of
// two CTAs on vertically adjacent tiles that share their B tile by TMA multicast, so a CTA pulls
// 24 KiB per k-tile out of L2 instead of 32) and tc:fp8_ws256 (tuning.bm 256: 256 x 128 tiles).
// Measured on an H200 (e4m3, bf16 out, interleaved with torch._scaled_mm, the report's FFN shapes
// and 4096^3, 8192^3): tc:fp8_ws 0.90-0.92x torch, tc:fp8_multicast 0.82-0.87x, tc:fp8_ws256
// 0.77-0.81x. L2 bandwidth is not what holds tc:fp8_ws back (ncu, 8192^3: L2 at 75% of its peak,
// the tensor pipe at 79% against cuBLAS's 92%); in a cluster, a stage is refilled only once the
// consumers of both CTAs are done with it, which likely costs more than the multicast saves.
// Measured on an H100 and not kept (e4m3, bf16 out, interleaved with torch._scaled_mm over input
// sets rotated out of L2, two runs each):
//   * a lookahead across tiles: each unit's first k-tile issued before the previous unit's tile
//     is stored, so the tensor cores work under the epilogue. 8192^3 0.90-0.92x -> 0.94-0.95x
//     torch, but 4096^3 1.03-1.05x -> 1.01x and the FFN shapes 0.99-1.01x -> 0.97-1.00x.
//     (ptxas serializes every wgmma where the count of wgmma groups in flight at a merge of paths
//     depends on the path; it says so in "ptxas info" lines, C7514/C7515, not as a warning.)
//   * what the epilogue and the promotion cost, by removing each (ladder-only builds, 4096^3, us):
//     torch 100, tc:fp8_ws 109, without its stores 94, without promotion (fast accumulation) 101,
//     torch with use_fast_accum 94. The stores' removal also drops the output's DRAM writes.
//   * direct stores instead of the staged TMA stores (every shape, 2026-11-26): 8192 x 8192 x 2048
//     bf16 out 248 -> 396 us, 4096^3 119 -> 150 us, 8192 x 2048 x 8192 float32 out 245 -> 251 us.
//   * consumer warpgroup 1 started 2, 3 or 4 k-tiles behind warpgroup 0 (a named barrier at the
//     start; the lag should let one warpgroup's wgmmas run under the other's epilogue): no shape
//     faster beyond noise (e4m3 and e5m2 x e4m3, bf16 and float32 out, the FFN step's six shapes,
//     4096^3, 8192^3, 4096 x 11008 x 4096; 2048 x 8192 x 8192 float32 out 0.86x -> 0.78x with a lag
//     of 3 in one run). A lag above the ring's depth deadlocks (warpgroup 0 waits for a stage only
//     warpgroup 1 can release).
//   * one set of k-tile sums, waited for in full before each promotion (as cuBLAS's loop does),
//     with and without consumer warpgroup 1 held back (a named barrier) until warpgroup 0 had
//     issued its first k-tile, so that their k-tiles would alternate on the tensor cores if these
//     ran them in issue order (2026-11-27, e4m3, bf16 out, the six report shapes, one run each):
//     0.66-0.78x torch with the offset, 0.72-0.76x without, against 0.87-0.93x for the two sets.
//     The offset changed nothing: the tensor cores do not keep the two warpgroups' k-tiles apart,
//     and the 64 registers one set frees (room for 144- or 192-wide tiles) cost a fifth of the
//     rate at 128 columns.
//   * each unit's first k-tile summed straight into the accumulators (no zeroing, no first
//     promotion) with the unit's set-up (raster coordinates, the next unit) moved under its first
//     wgmmas (2026-11-27, two runs against two of the kept kernel): the same within noise on five
//     shapes, 8192^3 0.84-0.85x against 0.88x. Not kept.
//   * each consumer warpgroup its own copy of the loop, its 64-row slice a compile-time constant
//     (2026-11-27), so that ptxas could keep the wgmma descriptors in uniform registers: it still
//     builds them in regular ones and moves each into uniform registers (108 R2UR per copy against
//     121 in the shared loop; both rebuild the descriptors' constant high word for every wgmma),
//     the FP8 units took three times as long to compile, and no shape ran faster (8192^3 0.85x
//     against 0.90x). ncu (H100, 4096^3, per issued instruction): our warps stall on dispatch
//     0.93 cycles and on the warpgroup's wgmma (gmma) 0.55, cuBLAS's 0.40 and 0.10, on 17% fewer
//     instructions; L2 throughput 65% of its peak (cuBLAS 57%), so not the bound.
//   * the FP8 FFN step's products alone (2026-11-26, torch._scaled_mm without fast accumulation,
//     same operand types and output dtypes): 0.90-0.95x, float32 outputs (the weight gradients,
//     a float32 input's gradient) 0.90-0.91x against 0.93-0.95x for bf16. torchao's float8
//     training runs its forward products with fast accumulation (its default for the output
//     GEMM): torch._scaled_mm with use_fast_accum took 1.00-1.06x less time on these shapes.
//   * the epilogue's cost, part by part (2026-11-27, one build with run-time switches added,
//     e4m3, bf16 out, three runs; ratio to torch for 4096^3 / 8192 x 8192 x 2048 / 8192 x 2048 x
//     8192): as kept 0.89-0.93 / 0.88-0.90 / 0.89-0.91; no epilogue at all (nothing stored)
//     0.95-1.00 / 0.99-1.01 / 0.95-0.96; the staging without the TMA stores 0.95 / 0.88 / 0.90;
//     the TMA stores without the staging 0.95 / 0.93 / 0.93; neither (barriers, the proxy fence
//     and the wait for the last store's reads alone) 0.93-0.97 / 0.93-0.94 / 0.92-0.94; the call
//     with nothing in it 0.99 / 0.96 / 0.94. The gap to cuBLAS is the time both consumer
//     warpgroups spend on a tile's epilogue with the tensor cores idle, spread over its parts.
//   * the k-tiles as one stream across work units, one k-tile issued ahead so that the next
//     unit's first k-tile runs under this unit's epilogue (at the stream's end a dummy group on
//     the current stage's bytes, so every path holds one group in flight; each k-tile's first
//     wgmma in an output-only form, so the promoted set's registers are free in the epilogue):
//     ptxas serialized every wgmma of the kernel (C7514: accumulator registers read inside a
//     pipeline stage) whenever an epilogue sat between an issue and its wait (the same loop
//     without the epilogue call: no C7514), and spilled 64 bytes. That build ran 0.55-0.67x
//     torch (0.63-0.76x for the kept loop in it, serialized too); the output-only form alone
//     changed nothing (0.85-0.92x). A second form, compiled only: the unit's end drains the
//     k-tiles (wait 0), stages the tile, and only then issues the next unit's first k-tile
//     (carried across the unit loop's back-edge) before the TMA stores and the set-up. ptxas
//     serialized it too, with the stores, the set-up, the bias read-ahead and the dummy group
//     moved out of the window one after another. The SASS holds the staging's values and the
//     barrier and descriptor operands in registers of the k-tile sums (`STSM [..], R24`): with a
//     wgmma group carried across a loop back-edge, ptxas counts those reuses as reads inside a
//     pipeline stage.
//   * the stores issued by a thread of the producer warpgroup's second warp (2026-11-27, bf16
//     out): each consumer warpgroup waits for its staging to be free (an mbarrier the storer
//     arrives on once the TMA has read it), stages its block, fences and arrives on a second
//     mbarrier; the storer walks the same units, stores each block and frees it. The consumers
//     then run no barrier, no store and no wait for the stores' reads (no C7514, no spills;
//     outputs equal to torch._scaled_mm's, the FP8 tests passed). A/B against this kernel on one
//     H100, two runs each, the six shapes above: 0.87-0.93x either way (4096 x 4096 x 11008
//     0.91-0.92x against 0.93x, 8192 x 8192 x 2048 0.91x against 0.90x), within the noise; so
//     the barriers, the store issue and the wait cost the tensor cores nothing measurable, and
//     the time left is the staging and the pipeline's drain and refill at each tile. Not kept.
// cuBLASLt runs these products in clusters of two CTAs (ncu: nvjet_sm90_qqtst_128x128_128x6_1x2
// for 4096^3, our tile and ring depth, 168 registers, 384 threads; 144x128 tiles for 8192^3; on
// an H200, 2026-11-28: 4096^3 103.4 us in 2 x 1 clusters, the tensor pipe 81% busy, against
// tc:fp8_ws's 112.3 at 73%; 8192^3 750 in 144 x 128 tiles, 92%, against 840 at 82%), and its
// per-k-tile loop is leaner: one set of k-tile sums waited for in full (WARPGROUP.DEPBAR 0,
// then the FADDs), about 104 instructions per warp and k-tile against tc:fp8_ws's 134 (124 since
// the 32-bit descriptor adds of wgmma_k_tile), its descriptors kept in uniform registers where
// ours are computed in regular ones and moved (R2UR) for every wgmma. (Broadcasting the
// warpgroup index with a shuffle, and the mbarrier wait's retry loop moved into its asm, left the
// descriptors in regular registers: ptxas's choice, not a divergence the compiler saw.)
// ncu source counters, H100, 8192 x 8192 x 2048 e4m3, bf16 out (2026-11-27): ours 227 us, cuBLAS
// 210 us (nvjet_sm90_qqtst_144x128_128x6_1x2_coopA: 144-wide tiles, 3648 of them against our
// 4096, one set of k-tile sums waited for in full before each promotion, which leaves it the
// registers for the wider tile). Of our warps' stall samples 24% fall in the code that runs once
// per tile (the unit's set-up with the raster's integer divisions and the accumulators' zeroing
// 7%, the last k-tiles' promotions 7%, the staged store 6%), against about 18% of cuBLAS's; while
// that code runs neither consumer warpgroup issues a wgmma. Wider tiles (fewer of them, each
// reading fewer bytes per product) or a cheaper per-tile path are what is left to try.
// A third way, built but not yet measured (2026-11-28, the ladder's fp8_ws:st<L>, a trial; the
// dispatcher never asks for it): the consumer warpgroups started L k-tiles apart (HopperParams::
// stagger), so that each one's epilogue runs while the other still issues wgmmas, the overlap
// ptxas refused above within one warpgroup (here each warpgroup's own loop is unchanged: the same
// 168 registers, no spill, the same wgmma waits in the SASS). scripts/fp8_sweep.py times it.
template <TcType TA, TcType TOut>
void launch_fp8(const TcProblem& pr, cudaStream_t stream) {
  static_assert(tc_is_fp8(TA) && !tc_is_fp8(TOut), "FP8 operands, a 16- or 32-bit output");
  TORCH_CHECK(pr.a_kmajor && pr.b_kmajor && pr.type == TA && pr.b_type == TcType::kE4M3 &&
                  pr.out_type == TOut && (pr.scale_a == nullptr) == (pr.scale_b == nullptr) &&
                  pr.act == elementwise::Act::kNone && pr.aux == nullptr && !pr.addend_fp32,
              "cudasteps.scaled_mm: tc:fp8_ws cannot take this problem");
  // Every work unit needs a k-tile: the consumers' first wait is for one.
  TORCH_CHECK(pr.M > 0 && pr.N > 0 && pr.K > 0, "cudasteps.scaled_mm: tc:fp8_ws needs M, N, K > 0");
  TORCH_CHECK(pr.range_bits == nullptr || pr.tuning.bm != 256,
              "cudasteps.scaled_mm_range: tc:fp8_ws256 does not take the range");
  // The stagger (a trial, the ladder's fp8_ws:st<L>): tc:fp8_ws's single CTAs only, L k-tiles
  // apart with L < the ring's stages (warpgroup 0 issues them before warpgroup 1 releases any).
  TORCH_CHECK(pr.tuning.stagger == 0 ||
                  (pr.tuning.bm != 256 && pr.tuning.ctas != 2 && pr.tuning.stagger > 0 &&
                   pr.tuning.stagger < HopperCfg<TA, 128>::kStages),
              "cudasteps.scaled_mm: the stagger takes tc:fp8_ws and 1 to ",
              HopperCfg<TA, 128>::kStages - 1, " k-tiles, got ", pr.tuning.stagger);
  if (pr.tuning.bm == 256) {
    // tc:fp8_ws256 (the ladder's), built for bf16 outputs alone.
    if constexpr (TOut == TcType::kBF16) {
      launch_split_k_tiles<Fp8WideCfg<TA>, TA, TcType::kE4M3, TOut, true, true, 1>(
          pr, wgmma_fp8_wide_kernel<TA, TOut>, stream);
      return;
    }
    TORCH_CHECK(false, "cudasteps.scaled_mm: tc:fp8_ws256 is built for bf16 outputs only");
  }
  using Cfg = HopperCfg<TA, 128>;
  if (pr.tuning.ctas == 2) {
    // tc:fp8_multicast (the ladder's), built for bf16 outputs alone.
    if constexpr (TOut == TcType::kBF16) {
      launch_split_k_tiles<Cfg, TA, TcType::kE4M3, TOut, true, true, 2>(
          pr, wgmma_ws_kernel<TA, 128, true, true, 2, TcType::kE4M3, TOut>, stream);
      return;
    }
    TORCH_CHECK(false, "cudasteps.scaled_mm: tc:fp8_multicast is built for bf16 outputs only");
  }
  launch_split_k_tiles<Cfg, TA, TcType::kE4M3, TOut, true, true, 1>(
      pr, wgmma_ws_kernel<TA, 128, true, true, 1, TcType::kE4M3, TOut>, stream);
}

// tc:ws_tf32_rs (kSwap: R = B, S = A; else R = A, S = B): one block per SM over the raster of
// R x S tiles, never split along K.
template <int BN, bool kSwap>
void launch_rs_typed(const TcProblem& pr, cudaStream_t stream) {
  constexpr TcType T = TcType::kTF32;
  using Cfg = RsCfg<BN>;
  const void* r_ptr = kSwap ? pr.b : pr.a;
  const void* s_ptr = kSwap ? pr.a : pr.b;
  const int64_t ldr = kSwap ? pr.ldb : pr.lda, lds = kSwap ? pr.lda : pr.ldb;
  const int64_t rows_r = kSwap ? pr.N : pr.M, rows_s = kSwap ? pr.M : pr.N;
  HopperParams p = {};
  p.M = pr.M;
  p.N = pr.N;
  p.K = pr.K;
  p.k_tiles = int(ceil_div<int64_t>(pr.K, Cfg::BK));
  const int64_t tiles_r = ceil_div<int64_t>(rows_r, Cfg::BM), tiles_s = ceil_div<int64_t>(rows_s, BN);
  TORCH_CHECK(tiles_r * tiles_s <= INT_MAX, "cudasteps.mm: the output [", pr.M, ", ", pr.N,
              "] has too many tiles of ", Cfg::BM, " x ", BN);
  p.raster.tiles_m = int(tiles_r);
  p.raster.tiles_n = int(tiles_s);
  p.raster.group = 8;
  p.splits = 1;
  p.k_tiles_per_split = p.k_tiles;
  const CUtensorMap map_r = operand_tensor_map(r_ptr, false, rows_r, pr.K, ldr, T, Cfg::BM);
  const CUtensorMap map_s = operand_tensor_map(s_ptr, true, rows_s, pr.K, lds, T, BN);
  TORCH_CHECK(pr.act == elementwise::Act::kNone && pr.aux == nullptr,
              "cudasteps.linear_act: tc:ws_tf32_rs has no fused epilogue");
  auto kernel = wgmma_ws_rs_kernel<BN, kSwap>;
  tc::configure_smem_once(kernel, Cfg::kSmemBytes);
  const int grid = std::min(p.raster.count(), sm_count());
  kernel<<<grid, 384, Cfg::kSmemBytes, stream>>>(map_r, map_s, p, Epilogue<T>::from(pr));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// tc:ws_persistent in 192 x 128 tiles (three consumer warpgroups; persistent_bm chose them): split
// along K where its rule says (choose_splits), never the tail split.
template <TcType T, bool AK, bool BKm>
void launch_tall(const TcProblem& pr, cudaStream_t stream) {
  TORCH_CHECK(!Epilogue<T>::from(pr).fused(),
              "cudasteps.mm: 192 x 128 tiles do not take linear_act's fused stage");
  launch_split_k_tiles<HopperCfg<T, 128, 192>, T, T, T, AK, BKm, 1>(
      pr, wgmma_ws_kernel<T, 128, AK, BKm, 1, T, T, 192>, stream);
}

// The skinny tiles of a few-row linear (the ladder's tc:ws_persistent:bt<16|32|64>; 16-bit
// operands, both K-major: x (M tokens) @ W^T (N features)): the kernel runs the swapped product
// W x^T, 64 rows of the weight (A) by BT tokens (B) per tile, one consumer warpgroup, a ring of
// 12-16 small stages, and stores each element at its transposed place in the output (cuBLAS's
// form for these products: nvjet_sm90_tst_64x16_64x16 for 32 x 4096 x 4096). One work unit per
// tile group: no split-K, no tail split. `tiles` (SkinnyTiles, scheduler.cuh) says how the CTAs
// are clustered:
//   * ctas (token tiles per cluster) and weight_ctas (weight tiles per cluster): clusters of
//     weight_ctas x ctas CTAs on adjacent tiles (ClusterGrid, mainloop.cuh), each loading its
//     slice of the weight tile its row shares and of the token tile its column shares and
//     multicasting them, for the ladder's sweeps (slower than single CTAs in raster group 1 on
//     every shape measured, scheduler.cuh): bt<n>:c2 (1 x 2; skinny_tiles' choice for 65-128
//     tokens until 2026-11-27), bt<32|64>:w4:c2 (4 x 2: cuBLAS's clusters for 64-128 tokens) and
//     w4 (4 x 1);
//   * k_parts 2 (bt<n>:k2, and skinny_tiles' choice against small weights): in clusters of two
//     CTAs on the same tile, each over half of its k-tiles (loading its own operands), rank 1's
//     sums added into rank 0's in its shared memory (combine_cluster_k_parts): twice the CTAs for
//     outputs whose tiles leave SMs idle, at the weight's and tokens' bytes of one pass.
template <TcType T, int BT>
void launch_skinny(const TcProblem& pr, const SkinnyTiles& tiles, cudaStream_t stream) {
  using Cfg = HopperCfg<T, BT, 64>;
  TORCH_CHECK(pr.a_kmajor && pr.b_kmajor && pr.M > 0 && pr.N > 0 && pr.K > 0,
              "cudasteps.mm: the skinny tiles (bt<16|32|64>) take x @ weight^T with both operands "
              "K-major and a non-empty product only");
  const int cn = tiles.ctas, cm = tiles.weight_ctas;
  TORCH_CHECK(tiles.k_parts != 2 || (cn == 1 && cm == 1),
              "cudasteps.mm: the skinny tiles split along K (k2) run in clusters of their own, not "
              "in clusters sharing operand tiles (c2, w<n>)");
  // The clusters built: 1 x 1 and 1 x 2, and for the ladder's sweeps (slower than those on every
  // shape measured: scheduler.cuh) 4 x 1 and 4 x 2, bf16 with 32 or 64 tokens per tile (whose
  // slices for 4 CTAs are whole 8-row groups) only, to spare the build their 8 kernels per type.
  constexpr bool kSharedTokensBuilt = T == TcType::kBF16 && BT >= 32;
  const bool built = (cm == 1 || (kSharedTokensBuilt && cm == 4)) && (cn == 1 || cn == 2);
  TORCH_CHECK(built, "cudasteps.mm: the skinny tiles run in clusters of c1 or c2 token tiles by w1 "
              "weight tiles, or w4 for bfloat16 in bt32 and bt64, got c", cn, " w", cm, " for bt",
              BT);
  TcProblem swapped = pr;  // the weight's rows as M, the tokens as N
  swapped.a = pr.b;
  swapped.lda = pr.ldb;
  swapped.b = pr.a;
  swapped.ldb = pr.lda;
  swapped.M = pr.N;
  swapped.N = pr.M;
  HopperParams p = problem_params<Cfg>(swapped, Cfg::kElemBytes);
  // The transposed store goes out through shared memory by thread (store_accumulators_transposed),
  // not by TMA.
  p.tma_store = false;
  // Raster group 1: the token tiles of one weight tile on consecutive CTAs, which then stream the
  // same weight rows side by side (the ladder's g8 is the other kernels' order, 8 weight tiles
  // down before the next token tile). scheduler.cuh's skinny_tiles has the measurements.
  p.raster.group = pr.tuning.raster_group != 0 ? pr.tuning.raster_group : 1;
  const Epilogue<T> ep = Epilogue<T>::from(pr);  // the original problem's output
  // Each CTA loads 64 / cn rows of its weight tile and BT / cm of its token tile: the boxes.
  const CUtensorMap map_a =
      operand_tensor_map(swapped.a, true, swapped.M, pr.K, swapped.lda, T, 64 / cn);
  const CUtensorMap map_b =
      operand_tensor_map(swapped.b, true, swapped.N, pr.K, swapped.ldb, T, BT / cm);
  if (tiles.k_parts == 2) {
    p.splits = 2;  // unit 2 c + rank of cluster c: the same tile, the rank's half of its k-tiles
    p.k_tiles_per_split = ceil_div(p.k_tiles, 2);  // rank 1's range may be empty (one k-tile)
    // One cluster per tile.
    launch_clusters(wgmma_ws_kernel<T, BT, true, true, 2, T, T, 64, true, 1, true>, 2,
                    p.raster.count(), p, map_a, map_b, map_a, ep, Cfg::kSkinnySmemBytes, stream,
                    pr.tuning.pdl, Cfg::kThreads);
    return;
  }
  if (cm == 1 && cn == 1) {  // single CTAs, persistent
    auto launch_alone = [&](auto kernel) {
      launch_persistent(kernel, p.raster.count(), sm_count(), map_a, map_b, map_a, p, ep,
                        Cfg::kSkinnySmemBytes, stream, pr.tuning.pdl, Cfg::kThreads);
    };
    if (!tiles.l2_hints) return launch_alone(wgmma_ws_kernel<T, BT, true, true, 1, T, T, 64, true>);
    if constexpr (BT >= 32) {
      return launch_alone(wgmma_ws_kernel<T, BT, true, true, 1, T, T, 64, true, 1, false, true>);
    }
    TORCH_CHECK(false, "cudasteps.mm: the skinny tiles' L2 hints (h1) are built for bt32 and bt64 "
                "alone only");
  }
  // The raster walks tile groups, cm weight tiles by cn token tiles each.
  p.raster.tiles_m = int(ceil_div<int64_t>(p.raster.tiles_m, cm));
  p.raster.tiles_n = int(ceil_div<int64_t>(p.raster.tiles_n, cn));
  auto launch = [&](auto kernel, int ctas) {
    launch_clusters(kernel, ctas, p.raster.count(), p, map_a, map_b, map_a, ep,
                    Cfg::kSkinnySmemBytes, stream, pr.tuning.pdl, Cfg::kThreads);
  };
  if (cm == 1) return launch(wgmma_ws_kernel<T, BT, true, true, 2, T, T, 64, true, 2>, 2);
  if constexpr (kSharedTokensBuilt) {
    if (cn == 1) return launch(wgmma_ws_kernel<T, BT, true, true, 4, T, T, 64, true>, 4);
    return launch(wgmma_ws_kernel<T, BT, true, true, 8, T, T, 64, true, 2>, 8);
  }
}

// The tile width persistent_bn picks (ping-pong: 128 x 128 per consumer warpgroup), or for 16-bit
// outputs of at most 64 rows 128 x 128 tiles split along K (few_rows_split_k; linear_act's fused
// stage too, so that its product keeps linear's bits). 128 x 64 tiles are built for
// tc:ws_persistent with 16-bit operands and an epilogue other than linear_act's fused stage
// (which the 128 and 256 widths take).
template <TcType T, bool AK, bool BKm>
void launch_layout(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  constexpr bool kHalfBuilt = T != TcType::kTF32;
  const Epilogue<T> ep = Epilogue<T>::from(p);
  const bool half_ok =
      kHalfBuilt && which == HopperKernel::kWarpSpecialized && !ep.fused() && !ep.act_grad();
  TORCH_CHECK(p.tuning.bn != 64 || half_ok,
              "cudasteps.mm: 128 x 64 tiles (bn64) are built for tc:ws_persistent with bfloat16 "
              "or float16 operands and no fused activation only");
  const TcTuning& t = p.tuning;
  if (t.bt != 0) {
    if constexpr (kHalfBuilt && AK && BKm) {
      const SkinnyTiles forced{t.bt, t.ctas == 2 ? 2 : 1, t.k_parts,
                               t.weight_ctas == 0 ? 1 : t.weight_ctas, t.l2_hints};
      if (t.bt == 16) return launch_skinny<T, 16>(p, forced, stream);
      if (t.bt == 32) return launch_skinny<T, 32>(p, forced, stream);
      if (t.bt == 64) return launch_skinny<T, 64>(p, forced, stream);
    }
    TORCH_CHECK(false, "cudasteps.mm: the skinny tiles (bt<16|32|64>) are built for bfloat16 or "
                "float16 x @ weight^T (both operands K-major) only");
  }
  const bool chosen = t.bn == 0 && t.bm == 0 && t.splits == 0 && t.tail_split < 0;
  // linear_act's fused stage asks for tc:ws_pingpong where there is no tail split
  // (tc_hopper_tail_split_wanted): it takes the skinny tiles too, so its product stays linear's.
  const bool default_kernel = which == HopperKernel::kWarpSpecialized ||
                              (which == HopperKernel::kPingPong && ep.fused());
  if constexpr (kHalfBuilt && AK && BKm) {
    const SkinnyTiles skinny =
        chosen && default_kernel
            ? skinny_tiles(p.M, p.N, p.K, sm_count(), dram_bytes_per_s_per_sm())
            : SkinnyTiles{};
    if (skinny.bt == 16) return launch_skinny<T, 16>(p, skinny, stream);
    if (skinny.bt == 32) return launch_skinny<T, 32>(p, skinny, stream);
    if (skinny.bt == 64) return launch_skinny<T, 64>(p, skinny, stream);
  }
  if (kHalfBuilt && which == HopperKernel::kWarpSpecialized && chosen &&
      few_rows_split_k(p.M, p.N, sm_count())) {
    TcProblem split = p;
    split.tuning.tail_split = 0;  // 128 x 128 tiles in split-K's k ranges, no tail split
    launch_typed<T, 128, AK, BKm>(split, which, stream);
    return;
  }
  const int k_tiles = int(ceil_div<int64_t>(p.K, HopperCfg<T, 128>::BK));
  double bn_time = 0.0;
  // 65-128 tokens of x @ weight^T past the skinny tiles, with fast DRAM per SM: 128 wide.
  const bool few_rows_wide = kHalfBuilt && AK && BKm && chosen &&
                             which == HopperKernel::kWarpSpecialized &&
                             few_rows_bn128(p.M, p.N, sm_count(), dram_bytes_per_s_per_sm());
  const int bn = which == HopperKernel::kPingPong || few_rows_wide
                     ? 128  // ping-pong: each consumer warpgroup 128 x 128
                     : persistent_bn(p.M, p.N, p.K, k_tiles, p.tuning.bn, half_ok, &bn_time);
  // 192 x 128 tiles: for the problems half_ok allows (their kernel takes the same epilogues as
  // the 64-wide one), where persistent_bm finds them shorter, or where the ladder asks (bm192).
  const int bm = p.tuning.bm != 0 ? p.tuning.bm : half_ok ? persistent_bm(p.M, p.N, bn_time) : 128;
  TORCH_CHECK(bm == 128 || (half_ok && (p.tuning.bn == 0 || p.tuning.bn == 128)),
              "cudasteps.mm: 192 x 128 tiles (bm192) are built for tc:ws_persistent with bfloat16 "
              "or float16 operands, 128 columns and no fused activation only");
  if (bm == 192) {
    if constexpr (kHalfBuilt) launch_tall<T, AK, BKm>(p, stream);
  } else if (bn == 256) {
    launch_typed<T, 256, AK, BKm>(p, which, stream);
  } else if (bn == 128) {
    launch_typed<T, 128, AK, BKm>(p, which, stream);
  } else if constexpr (kHalfBuilt) {
    launch_typed<T, 64, AK, BKm>(p, which, stream);
  }
}

// mm.dtype's float32 output of 16-bit operands (TcProblem::out_fp32): the product as
// tc:ws_persistent runs it, its accumulators written in float32, never rounded to the operands'
// type. The backward of a linear whose float32 parameters autocast runs in bf16 writes their
// gradients so, where a cast pass over each gradient would follow otherwise. Tiles 64, 128 or
// 256 wide by persistent_bn's estimate (the 64-wide ones for small weight gradients, as the bf16
// output takes them), with its tail split and split-K; the 192-row and skinny tiles are not built
// for this output (compile time: these products are the backward's, mostly large).
template <TcType T, bool AK, bool BKm>
void launch_layout_f32_out(const TcProblem& p, cudaStream_t stream) {
  static_assert(T == TcType::kBF16 || T == TcType::kFP16, "16-bit operands");
  const int k_tiles = int(ceil_div<int64_t>(p.K, HopperCfg<T, 128>::BK));
  const int bn = persistent_bn(p.M, p.N, p.K, k_tiles, p.tuning.bn, /*half_ok=*/true);
  if (bn == 256) {
    launch_typed<T, 256, AK, BKm, TcType::kTF32>(p, HopperKernel::kWarpSpecialized, stream);
  } else if (bn == 128) {
    launch_typed<T, 128, AK, BKm, TcType::kTF32>(p, HopperKernel::kWarpSpecialized, stream);
  } else {
    launch_typed<T, 64, AK, BKm, TcType::kTF32>(p, HopperKernel::kWarpSpecialized, stream);
  }
}

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
