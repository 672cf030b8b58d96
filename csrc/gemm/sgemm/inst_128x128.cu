// Instantiations of the SGEMM config table (configs.cuh): the 128x128 register-staged configs
// with 8 x 8 per thread (CfgMain, the main config; CfgBK16; CfgW32x64), in every operand layout
// and alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgMain, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                         cudaStream_t);
template void launch_cfg<CfgBK16, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                         cudaStream_t);
template void launch_cfg<CfgW32x64, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                           cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
