// Instantiations of the SGEMM config table (configs.cuh): the cp.async ring configs that only the
// ladder, the config sweep and `cfg:<name>` run, sgemm_kernel and the stream-K kernel each, for
// row-major operands with aligned rows alone (RowMajorOnly: the dispatcher repacks other operands
// into that layout): the 128x256 ring (CfgRingWide) and the row-FFMA-order twins of both rings
// (CfgRingWideRowFma, CfgRingTallRowFma: the ladder steps before serpentine_fma).
#include "gemm/sgemm/configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_cfg<CfgRingWide, false, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                                   cudaStream_t);
template void launch_streamk<CfgRingWide, false, true>(const SgemmParams&, const StreamKParams&,
                                                       bool, bool, bool, bool, cudaStream_t);
template void launch_cfg<CfgRingWideRowFma, false, true>(const SgemmParams&, bool, bool, bool, bool,
                                                         int, cudaStream_t);
template void launch_streamk<CfgRingWideRowFma, false, true>(const SgemmParams&,
                                                             const StreamKParams&, bool, bool,
                                                             bool, bool, cudaStream_t);
template void launch_cfg<CfgRingTallRowFma, false, true>(const SgemmParams&, bool, bool, bool, bool,
                                                         int, cudaStream_t);
template void launch_streamk<CfgRingTallRowFma, false, true>(const SgemmParams&,
                                                             const StreamKParams&, bool, bool,
                                                             bool, bool, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
