// Instantiations of the SGEMM config table (configs.cuh): the cp.async ring on 256x128 tiles in
// row FFMA order (CfgRingTallRowFma, ladder steps), for row-major operands with aligned rows
// alone (RowMajorOnly: the dispatcher repacks other operands into that layout).
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgRingTallRowFma, false, true>(const SgemmParams&, bool, bool, bool, bool,
                                                         int, cudaStream_t);
template void launch_streamk<CfgRingTallRowFma, false, true>(const SgemmParams&,
                                                             const StreamKParams&, bool, bool,
                                                             bool, bool, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
