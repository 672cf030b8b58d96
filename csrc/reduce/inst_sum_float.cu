// Instantiations of the sum's pass launchers (launchers.cuh) for fp32 and fp64 inputs, each summed
// in its own type. The half/bf16 and integer triples are in the other inst_sum_*.cu units, so that
// a parallel build compiles them side by side.
#include "reduce/launchers.cuh"

namespace cudasteps {
namespace reduce {

CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(double, double, double);

}  // namespace reduce
}  // namespace cudasteps
