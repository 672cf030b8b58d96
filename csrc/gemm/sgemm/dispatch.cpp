// The SGEMM path's dispatcher (gemm_cuda): the tuned SGEMMs (kernel.cuh: register-staged double buffer, or a
// cp.async ring into k-major tiles; multistage.cuh: multistage cp.async ring into
// layout-preserving tiles) behind one config table, chosen per shape from a measured table
// (table.inc), a simple tiled float64 kernel, and deterministic split-K.
//
// Layouts. Each operand is read in place when one of its strides is 1 (row- or column-major, with
// any leading dimension): the kernel template is instantiated for all four combinations (NN, NT,
// TN, TT), so a.t() or linear's weight costs no copy. Other strides go through cudasteps::copy.
// Operands whose base pointer is not 16-byte aligned or whose leading dimension is not a multiple
// of 4 take sgemm_kernel's scalar-load instantiation (Vec = false; in the cp.async ring, 4-byte
// copies); the math is the same. A ring config runs on a copy of such operands with padded rows
// when the product is large enough (worth_repacking), else its own scalar-copy instantiation. The
// configs only the ladder and the sweep run (the multistage configs and the ring's `_rowfma`
// twins) are built for row-major, aligned operands alone: any other operand is copied into that
// layout first.
//
// Config table: the sgemm_kernel configs (config_entry, in dispatch_kernels.cu), then the
// multistage configs of multistage_configs.cu (names cp<stages>_...); the `cfg:<name>` ladder
// variants run each one by name. The sgemm_kernel configs:
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
// The ring configs add the stream-K tail (kernel.cuh) where streamk_pays: the last, partial
// wave of tiles shared over all SMs by K iterations, with a deterministic fix-up.
// Choice (choose_config): the nearest row of the measured table table.inc (written by
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
// TF32 wgmma reads shared-memory operands K-major only: MN-major TF32 operands (mm's row-major B)
// are written K-major into such a buffer by cudasteps::transpose_ (one pass when the rows need no
// padding; into padded rows transpose_ stages through a contiguous buffer, a second pass), except
// that on Hopper one MN-major operand is read in place through registers by tc:ws_tf32_rs, unless
// its output has too few tiles to fill the SMs and the operand is narrow enough to transpose
// cheaply (tc_hopper_tf32_rs_wanted has the figures).
//
// Host code only, so a C++ unit, not a CUDA one (the host compiler alone, not nvcc's extra passes
// over ATen's headers; empty in a build without CUDA): the kernels and the config table's launch
// entries are dispatch_kernels.cu's, reached through launch.h. Also the host side of the ladder's
// first steps (sgemm_ladder_step_cuda; kernels in ladder_steps.cu).
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/checks.h"
#include "common/launch.cuh"
#include "gemm/gemm_cuda.h"
#include "gemm/sgemm/launch.h"
#include "gemm/sgemm/multistage.h"

