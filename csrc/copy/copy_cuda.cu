// CUDA copy: 16-byte vectorized, grid sized from the SM count, with a scalar head and tail.
//
// The final kernel (copy_vec16_kernel) moves bytes, so one kernel serves every dtype. SASS check
// (cuobjdump --dump-sass, sm_90): the aligned instantiation issues LDG.E.128 and STG.E.128.
//
// Alignment. The output is walked in 16-byte chunks aligned in the *output*; the first up to 15
// bytes (head) and the last up to 15 (tail) are copied byte by byte. When the input is misaligned
// relative to the output (a view with a storage offset, say x[1:] of fp32, which sits 4 bytes past
// a 16-byte boundary) each 16-byte chunk is loaded as the widest words the input address allows
// (4 x 4 bytes for that fp32 view) and still stored as one 16-byte access. The warp's loads then
// touch the same 128-byte lines as aligned loads would, so DRAM traffic is unchanged.
//
// Layouts (copy_cuda_impl): equal dense layouts are one byte copy (above); a transposed view of a
// contiguous tensor goes to the transpose kernel (copy.h); other strided inputs copied into a
// contiguous output go to the row kernel (innermost dim contiguous) or the gather kernel
// (innermost dim strided), see "Strided views: rows"; anything else (a strided output) to the
// generic strided kernel, one element per index step.
//
// Units: kernels.cuh (the kernels), rows.cuh with copy_rows_cuda.cu and copy_gather_cuda.cu
// (strided views row by row), this one (the ops and the ladder).
//
// Ladder (ladder_copy): scalar (one element per thread, one thread per element) -> grid_stride
// (a grid of one wave, each thread loops) -> vec16_persistent (16-byte accesses, still one wave
// of blocks looping) -> vec16 (the same kernel with one block per 8 KiB tile, in address order).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "common/launch.cuh"
#include "common/strided.h"
#include "common/vec.cuh"
#include "copy/copy.h"
#include "copy/kernels.cuh"

namespace cudasteps {
namespace {

// Both tensors dense with the same strides: their bytes line up one to one.
bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense() &&
         a.strides() == b.strides();
}

void copy_cuda_impl(at::Tensor& out, const at::Tensor& in) {
  if (in.numel() == 0) return;
  const c10::cuda::CUDAGuard guard(out.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (same_dense_layout(out, in)) {
    copy_bytes_cuda(in.const_data_ptr(), out.data_ptr(), in.numel() * in.element_size(), stream);
  } else if (out.is_contiguous() && is_transposed_contiguous(in)) {
    copy_transposed_view(out, in);
  } else if (!(out.is_contiguous() && copy_strided_rows(out, in, stream))) {
    dispatch_elem_bytes<StridedCopy>(in.element_size(), "copy", in, out, stream);
  }
}

at::Tensor copy_cuda(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  copy_cuda_impl(out, self);
  return out;
}

void copy__cuda(at::Tensor& out, const at::Tensor& src) {
  if (check_copy_args(out, src)) copy_cuda_impl(out, src);
}

// ---- Ladder -------------------------------------------------------------------------------------

// Step 1: one thread per element, one element per thread: a grid of numel / 512 blocks, each
// moving only 2 KiB of fp32 with 4-byte accesses.
template <int ElemBytes>
__global__ void copy_scalar_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                                   int64_t numel) {
  using W = typename Word<ElemBytes>::type;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel) reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src)[i];
}

// Step 2: a grid of one wave (sized from the SM count); each thread strides over the tensor.
template <int ElemBytes>
__global__ void __launch_bounds__(kCopyThreads)
    copy_grid_stride_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst,
                            int64_t numel) {
  using W = typename Word<ElemBytes>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const W*>(src)[i];
  }
}

template <int ElemBytes>
struct LadderScalar {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    const int64_t grid = ceil_div<int64_t>(numel, kCopyThreads);
    copy_scalar_kernel<ElemBytes><<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

template <int ElemBytes>
struct LadderGridStride {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    const auto kernel = copy_grid_stride_kernel<ElemBytes>;
    const int64_t grid = persistent_grid(kernel, kCopyThreads, numel, kCopyThreads);
    kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

at::Tensor ladder_copy_cuda(const at::Tensor& self, c10::string_view variant) {
  constexpr const char* op = "ladder_copy";
  CUDASTEPS_CHECK(self.is_contiguous(), op, "self must be contiguous, got strides ",
                  self.strides());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (self.numel() == 0) return out;
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const auto* src = static_cast<const uint8_t*>(self.const_data_ptr());
  auto* dst = static_cast<uint8_t*>(out.data_ptr());
  if (variant == "scalar") {
    dispatch_elem_bytes<LadderScalar>(self.element_size(), op, src, dst, self.numel(), stream);
  } else if (variant == "grid_stride") {
    dispatch_elem_bytes<LadderGridStride>(self.element_size(), op, src, dst, self.numel(), stream);
  } else if (variant == "vec16_persistent") {
    copy_bytes_cuda(src, dst, self.numel() * self.element_size(), stream, CopyGrid::kPersistent);
  } else if (variant == "vec16") {
    copy_bytes_cuda(src, dst, self.numel() * self.element_size(), stream, CopyGrid::kOneShot);
  } else {
    CUDASTEPS_CHECK(false, op, "variant must be one of scalar, grid_stride, vec16_persistent, vec16, got '",
                    std::string(variant), "'");
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("copy", &copy_cuda);
  m.impl("copy_", &copy__cuda);
  m.impl("ladder_copy", &ladder_copy_cuda);
}

}  // namespace cudasteps