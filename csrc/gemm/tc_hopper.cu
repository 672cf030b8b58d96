// Hopper tensor-core GEMM (sm_90a): warpgroup MMA (wgmma) on 128-byte-swizzled shared-memory tiles,
// the three Hopper steps of the tensor-core ladder:
//
//   tc:wgmma          2 consumer warpgroups (256 threads), operands brought by every thread with
//                     cp.async into a multistage ring written in the TMA's 128-byte swizzle, then
//                     wgmma from shared memory. What changes from mma.sync: one instruction per
//                     warpgroup computes a 64 x N x 16 product, operands never pass through
//                     registers, and the issue slots the ldmatrix/mma stream took are free.
//   tc:wgmma_tma      + the tensor memory accelerator: one thread issues cp.async.bulk.tensor per
//                     operand tile, completion counted in bytes on an mbarrier per stage; no
//                     address arithmetic or predication in the main loop, edges zero-filled by TMA.
//   tc:ws_persistent  + warp specialization: a producer warpgroup (registers given back with
//                     setmaxnreg) keeps the ring full while two consumer warpgroups (setmaxnreg up)
//                     run wgmma; full/empty mbarriers instead of block-wide barriers; one block per
//                     SM walking the output tiles in a grouped (L2-friendly) order, so the
//                     prologue of one tile overlaps the epilogue of the last.
//
// Tiles: BM = 128 (one 64-row wgmma per consumer warpgroup), BN = 256 or 128, BK = one 128-byte
// swizzle row of K (64 bf16/fp16 or 32 tf32). Operands must be K-major (A row-major, B
// column-major, as linear's x and weight are) and TMA-describable (16-byte aligned base and leading
// dimension): tc_hopper_supports() says so, and the dispatcher transposes or repacks the rest.
//
// Build: this file is compiled for sm_90a only (setup.py gives it -gencode=arch=compute_90a,
// code=sm_90a when the arch list has 9.0, and defines CUDASTEPS_HOPPER_KERNELS); in a build
// without 9.0 it compiles to stubs and tc_hopper_available() is false.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>

#include <climits>

#include "common/launch.cuh"
#include "gemm/tc_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUDASTEPS_SM90A_DEVICE 1
#endif

namespace cudasteps {
namespace gemm {
namespace {

using tc::Epilogue;
using tc::smem_u32;
using tc::TileRaster;

// ---- tile configuration ----
template <TcType T, int BN_>
struct HopperCfg {
  static constexpr int BM = 128, BN = BN_;
  static constexpr int kElemBytes = T == TcType::kTF32 ? 4 : 2;
  static constexpr int BK = 128 / kElemBytes;  // one 128-byte swizzle row of K
  static constexpr int kMmaK = T == TcType::kTF32 ? 8 : 16;
  static constexpr int kKSteps = BK / kMmaK;          // wgmmas per k-tile, 32 bytes of K each
  static constexpr int kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  // As many stages as fit beside the barriers in 227 KiB: 4 for 128 x 256, 6 for 128 x 128.
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr int kAccs = BN / 2;  // fp32 accumulators per thread of a consumer warpgroup
  // 1024 bytes of slack to align the ring to the 1024-byte swizzle atom, then the barriers.
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 2 * kStages * 8;
};

// ---- PTX wrappers (sm_90a) ----
#ifdef CUDASTEPS_SM90A_DEVICE
#include "gemm/tc_wgmma.inc"
#endif

__device__ __forceinline__ void hopper_only() {
#ifndef CUDASTEPS_SM90A_DEVICE
  __trap();
#endif
}

// Shared-memory matrix descriptor of a K-major tile in the 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused for this swizzle.
// Advancing the start address by 32 bytes steps one k16 (bf16/fp16) or k8 (tf32) slice.
__device__ __forceinline__ uint64_t kmajor_sw128_desc(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// One k-tile (128 bytes of K) of this warpgroup's 64 x BN block: kKSteps wgmmas, each 32 bytes of K.
template <TcType T, int BN>
__device__ __forceinline__ void wgmma_k_tile(float (&d)[BN / 2], const uint8_t* a_tile,
                                             const uint8_t* b_tile) {
#ifdef CUDASTEPS_SM90A_DEVICE
  const uint64_t da = kmajor_sw128_desc(a_tile), db = kmajor_sw128_desc(b_tile);
#pragma unroll
  for (int s = 0; s < HopperCfg<T, BN>::kKSteps; ++s) {
    const uint64_t step = uint64_t(s) * (32 >> 4);
    if constexpr (T == TcType::kBF16 && BN == 256) wgmma_m64n256k16_bf16(d, da + step, db + step);
    if constexpr (T == TcType::kBF16 && BN == 128) wgmma_m64n128k16_bf16(d, da + step, db + step);
    if constexpr (T == TcType::kFP16 && BN == 256) wgmma_m64n256k16_fp16(d, da + step, db + step);
    if constexpr (T == TcType::kFP16 && BN == 128) wgmma_m64n128k16_fp16(d, da + step, db + step);
    if constexpr (T == TcType::kTF32 && BN == 256) wgmma_m64n256k8_tf32(d, da + step, db + step);
    if constexpr (T == TcType::kTF32 && BN == 128) wgmma_m64n128k8_tf32(d, da + step, db + step);
  }
#else
  (void)d, (void)a_tile, (void)b_tile;
  hopper_only();
#endif
}

// Orders this warpgroup's accumulator registers before the wgmmas that follow.
__device__ __forceinline__ void wgmma_fence() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// The registers stay live across the asm (the wgmma writes them asynchronously): tie them to it.
template <int N>
__device__ __forceinline__ void keep_live(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Makes this thread's generic-proxy shared-memory writes (cp.async) visible to the async proxy
// (wgmma reads), once a barrier has ordered them.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
#endif
}

// Makes barrier initialisation visible to the async proxy (TMA completes transactions on them).
__device__ __forceinline__ void fence_barrier_init() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// Blocks until the phase of parity `parity` of `bar` has completed. A fresh barrier counts its
// (never run) phase of parity 1 as completed, so a producer waiting on "empty" with parity 1
// passes at once in the first round of the ring.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
#ifdef CUDASTEPS_SM90A_DEVICE
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

// One box of a 2-D tensor map (inner coordinate k, outer coordinate row) into shared memory;
// completion is counted on `bar` in bytes. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int k,
                                            int row) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row)
      : "memory");
#endif
}

