// CUDA transpose, transpose_ and ladder_transpose: the host side of the family's CUDA kernels.
// Checks the arguments, reduces the input's layout to the kernels' problem (transpose.h), picks
// the widest word the layout allows and calls the launchers (launch.h; kernels in kernels.cuh,
// instantiated in launchers.cu).
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <string>

#include "common/vec.cuh"
#include "transpose/launch.h"
#include "transpose/transpose.h"

namespace cudasteps {
namespace {

using transpose::kMicroRows;
using transpose::launch_final;
using transpose::LadderStep;

// Word width. A warp's load is 32 words of one input row, so 8-byte words move 256-byte row
// segments and 4-byte words 128-byte ones. Measured on the H100 at 8192^2 (first GPU run):
// fp64 (8-byte words) reached 96% of copy bandwidth while fp32 in 4-byte words reached 68% and
// bf16 in packed 4-byte words 69%, so 4- and 2-byte elements travel packed in 8-byte words
// (K = 2 or 4 per word) whenever the layout allows it.
//
// True when elements of `self` can travel packed, `word_bytes` per access: every row and the
// batch stride hold whole words, and both pointers are word-aligned.
bool packable(const at::Tensor& self, const TransposeProblem& p, const at::Tensor& out,
              int word_bytes) {
  const int64_t k = word_bytes / self.element_size();
  return p.rows % k == 0 && p.cols % k == 0 && p.in_row_stride % k == 0 &&
         (p.batch == 1 || p.in_batch_stride % k == 0) && is_aligned(self.const_data_ptr(), word_bytes) &&
         is_aligned(out.data_ptr(), word_bytes);
}

// Small dense matrices of 4-byte elements take the ladder's padded kernel (32 x 32 tiles, one
// element per thread and row step) instead of the final one (64 x 32 tiles in 8-byte words, 8
// loads in flight per thread): their time is one load-to-store latency, and more, smaller blocks
// reach it sooner. Measured on an H100, CUDA-graph replays: 128^2 1.77 against 2.39 us, 256^2
// 1.90 against 2.44, 512^2 2.10 against 2.56; at 1024^2 the final kernel is ahead (3.51 against
// 3.90 us). The padded kernel moves 4-byte words, so any 4-byte dtype takes it.
constexpr int64_t kSmallDenseMaxElems = int64_t(512) * 512;

bool small_dense(const TransposeProblem& p) {
  const int64_t numel = p.batch * p.rows * p.cols;
  return numel <= kSmallDenseMaxElems && p.in_row_stride == p.cols &&
         (p.batch == 1 || p.in_batch_stride == p.rows * p.cols);
}

void run_cuda_kernel(const at::Tensor& out, const at::Tensor& self, const TransposeProblem& p) {
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const void* in = self.const_data_ptr();
  void* o = out.data_ptr();
  switch (self.element_size()) {
    case 1:
      if (packable(self, p, out, 4)) return launch_final<uint8_t, uint32_t, kMicroRows>(in, o, p, stream);
      return launch_final<uint8_t, uint8_t, kMicroRows>(in, o, p, stream);
    case 2:
      if (packable(self, p, out, 8)) return launch_final<uint16_t, uint64_t, kMicroRows>(in, o, p, stream);
      if (packable(self, p, out, 4)) return launch_final<uint16_t, uint32_t, kMicroRows>(in, o, p, stream);
      return launch_final<uint16_t, uint16_t, kMicroRows>(in, o, p, stream);
    case 4:
      if (small_dense(p)) {
        return transpose::launch_ladder_step(LadderStep::Padded, static_cast<const float*>(in),
                                             static_cast<float*>(o), p.batch, p.rows, p.cols,
                                             p.batch * p.rows * p.cols, stream);
      }
      if (packable(self, p, out, 8)) return launch_final<uint32_t, uint64_t, kMicroRows>(in, o, p, stream);
      return launch_final<uint32_t, uint32_t, kMicroRows>(in, o, p, stream);
    case 8: return launch_final<uint64_t, uint64_t, kMicroRows>(in, o, p, stream);
    default: TORCH_INTERNAL_ASSERT(false, "element size checked before");
  }
}

// Data pointers of allocations and of element-offset views are aligned to the element size; the
// kernels need no more (packing checks its own 4-byte alignment).
struct ElemAligned {
  int64_t elem_bytes;
  bool operator()(const void* ptr) const { return is_aligned(ptr, int(elem_bytes)); }
};

at::Tensor transpose_cuda(const at::Tensor& self) {
  check_transpose_input(self, "transpose", "self");
  at::Tensor out = at::empty(transposed_shape(self), self.options().memory_format(at::MemoryFormat::Contiguous));
  transpose_into(out, self, run_cuda_kernel, ElemAligned{self.element_size()});
  return out;
}

void transpose__cuda(at::Tensor& out, const at::Tensor& src) {
  check_transpose_out(out, src);
  transpose_into(out, src, run_cuda_kernel, ElemAligned{src.element_size()});
}

// ---- Ladder (fp32, contiguous (..., M, N)) ------------------------------------------------------

at::Tensor ladder_transpose_cuda(const at::Tensor& self, c10::string_view variant) {
  constexpr const char* op = "ladder_transpose";
  const bool known = variant == "naive_row" || variant == "naive_col" || variant == "smem" ||
                     variant == "padded" || variant == "final";
  CUDASTEPS_CHECK(known, op, "variant must be one of naive_row, naive_col, smem, padded, final, got '",
                  std::string(variant), "'");
  if (variant == "final") return transpose_cuda(self);
  check_min_dim(self, 2, op, "self");
  CUDASTEPS_CHECK(self.scalar_type() == at::kFloat, op, "self must be Float for variant '",
                  std::string(variant), "' (only 'final' takes other dtypes), got ",
                  self.scalar_type());
  CUDASTEPS_CHECK(self.is_contiguous(), op, "self must be contiguous, got strides ", self.strides());
  at::Tensor out = at::empty(transposed_shape(self), self.options().memory_format(at::MemoryFormat::Contiguous));
  const int64_t numel = self.numel();
  if (numel == 0) return out;
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t M = self.size(-2);
  const int64_t N = self.size(-1);
  const int64_t batch = numel / (M * N);
  const float* in = self.const_data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const LadderStep step = variant == "naive_row"   ? LadderStep::NaiveRow
                          : variant == "naive_col" ? LadderStep::NaiveCol
                          : variant == "smem"      ? LadderStep::Smem
                                                   : LadderStep::Padded;
  transpose::launch_ladder_step(step, in, dst, batch, M, N, numel, stream);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("transpose", &transpose_cuda);
  m.impl("transpose_", &transpose__cuda);
  m.impl("ladder_transpose", &ladder_transpose_cuda);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
