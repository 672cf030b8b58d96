// The sm_80+ tensor-core GEMM kernels (mma.sync), ladder steps 1 and 2 of the tensor-core ladder:
//
//   tc:mma                 mma.sync on shared-memory tiles filled by plain bounds-checked scalar
//                          loads; fragments read from shared memory with 32-bit loads. Any layout,
//                          any alignment, any shape: the fallback for operands the faster kernels
//                          cannot read (misaligned views, odd leading dimensions).
//   tc:ldmatrix_cp_async   a multistage cp.async pipeline into XOR-swizzled shared memory,
//                          fragments through ldmatrix (ldmatrix.trans for MN-major operands),
//                          double-buffered in registers across the k-steps of a tile: the path for
//                          Ampere/Ada GPUs and the Hopper fallback for operands TMA cannot take.
//
// Both compute out[M, N] = alpha * A @ B + beta * C (tc/tc_gemm.h) with fp32 accumulators, for
// bf16/fp16 (m16n8k16) and TF32 (m16n8k8, operands rounded with cvt.rna.tf32.f32). The warp-level
// fragment layouts, ldmatrix and the swizzle are described in mma.cuh; the element traits,
// cp.async, the grouped tile order and the epilogue live in tc/common.cuh.
//
// K is measured in bytes per shared-memory row: every tile row holds 64 bytes of K (BK = 32 for
// bf16/fp16, 16 for TF32), so one configuration has the same shared-memory footprint and the same
// number of k-steps per tile (2) for all three types. Config names give the 16-bit BK.//
// This unit: the tc:mma step. The tc:ldmatrix_cp_async step is cp_async.cuh (the kernel),
// cp_async.cu (its configs and entry points) and the inst_cp_async_*.cu units. No ATen header
// here (a kernel unit would pay about 20 s of compile time for it): the device check is
// tc/dispatch.cpp's.
#include <c10/cuda/CUDAException.h>

#include "common/error.h"
#include "gemm/tc/sm80/common.cuh"

