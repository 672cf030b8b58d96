// Instantiations of the multistage cp.async SGEMM (sgemm_multistage.cuh): the configs that join
// gemm_cuda.cu's table (runnable as `cfg:<name>`, chosen by sgemm_table.inc), and the configs of
// the ladder steps that add one feature at a time.
//
// Names: cp<Stages>_<BM>x<BN>x<BK>_w<WM>x<WN>_t<TM>x<TN>, then _fdb (fragment double buffering),
// _se (shared-memory staged epilogue), _occ<N> (__launch_bounds__ for N blocks per SM; default 1,
// i.e. up to 255 registers and the slice's k groups fully unrolled). Table configs use the grouped
// (swizzled) tile order.
//
// Compile time: every table config is instantiated for the four layouts (A row- or column-major
// x B row- or column-major) but not for unaligned operands, which gemm_cuda sends to the
// sgemm_kernel config with the same block tile. Ladder-step configs exist for row-major A and B
// only.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "common/checks.h"
#include "gemm/sgemm_multistage.cuh"
#include "gemm/sgemm_multistage.h"

namespace cudasteps {
namespace gemm {
namespace {

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
void launch_all_layouts(const SgemmParams& p, bool a_k, bool b_k, int splits, cudaStream_t stream) {
  if (a_k) {
    if (b_k) return launch_ms<Cfg, true, true>(p, splits, stream);
    return launch_ms<Cfg, true, false>(p, splits, stream);
  }
  if (b_k) return launch_ms<Cfg, false, true>(p, splits, stream);
  return launch_ms<Cfg, false, false>(p, splits, stream);
}

template <class Cfg>
void launch_row_major(const SgemmParams& p, bool a_k, bool b_k, int splits, cudaStream_t stream) {
  CUDASTEPS_CHECK(a_k && !b_k, "ladder_mm", "this SGEMM ladder step reads row-major A and B only");
  launch_ms<Cfg, true, false>(p, splits, stream);
}

template <class Cfg>
constexpr MsEntry table_entry(const char* name) {
  return MsEntry{name, Cfg::BM, Cfg::BN, Cfg::BK, Cfg::MinBlocks, true, &launch_all_layouts<Cfg>};
}

template <class Cfg>
constexpr MsEntry step_entry(const char* name) {
  return MsEntry{name, Cfg::BM, Cfg::BN, Cfg::BK, Cfg::MinBlocks, false, &launch_row_major<Cfg>};
}

// Ladder-step names are the step names of gemm.py's LADDER.
const MsEntry kEntries[] = {
    step_entry<StepMultistage>("cp_async_multistage"),
    step_entry<StepFragDB>("frag_double_buffer"),
    step_entry<StepSmemEpi>("smem_epilogue"),
    table_entry<Ms128FdbSe>("cp3_128x128x16_w64x32_t8x8_fdb_se"),
    table_entry<Ms128>("cp3_128x128x16_w64x32_t8x8"),
    table_entry<Ms128Occ2>("cp4_128x128x8_w64x32_t8x8_occ2"),
    table_entry<Ms128Bk32>("cp3_128x128x32_w64x32_t8x8_se"),
    table_entry<Ms128x256Bk16>("cp3_128x256x16_w64x64_t8x16_se"),
    table_entry<Ms128x256Bk8>("cp4_128x256x8_w64x64_t8x16_se"),
    table_entry<Ms256x128>("cp3_256x128x16_w64x64_t16x8_se"),
    table_entry<Ms128x64>("cp4_128x64x16_w64x32_t8x8_occ2"),
    table_entry<Ms64x64>("cp4_64x64x16_w32x32_t8x4_occ4"),
};

}  // namespace

int ms_num_entries() {
  return int(sizeof(kEntries) / sizeof(kEntries[0]));
}

const MsEntry& ms_entry(int i) {
  return kEntries[i];
}

}  // namespace gemm
}  // namespace cudasteps
