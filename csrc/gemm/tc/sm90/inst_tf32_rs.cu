// The tc:ws_tf32_rs kernels (rs_kernel.cuh): TF32 with one MN-major operand read through
// registers, both tile widths, the register operand B (swapped) or A.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_rs_typed<128, false>(const TcProblem&, cudaStream_t);
template void launch_rs_typed<128, true>(const TcProblem&, cudaStream_t);
template void launch_rs_typed<256, false>(const TcProblem&, cudaStream_t);
template void launch_rs_typed<256, true>(const TcProblem&, cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
