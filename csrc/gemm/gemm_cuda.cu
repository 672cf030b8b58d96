// CUDA mm / addmm / linear: the tuned SGEMMs (gemm_tiles.cuh: register-staged double buffer, or a
// cp.async ring into k-major tiles; sgemm_multistage.cuh: multistage cp.async ring into
// layout-preserving tiles) behind one config table, chosen per shape from a measured table
// (sgemm_table.inc), a simple tiled float64 kernel, and deterministic split-K.
//
// Layouts. Each operand is read in place when one of its strides is 1 (row- or column-major, with
// any leading dimension): the kernel template is instantiated for all four combinations (NN, NT,
// TN, TT), so a.t() or linear's weight costs no copy. Other strides go through cudasteps::copy.
// Operands whose base pointer is not 16-byte aligned or whose leading dimension is not a multiple
// of 4 take sgemm_kernel's scalar-load instantiation (Vec = false; in the cp.async ring, 4-byte
// copies); the math is the same. A multistage or ring config runs on a copy of such operands with
// padded rows when the product is large enough (worth_repacking); else a multistage config
// (cp.async copies aligned 16-byte chunks) hands them to the sgemm_kernel config with the same
// block tile (unaligned_fallback), and a ring config takes its own scalar-copy instantiation.
//
// Config table: kConfigs below (sgemm_kernel), then the multistage configs of
// sgemm_multistage_cuda.cu (names cp<stages>_...); the `cfg:<name>` ladder variants run each one
// by name. The sgemm_kernel configs:
//   128x128x8_w64x32_t8x8   the main config: 256 threads, 8x8 accumulators per thread, 2 blocks
//                           per SM (<= 128 registers: 119-125 used, no spills in any of the 8
//                           layout/alignment instantiations), 17 KiB shared memory per block, k loop
//                           not unrolled (KUnroll = 1: unrolling 2x or more spills at 128 registers).
//   128x128x16_w64x32_t8x8  16-deep K slice: half the barriers per FFMA, 33 KiB shared memory;
//                           spills 8 bytes in the TT-like (A row-major, B column-major) layouts.
//   128x128x8_w32x64_t8x8   warp tile 32 x 64 instead of 64 x 32 (A/B shared-load balance flipped).
//   128x128x16_w64x32_t8x8_occ1  1 block per SM (up to 255 registers), k loop fully unrolled: ILP
//                           instead of occupancy hides the shared-load latency.
//   128x64x16_w64x32_t8x8   128 threads: twice as many blocks for mid-size outputs (3 blocks/SM:
//                           4 blocks/SM would cap registers at 128 and spill).
//   64x64x16_w32x32_t8x4    128 threads, 8x4 per thread: 4x the blocks of the main config, to fill
//                           132 SMs on small outputs (1024^2) when K is too short to split.
//   128x256x8_w64x64_t8x16  256 threads, 8x16 accumulators per thread (6 LDS.128 per 128 FFMA),
//                           1 block per SM (218-224 registers, no spills), k loop fully
//                           unrolled, 25 KiB shared memory. BK = 16 fully unrolled spills.
//   256x128x8_w64x64_t16x8  the transposed tile: 16x8 per thread, 1 block per SM (223-233
//                           registers, no spills), k loop fully unrolled, 25 KiB shared memory.
//   128x128x16_w64x64_t8x16 128 threads (4 warps), 8x16 per thread, 2 blocks per SM (235-250
//                           of 255 registers, no spills), KUnroll = 1 (2 spills 24-28 bytes),
//                           33 KiB shared memory.
//   ring3_128x256x8_w64x64_t8x16  sgemm_kernel's cp.async ring (Stages = 3): the 128x256x8 tile
//                           with no register staging, K-contiguous operands transposed by 4-byte
//                           copies into k-major tiles, 37 KiB shared memory. Copies per k step: 4
//                           (3 when both operands are K-contiguous, 1 for rows that are not
//                           16-byte aligned, where every copy is 4-byte). 224-255 registers; the
//                           unaligned TN instantiation (column-major A) spills 24 bytes. The
//                           table's choice for unaligned rows and for M = 128.
//   ring3_256x128x8_w64x64_t16x8  the same ring on cuBLAS's tile shape: 16x8 per thread, 3 copies
//                           per k step (2 when both operands are K-contiguous: 12 4-byte copies
//                           per thread per slice; 1 unaligned), 37 KiB shared memory, 239-249
//                           registers; the unaligned TN instantiation spills 12 bytes. The
//                           table's choice for every aligned layout of large products.
//   The ring configs issue a k step's FFMAs in serpentine order where that measured faster
//   (TileConfig::SerpentineFma; the 256x128 ring all but sgemm_kernel NN, the 128x256 ring
//   everywhere); the `_rowfma` twins (ring3_128x256x8_w64x64_t8x16_rowfma,
//   ring3_256x128x8_w64x64_t16x8_rowfma) keep row order everywhere, for the ladder steps before
//   serpentine_fma.
//   ring3_256x128x8_w64x64_t16x8_swapnn  the 256x128 ring running aligned NN products swapped,
//                           as C^T = B^T A^T (gemm_cuda): the TT instantiation, whose 4-byte
//                           transposing copies fill the tile's 128-wide side instead of its
//                           256-wide side, and an epilogue that stores the transposed product.
//                           Other layouts (and unaligned rows) run as the config without it.
// The ring configs add the stream-K tail (gemm_tiles.cuh) where streamk_pays: the last, partial
// wave of tiles shared over all SMs by K iterations, with a deterministic fix-up.
// Choice (choose_config): the nearest row of the measured table sgemm_table.inc (written by
// scripts/sgemm_sweep.py --emit), see choose_config for the rule between measured shapes.
//
// Tensor cores (tc_gemm_cuda, below the SGEMM): bf16/fp16 always, and float32 when torch's TF32
// switch (torch.backends.cuda.matmul.allow_tf32, or set_float32_matmul_precision "high"/"medium")
// is on, read from at::globalContext() per call. Kernel choice: on a Hopper GPU (and a build with
// the sm_90a kernels) the warp-specialized wgmma/TMA kernel; elsewhere (sm_80+) the multistage
// cp.async + ldmatrix kernel (the plain mma.sync kernel is the tc:mma ladder step, run by name).
// Operands TMA / cp.async cannot read in place (base or leading dimension not 16-byte aligned) are
// first repacked by cudasteps::copy_ into a buffer whose rows are padded to 16 bytes: one pass over
// the operand, small next to the product, and it lets ragged shapes (K = 4099) run the fast kernels.
// TF32 wgmma reads shared-memory operands K-major only. One MN-major TF32 operand (mm's row-major
// B) is read in place through registers by tc:ws_tf32_rs, where the output needs no split-K;
// otherwise MN-major TF32 operands are written K-major into such a buffer by cudasteps::transpose_
// (one pass when the rows need no padding; into padded rows transpose_ stages through a
// contiguous buffer, a second pass).
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/autograd.h"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gemm/gemm_cuda.h"
#include "gemm/gemm_tiles.cuh"
#include "gemm/sgemm_multistage.h"
#include "gemm/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace {

