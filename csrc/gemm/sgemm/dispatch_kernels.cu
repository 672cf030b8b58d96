// The SGEMM dispatcher's device side (dispatch.cpp, gemm_cuda, is the host side): the config
// table's sgemm_kernel entries (names, tiles and the launch functions of configs.cuh's
// instantiations, which live in the inst_*.cu units), the float64 tiled kernel, and the launcher of
// split-K's ordered sum (also the K = 0 epilogue of both dtypes). The configs themselves are
// described at the top of dispatch.cpp. No ATen header here (launch.h says why).
#include <c10/cuda/CUDAException.h>

#include <climits>
#include <cstdint>

#include "common/error.h"
#include "common/launch.cuh"
#include "gemm/sgemm/configs.cuh"
#include "gemm/sgemm/epilogue.cuh"
#include "gemm/sgemm/launch.h"

namespace cudasteps {
namespace gemm {
namespace {

// The sgemm_kernel configs. Index 0 is the main config; launch.h names the rows the dispatcher
// picks by index (checked below).
// The dispatcher picks the rows built for every layout (entry<Cfg>: the ring 256x128 with its
// swapped twin, the mid and small tiles); the rest (entry<Cfg, false, true>) run row-major
// operands alone, for the ladder and the sweep (configs.cuh, with_instantiation).
constexpr ConfigEntry kConfigs[] = {
    entry<CfgMain, false, true>("128x128x8_w64x32_t8x8"),
    entry<CfgBK16, false, true>("128x128x16_w64x32_t8x8"),
    entry<CfgW32x64, false, true>("128x128x8_w32x64_t8x8"),
    entry<CfgOcc1, false, true>("128x128x16_w64x32_t8x8_occ1"),
    entry<CfgMid>("128x64x16_w64x32_t8x8"),
    entry<CfgSmall>("64x64x16_w32x32_t8x4"),
    entry<CfgWide, false, true>("128x256x8_w64x64_t8x16"),
    entry<CfgTall, false, true>("256x128x8_w64x64_t16x8"),
    entry<CfgW64x64, false, true>("128x128x16_w64x64_t8x16"),
    entry<CfgRingWide, false, true>("ring3_128x256x8_w64x64_t8x16"),
    entry<CfgRingTall>("ring3_256x128x8_w64x64_t16x8"),
    entry<CfgRingWideRowFma, false, true>("ring3_128x256x8_w64x64_t8x16_rowfma"),
    entry<CfgRingTallRowFma, false, true>("ring3_256x128x8_w64x64_t16x8_rowfma"),
    entry<CfgRingTall, true>("ring3_256x128x8_w64x64_t16x8_swapnn"),
};

// Whether row i of the table launches config Cfg.
template <class Cfg, bool RowMajorOnly = false>
constexpr bool row_is(int i) {
  return kConfigs[i].launch == &launch_cfg<Cfg, false, RowMajorOnly>;
}
static_assert(row_is<CfgMain, true>(kMainConfig) && row_is<CfgMid>(kMidConfig) &&
                  row_is<CfgSmall>(kSmallConfig),
              "launch.h's config indices name these rows");

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

}  // namespace

int num_configs() {
  return int(sizeof(kConfigs) / sizeof(kConfigs[0]));
}

const ConfigEntry& config_entry(int i) {
  return kConfigs[i];
}

void launch_dgemm_tiled(const double* a, int64_t sa0, int64_t sa1, const double* b, int64_t sb0,
                        int64_t sb1, double* out, int64_t M, int64_t N, int64_t K, double alpha,
                        double beta, const double* addend, int64_t s0, int64_t s1,
                        cudaStream_t stream) {
  const int64_t tiles_n = ceil_div<int64_t>(N, kDTile);
  const int64_t tiles = ceil_div<int64_t>(M, kDTile) * tiles_n;
  CUDASTEPS_CHECK(tiles <= INT_MAX, "mm", "the float64 output [", M, ", ", N,
                  "] must have at most 2^31 - 1 tiles of 16 x 16, got ", tiles);
  dgemm_tiled_kernel<<<unsigned(tiles), dim3(kDTile, kDTile), 0, stream>>>(
      a, sa0, sa1, b, sb0, sb1, out, M, N, K, alpha, beta, addend, s0, s1, tiles_n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void launch_splitk_epilogue(const T* partial, int splits, int64_t M, int64_t N, T* out,
                            double alpha, double beta, const T* addend, int64_t s0, int64_t s1,
                            cudaStream_t stream) {
  constexpr int kThreads = 256;
  const auto kernel = splitk_epilogue_kernel<T>;
  const int64_t grid = persistent_grid(kernel, kThreads, M * N, kThreads);
  kernel<<<unsigned(grid), kThreads, 0, stream>>>(partial, splits, M, N, out, T(alpha), T(beta),
                                                  addend, s0, s1);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch_splitk_epilogue<float>(const float*, int, int64_t, int64_t, float*, double,
                                            double, const float*, int64_t, int64_t, cudaStream_t);
template void launch_splitk_epilogue<double>(const double*, int, int64_t, int64_t, double*, double,
                                             double, const double*, int64_t, int64_t,
                                             cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
