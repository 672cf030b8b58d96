// Instantiations of the SGEMM config table (configs.cuh): the smaller tiles for outputs that
// leave SMs idle (CfgMid: 128x64, CfgSmall: 64x64), in every operand layout and alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgMid, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                        cudaStream_t);
template void launch_cfg<CfgSmall, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                          cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
