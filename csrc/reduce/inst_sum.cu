// Instantiations of the sum's pass launchers (launchers.cuh), per (input, accumulator, result) type
// triple: a first pass from the input to its accumulator type (or straight to the result), a later
// one from accumulators to the result. The triples come in closed sets (reduce_cuda.cpp), so every
// kernel they launch is compiled here and nowhere else. One unit for the three dtype groups: each
// group alone took 4.7-7.4 s of compile time on 2 cores, about 3 s of it the unit's fixed cost
// (headers), paid once here.
#include <cstdint>

#include "reduce/launchers.cuh"

namespace cudasteps {
namespace reduce {

// fp32 and fp64 inputs, each summed in its own type.
CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(double, double, double);

// half and bf16 inputs, summed in fp32: results in fp32 or the input's own type.
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::Half, float, c10::Half);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::Half, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, c10::Half);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::BFloat16, float, c10::BFloat16);
CUDASTEPS_INSTANTIATE_SUM_PASSES(c10::BFloat16, float, float);
CUDASTEPS_INSTANTIATE_SUM_PASSES(float, float, c10::BFloat16);

// Integer and bool inputs (bool read as uint8), summed in int64.
CUDASTEPS_INSTANTIATE_SUM_PASSES(uint8_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int8_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int16_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int32_t, int64_t, int64_t);
CUDASTEPS_INSTANTIATE_SUM_PASSES(int64_t, int64_t, int64_t);

}  // namespace reduce
}  // namespace cudasteps
