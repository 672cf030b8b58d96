// The tc:ldmatrix_cp_async kernel (sm_80+): its tile configs (Config, the table of five), the
// per-thread cp.async copies (TileCopy), the kernel, and the launch templates by layout and type.
// launch_config<Cfg> is instantiated in the inst_cp_async_*.cu units, one config each, so that a
// parallel build compiles them side by side; cp_async.cu chooses a config and dispatches to them.
#pragma once

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/error.h"
#include "common/launch.cuh"
#include "gemm/tc/common.cuh"
#include "gemm/tc/sm80/common.cuh"
#include "gemm/tc/sm80/mma.cuh"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace sm80 {

// =============================================================================================
// tc:ldmatrix_cp_async
// =============================================================================================
//
// Per block: a BM x BN output tile, WarpsM x WarpsN warps of WM x WN, each warp MI x NI MMA tiles
// of 16 x 8. K is walked in tiles of kKBytes per row through a ring of Stages shared-memory
// buffers: while the warps run the MMAs of tile kt, the cp.async copies of tiles kt+1 ..
// kt+Stages-1 are in flight, so global latency hides behind Stages-1 tiles of math and there is
// one barrier per tile.
//
// Shared tiles keep the operand's global layout (no transposition, so every copy is a 16-byte
// cp.async): A K-major is BM rows (m) of kKBytes, A M-major is BK rows (k) of BM elements; the
// same for B with N. Rows are XOR-swizzled in 16-byte chunks (mma.cuh, swizzle_key), which
// makes both the cp.async stores and the ldmatrix reads bank-conflict-free without padding.
// Fragments: K-major tiles through ldmatrix.x4, MN-major (16-bit) through ldmatrix.x4.trans;
// MN-major TF32 has no 32-bit transposing ldmatrix, so tc_cp_async_supports refuses it and the
// dispatcher transposes the operand to K-major first.
//
// Ragged edges: chunks past M, N or K are zero-filled by cp.async's src-size (a chunk straddling
// the end reads only its valid bytes), so partial tiles need no special case in the math and no
// garbage enters the sum.
namespace cp_async_step {

template <int BM_, int BN_, int Stages_, int WarpsM_, int WarpsN_, int MinBlocks_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, Stages = Stages_;
  static constexpr int WarpsM = WarpsM_, WarpsN = WarpsN_, MinBlocks = MinBlocks_;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int WM = BM / WarpsM, WN = BN / WarpsN;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int kStageBytes = (BM + BN) * kKBytes;
  static constexpr size_t kSmemBytes = size_t(Stages) * kStageBytes;
  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0,
                "warp tiles of whole 16-row MMA tiles and pairs of 8-column MMA tiles");
  static_assert(Stages >= 2, "a ring of at least two buffers");
};

// The config table. A 64x64 warp tile (MI x NI = 4 x 8) issues 8 ldmatrix.x4 per 32 MMAs per
// k-step, a 64x32 one 6 per 16: the larger warp tile needs a third less shared-memory bandwidth
// per MMA, at the price of 128 accumulators per thread. Registers (ptxas -v, all layouts and
// types; no spills anywhere): sm_90 / sm_80
//   128x128x32_s4_w2x2   4 warps of 64x64, 64 KiB, 2 blocks/SM   242-253 / 222-238
//   128x256x32_s3_w2x4   8 warps of 64x64, 72 KiB, 1 block/SM    230-247 / 222-238
//   128x128x32_s4_w2x4   8 warps of 64x32, 64 KiB                148-163 / 144-158
//   64x128x32_s4_w2x2    4 warps of 32x64, 48 KiB                150-160 / 142-160
//   64x64x32_s4_w2x2     4 warps of 32x32, 32 KiB, 4 blocks/SM   98-109 / 94-104
// 128x128x32_s4_w2x4 is not chosen by shape: it is there to measure against the 4-warp tile.
//                         BM   BN  St WM WN MinBlocks
using Cfg128x128 = Config<128, 128, 4, 2, 2, 2>;
using Cfg128x256 = Config<128, 256, 3, 2, 4, 1>;
using Cfg128x128W8 = Config<128, 128, 4, 2, 4, 1>;
using Cfg64x128 = Config<64, 128, 4, 2, 2, 2>;
using Cfg64x64 = Config<64, 64, 4, 2, 2, 4>;

constexpr int kNumConfigs = 5;
constexpr const char* kConfigNames[kNumConfigs] = {
    "128x128x32_s4_w2x2", "128x256x32_s3_w2x4", "128x128x32_s4_w2x4", "64x128x32_s4_w2x2",
    "64x64x32_s4_w2x2"};
