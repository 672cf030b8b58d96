// CUDA bias_act and its ladder, the kernel side: the launchers of launch.h on the row and flat
// kernels of kernels.cuh (which also says how they work) and the ladder's own fused_scalar kernel,
// instantiated for float, double, Half and BFloat16. The host side (checks, dtype dispatch,
// allocation) is elementwise_cuda.cpp; the backward and sum_leading are bias_act_backward.cuh.
#include "elementwise/kernels.cuh"
#include "elementwise/launch.h"

namespace cudasteps {
namespace elementwise {
namespace {

// ---- ladder --------------------------------------------------------------------------------

// Step 2 (fused_scalar): one thread per element, one element per thread; the bias index is a
// 64-bit modulo per element and every access is one element wide.
template <typename T, typename Op>
__global__ void fused_scalar_kernel(const T* __restrict__ x, const void* __restrict__ v,
                                    bool v_is_float, T* __restrict__ out, int64_t numel,
                                    int64_t cols, Op op) {
  using Acc = opmath_type<T>;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= numel) return;
  Acc b = Acc(0);
  if (v != nullptr) {
    const int64_t c = i % cols;
    b = v_is_float ? Acc(static_cast<const float*>(v)[c]) : Acc(static_cast<const T*>(v)[c]);
  }
  out[i] = T(op(Acc(x[i]), b));
}

}  // namespace

// ---- the launchers of launch.h ---------------------------------------------------------------

template <typename T>
void launch_bias_act(Act act, const T* x, const void* bias, bool bias_is_float, T* out,
                     int64_t rows, int64_t cols, int64_t numel, cudaStream_t stream,
                     unsigned* amax_bits) {
  dispatch_act(act, [&](auto a) {
    const BiasActOpFor<decltype(a)::value, T> op{};
    if (bias != nullptr || amax_bits != nullptr) {
      // (Without a bias the row kernel reads zeros for it: the flat kernel emits no amax.)
      launch_rowvec<T>(x, bias, bias_is_float, out, rows, cols, op, stream, "bias_act", amax_bits);
    } else {
      launch_flat<T, false>(x, nullptr, out, numel, op, stream);
    }
  });
}

// Step 1 (unfused): the bias add and the activation as two kernels, with a round trip of the
// intermediate through memory (as eager PyTorch runs F.gelu(x + b)). This is the first.
template <typename T>
void launch_ladder_bias_add(const T* x, const void* bias, bool bias_is_float, T* sum,
                            int64_t rows, int64_t cols, cudaStream_t stream) {
  using Acc = opmath_type<T>;
  launch_rowvec<T>(x, bias, bias_is_float, sum, rows, cols, AddOp<Acc>{Acc(1)}, stream,
                   "ladder_bias_act");
}

template <typename T>
void launch_ladder_fused_scalar(Act act, const T* x, const void* bias, bool bias_is_float, T* out,
                                int64_t numel, int64_t cols, cudaStream_t stream) {
  dispatch_act(act, [&](auto a) {
    const int64_t grid = ceil_div<int64_t>(numel, kThreads);
    CUDASTEPS_CHECK(grid <= INT_MAX, "ladder_bias_act", "x is too large for the fused_scalar variant");
    fused_scalar_kernel<T><<<grid, kThreads, 0, stream>>>(x, bias, bias_is_float, out, numel, cols,
                                                          BiasActOpFor<decltype(a)::value, T>{});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

#define CUDASTEPS_INSTANTIATE_BIAS_ACT(T)                                                          \
  template void launch_bias_act<T>(Act, const T*, const void*, bool, T*, int64_t, int64_t, int64_t, \
                                   cudaStream_t, unsigned*);                                       \
  template void launch_ladder_bias_add<T>(const T*, const void*, bool, T*, int64_t, int64_t,       \
                                          cudaStream_t);                                           \
  template void launch_ladder_fused_scalar<T>(Act, const T*, const void*, bool, T*, int64_t,       \
                                              int64_t, cudaStream_t);
CUDASTEPS_INSTANTIATE_BIAS_ACT(float)
CUDASTEPS_INSTANTIATE_BIAS_ACT(double)
CUDASTEPS_INSTANTIATE_BIAS_ACT(c10::Half)
CUDASTEPS_INSTANTIATE_BIAS_ACT(c10::BFloat16)
#undef CUDASTEPS_INSTANTIATE_BIAS_ACT

}  // namespace elementwise
}  // namespace cudasteps
