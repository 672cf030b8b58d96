// Instantiations of the CUDA mul (self * other: MulOp) for the floating types (float,
// double, Half, BFloat16; fp32 math for the 16-bit ones), every kernel path of binary_kernels.cuh. The other
// dtype group is inst_mul_int.cu: the op's kernels split in two units that a parallel build
// compiles side by side.
#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {

template void launch_mul<float>(const BinaryArgs<float>&, cudaStream_t);
template void launch_mul<double>(const BinaryArgs<double>&, cudaStream_t);
template void launch_mul<c10::Half>(const BinaryArgs<c10::Half>&, cudaStream_t);
template void launch_mul<c10::BFloat16>(const BinaryArgs<c10::BFloat16>&, cudaStream_t);

}  // namespace elementwise
}  // namespace cudasteps
