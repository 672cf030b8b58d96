// The first steps of the SGEMM optimization ladder (ladder_mm), after siboehm's "How to optimize a
// CUDA matmul": each its own kernel, for float32, 2-D, contiguous row-major operands of any size
// (every load and store is bounds-checked). The later steps are configs of the table
// (configs.cuh, multistage_configs.cuh); gemm_ladder_cuda.cpp runs them all by name.
//
//   naive          one thread per output; consecutive threads walk M, so their B reads are the
//                  same word and their A reads are K floats apart: uncoalesced.
//   coalesced      consecutive threads walk N: B and C accesses coalesce into 128-byte lines.
//   smem_tile      32 x 32 tiles of A and B staged in shared memory: each global value is read
//                  once per block instead of once per thread.
//   blocktile_1d   64 x 64 block tile, 8-deep K slice, each thread computes 8 outputs of one
//                  column: one Bs value reused 8 times from a register.
//   blocktile_2d   128 x 128 block tile, each thread an 8 x 8 block: 16 shared loads per 64 FMA.
//   vectorized     + 16-byte global loads, A stored transposed in shared memory, LDS.128 reads
//                  (sgemm/kernel.cuh with WarpTile = false, Stages = 1).
//   warptile       + the warp-tiled thread layout (conflict-free LDS.128, 4x4 sub-tiles), BK = 16.
//
// This unit: the kernels and their launcher (launch_sgemm_ladder_step, launch.h). The host side
// (output, device guard, stream: sgemm_ladder_step_cuda) is in dispatch.cpp. No ATen header here
// (launch.h says why).
#include <c10/cuda/CUDAException.h>

#include <climits>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gemm/sgemm/kernel.cuh"
#include "gemm/sgemm/launch.h"

