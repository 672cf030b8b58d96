// The CUDA GEMM driver shared by gemm_cuda.cu (mm, addmm, linear) and gemm_ladder_cuda.cu.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "gemm/gemm.h"

namespace cudasteps {
namespace gemm {

// out[M, N] = alpha * a @ b + beta * addend, freshly allocated and contiguous. a, b: 2-D float32
// or float64 CUDA tensors of any strides (checked by the caller). force_config: an index into the
// config table (-1: chosen by shape); force_splits: split-K factor (0: chosen by shape).
at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                     double beta, int force_config = -1, int force_splits = 0);

// Index of the config named `name` (e.g. "128x128x16_w64x32_t8x8"), or -1.
int find_config(const std::string& name);
// Index of the double-buffered 128x128 main config (the `double_buffer` ladder step).
int main_config();
// "name1, name2, ...": for error messages.
std::string config_names();

}  // namespace gemm
}  // namespace cudasteps