constexpr int kCfg128x128 = 0, kCfg128x256 = 1, kCfg64x128 = 3, kCfg64x64 = 4;
constexpr size_t kConfigSmem[kNumConfigs] = {Cfg128x128::kSmemBytes, Cfg128x256::kSmemBytes,
                                             Cfg128x128W8::kSmemBytes, Cfg64x128::kSmemBytes,
                                             Cfg64x64::kSmemBytes};
constexpr int kConfigBM[kNumConfigs] = {128, 128, 128, 64, 64};
constexpr int kConfigBN[kNumConfigs] = {128, 256, 128, 128, 64};

namespace {

// This thread's share of the cp.async copies of one operand's k-tiles. The tile has BX rows of
// kKBytes (KMajor: x = m or n, chunks along k) or kBK rows of BX elements (MN-major: rows along k,
// chunks along x). Thread tid copies chunk tid % kRowChunks of rows tid / kRowChunks + j * kRowStep:
// one fixed chunk column, so the chunk's position along the contiguous dimension, its swizzle key
// and its in-bounds byte count are per-thread constants, and only a pointer and a counter of K left
// change from tile to tile (64-bit math hoisted out of the main loop).
template <typename E, int BX, bool KMajor, int kThreads>
struct TileCopy {
  static constexpr int kEB = int(sizeof(E));
  static constexpr int kEPC = 16 / kEB;
  static constexpr int kBK = kKBytes / kEB;
  static constexpr int kRowChunks = KMajor ? kKBytes / 16 : BX * kEB / 16;
  static constexpr int kPerThread = BX * kKBytes / 16 / kThreads;
  static constexpr int kRowStep = kThreads / kRowChunks;
  static_assert(kThreads % kRowChunks == 0, "a fixed chunk column per thread");
  static_assert(kRowStep % 8 == 0, "rows 8 apart share the swizzle key");
  static_assert(kPerThread * kThreads * 16 == BX * kKBytes, "whole chunks per thread");

  // The operand pointer, leading dimension and the (unread) source address of zero-fill copies
  // are not kept here: issue() takes them from the kernel parameters (constant memory), which
  // saves registers in the main loop.
  const E* ptr;        // this thread's first chunk in the next k-tile
  int fixed_left;      // KMajor: rows (x) left from this thread's first row; else elements left
                       // along x from this thread's chunk. Constant; clamped to [-1, 2^30].
  int64_t k_left;      // KMajor: elements left along k from the chunk; else k rows left from the
                       // first row. Decreases by kBK per tile.
  uint32_t smem_off;   // swizzled byte offset of the first chunk in the tile

  static __device__ __forceinline__ int clamp_left(int64_t v) {
    return int(v < -1 ? -1 : v > (int64_t(1) << 30) ? (int64_t(1) << 30) : v);
  }

  __device__ __forceinline__ TileCopy(const E* src, int64_t ld, int64_t x0, int64_t x_end,
                                      int64_t k_end, int tid) {
    const int row = tid / kRowChunks, chunk = tid % kRowChunks;
    if constexpr (KMajor) {
      ptr = src + (x0 + row) * ld + chunk * kEPC;
      fixed_left = clamp_left(x_end - (x0 + row));
      k_left = k_end - chunk * kEPC;
    } else {
      ptr = src + int64_t(row) * ld + x0 + chunk * kEPC;
      fixed_left = clamp_left(x_end - (x0 + chunk * kEPC));
      k_left = k_end - row;
    }
    smem_off = tc::swizzled_offset<kRowChunks>(row, chunk);
  }

  // Issues the copies of the next k-tile into `tile` and moves on to the following one.
  // zero_src: any valid global address (nothing is read from it).
  __device__ __forceinline__ void issue(unsigned char* tile, int64_t ld, const void* zero_src) {
    // Bytes of a chunk inside the matrix along the contiguous dimension, and rows inside along
    // the other one.
    const int64_t along = KMajor ? k_left : fixed_left;
    const int64_t rows = KMajor ? fixed_left : k_left;
    const int bytes = along >= kEPC ? 16 : along > 0 ? int(along) * kEB : 0;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const bool inside = bytes > 0 && j * kRowStep < rows;
      tc::cp_async_16_bytes(tile + smem_off + j * (kRowStep * kRowChunks * 16),
                            inside ? static_cast<const void*>(ptr + j * kRowStep * ld) : zero_src,
                            inside ? bytes : 0);
    }
    ptr += KMajor ? int64_t(kBK) : int64_t(kBK) * ld;
    k_left -= kBK;
  }
};

