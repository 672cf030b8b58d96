// Instantiations of the SGEMM config table (configs.cuh): the register-staged configs that only the
// ladder, the config sweep and `cfg:<name>` run (CfgMain, the double_buffer step's; CfgBK16,
// CfgW32x64, CfgOcc1, CfgW64x64, CfgWide, CfgTall), each for row-major operands with aligned rows
// alone (RowMajorOnly: the dispatcher repacks other operands into that layout).
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgMain, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);
template void launch_cfg<CfgBK16, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);
template void launch_cfg<CfgW32x64, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                                 cudaStream_t);
template void launch_cfg<CfgOcc1, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);
template void launch_cfg<CfgW64x64, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                                 cudaStream_t);
template void launch_cfg<CfgWide, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);
template void launch_cfg<CfgTall, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
