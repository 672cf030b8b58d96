// CUDA copy of strided views into a contiguous output, row by row (innermost dim contiguous; this
// unit) or by gathering (innermost dim strided; copy_gather_cuda.cu): copy_strided_rows, which
// the host code (copy_cuda.cpp) calls with the pair of strides it built from the tensors
// (launch.h). The kernels and how they work: rows.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/strided.h"
#include "common/vec.cuh"
#include "copy/launch.h"
#include "copy/rows.cuh"

namespace cudasteps {

// A contiguous `out` from a strided `in` by rows (see "Strided views: rows"). Returns false
// (nothing launched) when the output is not element-aligned, which no tensor of PyTorch's
// allocator is.
bool copy_strided_rows(const StridedPair& p, int64_t elem, const void* src_ptr, void* dst_ptr,
                       cudaStream_t stream) {
  const int last = p.ndim - 1;
  RowLayout L;
  L.outer_dims = last;
  L.rows = 1;
  for (int d = 0; d < last; ++d) {
    L.outer_sizes[d] = p.sizes[d];
    L.outer_strides[d] = p.in_strides[d] * elem;
    L.rows *= p.sizes[d];
  }
  L.index32 = L.rows <= int64_t(std::numeric_limits<uint32_t>::max());
  L.row_bytes = p.sizes[last] * elem;
  L.inner_stride = p.in_strides[last] * elem;
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  // Output rows are contiguous one after another: chunks as wide as the output address and the
  // row length allow, so that no chunk straddles two rows.
  const int chunk_bytes = std::min(alignment_of(dst), pow2_divisor(L.row_bytes));
  if (chunk_bytes < elem) return false;
  L.chunks = L.row_bytes / chunk_bytes;
  set_row_tiles(L);
  if (p.in_strides[last] == 1) {
    if (last == 0) {  // a single contiguous run (the input differs only in size-1 dims' strides)
      copy_bytes_cuda(src, dst, L.row_bytes, stream);
      return true;
    }
    // Every input row start must allow the load width: the base address and each outer stride.
    int load_align = std::min(chunk_bytes, alignment_of(src));
    for (int d = 0; d < last; ++d) {
      load_align = std::min(load_align, pow2_divisor(L.outer_strides[d]));
    }
    switch (chunk_bytes) {
      case 16: launch_copy_rows<16>(load_align, src, dst, L, stream); break;
      case 8: launch_copy_rows<8>(load_align, src, dst, L, stream); break;
      case 4: launch_copy_rows<4>(load_align, src, dst, L, stream); break;
      case 2: launch_copy_rows<2>(load_align, src, dst, L, stream); break;
      default: launch_copy_rows<1>(load_align, src, dst, L, stream); break;
    }
    return true;
  }
  switch (elem) {
    case 1:
    case 2:
    case 4:
    case 8:
    case 16: copy_gather_rows(int(elem), chunk_bytes, src, dst, L, stream); return true;
    default: return false;
  }
}

}  // namespace cudasteps
