// CUDA copy, copy_ and ladder_copy: the host side of the copy family. Checks the arguments
// (copy.h), picks the path for the layouts, allocates the output and calls the launchers of
// launch.h on the current stream; registers the ops for the CUDA key.
//
// Layouts (copy_cuda_impl): equal dense layouts are one byte copy (copy_bytes_cuda: a memcpy up
// to 4 MiB, the vector kernel above); a transposed view of a contiguous tensor goes to the
// transpose kernel (copy.h); other strided inputs copied into a contiguous output go to the row
// kernel (innermost dim contiguous) or the gather kernel (innermost dim strided),
// copy_strided_rows; anything else (a strided output) to the generic strided kernel, one element
// per index step.
//
// Units: kernels.cuh (the kernels, the ladder's among them) with copy_kernels_cuda.cu (their
// launchers), rows.cuh with copy_rows_cuda.cu and copy_gather_cuda.cu (strided views row by row),
// launch.h (the launchers they all define), this one (the ops and the ladder).
//
// Ladder (ladder_copy): scalar (one element per thread, one thread per element) -> grid_stride
// (a grid of one wave, each thread loops) -> vec16_persistent (16-byte accesses, still one wave
// of blocks looping) -> vec16 (the same kernel with one block per 8 KiB tile, in address order).
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/strided.h"
#include "common/strided_tensors.h"
#include "copy/copy.h"
#include "copy/launch.h"

namespace cudasteps {
namespace {

// Dispatches on the element size: copy moves bytes, so dtypes of equal size share a kernel.
template <template <int> class Launcher, typename... Args>
void dispatch_elem_bytes(int64_t elem_bytes, const char* op, Args&&... args) {
  switch (elem_bytes) {
    case 1: return Launcher<1>::run(std::forward<Args>(args)...);
    case 2: return Launcher<2>::run(std::forward<Args>(args)...);
    case 4: return Launcher<4>::run(std::forward<Args>(args)...);
    case 8: return Launcher<8>::run(std::forward<Args>(args)...);
    case 16: return Launcher<16>::run(std::forward<Args>(args)...);
    default: CUDASTEPS_CHECK(false, op, "unsupported element size ", elem_bytes);
  }
}

template <int ElemBytes>
struct StridedCopy {
  static void run(const at::Tensor& in, at::Tensor& out, cudaStream_t stream) {
    const StridedPair layout = make_strided_pair(out, in, "copy");
    launch_copy_strided<ElemBytes>(static_cast<const uint8_t*>(in.const_data_ptr()),
                                   static_cast<uint8_t*>(out.data_ptr()), layout, in.numel(),
                                   stream);
  }
};

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
  } else if (!(out.is_contiguous() &&
                copy_strided_rows(make_strided_pair(out, in, "copy"), in.element_size(),
                                  in.const_data_ptr(), out.data_ptr(), stream))) {
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

// Step 1 (copy_scalar_kernel): one thread per element, one element per thread.
template <int ElemBytes>
struct LadderScalar {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    launch_copy_scalar<ElemBytes>(src, dst, numel, stream);
  }
};

// Step 2 (copy_grid_stride_kernel): a grid of one wave; each thread strides over the tensor.
template <int ElemBytes>
struct LadderGridStride {
  static void run(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
    launch_copy_grid_stride<ElemBytes>(src, dst, numel, stream);
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

#endif  // CUDASTEPS_WITH_CUDA