//                        BM   BN  BK  WM  WN TM TN St Warp  MinBlk KUnroll
using CfgMain = TileConfig<128, 128, 8, 64, 32, 8, 8, 2, true, 2, 1>;
using CfgBK16 = TileConfig<128, 128, 16, 64, 32, 8, 8, 2, true, 2, 1>;
using CfgW32x64 = TileConfig<128, 128, 8, 32, 64, 8, 8, 2, true, 2, 1>;
using CfgOcc1 = TileConfig<128, 128, 16, 64, 32, 8, 8, 2, true, 1, 16>;
using CfgMid = TileConfig<128, 64, 16, 64, 32, 8, 8, 2, true, 3, 1>;
using CfgSmall = TileConfig<64, 64, 16, 32, 32, 8, 4, 2, true, 4, 16>;
// Larger thread tiles (8x16 / 16x8: 128 accumulators, 6 LDS.128 per 128 FFMA instead of 4 per
// 64), not chosen by shape yet: runnable by name for measurement.
using CfgWide = TileConfig<128, 256, 8, 64, 64, 8, 16, 2, true, 1, 8>;
using CfgTall = TileConfig<256, 128, 8, 64, 64, 16, 8, 2, true, 1, 8>;
using CfgW64x64 = TileConfig<128, 128, 16, 64, 64, 8, 16, 2, true, 2, 1>;
// The cp.async ring (Stages >= 3, sm_80+): the k loop is always fully unrolled there.
// CopyGroup: copies issued per k step (aligned; both operands K-contiguous; unaligned).
// Each ring config comes in two FFMA orders (TileConfig::SerpentineFma): the table's, serpentine
// wherever that measured faster (H100, 4096^3, against row order), and a `_rowfma` twin in row
// order everywhere, which the ladder steps before serpentine_fma run.
//   128x256 (8x16 per thread): serpentine everywhere (NN +2.4%, NT +1.8%, TN +4.6%, TT +8.7%).
//   256x128 (16x8 per thread): serpentine except sgemm_kernel NN (0.8% slower there); sgemm_kernel
//   TN +3%, NT +2%, TT +1.4%; the stream-K kernel's gain shows in NN with the tail on: 0.996x ->
//   1.005-1.011x of cuBLAS.
constexpr unsigned kAllSerpentine = 0xffu;
constexpr unsigned kRingTallSerpentine = kAllSerpentine & ~fma_order_bit(true, false, false);
using CfgRingWide = TileConfig<128, 256, 8, 64, 64, 8, 16, 3, true, 1, 8, 4, 3, 1, kAllSerpentine>;
using CfgRingWideRowFma = TileConfig<128, 256, 8, 64, 64, 8, 16, 3, true, 1, 8, 4, 3, 1>;
using CfgRingTall =
    TileConfig<256, 128, 8, 64, 64, 16, 8, 3, true, 1, 8, 3, 2, 1, kRingTallSerpentine>;
using CfgRingTallRowFma = TileConfig<256, 128, 8, 64, 64, 16, 8, 3, true, 1, 8, 3, 2, 1>;

// Whether this device gives a block `bytes` of shared memory (the ring's stages and the blocked
// sums' totals: 168 KB for 256x128, more than an A100's 163 KB).
bool smem_fits(size_t bytes) {
  return size_t(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin) >= bytes;
}

// A launch's dynamic shared memory (with the blocked sums' totals when they are on), after
// configuring the kernel once per device: the dynamic shared memory above 48 KiB (for the ring,
// room for the totals where the device has it) and, for the ring, the whole carveout as shared
// memory.
template <class Cfg, class Kernel>
size_t kernel_smem(Kernel kernel, const SgemmParams& p) {
  constexpr size_t kWithSums = Cfg::kSmemBytes + Cfg::kSumBytes;
  if constexpr (Cfg::Stages >= 3) {
    tc::configure_smem_once(kernel, smem_fits(kWithSums) ? kWithSums : Cfg::kSmemBytes);
    return p.sum_block_slices > 0 ? kWithSums : Cfg::kSmemBytes;
  } else {
    if constexpr (Cfg::kSmemBytes > 48 * 1024) tc::configure_smem_once(kernel, Cfg::kSmemBytes);
    return Cfg::kSmemBytes;
  }
}