namespace cudasteps {
namespace gemm {
namespace {

// Whether config c is a ring config (Stages >= 3): the stream-K kernel, the blocked sums.
bool is_ring(const ConfigEntry* c) { return c != nullptr && c->launch_streamk != nullptr; }

// Whether config c runs the product swapped, as C^T = B^T A^T (gemm_cuda): a swap_nn config on an
// NN product (a_k: A row-major, b_k: B column-major) whose operand rows are 16-byte aligned.
bool runs_swapped(const ConfigEntry* c, bool a_k, bool b_k, bool vec) {
  return c != nullptr && c->swap_nn && a_k && !b_k && vec;
}

// The combined table: index i < num_configs() is config_entry(i) (sgemm_kernel), the others are
// the multistage entries ms_entry(i - num_configs()) (multistage_configs.cu), which include the
// ladder-step configs (not listed by name: not every layout is instantiated for them).
struct ResolvedConfig {
  const char* name;
  int bm, bn, bk, min_blocks;
  const ConfigEntry* legacy;  // sgemm_kernel config, or nullptr
  const MsEntry* ms;          // multistage config, or nullptr
};

ResolvedConfig resolve_config(int index) {
  if (index < num_configs()) {
    const ConfigEntry& c = config_entry(index);
    return ResolvedConfig{c.name, c.bm, c.bn, c.bk, c.min_blocks, &c, nullptr};
  }
  const MsEntry& e = ms_entry(index - num_configs());
  return ResolvedConfig{e.name, e.bm, e.bn, e.bk, e.min_blocks, nullptr, &e};
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
// Each split keeps about this much K or more (K / this, rounded to the nearest, caps the splits of
// a shape between the table's rows), so its partial-sum write stays small next to its math.
constexpr int64_t kSplitKMinSlice = 256;
constexpr int kSplitKMax = 16;

// ---- the measured dispatch table (table.inc, written by scripts/sgemm_sweep.py --emit) ----

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
#include "gemm/sgemm/table.inc"
};
constexpr int kSgemmTableRows = sizeof(kSgemmTable) / sizeof(kSgemmTable[0]);

// Index of the config that table row r names, resolved once.
int table_config(int r) {
  static const std::vector<int> indices = [] {
    std::vector<int> v;
    for (const SgemmTableRow& row : kSgemmTable) {
      const int c = find_config(row.config);
      TORCH_CHECK(c >= 0, "cudasteps.mm: gemm/sgemm/table.inc names an unknown config '",
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
//     shape is exactly the row's. A shape in between whose tiles of that config leave more than
//     an eighth of the SMs idle splits K (the row's way) when K is long (>= 2048) or the row
//     split too (K >= 512), by splits_filling_waves (every split keeping 256+ of K); whether or
//     not the row itself split: a row that did not (4096^3 NT, nearest to the 1024 x 1024 x 4096
//     linear and weight gradients) once left such shapes on 32 of 132 SMs, 0.25-0.28x torch.mm
//     on an H100.
//     Otherwise it takes a smaller tile: 128x64, or 64x64 when even those do not fill the SMs
//     (the rule measured before the table existed; without it 1000^3 ran 128x256 tiles on 32 of
//     132 SMs, 0.30x torch.mm on an H100).
constexpr double kLayoutPenalty = 4.0;

// The split-K factor (1 .. max_splits) for `tiles` output tiles on `slots` resident blocks (SMs x
// blocks per SM) that takes the fewest waves of work per split: ceil(tiles * s / slots) / s, the
// smallest s on ties (each split adds a partial sum to write and add). 32 tiles on 132 slots: 4
// (one wave of 128 blocks, each a quarter of K); 128 tiles: 1 (2 splits would take two waves of
// half-K blocks, no faster, plus the partial sums).
int splits_filling_waves(int64_t tiles, int64_t slots, int max_splits) {
  int best = 1;
  int64_t best_num = ceil_div<int64_t>(tiles, slots), best_den = 1;  // waves / splits
  for (int s = 2; s <= max_splits; ++s) {
    const int64_t waves = ceil_div<int64_t>(tiles * s, slots);
    if (waves * best_den < best_num * s) {  // waves / s < best_num / best_den
      best = s;
      best_num = waves;
      best_den = s;
    }
  }
  return best;
}

// The 256 x 128 ring (the table's config for most shapes) and its 128 x 256 twin: where M is an
// odd multiple of 128, the twin's tiles can fill their waves where the tall tiles leave a partial
// last one. Measured on an H100 (2026-11-28, fp32 NT, scripts/sgemm_sweep.py --shapes, us): 4224 x
// 4096 x 512, 544 tall tiles (4 waves + 16 tiles, the stream-K tail) 415.6, 528 wide tiles (4 full
// waves) 386.8 [cuBLAS 362.7]. At equal waves the twin runs 2-7% slower (sweep.json: 4096^3 NT
// 2827 against 2642 us, NN 2781 / 2719, TN 2727 / 2661), so it is taken only where it saves a wave
// of at most 14: 15 waves of it cost more than the tall tiles' 14 + a tail.
constexpr const char* kRingTall = "ring3_256x128x8_w64x64_t16x8";
constexpr const char* kRingWide = "ring3_128x256x8_w64x64_t8x16";

// tiles: config's tiles of the M x N output (choose_config has them).
void take_wide_twin_if_fewer_waves(int64_t M, int64_t N, int64_t tiles, int64_t sms,
                                   int& config) {
  static const int tall = find_config(kRingTall), wide = find_config(kRingWide);
  if (config != tall || wide < 0) return;  // (the _swapnn config tiles NN products transposed)
  const ResolvedConfig w = resolve_config(wide);
  const int64_t wide_tiles = ceil_div<int64_t>(M, w.bm) * ceil_div<int64_t>(N, w.bn);
  if (15 * ceil_div<int64_t>(wide_tiles, sms) < 14 * ceil_div<int64_t>(tiles, sms)) config = wide;
}

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
  if (exact) {
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
  // Tiles that fill all but an eighth of the SMs keep the row's config, unsplit (splitting them
  // takes as many waves: splits_filling_waves). 128 tiles of 256 x 128 on an H100's 132 SMs (the
  // 1024 x 4096 x 1024 products of an FFN with 1024 rows, forward and backward) went to 128 x 64
  // tiles before, at about half cuBLAS's speed in a training step. The 256 x 128 ring gives way to
  // its 128 x 256 twin where that takes fewer waves.
  if (8 * tiles >= 7 * sms) {
    take_wide_twin_if_fewer_waves(M, N, tiles, sms, config);
    return;
  }
  if (K >= kSplitKMinK || (row.splits > 1 && K >= 2 * kSplitKMinSlice)) {
    // K / kSplitKMinSlice rounded to the nearest (slices of at least about 0.9 x 256): K = 1000
    // then splits 4 ways as the 1024^3 row does (0.0624 ms against torch.mm's 0.0595 on an H100)
    // instead of 3 (0.073 ms), whose blocks leave a quarter of the SMs idle.
    const int max_splits = int(std::min<int64_t>((K + kSplitKMinSlice / 2) / kSplitKMinSlice,
                                                 kSplitKMax));
    splits = splits_filling_waves(tiles, int64_t(c.min_blocks) * sms, max_splits);
    fixup = row.fixup && splits > 1;
    return;
  }
  const ConfigEntry& mid = config_entry(kMidConfig);
  const bool mid_fills = ceil_div<int64_t>(M, mid.bm) * ceil_div<int64_t>(N, mid.bn) >= sms;
  config = mid_fills ? kMidConfig : kSmallConfig;
}

// Split-K's ordered sum, or the K = 0 epilogue (splits = 0), the addend unpacked for the launcher.
template <typename T>
void launch_epilogue(const T* partial, int splits, int64_t M, int64_t N, T* out, double alpha,
                     double beta, const Addend& add, cudaStream_t stream) {
  launch_splitk_epilogue<T>(partial, splits, M, N, out, alpha, beta,
                            static_cast<const T*>(add.ptr), add.s0, add.s1, stream);
}

// The base 16-byte aligned and every row on a 16-byte boundary (ld a multiple of 4 floats).
bool rows_16b_aligned(const Operand& o) {
  return tc_rows_16b_aligned(o.ptr, o.ld, sizeof(float));
}

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
// in the same storage order (col_major == o.col_major: tc_repack with the layout kept, one
// cudasteps::copy_ pass) or row-major (col_major == false: a transpose where o is column-major).
Operand repack_rows(const at::Tensor& t, const Operand& o, bool is_b, bool col_major) {
  TcOperand current;
  current.holder = o.holder;
  current.ptr = o.ptr;
  current.ld = o.ld;
  // tc_repack's k_major: A row-major, B column-major.
  current.k_major = is_b ? o.col_major : !o.col_major;
  const TcOperand r = tc_repack(t, current, is_b, is_b ? col_major : !col_major);
  Operand out;
  out.holder = r.holder;
  out.ptr = r.ptr;
  out.ld = r.ld;
  out.col_major = col_major;
  return out;
}

Operand repack_rows(const at::Tensor& t, const Operand& o, bool is_b) {
  return repack_rows(t, o, is_b, o.col_major);
}

}  // namespace

int find_config(const std::string& name) {
  for (int i = 0; i < num_configs(); ++i)
    if (name == config_entry(i).name) return i;
  for (int i = 0; i < ms_num_entries(); ++i)
    if (ms_entry(i).table_config && name == ms_entry(i).name) return num_configs() + i;
  return -1;
}

int find_ladder_step_config(const std::string& step) {
  for (int i = 0; i < ms_num_entries(); ++i)
    if (!ms_entry(i).table_config && step == ms_entry(i).name) return num_configs() + i;
  return -1;
}

int main_config() { return kMainConfig; }

std::string config_names() {
  std::string names;
  for (int i = 0; i < num_configs(); ++i) {
    if (i) names += ", ";
    names += config_entry(i).name;
  }
  for (int i = 0; i < ms_num_entries(); ++i)
    if (ms_entry(i).table_config) names += std::string(", ") + ms_entry(i).name;
  return names;
}

// The stream-K tail pays when at least one full wave of tiles runs and the last wave leaves at
// least a tenth of the SMs idle, and each block sharing the tail keeps 32+ K slices (a part's
// write-out and the last part's sums cost about as much as 10-20 slices). Measured on an H100
// (ring3_256x128x8, 132 SMs, against the same config without it): 8192^3 (15 waves + 68 tiles)
// +2.5%, 16384x4096x4096 NT +2.7%, 4097x4095x4099 (4 waves + 16) +16%, 4096^3 (3 + 116) +0.4%.
// Below one wave it loses: 2048^3 (128 tiles) ran 7% slower shared over 132 blocks.
// A thinner tail (fewer than 32 slices a block) pays too where its share and the fix-up (taken as
// 20 slices) cost at most half the wave it would otherwise take. Measured on an H100 (2026-11-28,
// fp32 TF32 off, us, without the tail / with it, cuBLAS in brackets; two runs alike): 1024 x 4608
// x 1024 NT (one wave + 12 tiles of 128 slices) 347 / 238 [258-261], NN 359 / 243.5 [238.5],
// 1152 x 4096 x 1024 NT (+ 28 tiles) 346 / 251 [258], 2304 x 2048 x 2048 NT (+ 12 tiles of 256)
// 673 / 415.5 [461], 4224 x 4096 x 512 NT (4 waves + 16 tiles of 64) 452.5 / 416 [364].
constexpr int64_t kStreamKMinSlices = 32;
constexpr int64_t kStreamKFixupSlices = 20;

bool streamk_pays(int64_t tiles, int64_t sms, int64_t iters_per_tile) {
  const int64_t tail = tiles % sms;
  if (tiles <= sms || tail == 0 || tail * 10 > sms * 9) return false;
  const int64_t tail_iters = tail * iters_per_tile;
  return tail_iters >= kStreamKMinSlices * sms ||
         2 * (tail_iters + kStreamKFixupSlices * sms) <= iters_per_tile * sms;
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
    launch_dgemm_tiled(a_t.const_data_ptr<double>(), a_t.stride(0), a_t.stride(1),
                       b_t.const_data_ptr<double>(), b_t.stride(0), b_t.stride(1),
                       out.data_ptr<double>(), M, N, K, alpha, beta,
                       static_cast<const double*>(add.ptr), add.s0, add.s1, stream);
    return out;
  }

  // The kernel tracks the K extent left in a 32-bit register.
  CUDASTEPS_CHECK(K <= int64_t(INT_MAX) - 64, "mm", "the inner dimension K must be below 2^31 - 64 ",
                  "for float32, got ", K);
  Operand a = make_operand(a_t);
  Operand b = make_operand(b_t);
  bool vec = rows_16b_aligned(a) && rows_16b_aligned(b);

  bool a_k = !a.col_major;  // row-major A is contiguous along K
  bool b_k = b.col_major;   // column-major B is contiguous along K
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
  // The configs only the ladder and the sweep run (the multistage configs and every sgemm_kernel
  // config but the ring 256x128 and the mid and small tiles: MsEntry,
  // ConfigEntry::row_major_only) are built for row-major operands with aligned rows
  // alone: others are copied into that layout first (the ladder runs them on row-major operands;
  // the sweep's other layouts then time the copy too). The sums are those of the operands' own
  // layout, bit for bit: each output's FFMAs run in the same k order.
  if (chosen.ms != nullptr || (chosen.legacy != nullptr && chosen.legacy->row_major_only)) {
    if (a.col_major || !rows_16b_aligned(a)) a = repack_rows(a_t, a, false, false);
    if (b.col_major || !rows_16b_aligned(b)) b = repack_rows(b_t, b, true, false);
    a_k = true;
    b_k = false;
    vec = true;
  }
  // Operands whose rows are not 16-byte aligned (K = 4099, a storage offset): the ring's
  // scalar-copy instantiation runs them, but slower than the aligned one plus a pass that copies
  // them into padded rows, which also lets an NN product run swapped, so the ring repacks them
  // where the product hides that pass (worth_repacking; 4097 x 4095 x 4099 on an H100: 3.17 ms
  // with the scalar copies, 2.94 ms repacked; cuBLAS 3.03 ms).
  if (is_ring(chosen.legacy) && !vec) {
    const int64_t a_elems = rows_16b_aligned(a) ? 0 : M * K;
    const int64_t b_elems = rows_16b_aligned(b) ? 0 : K * N;
    if (worth_repacking(M, N, K, a_elems + b_elems)) {
      if (a_elems) a = repack_rows(a_t, a, false);
      if (b_elems) b = repack_rows(b_t, b, true);
      vec = true;
    }
  }
  const ConfigEntry* legacy = chosen.legacy;
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
  // The ring's blocked sums (kernel.cuh), where the device has the shared memory for them.
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
  // per SM (kernel.cuh); or, split-K with the in-kernel fix-up, every tile's iterations shared
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

at::Tensor sgemm_ladder_step_cuda(const at::Tensor& self, const at::Tensor& mat2,
                                  const std::string& variant) {
  const int64_t M = self.size(0), K = self.size(1), N = mat2.size(1);
  at::Tensor out = at::empty({M, N}, self.options());
  if (M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  launch_sgemm_ladder_step(variant, self.const_data_ptr<float>(), mat2.const_data_ptr<float>(),
                           out.data_ptr<float>(), M, N, K, stream);
  return out;
}

}  // namespace gemm
}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