// AK: A is K-major (row-major); BK: B is K-major (column-major).
template <TcType T, class Cfg, bool AK, bool BK>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    tc_cp_async_kernel(const TcProblem p, const TileRaster raster, const Epilogue<T> ep) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using E = typename Elem<T>::type;
  constexpr int kEB = int(sizeof(E));
  constexpr int kEPC = 16 / kEB;            // elements per 16-byte chunk
  constexpr int kBK = kKBytes / kEB;        // K elements per tile
  constexpr int kMmaK = Mma<T>::kK;
  constexpr int kKSteps = kBK / kMmaK;      // 2 for every type
  constexpr int kStepChunks = kMmaK / kEPC;  // chunks of K per k-step: 2
  constexpr int BM = Cfg::BM, BN = Cfg::BN, kThreads = Cfg::kThreads;
  constexpr int MI = Cfg::MI, NI = Cfg::NI, WM = Cfg::WM, WN = Cfg::WN;
  static_assert(T != TcType::kTF32 || (AK && BK), "TF32 tiles are K-major (no 32-bit ldmatrix.trans)");
  static_assert(kKSteps == 2 && kStepChunks == 2, "64-byte K rows: two k-steps of two chunks");

  // Row geometry of the shared tiles: K-major tiles have rows of K (kKBytes), MN-major tiles
  // rows of M or N.
  constexpr int kARowChunks = AK ? kKBytes / 16 : BM * kEB / 16;
  constexpr int kBRowChunks = BK ? kKBytes / 16 : BN * kEB / 16;
  constexpr int kATileBytes = BM * kKBytes;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = tc::smem_u32(smem);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / Cfg::WarpsN, warp_n = warp % Cfg::WarpsN;
  int tile_m, tile_n;
  raster.coords(int(blockIdx.x), tile_m, tile_n);
  const int64_t m0 = int64_t(tile_m) * BM, n0 = int64_t(tile_n) * BN;
  const E* a = static_cast<const E*>(p.a);
  const E* b = static_cast<const E*>(p.b);
  const int64_t num_k_tiles = ceil_div<int64_t>(p.K, kBK);

  TileCopy<E, BM, AK, kThreads> copy_a(a, p.lda, m0, p.M, p.K, tid);
  TileCopy<E, BN, BK, kThreads> copy_b(b, p.ldb, n0, p.N, p.K, tid);
  // Issues the cp.async copies of the next k-tile into ring slot `stage` (not committed).
  auto load_tile = [&](int stage) {
    unsigned char* sa = smem + stage * Cfg::kStageBytes;
    copy_a.issue(sa, p.lda, p.a);
    copy_b.issue(sa + kATileBytes, p.ldb, p.a);
  };

  // Per-lane constants of the ldmatrix addresses. Lane l serves row l % 8 of matrix q = l / 8.
  const int q = lane / 8, r8 = lane % 8;
  // A, K-major: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15,
  // k 8-15) of an MMA tile = a0..a3: lane l gives row l % 16 at k chunk l / 16.
  // A, M-major (.trans): the same four matrices with rows along k: matrix q covers m 8 (q % 2)
  // .. +7 and k 8 (q / 2) .. +7; lane l gives k row 8 (q / 2) + l % 8 at m chunk q % 2.
  const int a_row = AK ? warp_m * WM + lane % 16 : (q / 2) * 8 + r8;
  const int a_chunk = AK ? lane / 16 : (warp_m * WM) / kEPC + (q % 2);
  const int a_key = tc::swizzle_key<kARowChunks>(a_row);
  // B, for a pair of n-tiles (16 columns): matrices b0, b1 of n-tile 2j, then b0, b1 of 2j + 1.
  // K-major: matrix q covers n 8 (q / 2) .. +7 and k chunk q % 2: lane gives n row 8 (q / 2) + l % 8.
  // N-major (.trans): matrix q covers k 8 (q % 2) .. +7 and n chunk q / 2: lane gives k row
  // 8 (q % 2) + l % 8.
  const int b_row = BK ? warp_n * WN + (q / 2) * 8 + r8 : (q % 2) * 8 + r8;
  const int b_chunk = BK ? (q % 2) : (warp_n * WN) / kEPC + (q / 2);
  const int b_key = tc::swizzle_key<kBRowChunks>(b_row);

  uint32_t af[2][MI][4], bf[2][NI][2];

  // A fragments of k-step ks of the tile in ring slot `stage` (all MI MMA tiles).
  auto load_a_frags = [&](int stage, int ks, uint32_t(&fa)[MI][4]) {
    const uint32_t sa = smem_base + stage * Cfg::kStageBytes;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      if constexpr (AK) {
        // Row a_row + 16 i (same key: rows 16 apart), chunk 2 ks + l / 16.
        const uint32_t addr = sa + uint32_t(a_row + i * 16) * (kARowChunks * 16) +
                              uint32_t(((ks * kStepChunks + a_chunk) ^ a_key) * 16);
        tc::ldmatrix_x4(fa[i], addr);
      } else {
        // k row 16 ks + a_row (same key), m chunk of MMA tile i: 2 i + a_chunk.
        const uint32_t addr = sa + uint32_t(ks * kMmaK + a_row) * (kARowChunks * 16) +
                              uint32_t(((a_chunk + i * 2) ^ a_key) * 16);
        tc::ldmatrix_x4_trans(fa[i], addr);
      }
    }
  };
  // B fragments of n-tiles 2 jp and 2 jp + 1 (one ldmatrix.x4) of k-step ks.
  auto load_b_pair = [&](int stage, int ks, int jp, uint32_t(&fb)[NI][2]) {
    const uint32_t sb = smem_base + stage * Cfg::kStageBytes + kATileBytes;
    uint32_t r[4];
    if constexpr (BK) {
      const uint32_t addr = sb + uint32_t(b_row + jp * 16) * (kBRowChunks * 16) +
                            uint32_t(((ks * kStepChunks + b_chunk) ^ b_key) * 16);
      tc::ldmatrix_x4(r, addr);
    } else {
      const uint32_t addr = sb + uint32_t(ks * kMmaK + b_row) * (kBRowChunks * 16) +
                            uint32_t(((b_chunk + jp * 2) ^ b_key) * 16);
      tc::ldmatrix_x4_trans(r, addr);
    }
    fb[2 * jp][0] = r[0];
    fb[2 * jp][1] = r[1];
    fb[2 * jp + 1][0] = r[2];
    fb[2 * jp + 1][1] = r[3];
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

  // Prologue: tiles 0 .. Stages-2 in flight (one commit group each, empty past the end so that
  // the group count stays in step with the tile index).
#pragma unroll
  for (int s = 0; s < Cfg::Stages - 1; ++s) {
    if (s < num_k_tiles) load_tile(s);
    tc::cp_async_commit();
  }
  tc::cp_async_wait<Cfg::Stages - 2>();
  __syncthreads();

  int read_stage = 0;
  int write_stage = Cfg::Stages - 1;
  load_a_frags(read_stage, 0, af[0]);
#pragma unroll
  for (int jp = 0; jp < NI / 2; ++jp) load_b_pair(read_stage, 0, jp, bf[0]);

  for (int64_t kt = 0; kt < num_k_tiles; ++kt) {
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      if (ks == kKSteps - 1) {
        // Groups committed so far: Stages - 1 + kt + 1; tile kt + 1 is group kt + 1, complete
        // once at most Stages - 2 remain. The barrier makes every thread's copies visible, and
        // guarantees that no warp still reads slot kt % Stages, which the next iteration's
        // copies overwrite.
        tc::cp_async_wait<Cfg::Stages - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == Cfg::Stages ? 0 : read_stage + 1;
      }
      // Fragments of the next k-step (of this tile, or the first of the next one) load while
      // the MMAs of this one run: A first (used by every MMA of the step), B pair by pair as the
      // MMAs of the current step release the pair's registers, which keeps the 64x64 warp tile
      // (128 accumulators + fragments) within 255 registers.
      const int next = (ks + 1) % 2;
      const int next_ks = (ks + 1) % kKSteps;
      const bool has_next = ks + 1 < kKSteps || kt + 1 < num_k_tiles;
      if (has_next) load_a_frags(read_stage, next_ks, af[next]);
      if (ks == 0) {
        // Slot write_stage held tile kt - 1, last read before the barrier of iteration kt - 1.
        if (kt + Cfg::Stages - 1 < num_k_tiles) load_tile(write_stage);  // tile kt + Stages - 1
        tc::cp_async_commit();
        write_stage = write_stage + 1 == Cfg::Stages ? 0 : write_stage + 1;
      }
      const int cur = ks % 2;
      if constexpr (T == TcType::kTF32) {
        // ldmatrix delivers raw fp32 bits: round them to TF32 (to nearest) just before use.
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int c = 0; c < 4; ++c) tc::round_tf32(af[cur][i][c]);
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) tc::round_tf32(bf[cur][j][c]);
      }
