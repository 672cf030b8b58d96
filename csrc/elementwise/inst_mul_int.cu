// Instantiations of the CUDA mul (self * other: MulOp) for the integer types and bool
// (uint8_t, int8_t, int16_t, int, int64_t, bool), every kernel path of binary_kernels.cuh. The other
// dtype group is inst_mul_float.cu: the op's kernels split in two units that a parallel build
// compiles side by side.
#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {

template void launch_mul<uint8_t>(const BinaryArgs<uint8_t>&, cudaStream_t);
template void launch_mul<int8_t>(const BinaryArgs<int8_t>&, cudaStream_t);
template void launch_mul<int16_t>(const BinaryArgs<int16_t>&, cudaStream_t);
template void launch_mul<int>(const BinaryArgs<int>&, cudaStream_t);
template void launch_mul<int64_t>(const BinaryArgs<int64_t>&, cudaStream_t);
template void launch_mul<bool>(const BinaryArgs<bool>&, cudaStream_t);

}  // namespace elementwise
}  // namespace cudasteps
