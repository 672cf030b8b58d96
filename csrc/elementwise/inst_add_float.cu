// Instantiations of the CUDA add (self + alpha * other: AddOp) for the floating types (float,
// double, Half, BFloat16; fp32 math for the 16-bit ones), every kernel path of binary_kernels.cuh. The other
// dtype group is inst_add_int.cu: the op's kernels split in two units that a parallel build
// compiles side by side.
#include "elementwise/binary_kernels.cuh"

namespace cudasteps {
namespace elementwise {

template void launch_add<float>(const BinaryArgs<float>&, opmath_type<float>, cudaStream_t);
template void launch_add<double>(const BinaryArgs<double>&, opmath_type<double>, cudaStream_t);
template void launch_add<c10::Half>(const BinaryArgs<c10::Half>&, opmath_type<c10::Half>, cudaStream_t);
template void launch_add<c10::BFloat16>(const BinaryArgs<c10::BFloat16>&, opmath_type<c10::BFloat16>, cudaStream_t);

}  // namespace elementwise
}  // namespace cudasteps
