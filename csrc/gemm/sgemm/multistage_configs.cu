// Instantiations of the multistage cp.async SGEMM (multistage.cuh): the configs that join
// the SGEMM config table (runnable as `cfg:<name>`, chosen by table.inc), and the configs of
// the ladder steps that add one feature at a time.
//
// Names: cp<Stages>_<BM>x<BN>x<BK>_w<WM>x<WN>_t<TM>x<TN>, then _fdb (fragment double buffering),
// _se (shared-memory staged epilogue), _occ<N> (__launch_bounds__ for N blocks per SM; default 1,
// i.e. up to 255 registers and the slice's k groups fully unrolled). Table configs use the grouped
// (swizzled) tile order.
//
// Compile time: every config (table and ladder step) is instantiated for row-major A and B with
// 16-byte aligned rows only; the dispatcher copies other operands into that layout first. The
// table (table.inc) never picks a multistage config (the ring configs won every measured shape),
// so only the ladder and the sweep run them: their other three layouts took about 15 s of compile
// time on a 2-core machine for rows no report showed.
//
// This unit: the entries (names, tiles, launch functions) that join the SGEMM config table.
#include "gemm/sgemm/multistage_configs.cuh"

namespace cudasteps {
namespace gemm {
namespace {

template <class Cfg>
constexpr MsEntry table_entry(const char* name) {
  return MsEntry{name, Cfg::BM, Cfg::BN, Cfg::BK, Cfg::MinBlocks, true, &launch_row_major<Cfg>};
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