#pragma unroll
      for (int jp = 0; jp < NI / 2; ++jp) {
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          Mma<T>::run(acc[i][2 * jp], af[cur][i], bf[cur][2 * jp]);
          Mma<T>::run(acc[i][2 * jp + 1], af[cur][i], bf[cur][2 * jp + 1]);
        }
        if (has_next) load_b_pair(read_stage, next_ks, jp, bf[next]);
      }
    }
  }
  tc::cp_async_wait<0>();  // no copy may outlive the block (the trailing groups are empty)

  // The epilogue re-derives the tile origin and the lane's position from the special registers
  // (volatile reads, which the compiler cannot merge with the ones at the top) rather than keeping
  // them live through the main loop: with 64x64 warp tiles the loop needs all but a few of the
  // 255 registers.
  {
    uint32_t block, thread;
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(block));
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(thread));
    int tm, tn;
    raster.coords(int(block), tm, tn);
    const int ln = int(thread) % 32, wp = int(thread) / 32;
    const int g = ln / 4, t = ln % 4;
    const int64_t row0 = int64_t(tm) * BM + (wp / Cfg::WarpsN) * WM + g;
    const int64_t col0 = int64_t(tn) * BN + (wp % Cfg::WarpsN) * WN + 2 * t;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const int64_t m = row0 + i * 16;
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int64_t n = col0 + j * 8;
        ep.store_pair(m, n, acc[i][j][0], acc[i][j][1]);
        ep.store_pair(m + 8, n, acc[i][j][2], acc[i][j][3]);
      }
    }
  }
