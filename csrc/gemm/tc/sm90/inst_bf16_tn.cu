// The Hopper kernels for bf16 operands, A column-major (M-major) and B row-major (N-major):
// every ladder step's kernel in both tile widths (launch_layout, launch.cuh). One unit per
// (type, layout), so that a parallel build compiles them side by side.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_layout<TcType::kBF16, false, false>(const TcProblem&, HopperKernel,
                                                         cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