namespace cudasteps {
namespace gemm {
namespace sm80 {
namespace {

// =============================================================================================
// tc:mma
// =============================================================================================
//
// One 128 x 128 output tile per block of 8 warps (2 x 4), each warp a 64 x 32 tile: 4 x 4 MMA
// tiles of 16 x 8, 64 fp32 accumulators per thread. K is walked 64 bytes at a time. Both operands
// are stored K-major in shared memory whatever their layout in global memory (the tile loaders
// transpose MN-major operands on the way), so one fragment-load routine serves all four layouts:
// tile rows of 16 words of K plus 4 words of padding. The padding makes the fragment loads
// conflict-free: lanes (g, t) read word 20 g + t (+ constant), and 20 g mod 32 for g = 0..7 is
// {0, 20, 8, 28, 16, 4, 24, 12}, so the 32 words land in 32 different banks. (The transposing
// stores of an MN-major operand, 32 consecutive m of one k, are 4-way conflicted: 20 m mod 32
// repeats every 8 rows. Left so: this step is about the MMA, the next one removes the scalar path.)
// One shared-memory stage: load, barrier, MMAs, barrier. Two blocks per SM (20 KiB of shared
// memory and <= 128 registers each) overlap one block's loads with the other's MMAs.
namespace mma_step {

constexpr int kBM = 128, kBN = 128;
constexpr int kWarpsM = 2, kWarpsN = 4;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // 64 x 32
constexpr int kMI = kWM / 16, kNI = kWN / 8;              // 4 x 4 MMA tiles per warp
constexpr int kKWords = kKBytes / 4;                      // 16 words of K per tile row
constexpr int kRowWords = kKWords + 4;                    // + padding (see above)
constexpr int kKSteps = kKWords / 8;                      // 8 words (16 bf16 or 8 tf32) per MMA

// Fills one K-major shared tile s[BX][kRowWords] (x = m for A, n for B) from the operand slice
// starting at (x0, k0). KMajor: element (x, k) at src[x * ld + k], else at src[k * ld + x].
// Consecutive threads walk the contiguous dimension, so the global reads coalesce. Elements
// outside the matrix are stored as zero. TF32 operands are rounded once here, not per use.
// Loads go in batches of 4 (4 loads in flight, then 4 stores): all of a thread's loads at once
// would need 16 more registers, over the 128 of two blocks per SM.
template <TcType T, int BX, bool KMajor>
__device__ __forceinline__ void fill_tile(uint32_t* __restrict__ s,
                                          const typename Elem<T>::type* __restrict__ src,
                                          int64_t ld, int64_t x0, int64_t x_end, int64_t k0,
                                          int64_t k_end, int tid) {
  constexpr int kBK = kKBytes / int(sizeof(typename Elem<T>::type));
  constexpr int kPerThread = BX * kBK / kThreads;
  constexpr int kBatch = kPerThread < 4 ? kPerThread : 4;
  static_assert(kThreads % kBK == 0 && kThreads % BX == 0, "whole rows per pass");
  static_assert(kPerThread % kBatch == 0, "whole batches");
  // This thread's elements: (x, k), (x + j * kXStep, k + j * kKStep) for j < kPerThread.
  constexpr int kXStep = KMajor ? kThreads / kBK : 0;
  constexpr int kKStep = KMajor ? 0 : kThreads / BX;
  const int x = KMajor ? tid / kBK : tid % BX;
  const int k = KMajor ? tid % kBK : tid / BX;
  // Elements left from this thread's first (x, k) along each dimension (may be <= 0).
  const int64_t x_left = x_end - (x0 + x), k_left = k_end - (k0 + k);
  const int64_t off0 = KMajor ? (x0 + x) * ld + k0 + k : (k0 + k) * ld + x0 + x;
  const int64_t step = KMajor ? int64_t(kXStep) * ld : int64_t(kKStep) * ld;
#pragma unroll
  for (int j0 = 0; j0 < kPerThread; j0 += kBatch) {
    uint32_t v[kBatch];
#pragma unroll
    for (int jj = 0; jj < kBatch; ++jj) {
      const int j = j0 + jj;
      v[jj] = 0;
      if (j * kXStep < x_left && j * kKStep < k_left) {
        const int64_t off = off0 + j * step;
        if constexpr (T == TcType::kTF32) {
          v[jj] = tc::to_tf32(__ldg(src + off));
        } else {
          v[jj] = __ldg(reinterpret_cast<const unsigned short*>(src) + off);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < kBatch; ++jj) {
      const int j = j0 + jj;
      const int sx = x + j * kXStep, sk = k + j * kKStep;
      if constexpr (T == TcType::kTF32) {
        s[sx * kRowWords + sk] = v[jj];
      } else {
        reinterpret_cast<unsigned short*>(s)[sx * (2 * kRowWords) + sk] =
            static_cast<unsigned short>(v[jj]);
      }
    }
  }
}

template <TcType T>
__global__ void __launch_bounds__(kThreads, 2)
    tc_mma_kernel(const TcProblem p, const TileRaster raster, const Epilogue<T> ep) {
  using E = typename Elem<T>::type;
  constexpr int kBK = kKBytes / int(sizeof(E));
  __shared__ uint32_t As[kBM * kRowWords];
  __shared__ uint32_t Bs[kBN * kRowWords];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;
  int tile_m, tile_n;
  raster.coords(int(blockIdx.x), tile_m, tile_n);
  const int64_t m0 = int64_t(tile_m) * kBM, n0 = int64_t(tile_n) * kBN;
  const E* a = static_cast<const E*>(p.a);
  const E* b = static_cast<const E*>(p.b);

  float acc[kMI][kNI][4];
#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < kNI; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

  // Word offsets of this lane's fragment rows: A rows warp_m * 64 + i * 16 + g (+ 8), B rows
  // (n) warp_n * 32 + j * 8 + g; word t (+ 4) of the k-step.
  const int a_word = (warp_m * kWM + g) * kRowWords + t;
  const int b_word = (warp_n * kWN + g) * kRowWords + t;

  for (int64_t k0 = 0; k0 < p.K; k0 += kBK) {
    // The layout branches are uniform across the grid.
    if (p.a_kmajor) {
      fill_tile<T, kBM, true>(As, a, p.lda, m0, p.M, k0, p.K, tid);
    } else {
      fill_tile<T, kBM, false>(As, a, p.lda, m0, p.M, k0, p.K, tid);
    }
    if (p.b_kmajor) {
      fill_tile<T, kBN, true>(Bs, b, p.ldb, n0, p.N, k0, p.K, tid);
    } else {
      fill_tile<T, kBN, false>(Bs, b, p.ldb, n0, p.N, k0, p.K, tid);
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t af[kMI][4], bf[kNI][2];
#pragma unroll
      for (int i = 0; i < kMI; ++i) {
        const uint32_t* r = As + a_word + i * 16 * kRowWords + ks * 8;
        af[i][0] = r[0];
        af[i][1] = r[8 * kRowWords];
        af[i][2] = r[4];
        af[i][3] = r[8 * kRowWords + 4];
      }
#pragma unroll
      for (int j = 0; j < kNI; ++j) {
        const uint32_t* r = Bs + b_word + j * 8 * kRowWords + ks * 8;
        bf[j][0] = r[0];
        bf[j][1] = r[4];
      }
#pragma unroll
      for (int i = 0; i < kMI; ++i)
#pragma unroll
        for (int j = 0; j < kNI; ++j) Mma<T>::run(acc[i][j], af[i], bf[j]);
    }
    __syncthreads();  // everyone is done reading the tiles before they are refilled
  }

#pragma unroll
  for (int i = 0; i < kMI; ++i) {
    const int64_t m = m0 + warp_m * kWM + i * 16 + g;
#pragma unroll
    for (int j = 0; j < kNI; ++j) {
      const int64_t n = n0 + warp_n * kWN + j * 8 + 2 * t;
      ep.store_pair(m, n, acc[i][j][0], acc[i][j][1]);
      ep.store_pair(m + 8, n, acc[i][j][2], acc[i][j][3]);
    }
  }
}

template <TcType T>
void launch(const TcProblem& p, cudaStream_t stream) {
  const TileRaster raster = make_raster(p, kBM, kBN, "tc:mma");
  tc_mma_kernel<T><<<raster.count(), kThreads, 0, stream>>>(p, raster, Epilogue<T>::from(p));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace mma_step

}  // namespace
}  // namespace sm80

void tc_mma_launch(const TcProblem& p, cudaStream_t stream) {
  sm80::check_problem(p, "tc:mma");
  sm80::check_device("tc:mma");
  switch (p.type) {
    case TcType::kBF16: sm80::mma_step::launch<TcType::kBF16>(p, stream); break;
    case TcType::kFP16: sm80::mma_step::launch<TcType::kFP16>(p, stream); break;
    case TcType::kTF32: sm80::mma_step::launch<TcType::kTF32>(p, stream); break;
  }
}

}  // namespace gemm
}  // namespace cudasteps