template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
void launch_one(const SgemmParams& p, int splits, cudaStream_t stream) {
  auto kernel = sgemm_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
  const size_t smem = kernel_smem<Cfg>(kernel, p);
  const dim3 grid(unsigned(p.tiles_m) * unsigned(p.tiles_n), 1, unsigned(splits));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The stream-K tail (StreamKParams in gemm_tiles.cuh): sgemm_kernel on the full waves' tiles
// [0, dp_tiles), then sgemm_streamk_kernel on the tail.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
void launch_streamk_one(const SgemmParams& p, const StreamKParams& sk, cudaStream_t stream) {
  if (sk.dp_tiles > 0) {
    auto kernel = sgemm_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
    const size_t smem = kernel_smem<Cfg>(kernel, p);
    kernel<<<unsigned(sk.dp_tiles), Cfg::kThreads, smem, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  auto kernel = sgemm_streamk_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
  const size_t smem = kernel_smem<Cfg>(kernel, p);
  kernel<<<unsigned(sk.blocks), Cfg::kThreads, smem, stream>>>(p, sk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Calls f(ALayoutK, BLayoutK, Vec, OutT), each a std::bool_constant, for the operands' layouts
// and alignment: the one place that maps run-time flags onto the 8 kernel instantiations, and, for
// a SwapNN config, `swapped` (an aligned NN product swapped into C^T = B^T A^T by gemm_cuda) onto
// the ninth: the TT instantiation storing the transposed output.
template <bool SwapNN, class F>
void with_instantiation(bool a_k, bool b_k, bool vec, bool swapped, F&& f) {
  if constexpr (SwapNN) {
    if (swapped) return f(std::false_type{}, std::true_type{}, std::true_type{}, std::true_type{});
  }
  auto pick_vec = [&](auto a, auto b) {
    if (vec) return f(a, b, std::true_type{}, std::false_type{});
    return f(a, b, std::false_type{}, std::false_type{});
  };
  auto pick_b = [&](auto a) {
    if (b_k) return pick_vec(a, std::true_type{});
    return pick_vec(a, std::false_type{});
  };
  if (a_k) return pick_b(std::true_type{});
  return pick_b(std::false_type{});
}

template <class Cfg, bool SwapNN>
void launch_streamk(const SgemmParams& p, const StreamKParams& sk, bool a_k, bool b_k, bool vec,
                    bool swapped, cudaStream_t stream) {
  with_instantiation<SwapNN>(a_k, b_k, vec, swapped, [&](auto a, auto b, auto v, auto t) {
    launch_streamk_one<Cfg, decltype(a)::value, decltype(b)::value, decltype(v)::value,
                       decltype(t)::value>(p, sk, stream);
  });
}

// Picks the instantiation for the operands' layouts and alignment (with_instantiation).
template <class Cfg, bool SwapNN>
void launch_cfg(const SgemmParams& p, bool a_k, bool b_k, bool vec, bool swapped, int splits,
                cudaStream_t stream) {
  with_instantiation<SwapNN>(a_k, b_k, vec, swapped, [&](auto a, auto b, auto v, auto t) {
    launch_one<Cfg, decltype(a)::value, decltype(b)::value, decltype(v)::value,
               decltype(t)::value>(p, splits, stream);
  });
}

struct ConfigEntry {
  const char* name;
  int bm, bn, bk;
  int min_blocks;
  // The ring's shared memory with the blocked sums' totals (0: not a ring config).
  size_t sum_smem_bytes;
  // Runs aligned NN products swapped (gemm_cuda); other layouts as the config without it.
  bool swap_nn;
  void (*launch)(const SgemmParams&, bool, bool, bool, bool, int, cudaStream_t);
  // The stream-K tail (the ring configs), or nullptr.
  void (*launch_streamk)(const SgemmParams&, const StreamKParams&, bool, bool, bool, bool,
                         cudaStream_t);
};

template <class Cfg, bool SwapNN = false>
constexpr ConfigEntry entry(const char* name) {
  static_assert(!SwapNN || Cfg::Stages >= 3, "swapped NN products: the ring configs only");
  if constexpr (Cfg::Stages >= 3) {
    return ConfigEntry{name,
                       Cfg::BM,
                       Cfg::BN,
                       Cfg::BK,
                       Cfg::MinBlocks,
                       Cfg::kSmemBytes + Cfg::kSumBytes,
                       SwapNN,
                       &launch_cfg<Cfg, SwapNN>,
                       &launch_streamk<Cfg, SwapNN>};
  } else {
    return ConfigEntry{name,     Cfg::BM, Cfg::BN, Cfg::BK, Cfg::MinBlocks, 0, false,
                       &launch_cfg<Cfg, false>, nullptr};
  }
}

// Whether config c is a ring config (Stages >= 3): the stream-K kernel, the blocked sums.
bool is_ring(const ConfigEntry* c) { return c != nullptr && c->launch_streamk != nullptr; }

// Whether config c runs the product swapped, as C^T = B^T A^T (gemm_cuda): a swap_nn config on an
// NN product (a_k: A row-major, b_k: B column-major) whose operand rows are 16-byte aligned.
bool runs_swapped(const ConfigEntry* c, bool a_k, bool b_k, bool vec) {
  return c != nullptr && c->swap_nn && a_k && !b_k && vec;
}

// The sgemm_kernel configs. Index 0 is the main config.
const ConfigEntry kConfigs[] = {
    entry<CfgMain>("128x128x8_w64x32_t8x8"),
    entry<CfgBK16>("128x128x16_w64x32_t8x8"),
    entry<CfgW32x64>("128x128x8_w32x64_t8x8"),
    entry<CfgOcc1>("128x128x16_w64x32_t8x8_occ1"),
    entry<CfgMid>("128x64x16_w64x32_t8x8"),
    entry<CfgSmall>("64x64x16_w32x32_t8x4"),
    entry<CfgWide>("128x256x8_w64x64_t8x16"),
    entry<CfgTall>("256x128x8_w64x64_t16x8"),
    entry<CfgW64x64>("128x128x16_w64x64_t8x16"),
    entry<CfgRingWide>("ring3_128x256x8_w64x64_t8x16"),
    entry<CfgRingTall>("ring3_256x128x8_w64x64_t16x8"),
    entry<CfgRingWideRowFma>("ring3_128x256x8_w64x64_t8x16_rowfma"),
    entry<CfgRingTallRowFma>("ring3_256x128x8_w64x64_t16x8_rowfma"),
    entry<CfgRingTall, true>("ring3_256x128x8_w64x64_t16x8_swapnn"),
};
constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);
constexpr int kMainConfig = 0;
// Smaller tiles for outputs that leave SMs idle and cannot split K (choose_config).
constexpr int kMidConfig = 4, kSmallConfig = 5;  // 128x64x16_w64x32_t8x8, 64x64x16_w32x32_t8x4

// The combined table: index i < kNumConfigs is kConfigs[i] (sgemm_kernel), the others are the
// multistage entries ms_entry(i - kNumConfigs) (sgemm_multistage_cuda.cu), which include the
// ladder-step configs (not listed by name: not every layout is instantiated for them).
struct ResolvedConfig {
  const char* name;
  int bm, bn, bk, min_blocks;
  const ConfigEntry* legacy;  // sgemm_kernel config, or nullptr
  const MsEntry* ms;          // multistage config, or nullptr
};

ResolvedConfig resolve_config(int index) {
  if (index < kNumConfigs) {
    const ConfigEntry& c = kConfigs[index];
    return ResolvedConfig{c.name, c.bm, c.bn, c.bk, c.min_blocks, &c, nullptr};
  }
  const MsEntry& e = ms_entry(index - kNumConfigs);
  return ResolvedConfig{e.name, e.bm, e.bn, e.bk, e.min_blocks, nullptr, &e};
}

// The sgemm_kernel config with the block tile of a multistage config: what runs when an operand
// row is not 16-byte aligned (cp.async copies whole aligned 16-byte chunks).
const ConfigEntry& unaligned_fallback(int bm, int bn) {
  for (const ConfigEntry& c : kConfigs)
    if (c.bm == bm && c.bn == bn) return c;
  return kConfigs[kMainConfig];
}

// The ring configs' blocked sums: K per block. Error against float64 on an H100, as a fraction
// of one straight sum's: cuBLAS 0.58x on 4097 x 4095 x 4099, 0.70x on the TN products at K = 4096
// and 8192, about 1x elsewhere (1.13x at 2048^3); blocks of 1024 give 1 / sqrt(K / 1024): 0.5x at
// K = 4096, 0.35x at 8192, 0.71x at 2048, none up to 1024. They cost 0.3-0.5% at 2048^3 to
// 8192^3; 4 blocks whatever K (256 of K per block at 1024) cost 1.6% at 2048^3, where one flush,
// about a slice's time, is a larger share.
constexpr int64_t kSumBlockK = 1024;
// Split-K applies when the output is too small to fill the GPU and K is at least this long.
constexpr int64_t kSplitKMinK = 2048;
// Each split keeps at least this much K, so its partial-sum write stays small next to its math.
constexpr int64_t kSplitKMinSlice = 256;
constexpr int kSplitKMax = 16;

// ---- the measured dispatch table (sgemm_table.inc, written by scripts/sgemm_sweep.py --emit) ----

// One measured shape: the config (any name of the combined table) and split-K factor that ran it
// fastest. layout: "NN", "NT", "TN" or "TT" (A then B; T = column-major, e.g. a.t() or linear's
// weight as B). fixup: the splits are added up by the ring configs' stream-K kernel itself (the
// last block of each tile), not by a partial-sum tensor and a second kernel.
struct SgemmTableRow {
  int64_t M, N, K;
  const char* layout;
  const char* config;
  int splits;
  bool fixup;
};

const SgemmTableRow kSgemmTable[] = {
#include "gemm/sgemm_table.inc"
};
constexpr int kSgemmTableRows = sizeof(kSgemmTable) / sizeof(kSgemmTable[0]);

// Index of the config that table row r names, resolved once.
int table_config(int r) {
  static const std::vector<int> indices = [] {
    std::vector<int> v;
    for (const SgemmTableRow& row : kSgemmTable) {
      const int c = find_config(row.config);
      TORCH_CHECK(c >= 0, "cudasteps.mm: gemm/sgemm_table.inc names an unknown config '",
                  row.config, "' (regenerate it with scripts/sgemm_sweep.py --emit)");
      v.push_back(c);
    }
    return v;
  }();
  return indices[r];
}

double log2_ratio(int64_t a, int64_t b) {
  return std::fabs(std::log2(double(std::max<int64_t>(a, 1)) / double(std::max<int64_t>(b, 1))));
}

// Chooses by the measured table:
//   * the row whose shape is nearest to (M, N, K) in log2 distance |log2 M/Mr| + |log2 N/Nr| +
//     |log2 K/Kr|, plus kLayoutPenalty when its layout differs; ties go to the earlier row. The
//     penalty is large because the best config depends on the layout (with a penalty of 1/2,
//     4096^3 NT once took an NN row's config, whose copies of a column-major B were slow, and
//     ran 0.67x torch.mm against 0.87x for its own row's, 2 octaves away). The choice
//     depends only on the shape, the layout, the device's SM count and the committed table: the
//     same in every run.
//   * that row's config; its split-K factor (and fixup: how the splits are added up) when the
//     shape is exactly the row's. A shape in between whose tiles of that config leave SMs idle
//     splits K (the row's way) when K is long (>= 2048) or the row split too (K >= 512): as many
//     splits as fill one wave of resident blocks (MinBlocks per SM, every split keeping 256+ of
//     K). Otherwise it takes a smaller tile: 128x64, or 64x64
//     when even those do not fill the SMs (the rule measured before the table existed; without
//     it 1000^3 ran 128x256 tiles on 32 of 132 SMs, 0.30x torch.mm on an H100).
constexpr double kLayoutPenalty = 4.0;

void choose_config(int64_t M, int64_t N, int64_t K, bool a_k, bool b_k, int& config, int& splits,
                   bool& fixup) {
  const char layout[3] = {a_k ? 'N' : 'T', b_k ? 'T' : 'N', '\0'};
  int best = 0;
  double best_d = 0.0;
  for (int r = 0; r < kSgemmTableRows; ++r) {
    const SgemmTableRow& row = kSgemmTable[r];
    const double d = log2_ratio(M, row.M) + log2_ratio(N, row.N) + log2_ratio(K, row.K) +
                     (std::strcmp(row.layout, layout) == 0 ? 0.0 : kLayoutPenalty);
    if (r == 0 || d < best_d) {
      best = r;
      best_d = d;
    }
  }
  const SgemmTableRow& row = kSgemmTable[best];
  config = table_config(best);
  const bool exact = row.M == M && row.N == N && row.K == K && std::strcmp(row.layout, layout) == 0;
  fixup = false;
  if (exact || row.splits <= 1) {
    splits = std::max(row.splits, 1);
    fixup = row.fixup && splits > 1;
    return;
  }
  const ResolvedConfig c = resolve_config(config);
  const int64_t sms = sm_count();
  // A swap_nn config tiles the transposed product of an NN layout (taken as aligned here).
  const bool swaps = runs_swapped(c.legacy, a_k, b_k, true);
  const int64_t tiles =
      ceil_div<int64_t>(swaps ? N : M, c.bm) * ceil_div<int64_t>(swaps ? M : N, c.bn);
  splits = 1;
  if (tiles >= sms) return;
  if (K >= kSplitKMinK || (row.splits > 1 && K >= 2 * kSplitKMinSlice)) {
    const int64_t want = (int64_t(c.min_blocks) * sms) / tiles;
    splits = int(std::max<int64_t>(2, std::min<int64_t>({want, K / kSplitKMinSlice, kSplitKMax})));
    fixup = row.fixup;
    return;
  }
  const ConfigEntry& mid = kConfigs[kMidConfig];
  const bool mid_fills = ceil_div<int64_t>(M, mid.bm) * ceil_div<int64_t>(N, mid.bn) >= sms;
  config = mid_fills ? kMidConfig : kSmallConfig;
}

// ---- float64: a simple shared-memory tiled kernel (one output per thread), any strides ----

// 16 x 16 tiles: 256 threads; the +1 column removes the bank conflicts of the column reads of
// Bs (8-byte elements: a 16-double row spans 32 banks).
constexpr int kDTile = 16;

__global__ void __launch_bounds__(kDTile* kDTile)
    dgemm_tiled_kernel(const double* __restrict__ a, int64_t sa0, int64_t sa1,
                       const double* __restrict__ b, int64_t sb0, int64_t sb1,
                       double* __restrict__ out, int64_t M, int64_t N, int64_t K, double alpha,
                       double beta, const double* __restrict__ addend, int64_t s0, int64_t s1,
                       int64_t tiles_n) {
  __shared__ double As[kDTile][kDTile + 1];
  __shared__ double Bs[kDTile][kDTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t m0 = (int64_t(blockIdx.x) / tiles_n) * kDTile;
  const int64_t n0 = (int64_t(blockIdx.x) % tiles_n) * kDTile;
  const int64_t m = m0 + ty, n = n0 + tx;
  double acc = 0.0;
  for (int64_t k0 = 0; k0 < K; k0 += kDTile) {
    As[ty][tx] = (m < M && k0 + tx < K) ? a[m * sa0 + (k0 + tx) * sa1] : 0.0;
    Bs[ty][tx] = (k0 + ty < K && n < N) ? b[(k0 + ty) * sb0 + n * sb1] : 0.0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kDTile; ++k) acc = fma(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (m < M && n < N) {
    double v = alpha * acc;
    if (addend != nullptr) v += beta * addend[m * s0 + n * s1];
    out[m * N + n] = v;
  }
}

template <typename T>
void launch_epilogue(const T* partial, int splits, int64_t M, int64_t N, T* out, double alpha,
                     double beta, const Addend& add, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const auto kernel = splitk_epilogue_kernel<T>;
  const int64_t grid = persistent_grid(kernel, kThreads, M * N, kThreads);
  kernel<<<unsigned(grid), kThreads, 0, stream>>>(partial, splits, M, N, out, T(alpha), T(beta),
                                                  static_cast<const T*>(add.ptr), add.s0, add.s1);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- tensor cores: operands as the kernels read them ----

// One operand of a TcProblem: `k_major` as in TcProblem (A row-major, B column-major).
struct TcOperand {
  at::Tensor holder;
  const void* ptr = nullptr;
  int64_t ld = 0;
  bool k_major = true;
};

// The shortest leading dimension, at least `cols`, that starts every row on a 16-byte boundary.
int64_t padded_ld(int64_t cols, int64_t elem_bytes) {
  const int64_t align = 16 / elem_bytes;
  return std::max<int64_t>(ceil_div<int64_t>(cols, align) * align, align);
}

// `t` (rows x cols) read in place: row- or column-major (make_operand copies other strides). A
// leading dimension that never steps (one row of a row-major matrix) is set to a 16-byte multiple
// so that alignment checks look at what matters.
TcOperand tc_operand(const at::Tensor& t, bool is_b) {
  const Operand o = make_operand(t);
  TcOperand r;
  r.holder = o.holder;
  r.ptr = o.ptr;
  r.ld = o.ld;
  r.k_major = is_b ? o.col_major : !o.col_major;
  const int64_t stepped = o.col_major ? t.size(1) : t.size(0);
  const int64_t contiguous = o.col_major ? t.size(0) : t.size(1);
  if (stepped <= 1) r.ld = padded_ld(contiguous, t.element_size());
  return r;
}

bool tc_operand_aligned(const TcOperand& o, int64_t elem_bytes) {
  return tc_rows_16b_aligned(o.ptr, o.ld, elem_bytes);
}

// `t` rewritten into a fresh buffer whose rows are padded to 16 bytes, in the layout `k_major`
// asks for (A row-major / B column-major when true): cudasteps::copy_ when that is the layout
// `current` already has (one pass), cudasteps::transpose_ when it flips it (one pass, or two when
// the rows are padded: transpose_ writes a non-contiguous out through a contiguous buffer).
TcOperand tc_repack(const at::Tensor& t, const TcOperand& current, bool is_b, bool k_major) {
  static const auto copy_op = typed_op<void(at::Tensor&, const at::Tensor&)>("copy_");
  static const auto transpose_op = typed_op<void(at::Tensor&, const at::Tensor&)>("transpose_");
  // The operand as a [stepped, contiguous] view in the storage order asked for.
  const bool col_major = is_b ? k_major : !k_major;
  const at::Tensor rows_view = col_major ? t.t() : t;
  const int64_t rows = rows_view.size(0), cols = rows_view.size(1);
  const int64_t ld = padded_ld(cols, t.element_size());
  at::Tensor buf = at::empty({rows, ld}, t.options());
  at::Tensor window = buf.narrow(1, 0, cols);
  if (current.k_major == k_major) {
    copy_op.call(window, rows_view);
  } else {
    // rows_view.t() is `t` in its own storage order: the transpose kernel reads it in place.
    transpose_op.call(window, rows_view.t());
  }
  TcOperand r;
  r.holder = buf;
  r.ptr = buf.const_data_ptr();
  r.ld = ld;
  r.k_major = k_major;
  return r;
}

const char* tc_kernel_name(TcKernel k) {
  switch (k) {
    case TcKernel::kMma: return "tc:mma";
    case TcKernel::kCpAsync: return "tc:ldmatrix_cp_async";
    case TcKernel::kWgmma: return "tc:wgmma";
    case TcKernel::kWgmmaTma: return "tc:wgmma_tma";
    case TcKernel::kWsPersistent: return "tc:ws_persistent";
    case TcKernel::kWsMulticast: return "tc:ws_multicast";
    case TcKernel::kWsPingPong: return "tc:ws_pingpong";
    case TcKernel::kWsTf32Rs: return "tc:ws_tf32_rs";
    default: return "tc:final";
  }
}

bool is_hopper_kernel(TcKernel k) {
  return k == TcKernel::kWgmma || k == TcKernel::kWgmmaTma || k == TcKernel::kWsPersistent ||
         k == TcKernel::kWsMulticast || k == TcKernel::kWsPingPong || k == TcKernel::kWsTf32Rs ||
         k == TcKernel::kFinal;
}

bool rows_16b_aligned(const Operand& o) { return is_aligned(o.ptr, 16) && o.ld % 4 == 0; }

// Repacking unaligned operands for the multistage kernel pays when the product's FLOPs are at least
// this many times the bytes the copies move (read + write). An H100 does ~17 FP32 FLOP per byte of
// DRAM bandwidth (66.9 TFLOP/s, 3.35 TB/s), so the pass then costs at most ~4% of the product at
// peak: less than the multistage kernel is expected to gain over the scalar-load path. The sweep
// measures the forced multistage configs with the repack included (4097x4095x4099).
constexpr int64_t kRepackMinFlopsPerByte = 400;

bool worth_repacking(int64_t M, int64_t N, int64_t K, int64_t repacked_elems) {
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double bytes = 2.0 * sizeof(float) * double(repacked_elems);
  return flops >= double(kRepackMinFlopsPerByte) * bytes;
}

// `o` (float32, the Operand of `t`) copied into a buffer whose rows start on 16-byte boundaries,
// in the same storage order (tc_repack with the layout kept: one cudasteps::copy_ pass).
Operand repack_rows(const at::Tensor& t, const Operand& o, bool is_b) {
  TcOperand current;
  current.holder = o.holder;
  current.ptr = o.ptr;
  current.ld = o.ld;
  // tc_repack's k_major: A row-major, B column-major.
  current.k_major = is_b ? o.col_major : !o.col_major;
  const TcOperand r = tc_repack(t, current, is_b, current.k_major);
  Operand out;
  out.holder = r.holder;
  out.ptr = r.ptr;
  out.ld = r.ld;
  out.col_major = o.col_major;
  return out;
}

}  // namespace

TcType tc_type_of(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return TcType::kBF16;
  if (dtype == at::kHalf) return TcType::kFP16;
  return TcType::kTF32;
}

at::Tensor tc_gemm_cuda(const at::Tensor& a_t, const at::Tensor& b_t, const Addend& add_in,
                        double alpha, double beta, TcType type, TcKernel kernel,
                        int cp_async_config, TcTuning tuning) {
  const int64_t M = a_t.size(0), K = a_t.size(1), N = b_t.size(1);
  at::Tensor out = at::empty({M, N}, a_t.options().memory_format(at::MemoryFormat::Contiguous));
  if (M == 0 || N == 0) return out;
  const c10::cuda::CUDAGuard guard(a_t.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Addend add = add_in;
  if (beta == 0.0) add.ptr = nullptr;
  if (K == 0) {  // alpha * (empty sum) + beta * C, computed in fp32 and rounded once
    if (add.ptr == nullptr) return out.zero_();
    return out.copy_(add.holder.to(at::kFloat).mul(beta).expand({M, N}));
  }

  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  CUDASTEPS_CHECK(prop->major >= 8, "mm", "tensor-core GEMM (", a_t.scalar_type(),
                  ") needs a GPU of compute capability 8.0 or newer, got ", prop->major, ".",
                  prop->minor, " (", prop->name, ")");
  const int64_t eb = a_t.element_size();
  TcOperand a = tc_operand(a_t, false);
  TcOperand b = tc_operand(b_t, true);

  if (kernel == TcKernel::kAuto) {
    kernel = tc_hopper_available() ? TcKernel::kFinal : TcKernel::kCpAsync;
  }
  if (is_hopper_kernel(kernel)) {
    CUDASTEPS_CHECK(tc_hopper_available(), "ladder_mm", tc_kernel_name(kernel),
                    " needs a compute capability 9.0 GPU and a build for it (sm_90a), got ",
                    prop->major, ".", prop->minor);
    // TF32 wgmma reads shared-memory operands K-major only (bf16/fp16 are read in place either
    // way). tc:ws_tf32_rs, and tc:final where the output needs no split-K, read one MN-major
    // operand through registers: of two, B is transposed once by cudasteps::transpose. For the
    // other kernels each MN-major operand is transposed.
    const bool rs = kernel == TcKernel::kWsTf32Rs ||
                    (kernel == TcKernel::kFinal && tc_hopper_tf32_rs_wanted(M, N, K));
    if (type == TcType::kTF32 && rs) {
      if (!a.k_major && !b.k_major) b = tc_repack(b_t, b, true, true);
      CUDASTEPS_CHECK(kernel == TcKernel::kFinal || !(a.k_major && b.k_major), "ladder_mm",
                      "tc:ws_tf32_rs reads one operand MN-major (self column-major or mat2 "
                      "row-major), got self row-major and mat2 column-major: tc:ws_persistent "
                      "reads that layout");
    } else if (type == TcType::kTF32) {
      if (!a.k_major) a = tc_repack(a_t, a, false, true);
      if (!b.k_major) b = tc_repack(b_t, b, true, true);
    }
  }
  if (kernel != TcKernel::kMma) {
    if (!tc_operand_aligned(a, eb)) a = tc_repack(a_t, a, false, a.k_major);
    if (!tc_operand_aligned(b, eb)) b = tc_repack(b_t, b, true, b.k_major);
  }

  TcProblem p;
  p.type = type;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a = a.ptr;
  p.lda = a.ld;
  p.a_kmajor = a.k_major;
  p.b = b.ptr;
  p.ldb = b.ld;
  p.b_kmajor = b.k_major;
  p.out = out.data_ptr();
  p.ldo = N;
  p.alpha = float(alpha);
  p.beta = float(beta);
  p.addend = add.ptr;
  p.add_s0 = add.s0;
  p.add_s1 = add.s1;
  p.tuning = tuning;

  if (is_hopper_kernel(kernel) && !tc_hopper_supports(p)) {
    // Sizes past the TMA's 32-bit coordinates: a forced ladder step refuses, the dispatcher
    // takes the sm_80 path.
    CUDASTEPS_CHECK(kernel == TcKernel::kFinal, "ladder_mm", tc_kernel_name(kernel),
                    " cannot take a [", M, ", ", K, "] x [", K, ", ", N, "] product");
    kernel = TcKernel::kCpAsync;
  }
  if (kernel == TcKernel::kCpAsync && !tc_cp_async_supports(p)) {
    // A layout the cp.async kernel does not read (tf32 MN-major): transpose to K-major.
    if (!p.a_kmajor) {
      a = tc_repack(a_t, a, false, true);
      p.a = a.ptr, p.lda = a.ld, p.a_kmajor = true;
    }
    if (!p.b_kmajor) {
      b = tc_repack(b_t, b, true, true);
      p.b = b.ptr, p.ldb = b.ld, p.b_kmajor = true;
    }
    CUDASTEPS_CHECK(tc_cp_async_supports(p), "ladder_mm", tc_kernel_name(kernel),
                    " cannot read these operands");
  }
  switch (kernel) {
    case TcKernel::kMma: tc_mma_launch(p, stream); break;
    case TcKernel::kCpAsync: tc_cp_async_launch(p, cp_async_config, stream); break;
    case TcKernel::kWgmma: tc_wgmma_launch(p, stream); break;
    case TcKernel::kWgmmaTma: tc_wgmma_tma_launch(p, stream); break;
    case TcKernel::kWsPersistent: tc_ws_persistent_launch(p, stream); break;
    case TcKernel::kWsMulticast: tc_ws_multicast_launch(p, stream); break;
    case TcKernel::kWsPingPong: tc_ws_pingpong_launch(p, stream); break;
    case TcKernel::kWsTf32Rs: tc_ws_tf32_rs_launch(p, stream); break;
    default: tc_hopper_final_launch(p, stream); break;
  }
  return out;
}

namespace {

// The op-level choice: tensor cores for bf16/fp16, and for float32 when TF32 is allowed.
at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                       double beta) {
  const auto dtype = a.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16 ||
      (dtype == at::kFloat && at::globalContext().allowTF32CuBLAS())) {
    return tc_gemm_cuda(a, b, add, alpha, beta, tc_type_of(dtype));
  }
  return gemm_cuda(a, b, add, alpha, beta);
}

}  // namespace

int find_config(const std::string& name) {
  for (int i = 0; i < kNumConfigs; ++i)
    if (name == kConfigs[i].name) return i;
  for (int i = 0; i < ms_num_entries(); ++i)
    if (ms_entry(i).all_layouts && name == ms_entry(i).name) return kNumConfigs + i;
  return -1;
}

int find_ladder_step_config(const std::string& step) {
  for (int i = 0; i < ms_num_entries(); ++i)
    if (!ms_entry(i).all_layouts && step == ms_entry(i).name) return kNumConfigs + i;
  return -1;
}

int main_config() { return kMainConfig; }

std::string config_names() {
  std::string names;
  for (int i = 0; i < kNumConfigs; ++i) {
    if (i) names += ", ";
    names += kConfigs[i].name;
  }
  for (int i = 0; i < ms_num_entries(); ++i)
    if (ms_entry(i).all_layouts) names += std::string(", ") + ms_entry(i).name;
  return names;
}

// The stream-K tail pays when at least one full wave of tiles runs and the last wave leaves at
// least a tenth of the SMs idle, and each block sharing the tail keeps 32+ K slices (a part's
// write-out and the last part's sums cost about as much as 10-20 slices). Measured on an H100
// (ring3_256x128x8, 132 SMs, against the same config without it): 8192^3 (15 waves + 68 tiles)
// +2.5%, 16384x4096x4096 NT +2.7%, 4097x4095x4099 (4 waves + 16) +16%, 4096^3 (3 + 116) +0.4%.
// Below one wave it loses: 2048^3 (128 tiles) ran 7% slower shared over 132 blocks.
bool streamk_pays(int64_t tiles, int64_t sms, int64_t iters_per_tile) {
  const int64_t tail = tiles % sms;
  return tiles > sms && tail > 0 && tail * 10 <= sms * 9 && tail * iters_per_tile >= 32 * sms;
}

at::Tensor gemm_cuda(const at::Tensor& a_t, const at::Tensor& b_t, const Addend& add_in,
                     double alpha, double beta, int force_config, int force_splits,
                     StreamK streamk, bool blocked_sums) {
  const int64_t M = a_t.size(0), K = a_t.size(1), N = b_t.size(1);
  at::Tensor out = at::empty({M, N}, a_t.options().memory_format(at::MemoryFormat::Contiguous));
  if (M == 0 || N == 0) return out;
  const c10::cuda::CUDAGuard guard(a_t.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // beta == 0 ignores the addend entirely (NaN in it does not propagate), as torch.addmm does.
  Addend add = add_in;
  if (beta == 0.0) add.ptr = nullptr;
  const bool is_float = a_t.scalar_type() == at::kFloat;

  if (K == 0) {  // alpha * (empty sum) + beta * C
    if (is_float) {
      launch_epilogue<float>(nullptr, 0, M, N, out.data_ptr<float>(), alpha, beta, add, stream);
    } else {
      launch_epilogue<double>(nullptr, 0, M, N, out.data_ptr<double>(), alpha, beta, add, stream);
    }
    return out;
  }

  if (!is_float) {
    const int64_t tiles_n = ceil_div<int64_t>(N, kDTile);
    const int64_t tiles = ceil_div<int64_t>(M, kDTile) * tiles_n;
    CUDASTEPS_CHECK(tiles <= INT_MAX, "mm", "the float64 output [", M, ", ", N,
                    "] must have at most 2^31 - 1 tiles of 16 x 16, got ", tiles);
    dgemm_tiled_kernel<<<unsigned(tiles), dim3(kDTile, kDTile), 0, stream>>>(
        a_t.const_data_ptr<double>(), a_t.stride(0), a_t.stride(1), b_t.const_data_ptr<double>(),
        b_t.stride(0), b_t.stride(1), out.data_ptr<double>(), M, N, K, alpha, beta,
        static_cast<const double*>(add.ptr), add.s0, add.s1, tiles_n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
  }

  // The kernel tracks the K extent left in a 32-bit register.
  CUDASTEPS_CHECK(K <= int64_t(INT_MAX) - 64, "mm", "the inner dimension K must be below 2^31 - 64 ",
                  "for float32, got ", K);
  Operand a = make_operand(a_t);
  Operand b = make_operand(b_t);
  bool vec = rows_16b_aligned(a) && rows_16b_aligned(b);

  const bool a_k = !a.col_major;  // row-major A is contiguous along K
  const bool b_k = b.col_major;   // column-major B is contiguous along K
  int config = force_config, splits = force_splits;
  if (config < 0) {
    int auto_splits = 1;
    bool fixup = false;
    choose_config(M, N, K, a_k, b_k, config, auto_splits, fixup);
    if (splits <= 0) {
      splits = auto_splits;
      if (fixup) streamk = StreamK::kOn;  // split-K with the in-kernel fix-up (below)
    }
  }
  if (splits <= 0) splits = 1;
  const ResolvedConfig chosen = resolve_config(config);
  // The multistage kernel copies aligned 16-byte chunks. Operands whose rows are not 16-byte
  // aligned (K = 4099, a storage offset) are copied into padded rows when the product hides that
  // pass (worth_repacking), else they take the sgemm_kernel config with the same block tile (its
  // scalar-load instantiation). The ring's scalar-copy instantiation runs them, but slower than the
  // aligned one plus the pass, which also lets an NN product run swapped, so the ring repacks them
  // too (4097 x 4095 x 4099 on an H100: 3.17 ms with the scalar copies, 2.94 ms repacked; cuBLAS
  // 3.03 ms).
  if ((chosen.ms != nullptr || is_ring(chosen.legacy)) && !vec) {
    const int64_t a_elems = rows_16b_aligned(a) ? 0 : M * K;
    const int64_t b_elems = rows_16b_aligned(b) ? 0 : K * N;
    if (worth_repacking(M, N, K, a_elems + b_elems)) {
      if (a_elems) a = repack_rows(a_t, a, false);
      if (b_elems) b = repack_rows(b_t, b, true);
      vec = true;
    }
  }
  const ConfigEntry* legacy = chosen.legacy;
  if (chosen.ms != nullptr && !vec) legacy = &unaligned_fallback(chosen.bm, chosen.bn);
  const int bm = legacy ? legacy->bm : chosen.bm, bn = legacy ? legacy->bn : chosen.bn;
  const int bk = legacy ? legacy->bk : chosen.bk;
  // A swap_nn config runs an aligned NN product C = A B as C^T = B^T A^T: B^T is a column-major
  // [N, K] and A^T a column-major [K, M], read by the TT instantiation, which stores C^T
  // transposed, i.e. C. Its only transposing copies are those of A^T, on the BN side of the tile
  // (128 of 256x128) instead of the BM side. The sums are the same, bit for bit (each output's
  // FFMAs in the same k order); the tiles and the stream-K tail's parts are those of the [N, M]
  // product.
  const bool swapped = runs_swapped(legacy, a_k, b_k, vec);
  const int64_t pm = swapped ? N : M, pn = swapped ? M : N;  // the kernel's product: [pm, pn]

  SgemmParams p{};
  p.a = static_cast<const float*>(swapped ? b.ptr : a.ptr);
  p.b = static_cast<const float*>(swapped ? a.ptr : b.ptr);
  p.lda = swapped ? b.ld : a.ld;
  p.ldb = swapped ? a.ld : b.ld;
  p.M = pm;
  p.N = pn;
  p.K = K;
  const int64_t tiles_m = ceil_div<int64_t>(pm, bm), tiles_n = ceil_div<int64_t>(pn, bn);
  CUDASTEPS_CHECK(tiles_m * tiles_n <= INT_MAX, "mm", "the output [", M, ", ", N,
                  "] must have at most 2^31 - 1 tiles of ", bm, " x ", bn, ", got ",
                  tiles_m * tiles_n);
  p.tiles_m = int(tiles_m);
  p.tiles_n = int(tiles_n);
  // The ring's blocked sums (gemm_tiles.cuh), where the device has the shared memory for them.
  if (blocked_sums && is_ring(legacy) && smem_fits(legacy->sum_smem_bytes)) {
    p.sum_block_slices = int(kSumBlockK / bk);
  }
  const int64_t sms = sm_count(), tiles = tiles_m * tiles_n;
  const int64_t iters_per_tile = ceil_div<int64_t>(K, bk);
  // Split-K with the fix-up in the kernel (streamk kOn with splits > 1, a ring config): every tile
  // is shared by `parts` blocks of the stream-K kernel, and the block that writes a tile's last
  // part adds up the parts in fixed order and stores the tile. No partial-sum tensor and no second
  // kernel; but that last block's sum of a whole tile is one SM's work, where the separate pass
  // spreads it over all of them: on an H100 at 1024^3 (32 tiles of 256x128, 4 parts) it ran
  // 63.7 us against 53.4 + 5.1 us for split-K and its pass, and 1-2% behind on the skinny shapes,
  // so the sweep has not chosen it.
  int parts = 1;
  if (splits > 1 && streamk == StreamK::kOn && is_ring(legacy)) {
    parts = int(std::min<int64_t>(splits, iters_per_tile));
    splits = 1;
    // Two tile-sized workspace slots per block: keep the blocks to a few waves.
    CUDASTEPS_CHECK(tiles * parts <= 8 * sms, "mm", "split-K with the in-kernel fix-up needs ",
                    "tiles x parts <= 8 x SMs (", 8 * sms, "), got ", tiles, " x ", parts);
  }
  // K slices per split: whole BK slices, and no empty split.
  p.k_per_split = ceil_div<int64_t>(ceil_div<int64_t>(K, splits), bk) * bk;
  splits = int(ceil_div<int64_t>(K, p.k_per_split));

  at::Tensor partial;
  if (splits == 1) {
    p.out = out.data_ptr<float>();
    p.out_split_stride = 0;
    p.addend = static_cast<const float*>(add.ptr);
    p.add_s0 = swapped ? add.s1 : add.s0;
    p.add_s1 = swapped ? add.s0 : add.s1;
    p.alpha = float(alpha);
    p.beta = float(beta);
  } else {
    // Deterministic split-K: each split writes its own partial sums, one pass adds them in split
    // order (no atomics).
    partial = at::empty({splits, M, N}, out.options());
    p.out = partial.data_ptr<float>();
    p.out_split_stride = M * N;
    p.addend = nullptr;
    p.alpha = 1.f;
    p.beta = 0.f;
  }
  // The stream-K tail: the full waves' tiles, then the last wave's K iterations shared by one block
  // per SM (gemm_tiles.cuh); or, split-K with the in-kernel fix-up, every tile's iterations shared
  // by `parts` blocks each. Its workspace: two tile-sized slots per block and a counter per shared
  // tile.
  const int64_t tail = tiles < sms ? tiles : tiles % sms;
  const bool use_streamk =
      parts > 1 || (is_ring(legacy) && splits == 1 && tail > 0 &&
                    (streamk == StreamK::kOn ||
                     (streamk == StreamK::kAuto && streamk_pays(tiles, sms, iters_per_tile))));
  if (use_streamk) {
    const int64_t shared = parts > 1 ? tiles : tail;
    StreamKParams sk{};
    sk.dp_tiles = int(tiles - shared);
    sk.iters_per_tile = int(iters_per_tile);
    sk.iters = shared * iters_per_tile;
    sk.blocks = int(std::min<int64_t>(parts > 1 ? shared * parts : sms, sk.iters));
    const at::Tensor workspace = at::empty({int64_t(sk.blocks) * 2 * bm * bn}, out.options());
    const at::Tensor counters = at::zeros({shared}, out.options().dtype(at::kInt));
    sk.workspace = workspace.data_ptr<float>();
    sk.counters = counters.data_ptr<int>();
    legacy->launch_streamk(p, sk, a_k, b_k, vec, swapped, stream);
  } else if (legacy != nullptr) {
    legacy->launch(p, a_k, b_k, vec, swapped, splits, stream);
  } else {
    chosen.ms->launch(p, a_k, b_k, splits, stream);
  }
  if (splits > 1) {
    launch_epilogue<float>(partial.const_data_ptr<float>(), splits, M, N, out.data_ptr<float>(),
                           alpha, beta, add, stream);
  }
  return out;
}

namespace {

at::Tensor mm_cuda(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm_pair(self, mat2, "mm", "self", "mat2");
  return matmul_cuda(self, mat2, Addend{}, 1.0, 0.0);
}

at::Tensor addmm_cuda(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha) {
  check_mm_pair(mat1, mat2, "addmm", "mat1", "mat2");
  check_addmm_self(self, mat1, mat1.size(0), mat2.size(1));
  const double beta_d = beta.toDouble();
  Addend add;
  if (beta_d != 0.0) add = make_addend(self, mat1.size(0), mat2.size(1));
  return matmul_cuda(mat1, mat2, add, alpha.toDouble(), beta_d);
}

at::Tensor linear_cuda(const at::Tensor& input, const at::Tensor& weight,
                       const c10::optional<at::Tensor>& bias) {
  check_linear_args(input, weight, bias);
  const int64_t N = weight.size(0);
  const at::Tensor x = flatten_input(input);
  Addend add;
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) add = make_bias_addend(*bias, N);
  // weight.t() is a column-major (K-major) [K, N] view: read in place by every kernel.
  at::Tensor out = matmul_cuda(x, weight.t(), add, 1.0, has_bias ? 1.0 : 0.0);
  return out.view(linear_out_shape(input, N));
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("mm", &gemm::mm_cuda);
  m.impl("addmm", &gemm::addmm_cuda);
  m.impl("linear", &gemm::linear_cuda);
}

}  // namespace cudasteps
