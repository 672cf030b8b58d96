// The Hopper FP8 kernels (tc:fp8_ws, scaled_mm) with A of type float8_e5m2 and B float8_e4m3fn,
// for bf16 and float32 outputs (launch_fp8, launch.cuh). A unit of its own, so that a parallel
// build compiles it beside the other instantiations.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_fp8<TcType::kE5M2, TcType::kBF16>(const TcProblem&, cudaStream_t);
template void launch_fp8<TcType::kE5M2, TcType::kTF32>(const TcProblem&, cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
