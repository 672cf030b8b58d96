// CUDA bias_act and its ladder: the row kernels of kernels.cuh, which also says how they work.
// The backward and sum_leading (the bias gradient) are bias_act_backward_cuda.cu.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "elementwise/kernels.cuh"

namespace cudasteps {
namespace elementwise {
namespace {

// ---- ops -----------------------------------------------------------------------------------

at::Tensor bias_act_cuda(const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
                         c10::string_view act_name) {
  const Act act = check_bias_act_args(x_in, bias_in, act_name, "bias_act");
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.has_value() ? bias_in->contiguous() : at::Tensor();
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_cuda", [&] {
    dispatch_act(act, [&](auto a) {
      const BiasActOpFor<decltype(a)::value, scalar_t> op{};
      if (bias.defined()) {
        launch_rowvec<scalar_t>(x.const_data_ptr<scalar_t>(), bias.const_data_ptr(),
                                bias.scalar_type() == at::kFloat, out.data_ptr<scalar_t>(),
                                num_rows(x), num_cols(x), op, stream, "bias_act");
      } else {
        launch_flat<scalar_t, false>(x.const_data_ptr<scalar_t>(), nullptr, out.data_ptr<scalar_t>(),
                                     x.numel(), op, stream);
      }
    });
  });
  return out;
}


// ---- ladder --------------------------------------------------------------------------------

// Step 2 (fused_scalar): one thread per element, one element per thread; the bias index is a
// 64-bit modulo per element and every access is one element wide.
template <typename T, typename Op>
__global__ void fused_scalar_kernel(const T* __restrict__ x, const void* __restrict__ v,
                                    bool v_is_float, T* __restrict__ out, int64_t numel,
                                    int64_t cols, Op op) {
  using Acc = at::opmath_type<T>;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= numel) return;
  Acc b = Acc(0);
  if (v != nullptr) {
    const int64_t c = i % cols;
    b = v_is_float ? Acc(static_cast<const float*>(v)[c]) : Acc(static_cast<const T*>(v)[c]);
  }
  out[i] = T(op(Acc(x[i]), b));
}

at::Tensor ladder_bias_act_cuda(const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
                                c10::string_view act_name, c10::string_view variant) {
  constexpr const char* name = "ladder_bias_act";
  const Act act = check_bias_act_args(x_in, bias_in, act_name, name);
  CUDASTEPS_CHECK(variant == "unfused" || variant == "fused_scalar" || variant == "fused_vec16",
                  name, "variant must be one of unfused, fused_scalar, fused_vec16, got '",
                  std::string(variant), "'");
  if (variant == "fused_vec16") return bias_act_cuda(x_in, bias_in, act_name);
  at::Tensor out = at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (x_in.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const at::Tensor bias = bias_in.has_value() ? bias_in->contiguous() : at::Tensor();
  const void* v = bias.defined() ? bias.const_data_ptr() : nullptr;
  const bool v_is_float = bias.defined() && bias.scalar_type() == at::kFloat;
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "ladder_bias_act_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;
    dispatch_act(act, [&](auto a) {
      if (variant == "fused_scalar") {
        const int64_t grid = ceil_div<int64_t>(x.numel(), kThreads);
        CUDASTEPS_CHECK(grid <= INT_MAX, name, "x is too large for the fused_scalar variant");
        fused_scalar_kernel<scalar_t><<<grid, kThreads, 0, stream>>>(
            x.const_data_ptr<scalar_t>(), v, v_is_float, out.data_ptr<scalar_t>(), x.numel(),
            num_cols(x), BiasActOpFor<decltype(a)::value, scalar_t>{});
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return;
      }
      // Step 1 (unfused): the bias add and the activation as two kernels, with a round trip of
      // the intermediate through memory (as eager PyTorch runs F.gelu(x + b)).
      const scalar_t* src = x.const_data_ptr<scalar_t>();
      at::Tensor sum;  // x + bias, materialized
      if (v != nullptr) {
        sum = at::empty_like(x);
        launch_rowvec<scalar_t>(src, v, v_is_float, sum.data_ptr<scalar_t>(), num_rows(x),
                                num_cols(x), AddOp<Acc>{Acc(1)}, stream, name);
        src = sum.const_data_ptr<scalar_t>();
      }
      launch_flat<scalar_t, false>(src, nullptr, out.data_ptr<scalar_t>(), x.numel(),
                                   BiasActOpFor<decltype(a)::value, scalar_t>{}, stream);
    });
  });
  return out;
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("bias_act", &elementwise::bias_act_cuda);
  m.impl("ladder_bias_act", &elementwise::ladder_bias_act_cuda);
}

}  // namespace cudasteps
