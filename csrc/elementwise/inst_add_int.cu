// Instantiations of the CUDA add (self + alpha * other: AddOp) for the integer types and bool
// (uint8_t, int8_t, int16_t, int, int64_t, bool), every kernel path of binary_kernels.cuh. The other
// dtype group is inst_add_float.cu: the op's kernels split in two units that a parallel build
// compiles side by side.
#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {

template void launch_add<uint8_t>(const BinaryArgs<uint8_t>&, opmath_type<uint8_t>, cudaStream_t);
template void launch_add<int8_t>(const BinaryArgs<int8_t>&, opmath_type<int8_t>, cudaStream_t);
template void launch_add<int16_t>(const BinaryArgs<int16_t>&, opmath_type<int16_t>, cudaStream_t);
template void launch_add<int>(const BinaryArgs<int>&, opmath_type<int>, cudaStream_t);
template void launch_add<int64_t>(const BinaryArgs<int64_t>&, opmath_type<int64_t>, cudaStream_t);
template void launch_add<bool>(const BinaryArgs<bool>&, opmath_type<bool>, cudaStream_t);

}  // namespace elementwise
}  // namespace cudasteps
