// Instantiations of the SGEMM config table (configs.cuh): the cp.async ring on 256x128 tiles in
// row FFMA order (CfgRingTallRowFma, ladder steps), in every operand layout and alignment.
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgRingTallRowFma, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                                   cudaStream_t);
template void launch_streamk<CfgRingTallRowFma, false>(const SgemmParams&, const StreamKParams&,
                                                       bool, bool, bool, bool, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
