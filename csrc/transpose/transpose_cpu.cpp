// CPU transpose: cache-blocked, parallel over (matrix, block row).
//
// A 64 x 64 block of 8-byte elements is 32 KiB in and 32 KiB out, so a block's source rows and
// destination rows stay in L1/L2 while it is transposed; the inner loop writes the output row
// contiguously and reads the input column at a stride that touches each cache line 8+ times in a
// row, not once per pass over the whole matrix.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>

#include "transpose/transpose.h"

namespace cudasteps {
namespace {

constexpr int64_t kCpuBlock = 64;  // elements per block side
// Elements per parallel task at least: below that, thread start-up costs more than the work.
constexpr int64_t kMinElemsPerTask = 1 << 16;

template <int ElemBytes>
void transpose_cpu_kernel(char* out, const char* in, const TransposeProblem& p) {
  const int64_t M = p.rows, N = p.cols;
  const int64_t row_blocks = (M + kCpuBlock - 1) / kCpuBlock;
  const int64_t tasks = p.batch * row_blocks;
  const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / (kCpuBlock * N));
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / row_blocks;
      const int64_t r0 = (task - b * row_blocks) * kCpuBlock;
      const int64_t r1 = std::min(r0 + kCpuBlock, M);
      const char* src = in + b * p.in_batch_stride * ElemBytes;
      char* dst = out + b * M * N * ElemBytes;
      for (int64_t c0 = 0; c0 < N; c0 += kCpuBlock) {
        const int64_t c1 = std::min(c0 + kCpuBlock, N);
        for (int64_t c = c0; c < c1; ++c) {
          char* drow = dst + (c * M) * ElemBytes;
          for (int64_t r = r0; r < r1; ++r) {
            std::memcpy(drow + r * ElemBytes, src + (r * p.in_row_stride + c) * ElemBytes, ElemBytes);
          }
        }
      }
    }
  });
}

void run_cpu_kernel(const at::Tensor& out, const at::Tensor& self, const TransposeProblem& p) {
  char* out_ptr = static_cast<char*>(out.data_ptr());
  const char* in_ptr = static_cast<const char*>(self.const_data_ptr());
  switch (self.element_size()) {
    case 1: return transpose_cpu_kernel<1>(out_ptr, in_ptr, p);
    case 2: return transpose_cpu_kernel<2>(out_ptr, in_ptr, p);
    case 4: return transpose_cpu_kernel<4>(out_ptr, in_ptr, p);
    case 8: return transpose_cpu_kernel<8>(out_ptr, in_ptr, p);
    default: TORCH_INTERNAL_ASSERT(false, "element size checked before");
  }
}

bool cpu_aligned(const void*) { return true; }

at::Tensor transpose_cpu(const at::Tensor& self) {
  check_transpose_input(self, "transpose", "self");
  at::Tensor out = at::empty(transposed_shape(self), self.options().memory_format(at::MemoryFormat::Contiguous));
  transpose_into(out, self, run_cpu_kernel, cpu_aligned);
  return out;
}

void transpose__cpu(at::Tensor& out, const at::Tensor& src) {
  check_transpose_out(out, src);
  transpose_into(out, src, run_cpu_kernel, cpu_aligned);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("transpose", &transpose_cpu);
  m.impl("transpose_", &transpose__cpu);
}

}  // namespace cudasteps
