// Instantiations of the multistage SGEMM (multistage_configs.cuh): the 128x128 configs with BK 8
// and 32, and the smaller 128x64 and 64x64 tiles.
#include "gemm/sgemm/multistage_configs.cuh"

namespace cudasteps {
namespace gemm {

template void launch_row_major<Ms128Occ2>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms128Bk32>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms128x64>(const SgemmParams&, bool, bool, int, cudaStream_t);
template void launch_row_major<Ms64x64>(const SgemmParams&, bool, bool, int, cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
