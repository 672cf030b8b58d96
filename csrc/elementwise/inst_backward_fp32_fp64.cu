// Instantiations of the CUDA bias_act_backward and sum_leading launchers (bias_act_backward.cuh)
// for float and double. The other two dtypes are inst_backward_fp16_bf16.cu: the
// backward's kernels split in two units that a parallel build compiles side by side.
#include "elementwise/bias_act_backward.cuh"

namespace cudasteps {
namespace elementwise {

CUDASTEPS_INSTANTIATE_BIAS_ACT_BACKWARD(float)
CUDASTEPS_INSTANTIATE_BIAS_ACT_BACKWARD(double)

}  // namespace elementwise
}  // namespace cudasteps
