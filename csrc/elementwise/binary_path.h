// The kernel paths of add / mul (binary.h chooses one per call; the CPU loops of
// elementwise_cpu.cpp and the CUDA launchers of binary_kernels.cuh carry it out). Light on purpose
// (no header at all): the CUDA launcher declarations (launch.h) take it, and the kernel units that
// define them must not pay for ATen's headers (about 20 s of compile time per unit).
#pragma once

namespace cudasteps {
namespace elementwise {

//   kEmpty      no elements: nothing to launch
//   kFlat       both operands dense and of the result shape: one vectorized pass
//   kFlatValue  one dense operand of the result shape and a host value
//   kFlatDeviceOther / kFlatDeviceSelf
//               one dense operand of the result shape and, as other / self, one element in GPU
//               memory (a 0-dim or one-element CUDA tensor): the flat pass, each thread reading
//               that element once (CUDA only; the strided kernel took 1.2x the flat pass's time)
//   kRowVec     self dense of the result shape, other a per-feature vector (it varies only along
//               the last dim): the row kernel keeps the vector in registers
//   kVecRow     the same with the roles swapped
//   kStrided    anything else: a general kernel with 64-bit strides (0 on broadcast dims)
enum class BinaryPath {
  kEmpty,
  kFlat,
  kFlatValue,
  kFlatDeviceOther,
  kFlatDeviceSelf,
  kRowVec,
  kVecRow,
  kStrided
};

}  // namespace elementwise
}  // namespace cudasteps
