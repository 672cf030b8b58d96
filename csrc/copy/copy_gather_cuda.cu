// CUDA copy of a column-strided view (innermost dim strided, or expanded) into a contiguous
// output: copy_gather_kernel, one instantiation per element size and chunk width (rows.cuh).
#include "copy/rows.cuh"

namespace cudasteps {
namespace {

// copy_gather_kernel<ElemBytes, chunk_bytes>; chunk_bytes is a power of two in [ElemBytes, 16].
template <int ElemBytes>
void launch_copy_gather(int chunk_bytes, const uint8_t* src, uint8_t* dst, const RowLayout& L,
                        cudaStream_t stream) {
  if (chunk_bytes >= 16) {
    return launch_row_tiles(copy_gather_kernel<ElemBytes, 16>, src, dst, L, stream);
  }
  if constexpr (ElemBytes <= 8) {
    if (chunk_bytes >= 8) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 8>, src, dst, L, stream);
    }
  }
  if constexpr (ElemBytes <= 4) {
    if (chunk_bytes >= 4) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 4>, src, dst, L, stream);
    }
  }
  if constexpr (ElemBytes <= 2) {
    if (chunk_bytes >= 2) {
      return launch_row_tiles(copy_gather_kernel<ElemBytes, 2>, src, dst, L, stream);
    }
  }
  return launch_row_tiles(copy_gather_kernel<ElemBytes, ElemBytes>, src, dst, L, stream);
}

}  // namespace

void copy_gather_rows(int elem_bytes, int chunk_bytes, const uint8_t* src, uint8_t* dst,
                      const RowLayout& L, cudaStream_t stream) {
  switch (elem_bytes) {
    case 1: return launch_copy_gather<1>(chunk_bytes, src, dst, L, stream);
    case 2: return launch_copy_gather<2>(chunk_bytes, src, dst, L, stream);
    case 4: return launch_copy_gather<4>(chunk_bytes, src, dst, L, stream);
    case 8: return launch_copy_gather<8>(chunk_bytes, src, dst, L, stream);
    default: return launch_copy_gather<16>(chunk_bytes, src, dst, L, stream);
  }
}

}  // namespace cudasteps
