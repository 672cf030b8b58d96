// Instantiations of the CUDA bias_act_backward and sum_leading launchers (bias_act_backward.cuh)
// for Half and BFloat16 (fp32 math; FastGelu for gelu). The other two dtypes are inst_backward_fp32_fp64.cu: the
// backward's kernels split in two units that a parallel build compiles side by side.
#include "elementwise/bias_act_backward.cuh"

namespace cudasteps {
namespace elementwise {

CUDASTEPS_INSTANTIATE_BIAS_ACT_BACKWARD(c10::Half)
CUDASTEPS_INSTANTIATE_BIAS_ACT_BACKWARD(c10::BFloat16)

}  // namespace elementwise
}  // namespace cudasteps
