// Instantiations of the multistage SGEMM (multistage_configs.cuh): the 128x256 and 256x128
// configs.
#include "gemm/sgemm/multistage_configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_row_major<Ms128x256Bk16>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms128x256Bk8>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms256x128>(const SgemmParams&, bool, bool, int, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
