// The multistage SGEMM's configs, as types (MsConfig aliases: the ladder steps', then the
// config table's), and the launch templates that pick the kernel instantiation for an operand
// layout (launch_row_major: row-major A and B, for table configs and ladder steps). Instantiated in
// the inst_multistage_*.cu units, a few configs each, so that a parallel build compiles them side
// by side; the extern declarations at the end keep every other unit from instantiating them.
#pragma once

#include <c10/cuda/CUDAException.h>

#include "common/error.h"
#include "gemm/sgemm/multistage.cuh"
#include "gemm/sgemm/multistage.h"

namespace cudasteps {
namespace gemm {

//                      BM   BN  BK  WM  WN  TM  TN St MinB  FragDB SmemEpi Swizzle
// Ladder steps (each adds one feature to the one before).
using StepMultistage = MsConfig<128, 128, 16, 64, 32, 8, 8, 3, 1, false, false, false>;
using StepFragDB = MsConfig<128, 128, 16, 64, 32, 8, 8, 3, 1, true, false, false>;
using StepSmemEpi = MsConfig<128, 128, 16, 64, 32, 8, 8, 3, 1, true, true, false>;
// Table configs (the swizzled_raster step is the first: StepSmemEpi + grouped tile order). Two
// blocks per SM (128 registers) fit BK = 8 only: 128x128x16 at occ2 spills 8-12 bytes (ptxas -v).
using Ms128FdbSe = MsConfig<128, 128, 16, 64, 32, 8, 8, 3, 1, true, true, true>;
using Ms128 = MsConfig<128, 128, 16, 64, 32, 8, 8, 3, 1, false, false, true>;
using Ms128Occ2 = MsConfig<128, 128, 8, 64, 32, 8, 8, 4, 2, false, false, true>;
using Ms128Bk32 = MsConfig<128, 128, 32, 64, 32, 8, 8, 3, 1, false, true, true>;
using Ms128x256Bk16 = MsConfig<128, 256, 16, 64, 64, 8, 16, 3, 1, false, true, true>;
using Ms128x256Bk8 = MsConfig<128, 256, 8, 64, 64, 8, 16, 4, 1, false, true, true>;
using Ms256x128 = MsConfig<256, 128, 16, 64, 64, 16, 8, 3, 1, false, true, true>;
using Ms128x64 = MsConfig<128, 64, 16, 64, 32, 8, 8, 4, 2, false, false, true>;
using Ms64x64 = MsConfig<64, 64, 16, 32, 32, 8, 4, 4, 4, false, false, true>;

template <class Cfg, bool ALayoutK, bool BLayoutK>
void launch_ms(const SgemmParams& p, int splits, cudaStream_t stream) {
  const auto kernel = sgemm_multistage_kernel<Cfg, ALayoutK, BLayoutK>;
  constexpr size_t smem = MsSmem<Cfg, ALayoutK, BLayoutK>::kBytes;
  tc::configure_smem_once(kernel, smem);
  const dim3 grid(unsigned(p.tiles_m) * unsigned(p.tiles_n), 1, unsigned(splits));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <class Cfg>
void launch_row_major(const SgemmParams& p, bool a_k, bool b_k, int splits, cudaStream_t stream) {
  CUDASTEPS_CHECK(a_k && !b_k, "ladder_mm",
                  "the multistage SGEMM configs read row-major A and B only (the dispatcher copies "
                  "other layouts into it)");
  launch_ms<Cfg, true, false>(p, splits, stream);
}

// ---- the instantiations, one inst_multistage_*.cu unit each group ----
extern template void launch_row_major<StepMultistage>(const SgemmParams&, bool, bool, int,
                                                      cudaStream_t);
extern template void launch_row_major<StepFragDB>(const SgemmParams&, bool, bool, int,
                                                  cudaStream_t);
extern template void launch_row_major<StepSmemEpi>(const SgemmParams&, bool, bool, int,
                                                   cudaStream_t);
extern template void launch_row_major<Ms128FdbSe>(const SgemmParams&, bool, bool, int,
                                                  cudaStream_t);
extern template void launch_row_major<Ms128>(const SgemmParams&, bool, bool, int, cudaStream_t);
extern template void launch_row_major<Ms128Occ2>(const SgemmParams&, bool, bool, int, cudaStream_t);
extern template void launch_row_major<Ms128Bk32>(const SgemmParams&, bool, bool, int, cudaStream_t);
extern template void launch_row_major<Ms128x256Bk16>(const SgemmParams&, bool, bool, int,
                                                     cudaStream_t);
extern template void launch_row_major<Ms128x256Bk8>(const SgemmParams&, bool, bool, int,
                                                    cudaStream_t);
extern template void launch_row_major<Ms256x128>(const SgemmParams&, bool, bool, int, cudaStream_t);
extern template void launch_row_major<Ms128x64>(const SgemmParams&, bool, bool, int, cudaStream_t);
extern template void launch_row_major<Ms64x64>(const SgemmParams&, bool, bool, int, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
