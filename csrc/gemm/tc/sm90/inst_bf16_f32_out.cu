// The Hopper kernels for bf16 operands with a float32 output (mm.dtype: launch_layout_f32_out,
// launch.cuh), every layout: tc:ws_persistent's kernel in 64-, 128- and 256-wide tiles, plain
// epilogue. Apart from the bf16 layout units, so that a parallel build compiles it beside them.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_layout_f32_out<TcType::kBF16, true, true>(const TcProblem&, cudaStream_t);
template void launch_layout_f32_out<TcType::kBF16, true, false>(const TcProblem&, cudaStream_t);
template void launch_layout_f32_out<TcType::kBF16, false, true>(const TcProblem&, cudaStream_t);
template void launch_layout_f32_out<TcType::kBF16, false, false>(const TcProblem&, cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