#else
  (void)p, (void)raster, (void)ep;
  __trap();
#endif
}

}  // namespace

template <TcType T, class Cfg, bool AK, bool BK>
void launch_kernel(const TcProblem& p, int config, cudaStream_t stream) {
  auto kernel = tc_cp_async_kernel<T, Cfg, AK, BK>;
  // Up to 72 KiB of dynamic shared memory, and the max-shared carveout: MinBlocks blocks must
  // fit on an SM (two 64 KiB blocks for 128x128).
  tc::configure_smem_once(kernel, Cfg::kSmemBytes);
  const TileRaster raster = make_raster(p, Cfg::BM, Cfg::BN, kConfigNames[config]);
  kernel<<<raster.count(), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p, raster,
                                                                    Epilogue<T>::from(p));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <TcType T, class Cfg>
void launch_layout(const TcProblem& p, int config, cudaStream_t stream) {
  if constexpr (T == TcType::kTF32) {
    launch_kernel<T, Cfg, true, true>(p, config, stream);  // tc_cp_async_supports: K-major only
  } else if (p.a_kmajor) {
    if (p.b_kmajor) {
      launch_kernel<T, Cfg, true, true>(p, config, stream);
    } else {
      launch_kernel<T, Cfg, true, false>(p, config, stream);
    }
  } else {
    if (p.b_kmajor) {
      launch_kernel<T, Cfg, false, true>(p, config, stream);
    } else {
      launch_kernel<T, Cfg, false, false>(p, config, stream);
    }
  }
}

template <class Cfg>
void launch_config(const TcProblem& p, int config, cudaStream_t stream) {
  switch (p.type) {
    case TcType::kBF16: launch_layout<TcType::kBF16, Cfg>(p, config, stream); break;
    case TcType::kFP16: launch_layout<TcType::kFP16, Cfg>(p, config, stream); break;
    case TcType::kTF32: launch_layout<TcType::kTF32, Cfg>(p, config, stream); break;
  }
}

// ---- the instantiations, one inst_cp_async_*.cu unit each ----
extern template void launch_config<Cfg128x128>(const TcProblem&, int, cudaStream_t);
extern template void launch_config<Cfg128x256>(const TcProblem&, int, cudaStream_t);
extern template void launch_config<Cfg128x128W8>(const TcProblem&, int, cudaStream_t);
extern template void launch_config<Cfg64x128>(const TcProblem&, int, cudaStream_t);
extern template void launch_config<Cfg64x64>(const TcProblem&, int, cudaStream_t);

}  // namespace cp_async_step
}  // namespace sm80
}  // namespace gemm
}  // namespace cudasteps
