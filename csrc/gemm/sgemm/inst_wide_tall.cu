// Instantiations of the SGEMM config table (configs.cuh): the register-staged 128x256 and
// 256x128 tiles (CfgWide, CfgTall), in every operand layout and alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgWide, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                         cudaStream_t);
template void launch_cfg<CfgTall, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                         cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
