// CUDA bias_act_backward (the activation's derivative, fused with the bias gradient's column sum)
// and sum_leading (the bias gradient of a plain bias add): the rowgrad kernel of kernels.cuh,
// which also says how it works.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "elementwise/kernels.cuh"

namespace cudasteps {
namespace elementwise {
namespace {

std::tuple<at::Tensor, c10::optional<at::Tensor>> bias_act_backward_cuda(
    const at::Tensor& grad_in, const at::Tensor& x_in, const c10::optional<at::Tensor>& bias_in,
    c10::string_view act_name) {
  const Act act = check_bias_act_backward_args(grad_in, x_in, bias_in, act_name);
  at::Tensor grad_x =
      at::empty(x_in.sizes(), x_in.options().memory_format(at::MemoryFormat::Contiguous));
  c10::optional<at::Tensor> grad_bias;
  // Every column is written by the finalize pass; zeros only when there are no rows to sum.
  if (bias_in.has_value()) grad_bias = at::empty(bias_in->sizes(), bias_in->options());
  if (x_in.numel() == 0) {
    if (grad_bias.has_value()) grad_bias->zero_();
    return {grad_x, grad_bias};
  }
  const c10::cuda::CUDAGuard guard(x_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad = grad_in.contiguous();
  const at::Tensor bias = bias_in.has_value() ? bias_in->contiguous() : at::Tensor();
  CUDASTEPS_FLOAT_TYPES(x.scalar_type(), "bias_act_backward_cuda", [&] {
    dispatch_act(act, [&](auto a) {
      const BiasActGradOpFor<decltype(a)::value, scalar_t> op{};
      if (bias.defined()) {
        at::Tensor sum_out = *grad_bias;
        launch_rowgrad<scalar_t, true, true>(
            grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), bias.const_data_ptr(),
            bias.scalar_type() == at::kFloat, grad_x.data_ptr<scalar_t>(), sum_out, 1.0,
            num_rows(x), num_cols(x), op, x.options(), stream, "bias_act_backward");
      } else {
        // No bias, no column sum: a plain same-shape elementwise pass, d = g * act'(x).
        const XGradOp<BiasActGradOpFor<decltype(a)::value, scalar_t>> flat_op{op};
        launch_flat<scalar_t, true>(x.const_data_ptr<scalar_t>(), grad.const_data_ptr<scalar_t>(),
                                    grad_x.data_ptr<scalar_t>(), x.numel(), flat_op, stream);
      }
    });
  });
  return {grad_x, grad_bias};
}

at::Tensor sum_leading_cuda(const at::Tensor& self_in, const c10::optional<at::Tensor>& other_in,
                            double alpha, c10::optional<at::ScalarType> dtype) {
  check_sum_leading_args(self_in, other_in);
  const at::ScalarType out_dtype = sum_leading_dtype(self_in, dtype);
  const int64_t cols = self_in.size(-1);
  at::Tensor out = at::empty({cols}, self_in.options().dtype(out_dtype));
  if (self_in.numel() == 0) return out.zero_();
  const c10::cuda::CUDAGuard guard(self_in.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor self = self_in.contiguous();
  const at::Tensor other = other_in.has_value() ? other_in->contiguous() : at::Tensor();
  // The finalize pass writes fp32 or self's dtype directly; any other dtype goes through an fp32
  // (fp64 for double) buffer and a cast.
  const bool direct = out_dtype == at::kFloat || out_dtype == self.scalar_type();
  at::Tensor sum_acc =
      direct ? out : at::empty({cols}, self.options().dtype(at::toOpMathType(self.scalar_type())));
  CUDASTEPS_FLOAT_TYPES(self.scalar_type(), "sum_leading_cuda", [&] {
    const int64_t rows = num_rows(self);
    if (other.defined()) {
      launch_rowgrad<scalar_t, true, false>(self.const_data_ptr<scalar_t>(),
                                            other.const_data_ptr<scalar_t>(), nullptr, false, nullptr,
                                            sum_acc, alpha, rows, cols, ProductOp<true>{},
                                            self.options(), stream, "sum_leading");
    } else {
      launch_rowgrad<scalar_t, false, false>(self.const_data_ptr<scalar_t>(), nullptr, nullptr,
                                             false, nullptr, sum_acc, alpha, rows, cols,
                                             ProductOp<false>{}, self.options(), stream,
                                             "sum_leading");
    }
  });
  if (!direct) out.copy_(sum_acc);
  return out;
}

}  // namespace
}  // namespace elementwise

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("bias_act_backward", &elementwise::bias_act_backward_cuda);
  m.impl("sum_leading", &elementwise::sum_leading_cuda);
}

}  // namespace cudasteps
