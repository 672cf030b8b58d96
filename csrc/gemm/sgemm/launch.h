// The SGEMM room's launchers as the host code sees them (dispatch.cpp): the sgemm_kernel config
// table (ConfigEntry: a config's tiles and the launch functions of its instantiations; the table
// itself is in dispatch_kernels.cu), the float64 tiled kernel, split-K's ordered sum, and the
// ladder's first steps (ladder_steps.cu). Raw pointers, sizes, strides and a stream in; the kernel
// units define them. Light on purpose (CUDA's runtime and c10's error checks, nothing of ATen and
// no device code): both the host .cpp and the kernel units include it, and ATen's headers would
// cost each kernel unit about 20 s of compile time under nvcc.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/launch.cuh"
#include "gemm/sgemm/tile_config.cuh"

namespace cudasteps {
namespace gemm {

// One sgemm_kernel config of the table: its tiles and the launch functions of its instantiations
// (configs.cuh: entry<> fills it, launch_cfg / launch_streamk pick the instantiation).
struct ConfigEntry {
  const char* name;
  int bm, bn, bk;
  int min_blocks;
  // The ring's shared memory with the blocked sums' totals (0: not a ring config).
  size_t sum_smem_bytes;
  // Runs aligned NN products swapped (gemm_cuda); other layouts as the config without it.
  bool swap_nn;
  // Built for row-major A and B with 16-byte aligned rows only (the configs only the ladder, the
  // sweep and `cfg:<name>` run; configs.cuh): gemm_cuda repacks other operands into that.
  bool row_major_only;
  void (*launch)(const SgemmParams&, bool, bool, bool, bool, int, cudaStream_t);
  // The stream-K tail (the ring configs), or nullptr.
  void (*launch_streamk)(const SgemmParams&, const StreamKParams&, bool, bool, bool, bool,
                         cudaStream_t);
};

// The sgemm_kernel configs (dispatch_kernels.cu). Index 0 is the main config.
int num_configs();
const ConfigEntry& config_entry(int i);
// Rows of that table picked by index: the main config (the ladder's double_buffer step, row-major
// operands alone), and the smaller tiles the dispatcher takes for outputs that leave SMs idle and
// cannot split K (choose_config).
constexpr int kMainConfig = 0;
constexpr int kMidConfig = 4, kSmallConfig = 5;  // 128x64x16_w64x32_t8x8, 64x64x16_w32x32_t8x4

// Whether this device gives a block `bytes` of shared memory (the ring's stages and the blocked
// sums' totals: 168 KB for 256x128, more than an A100's 163 KB).
inline bool smem_fits(size_t bytes) {
  return smem_per_block_optin() >= bytes;
}

// out[M, N] (row-major) = alpha * a @ b + beta * addend[m * s0 + n * s1] in float64: the simple
// tiled kernel (one output per thread, 16 x 16 tiles), operands of any strides; addend nullptr:
// none (dispatch_kernels.cu).
void launch_dgemm_tiled(const double* a, int64_t sa0, int64_t sa1, const double* b, int64_t sb0,
                        int64_t sb1, double* out, int64_t M, int64_t N, int64_t K, double alpha,
                        double beta, const double* addend, int64_t s0, int64_t s1,
                        cudaStream_t stream);

// out[i] = alpha * sum_s partial[s][i] + beta * addend[m * s0 + n * s1] (splitk_epilogue_kernel:
// split-K's partial sums added in split order; splits = 0 is the K = 0 case). Instantiated for
// float and double (dispatch_kernels.cu).
template <typename T>
void launch_splitk_epilogue(const T* partial, int splits, int64_t M, int64_t N, T* out,
                            double alpha, double beta, const T* addend, int64_t s0, int64_t s1,
                            cudaStream_t stream);

// One of the SGEMM ladder's first steps by name (naive, coalesced, smem_tile, blocktile_1d,
// blocktile_2d, vectorized, warptile) on contiguous row-major a [M, K], b [K, N] into c [M, N],
// M, N, K > 0 (ladder_steps.cu).
void launch_sgemm_ladder_step(const std::string& variant, const float* a, const float* b, float* c,
                              int64_t M, int64_t N, int64_t K, cudaStream_t stream);

}  // namespace gemm
}  // namespace cudasteps
