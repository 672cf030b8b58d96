// CUDA bias_act_backward (the activation's derivative, fused with the bias gradient's column sum)
// and sum_leading (the bias gradient of a plain bias add), the kernel side: the launchers of
// launch.h on the rowgrad and flat kernels of kernels.cuh (which also says how they work).
// inst_backward_fp16_bf16.cu and inst_backward_fp32_fp64.cu instantiate them, two dtypes each, so
// that a parallel build compiles them side by side. The host side (checks, dtype dispatch,
// allocation) is elementwise_cuda.cpp. Light on purpose, as kernels.cuh (nothing of ATen: about
// 20 s of compile time per unit).
#pragma once

#include "elementwise/kernels.cuh"
#include "elementwise/launch.h"

namespace cudasteps {
namespace elementwise {

template <typename T>
void launch_bias_act_backward(Act act, const T* grad, const T* x, const void* bias,
                              bool bias_is_float, T* grad_x, void* grad_bias,
                              bool grad_bias_is_float, int64_t rows, int64_t cols, int64_t numel,
                              cudaStream_t stream, unsigned* amax_bits) {
  dispatch_act(act, [&](auto a) {
    const BiasActGradOpFor<decltype(a)::value, T> op{};
    if (bias != nullptr || amax_bits != nullptr) {
      // (Without a bias: zeros for it, and no column sums finalized; the flat kernel emits no
      // amax.)
      launch_rowgrad<T, true, true>(grad, x, bias, bias_is_float, grad_x, grad_bias,
                                    grad_bias_is_float, 1.0, rows, cols, op, stream,
                                    "bias_act_backward", amax_bits);
    } else {
      // No bias, no column sum: a plain same-shape elementwise pass, d = g * act'(x).
      const XGradOp<BiasActGradOpFor<decltype(a)::value, T>> flat_op{op};
      launch_flat<T, true>(x, grad, grad_x, numel, flat_op, stream);
    }
  });
}

template <typename T>
void launch_sum_leading(const T* self, const T* other, void* sum_out, bool sum_out_is_float,
                        double alpha, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (other != nullptr) {
    launch_rowgrad<T, true, false>(self, other, nullptr, false, nullptr, sum_out, sum_out_is_float,
                                   alpha, rows, cols, ProductOp<true>{}, stream, "sum_leading");
  } else {
    launch_rowgrad<T, false, false>(self, nullptr, nullptr, false, nullptr, sum_out,
                                    sum_out_is_float, alpha, rows, cols, ProductOp<false>{}, stream,
                                    "sum_leading");
  }
}

// Explicit instantiations of both launchers for the dtype T (the inst_backward_*.cu units).
#define CUDASTEPS_INSTANTIATE_BIAS_ACT_BACKWARD(T)                                                 \
  template void launch_bias_act_backward<T>(Act, const T*, const T*, const void*, bool, T*, void*, \
                                            bool, int64_t, int64_t, int64_t, cudaStream_t,         \
                                            unsigned*);                                            \
  template void launch_sum_leading<T>(const T*, const T*, void*, bool, double, int64_t, int64_t,   \
                                      cudaStream_t);

}  // namespace elementwise
}  // namespace cudasteps