__device__ __forceinline__ uint8_t* align_1024(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Each consumer warpgroup owns 64 rows of the 128-row tile: accumulator element d[4j + 2i + c] of
// lane l in warp w sits at row 16w + l/4 + 8i, column 8j + 2(l%4) + c of its 64 x BN block.
template <TcType T, int BN>
__device__ __forceinline__ void store_accumulators(const Epilogue<T>& ep, const float (&d)[BN / 2],
                                                   int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int64_t row = m0 + warp * 16 + lane / 4;
  const int64_t col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    ep.store_pair(row, col + 8 * j, d[4 * j], d[4 * j + 1]);
    ep.store_pair(row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3]);
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) d[i] = 0.f;
}

struct HopperParams {
  const uint8_t* a;  // tc:wgmma only (the TMA kernels read through tensor maps)
  const uint8_t* b;
  int64_t lda, ldb;  // elements
  int64_t M, N, K;
  int k_tiles;
  TileRaster raster;
};

// ---- tc:wgmma: cp.async ring, every thread loads ----

// Tile rows [row0, row0 + rows) x k-tile kt of a K-major operand into a 128-byte-swizzled stage:
// 16-byte chunk c of row r lands at chunk c ^ (r % 8) of that row, the layout TMA's 128-byte
// swizzle writes and the wgmma descriptor reads (8 rows of one chunk column hit 8 different
// 16-byte bank groups, so neither the stores nor the tensor core's reads conflict).
template <int Rows, int kElemBytes>
__device__ __forceinline__ void cp_async_tile(uint8_t* stage, const uint8_t* src, int64_t ld,
                                              int64_t row0, int64_t rows_total, int64_t k0,
                                              int64_t K) {
  constexpr int kChunks = Rows * 8;
  constexpr int kElemsPerChunk = 16 / kElemBytes;
  for (int i = threadIdx.x; i < kChunks; i += blockDim.x) {
    const int r = i / 8, c = i % 8;
    const int64_t row = row0 + r, k = k0 + int64_t(c) * kElemsPerChunk;
    int bytes = 0;
    const uint8_t* g = src;
    if (row < rows_total && k < K) {
      const int64_t left = (K - k) * kElemBytes;
      bytes = left >= 16 ? 16 : int(left);
      g = src + (row * ld + k) * kElemBytes;
    }
    tc::cp_async_16_bytes(stage + r * 128 + ((c ^ (r % 8)) * 16), g, bytes);
  }
}

