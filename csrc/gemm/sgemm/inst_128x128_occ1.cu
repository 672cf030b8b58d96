// Instantiations of the SGEMM config table (configs.cuh): the 128x128 register-staged configs
// with one block per SM or 8 x 16 per thread (CfgOcc1, CfgW64x64), in every operand layout and
// alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgOcc1, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                         cudaStream_t);
template void launch_cfg<CfgW64x64, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                           cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
