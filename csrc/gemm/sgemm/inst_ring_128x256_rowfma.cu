// Instantiations of the SGEMM config table (configs.cuh): the cp.async ring on 128x256 tiles in
// row FFMA order (CfgRingWideRowFma, ladder steps), for row-major operands with aligned rows
// alone (RowMajorOnly: the dispatcher repacks other operands into that layout).
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgRingWideRowFma, false, true>(const SgemmParams&, bool, bool, bool, bool,
                                                         int, cudaStream_t);
template void launch_streamk<CfgRingWideRowFma, false, true>(const SgemmParams&,
                                                             const StreamKParams&, bool, bool,
                                                             bool, bool, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