template <TcType T, int BN>
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
    cp_async_tile<Cfg::BM, Cfg::kElemBytes>(stage, p.a, p.lda, m0, p.M, k0, p.K);
    cp_async_tile<BN, Cfg::kElemBytes>(stage + Cfg::kABytes, p.b, p.ldb, n0, p.N, k0, p.K);
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
    wgmma_fence();
    wgmma_k_tile<T, BN>(d, stage + wg * 64 * 128, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
  }
  store_accumulators<T, BN>(ep, d, m0 + wg * 64, n0);
}

// ---- tc:wgmma_tma: TMA into the ring, one thread issues, block barrier to recycle a stage ----

template <TcType T, int BN>
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
    tma_load_2d(stage, &map_a, &full[s], kt * Cfg::BK, m0);
    tma_load_2d(stage + Cfg::kABytes, &map_b, &full[s], kt * Cfg::BK, n0);
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
    wgmma_fence();
    wgmma_k_tile<T, BN>(d, stage + wg * 64 * 128, stage + Cfg::kABytes);
    wgmma_commit();
    wgmma_wait<0>();
    keep_live(d);
    __syncthreads();  // both warpgroups are done with stage kt, which the next load refills
    if (threadIdx.x == 0 && kt + Cfg::kStages - 1 < p.k_tiles) load(kt + Cfg::kStages - 1);
  }
  store_accumulators<T, BN>(ep, d, int64_t(m0) + wg * 64, n0);
}

// ---- tc:ws_persistent: producer warpgroup + 2 consumer warpgroups, persistent tiles ----

template <TcType T, int BN>
__global__ void __launch_bounds__(384, 1)
    wgmma_ws_kernel(const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b, const HopperParams p,
                    const Epilogue<T> ep) {
  using Cfg = HopperCfg<T, BN>;
  constexpr int S = Cfg::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* ring = align_1024(smem_raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + S * Cfg::kStageBytes);
  uint64_t* empty = full + S;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);      // the producer's arrive (plus the TMA bytes)
      mbar_init(&empty[s], 256);   // every consumer thread, once it is done reading the stage
    }
    fence_barrier_init();
  }
  __syncthreads();
  const int tiles = p.raster.count();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // Producer: one thread issues every TMA; the warpgroup's other registers go to the consumers.
#ifdef CUDASTEPS_SM90A_DEVICE
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
    if (threadIdx.x == 0) {
      int stage = 0, phase = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int tm, tn;
        p.raster.coords(tile, tm, tn);
        for (int kt = 0; kt < p.k_tiles; ++kt) {
          mbar_wait(&empty[stage], phase ^ 1);
          uint8_t* dst = ring + stage * Cfg::kStageBytes;
          mbar_arrive_expect_tx(&full[stage], Cfg::kStageBytes);
          tma_load_2d(dst, &map_a, &full[stage], kt * Cfg::BK, tm * Cfg::BM);
          tma_load_2d(dst + Cfg::kABytes, &map_b, &full[stage], kt * Cfg::BK, tn * BN);
          if (++stage == S) stage = 0, phase ^= 1;
        }
      }
    }
  } else {
#ifdef CUDASTEPS_SM90A_DEVICE
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
    const int cwg = wg - 1;  // which 64-row half of the tile
    int stage = 0, phase = 0;
    float d[Cfg::kAccs];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int tm, tn;
      p.raster.coords(tile, tm, tn);
      zero(d);
      for (int kt = 0; kt < p.k_tiles; ++kt) {
        mbar_wait(&full[stage], phase);
        const uint8_t* src = ring + stage * Cfg::kStageBytes;
        wgmma_fence();
        wgmma_k_tile<T, BN>(d, src + cwg * 64 * 128, src + Cfg::kABytes);
        wgmma_commit();
        wgmma_wait<0>();
        keep_live(d);
        mbar_arrive(&empty[stage]);
        if (++stage == S) stage = 0, phase ^= 1;
      }
      store_accumulators<T, BN>(ep, d, int64_t(tm) * Cfg::BM + cwg * 64, int64_t(tn) * BN);
    }
  }
}

// ---- host side ----

