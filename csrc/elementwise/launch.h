// The elementwise family's CUDA launchers, as the host code (elementwise_cuda.cpp, binary_cuda.cpp)
// calls them: raw pointers, sizes and the stream, after the host has checked the arguments, set
// the device guard, allocated the outputs and dispatched on the dtype. Each launcher picks the
// kernel (activation, vector width, path), sizes its grid from the device and launches on the
// given stream. Defined and explicitly instantiated for every dtype they serve in the kernel
// units: bias_act_cuda.cu, inst_backward_*.cu, inst_add_*.cu and inst_mul_*.cu. Light on
// purpose (CUDA's runtime and the family's light headers, nothing of ATen): those units include
// it, and ATen's headers would cost each of them about 20 s of compile time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/strided.h"
#include "elementwise/binary_path.h"
#include "elementwise/functors.h"

namespace cudasteps {
namespace elementwise {

// ---- bias_act and its ladder (bias_act_cuda.cu; T: float, double, Half, BFloat16) -------------

// out = act(x + bias) for x contiguous, viewed as (rows, cols), and bias a per-feature vector of
// cols elements of type T, or fp32 when bias_is_float; without bias (null), out = act(x) over
// numel elements. amax_bits (bias_act_amax): null, or a float32 word set to +0 by the caller,
// raised to max |out| (the rounded values; float, Half and BFloat16 only).
template <typename T>
void launch_bias_act(Act act, const T* x, const void* bias, bool bias_is_float, T* out,
                     int64_t rows, int64_t cols, int64_t numel, cudaStream_t stream,
                     unsigned* amax_bits = nullptr);

// ladder_bias_act, step 1 (unfused), its first kernel: sum = x + bias materialized (the second is
// launch_bias_act without bias, on sum).
template <typename T>
void launch_ladder_bias_add(const T* x, const void* bias, bool bias_is_float, T* sum,
                            int64_t rows, int64_t cols, cudaStream_t stream);

// ladder_bias_act, step 2 (fused_scalar): out = act(x + bias) with one thread per element; bias
// may be null.
template <typename T>
void launch_ladder_fused_scalar(Act act, const T* x, const void* bias, bool bias_is_float, T* out,
                                int64_t numel, int64_t cols, cudaStream_t stream);

// ---- bias_act_backward and sum_leading (bias_act_backward.cuh, inst_backward_*.cu; four T) --

// grad_x = grad * act'(x + bias), all contiguous (rows, cols). With bias, also grad_bias[c] =
// sum over r of grad_x[r, c], written as T or, when grad_bias_is_float, fp32; without bias (null),
// grad_x alone over numel elements. amax_bits as launch_bias_act's, raised to max |grad_x|.
template <typename T>
void launch_bias_act_backward(Act act, const T* grad, const T* x, const void* bias,
                              bool bias_is_float, T* grad_x, void* grad_bias,
                              bool grad_bias_is_float, int64_t rows, int64_t cols, int64_t numel,
                              cudaStream_t stream, unsigned* amax_bits = nullptr);

// sum_out[c] = alpha * sum over r of self[r, c] * other[r, c] (self alone when other is null), for
// contiguous (rows, cols) inputs; sum_out is of type T or, when sum_out_is_float, fp32.
template <typename T>
void launch_sum_leading(const T* self, const T* other, void* sum_out, bool sum_out_is_float,
                        double alpha, int64_t rows, int64_t cols, cudaStream_t stream);

// ---- add / mul (binary_kernels.cuh; inst_add_*.cu and inst_mul_*.cu instantiate them for float,
// double, Half, BFloat16, uint8_t, int8_t, int16_t, int, int64_t and bool) ---------------------

// Which operand, if any, is a host value (binary.h: a Scalar, or a 0-dim CPU tensor).
enum class ValueOperand { kNone, kSelf, kOther };

// One planned add/mul call as the kernels read it (binary.h's BinaryPlan, carried out).
template <typename T>
struct BinaryArgs {
  BinaryPath path = BinaryPath::kEmpty;
  // The tensor operands in the result dtype, expanded to the result shape; null for the operand
  // that is a host value.
  const T* self = nullptr;
  const T* other = nullptr;
  T* out = nullptr;  // contiguous, of the result shape
  int64_t numel = 0;
  int64_t rows = 0, cols = 0;  // kRowVec / kVecRow: the dense operand as (rows, cols)
  ValueOperand value_operand = ValueOperand::kNone;
  opmath_type<T> value{};  // the host value, in the math type
  // kStrided: the views as read, (self, other) or, with a host value, the tensor operand twice.
  StridedPair strided;
};

// out = self + alpha * other.
template <typename T>
void launch_add(const BinaryArgs<T>& args, opmath_type<T> alpha, cudaStream_t stream);

// out = self * other.
template <typename T>
void launch_mul(const BinaryArgs<T>& args, cudaStream_t stream);

}  // namespace elementwise
}  // namespace cudasteps
