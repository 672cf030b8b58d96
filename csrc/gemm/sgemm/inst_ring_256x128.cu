// Instantiations of the SGEMM config table (configs.cuh): the cp.async ring on 256x128 tiles
// (CfgRingTall), with the transposed-output instantiation of swap_nn, in every operand layout
// and alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgRingTall, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                             cudaStream_t);
template void launch_streamk<CfgRingTall, false>(const SgemmParams&, const StreamKParams&, bool,
                                                 bool, bool, bool, cudaStream_t);
template void launch_cfg<CfgRingTall, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                            cudaStream_t);
template void launch_streamk<CfgRingTall, true>(const SgemmParams&, const StreamKParams&, bool,
                                                bool, bool, bool, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
