// Instantiations of the sum's pass launchers (launchers.cuh) for integer and bool inputs (bool is
// read as uint8), summed in int64: the first pass reads the input, later ones int64 accumulators.
#include <cstdint>

#include "reduce/launchers.cuh"

namespace cudasteps {
namespace reduce {

CUDASTEPS_INSTANTIATE_SUM_PASSES(uint8_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int8_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int16_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int32_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int64_t, int64_t, int64_t);

}  // namespace reduce
}  // namespace cudasteps
