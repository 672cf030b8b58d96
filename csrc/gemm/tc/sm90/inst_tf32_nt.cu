// The Hopper kernels for tf32 operands, A row-major (K-major) and B column-major (K-major):
// every ladder step's kernel in both tile widths (launch_layout, launch.cuh). One unit per
// (type, layout), so that a parallel build compiles them side by side.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_layout<TcType::kTF32, true, true>(const TcProblem&, HopperKernel,
                                                       cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
