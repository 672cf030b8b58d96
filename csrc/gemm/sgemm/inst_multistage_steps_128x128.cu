// Instantiations of the multistage SGEMM (multistage_configs.cuh): the ladder steps' configs
// (row-major operands only) and the 128x128x16 table configs.
#include "gemm/sgemm/multistage_configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_row_major<StepMultistage>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<StepFragDB>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<StepSmemEpi>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms128FdbSe>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms128>(const SgemmParams&, bool, bool, int, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
