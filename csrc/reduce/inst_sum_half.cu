// Instantiations of the sum's pass launchers (launchers.cuh) for half and bf16 inputs, summed in
// fp32: a first pass from the input to fp32 (or straight to the result), a later one from fp32
// accumulators to the result (fp32, or the input's own type). The pass types come in these
// closed sets (reduce_cuda.cpp), so every kernel they launch is compiled here and nowhere else.
#include "reduce/launchers.cuh"

namespace cudasteps {
namespace reduce {

CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::Half, float, c10::Half);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::Half, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, c10::Half);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::BFloat16, float, c10::BFloat16);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::BFloat16, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, c10::BFloat16);

}  // namespace reduce
}  // namespace cudasteps