// cuTensorMapEncodeTiled from the driver, found through the runtime (no link against libcuda).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                    cudaEnableDefault, &status));
#else
    C10_CUDA_CHECK(
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &status));
#endif
    TORCH_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr,
                "cudasteps.mm: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12+)");
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// A K-major operand (rows x K, element (r, k) at base[r * ld + k]) as a 2-D tensor map whose box
// is one stage tile: BK elements of K (128 bytes, swizzled) by box_rows rows.
CUtensorMap kmajor_tensor_map(const void* base, int64_t rows, int64_t K, int64_t ld, TcType type,
                              int box_rows) {
  const int eb = tc_elem_bytes(type);
  const CUtensorMapDataType dtype = type == TcType::kBF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : type == TcType::kFP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(K), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * eb};
  const cuuint32_t box[2] = {cuuint32_t(128 / eb), cuuint32_t(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, dtype, 2, const_cast<void*>(base), dims, strides, box,
                                    elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cudasteps.mm: cuTensorMapEncodeTiled failed (error ", int(r),
              ") for a [", rows, ", ", K, "] operand with leading dimension ", ld);
  return map;
}

enum class HopperKernel { kCpAsync, kTma, kWarpSpecialized };

template <TcType T, int BN>
void launch_typed(const TcProblem& pr, HopperKernel which, cudaStream_t stream) {
  using Cfg = HopperCfg<T, BN>;
  HopperParams p;
  p.a = static_cast<const uint8_t*>(pr.a);
  p.b = static_cast<const uint8_t*>(pr.b);
  p.lda = pr.lda;
  p.ldb = pr.ldb;
  p.M = pr.M;
  p.N = pr.N;
  p.K = pr.K;
  p.k_tiles = int(ceil_div<int64_t>(pr.K, Cfg::BK));
  const int64_t tiles_m = ceil_div<int64_t>(pr.M, Cfg::BM), tiles_n = ceil_div<int64_t>(pr.N, BN);
  TORCH_CHECK(tiles_m * tiles_n <= INT_MAX, "cudasteps.mm: the output [", pr.M, ", ", pr.N,
              "] has more than 2^31 - 1 tiles of ", Cfg::BM, " x ", BN);
  p.raster.tiles_m = int(tiles_m);
  p.raster.tiles_n = int(tiles_n);
  p.raster.group = 8;
  const Epilogue<T> ep = Epilogue<T>::from(pr);
  const int tiles = p.raster.count();
  if (which == HopperKernel::kCpAsync) {
    auto kernel = wgmma_cp_async_kernel<T, BN>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Cfg::kSmemBytes));
    kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(p, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const CUtensorMap map_a = kmajor_tensor_map(pr.a, pr.M, pr.K, pr.lda, T, Cfg::BM);
  const CUtensorMap map_b = kmajor_tensor_map(pr.b, pr.N, pr.K, pr.ldb, T, BN);
  if (which == HopperKernel::kTma) {
    auto kernel = wgmma_tma_kernel<T, BN>;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        Cfg::kSmemBytes));
    kernel<<<tiles, 256, Cfg::kSmemBytes, stream>>>(map_a, map_b, p, ep);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  auto kernel = wgmma_ws_kernel<T, BN>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Cfg::kSmemBytes));
  const int grid = std::min(tiles, sm_count());  // persistent: one block per SM
  kernel<<<grid, 384, Cfg::kSmemBytes, stream>>>(map_a, map_b, p, ep);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// 128 x 256 tiles when they still give every SM a tile, else 128 x 128 (twice the tiles).
template <TcType T>
void launch_any_bn(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  const int64_t wide_tiles = ceil_div<int64_t>(p.M, 128) * ceil_div<int64_t>(p.N, 256);
  if (wide_tiles >= sm_count()) {
    launch_typed<T, 256>(p, which, stream);
  } else {
    launch_typed<T, 128>(p, which, stream);
  }
}

void launch(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_supports(p), "cudasteps.mm: the Hopper kernels cannot take this problem");
  switch (p.type) {
    case TcType::kBF16: return launch_any_bn<TcType::kBF16>(p, which, stream);
    case TcType::kFP16: return launch_any_bn<TcType::kFP16>(p, which, stream);
    default: return launch_any_bn<TcType::kTF32>(p, which, stream);
  }
}

}  // namespace

bool tc_hopper_available() {
#ifdef CUDASTEPS_HOPPER_KERNELS
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major == 9 && prop->minor == 0;
#else
  return false;
#endif
}

bool tc_hopper_supports(const TcProblem& p) {
  // TMA coordinates are 32-bit; K-major operands only (see the file comment).
  return tc_hopper_available() && tc_operands_16b_aligned(p) && p.a_kmajor && p.b_kmajor &&
         p.M < INT_MAX && p.N < INT_MAX && p.K < INT_MAX;
}

void tc_wgmma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kCpAsync, stream);
}

void tc_wgmma_tma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kTma, stream);
}

void tc_hopper_final_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kWarpSpecialized, stream);
}

}  // namespace gemm
}  // namespace cudasteps