namespace cudasteps {
namespace gemm {
namespace {

constexpr const char* kOp = "ladder_mm";

// The output tile of block b when tiles are numbered row-major (tiles_n per row).
__device__ __forceinline__ void tile_of(int64_t tiles_n, int64_t tile_m_size, int64_t tile_n_size,
                                        int64_t& m0, int64_t& n0) {
  m0 = (int64_t(blockIdx.x) / tiles_n) * tile_m_size;
  n0 = (int64_t(blockIdx.x) % tiles_n) * tile_n_size;
}

// ---- naive / coalesced: 32 x 32 threads, one output each ----
constexpr int kNaiveTile = 32;

template <bool Coalesced>
__global__ void __launch_bounds__(kNaiveTile* kNaiveTile)
    naive_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                 int64_t M, int64_t N, int64_t K, int64_t tiles_n) {
  int64_t m0, n0;
  tile_of(tiles_n, kNaiveTile, kNaiveTile, m0, n0);
  // naive: threadIdx.x (the fast lane index) walks M; coalesced: it walks N.
  const int64_t m = m0 + (Coalesced ? threadIdx.y : threadIdx.x);
  const int64_t n = n0 + (Coalesced ? threadIdx.x : threadIdx.y);
  if (m >= M || n >= N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < K; ++k) acc = fmaf(a[m * K + k], b[k * N + n], acc);
  c[m * N + n] = acc;
}

// ---- smem_tile: 32 x 32 tiles through shared memory ----
__global__ void __launch_bounds__(kNaiveTile* kNaiveTile)
    smem_tile_kernel(const float* __restrict__ a, const float* __restrict__ b,
                     float* __restrict__ c, int64_t M, int64_t N, int64_t K, int64_t tiles_n) {
  __shared__ float As[kNaiveTile][kNaiveTile];
  __shared__ float Bs[kNaiveTile][kNaiveTile];
  int64_t m0, n0;
  tile_of(tiles_n, kNaiveTile, kNaiveTile, m0, n0);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t m = m0 + ty, n = n0 + tx;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += kNaiveTile) {
    As[ty][tx] = (m < M && k0 + tx < K) ? a[m * K + k0 + tx] : 0.f;
    Bs[ty][tx] = (k0 + ty < K && n < N) ? b[(k0 + ty) * N + n] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kNaiveTile; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
  }
  if (m < M && n < N) c[m * N + n] = acc;
}

// ---- blocktile_1d: 64 x 64 x 8 tile, 512 threads, 8 outputs (a column strip) per thread ----
constexpr int k1dBM = 64, k1dBN = 64, k1dBK = 8, k1dTM = 8;
constexpr int k1dThreads = k1dBM * k1dBN / k1dTM;  // 512 = one A element + one B element each
// __launch_bounds__(512, 1): without the explicit 1 block/SM, ptxas -v showed 40 registers and a
// 12-byte spill; with it 92 registers and no spill.

__global__ void __launch_bounds__(k1dThreads, 1)
    blocktile_1d_kernel(const float* __restrict__ a, const float* __restrict__ b,
                        float* __restrict__ c, int64_t M, int64_t N, int64_t K, int64_t tiles_n) {
  __shared__ float As[k1dBM][k1dBK];
  __shared__ float Bs[k1dBK][k1dBN];
  int64_t m0, n0;
  tile_of(tiles_n, k1dBM, k1dBN, m0, n0);
  const int tid = threadIdx.x;
  const int col = tid % k1dBN, row_group = tid / k1dBN;  // row_group * TM: first of 8 rows
  const int a_row = tid / k1dBK, a_col = tid % k1dBK;
  const int b_row = tid / k1dBN, b_col = tid % k1dBN;
  float acc[k1dTM] = {};
  for (int64_t k0 = 0; k0 < K; k0 += k1dBK) {
    As[a_row][a_col] = (m0 + a_row < M && k0 + a_col < K) ? a[(m0 + a_row) * K + k0 + a_col] : 0.f;
    Bs[b_row][b_col] = (k0 + b_row < K && n0 + b_col < N) ? b[(k0 + b_row) * N + n0 + b_col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < k1dBK; ++k) {
      const float bv = Bs[k][col];
#pragma unroll
      for (int r = 0; r < k1dTM; ++r) acc[r] = fmaf(As[row_group * k1dTM + r][k], bv, acc[r]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < k1dTM; ++r) {
    const int64_t m = m0 + row_group * k1dTM + r, n = n0 + col;
    if (m < M && n < N) c[m * N + n] = acc[r];
  }
}

// ---- blocktile_2d: 128 x 128 x 8 tile, 256 threads, 8 x 8 outputs per thread ----
constexpr int k2dBM = 128, k2dBN = 128, k2dBK = 8, k2dTM = 8, k2dTN = 8;
constexpr int k2dThreads = (k2dBM / k2dTM) * (k2dBN / k2dTN);  // 256

__global__ void __launch_bounds__(k2dThreads)
    blocktile_2d_kernel(const float* __restrict__ a, const float* __restrict__ b,
                        float* __restrict__ c, int64_t M, int64_t N, int64_t K, int64_t tiles_n) {
  __shared__ float As[k2dBM][k2dBK];
  __shared__ float Bs[k2dBK][k2dBN];
  int64_t m0, n0;
  tile_of(tiles_n, k2dBM, k2dBN, m0, n0);
  const int tid = threadIdx.x;
  const int trow = tid / (k2dBN / k2dTN), tcol = tid % (k2dBN / k2dTN);
  float acc[k2dTM][k2dTN] = {};
  for (int64_t k0 = 0; k0 < K; k0 += k2dBK) {
    // 1024 elements of each tile, 4 per thread.
    for (int i = tid; i < k2dBM * k2dBK; i += k2dThreads) {
      const int r = i / k2dBK, kk = i % k2dBK;
      As[r][kk] = (m0 + r < M && k0 + kk < K) ? a[(m0 + r) * K + k0 + kk] : 0.f;
    }
    for (int i = tid; i < k2dBK * k2dBN; i += k2dThreads) {
      const int kk = i / k2dBN, cc = i % k2dBN;
      Bs[kk][cc] = (k0 + kk < K && n0 + cc < N) ? b[(k0 + kk) * N + n0 + cc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < k2dBK; ++k) {
      float a_frag[k2dTM], b_frag[k2dTN];
#pragma unroll
      for (int r = 0; r < k2dTM; ++r) a_frag[r] = As[trow * k2dTM + r][k];
#pragma unroll
      for (int cc = 0; cc < k2dTN; ++cc) b_frag[cc] = Bs[k][tcol * k2dTN + cc];
#pragma unroll
      for (int r = 0; r < k2dTM; ++r)
#pragma unroll
        for (int cc = 0; cc < k2dTN; ++cc) acc[r][cc] = fmaf(a_frag[r], b_frag[cc], acc[r][cc]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < k2dTM; ++r) {
    const int64_t m = m0 + trow * k2dTM + r;
    if (m >= M) continue;
#pragma unroll
    for (int cc = 0; cc < k2dTN; ++cc) {
      const int64_t n = n0 + tcol * k2dTN + cc;
      if (n < N) c[m * N + n] = acc[r][cc];
    }
  }
}

// ---- vectorized / warptile: the sgemm/kernel.cuh kernel with features switched off ----
using CfgVectorized = TileConfig<128, 128, 8, 128, 128, 8, 8, 1, false, 2, 1>;
using CfgWarptile = TileConfig<128, 128, 16, 64, 32, 8, 8, 1, true, 2, 1>;

template <class Cfg>
void launch_tiles(const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K,
                  cudaStream_t stream) {
  SgemmParams p{};
  p.a = a;
  p.b = b;
  p.lda = K;
  p.ldb = N;
  p.out = c;
  p.alpha = 1.f;
  p.beta = 0.f;
  p.M = M;
  p.N = N;
  p.K = K;
  p.k_per_split = K;
  p.tiles_m = int(ceil_div<int64_t>(M, Cfg::BM));
  p.tiles_n = int(ceil_div<int64_t>(N, Cfg::BN));
  const bool vec = is_aligned(p.a, 16) && is_aligned(p.b, 16) && K % 4 == 0 && N % 4 == 0;
  const dim3 grid(unsigned(p.tiles_m) * unsigned(p.tiles_n));
  if (vec) {
    sgemm_kernel<Cfg, true, false, true><<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  } else {
    sgemm_kernel<Cfg, true, false, false><<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void launch_sgemm_ladder_step(const std::string& variant, const float* a, const float* b, float* c,
                              int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  auto grid_for = [&](int64_t tm, int64_t tn, int64_t& tiles_n) {
    tiles_n = ceil_div<int64_t>(N, tn);
    const int64_t tiles = ceil_div<int64_t>(M, tm) * tiles_n;
    CUDASTEPS_CHECK(tiles <= INT_MAX, kOp, "the output must have at most 2^31 - 1 tiles, got ",
                    tiles);
    return unsigned(tiles);
  };
  int64_t tiles_n = 0;
  if (variant == "naive" || variant == "coalesced" || variant == "smem_tile") {
    const unsigned grid = grid_for(kNaiveTile, kNaiveTile, tiles_n);
    const dim3 block(kNaiveTile, kNaiveTile);
    if (variant == "naive") {
      naive_kernel<false><<<grid, block, 0, stream>>>(a, b, c, M, N, K, tiles_n);
    } else if (variant == "coalesced") {
      naive_kernel<true><<<grid, block, 0, stream>>>(a, b, c, M, N, K, tiles_n);
    } else {
      smem_tile_kernel<<<grid, block, 0, stream>>>(a, b, c, M, N, K, tiles_n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else if (variant == "blocktile_1d") {
    const unsigned grid = grid_for(k1dBM, k1dBN, tiles_n);
    blocktile_1d_kernel<<<grid, k1dThreads, 0, stream>>>(a, b, c, M, N, K, tiles_n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else if (variant == "blocktile_2d") {
    const unsigned grid = grid_for(k2dBM, k2dBN, tiles_n);
    blocktile_2d_kernel<<<grid, k2dThreads, 0, stream>>>(a, b, c, M, N, K, tiles_n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else if (variant == "vectorized") {
    grid_for(CfgVectorized::BM, CfgVectorized::BN, tiles_n);
    launch_tiles<CfgVectorized>(a, b, c, M, N, K, stream);
  } else {
    grid_for(CfgWarptile::BM, CfgWarptile::BN, tiles_n);
    launch_tiles<CfgWarptile>(a, b, c, M, N, K, stream);
  }
}

}  // namespace gemm
}  // namespace cudasteps
