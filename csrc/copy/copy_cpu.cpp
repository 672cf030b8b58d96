// CPU copy: memcpy in parallel chunks when both sides are contiguous, an element loop otherwise.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>

#include "common/strided_tensors.h"
#include "copy/copy.h"

namespace cudasteps {
namespace {

// Chunks of at least 256 KiB per task: below that, thread start-up costs more than the copy.
constexpr int64_t kMinBytesPerTask = 256 * 1024;

// One row (the innermost merged dimension) per step: the offsets of a row's first element take
// one division per dimension, the rest of the row only additions.
template <int ElemBytes>
void copy_strided_elems(char* out, const char* in, const StridedPair& layout, int64_t numel) {
  const int last = layout.ndim - 1;
  const int64_t row_len = layout.sizes[last];
  const int64_t out_step = layout.out_strides[last] * ElemBytes;
  const int64_t in_step = layout.in_strides[last] * ElemBytes;
  const int64_t rows = numel / row_len;
  const int64_t grain = std::max<int64_t>(1, kMinBytesPerTask / (row_len * ElemBytes));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t out_off, in_off;
      layout.offsets(r * row_len, out_off, in_off);
      char* o = out + out_off * ElemBytes;
      const char* i = in + in_off * ElemBytes;
      for (int64_t k = 0; k < row_len; ++k, o += out_step, i += in_step) {
        std::memcpy(o, i, ElemBytes);
      }
    }
  });
}

void copy_cpu_impl(at::Tensor& out, const at::Tensor& in) {
  const int64_t numel = in.numel();
  if (numel == 0) return;
  char* out_ptr = static_cast<char*>(out.data_ptr());
  const char* in_ptr = static_cast<const char*>(in.const_data_ptr());
  if (out.is_contiguous() && in.is_contiguous()) {
    const int64_t nbytes = numel * in.element_size();
    at::parallel_for(0, nbytes, kMinBytesPerTask, [&](int64_t begin, int64_t end) {
      std::memcpy(out_ptr + begin, in_ptr + begin, end - begin);
    });
    return;
  }
  if (out.is_contiguous() && is_transposed_contiguous(in)) {
    copy_transposed_view(out, in);
    return;
  }
  const StridedPair layout = make_strided_pair(out, in, "copy");
  switch (in.element_size()) {
    case 1: return copy_strided_elems<1>(out_ptr, in_ptr, layout, numel);
    case 2: return copy_strided_elems<2>(out_ptr, in_ptr, layout, numel);
    case 4: return copy_strided_elems<4>(out_ptr, in_ptr, layout, numel);
    case 8: return copy_strided_elems<8>(out_ptr, in_ptr, layout, numel);
    case 16: return copy_strided_elems<16>(out_ptr, in_ptr, layout, numel);
    default:
      CUDASTEPS_CHECK(false, "copy", "unsupported element size ", in.element_size(), " of dtype ",
                      in.scalar_type());
  }
}

at::Tensor copy_cpu(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  copy_cpu_impl(out, self);
  return out;
}

void copy__cpu(at::Tensor& out, const at::Tensor& src) {
  if (check_copy_args(out, src)) copy_cpu_impl(out, src);
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("copy", &copy_cpu);
  m.impl("copy_", &copy__cpu);
}

}  // namespace cudasteps
