// Instantiates and launches kernels.cuh's kernels: copy_bytes_cuda (cudaMemcpyAsync up to 4 MiB,
// else copy_vec16_kernel, one instantiation per source alignment; kOneShot, the kernel's grid
// without a wave limit, is also what kAuto launches above 4 MiB), launch_copy_strided
// (copy_strided_kernel, one per element size) and the ladder's first two steps
// (launch_copy_scalar, launch_copy_grid_stride). Called by the host code (copy_cuda.cpp: copy,
// copy_, ladder_copy) and by copy_rows_cuda.cu (a strided view that is one contiguous run).
// Declared in launch.h.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/launch.cuh"
#include "common/strided.h"
#include "common/vec.cuh"
#include "copy/kernels.cuh"
#include "copy/launch.h"

namespace cudasteps {
namespace {

template <int SrcAlign>
void launch_copy_vec16(const uint8_t* src, uint8_t* dst, int64_t nbytes, int head,
                       CopyGrid grid_kind, cudaStream_t stream) {
  const auto kernel = copy_vec16_kernel<SrcAlign>;
  const int64_t n_tiles =
      std::max<int64_t>(1, ceil_div<int64_t>((nbytes - head) / 16, int64_t(kCopyThreads) * kCopyUnroll));
  const int64_t grid = grid_kind == CopyGrid::kPersistent
                           ? persistent_grid(kernel, kCopyThreads, n_tiles, 1)
                           : std::min<int64_t>(n_tiles, std::numeric_limits<int32_t>::max());
  kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, nbytes, head);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

// Byte copies up to this size run as cudaMemcpyAsync, as torch's copy_ runs them: there the
// copy's time is mostly the launch, and a memcpy costs 0.1-0.2 us less than a kernel. Measured
// on an H100 under CUDA-graph replay, torch's clone (a memcpy) against copy_vec16_kernel: 4 KiB
// 0.98 against 1.17 us, 64 KiB 1.29 / 1.40, 256 KiB 1.34 / 1.45, 1 MiB 1.52 / 1.69, 4 MiB 2.47 /
// 2.55. (The report's 4 KiB row then measured this path at 1.2 us against torch's 1.0: the
// benchmark timed the two graphs one after the other. A CUDA graph of either call holds one
// memcpy node, and their replays timed interleaved took 1.04 us each, H100, 2026-11-27.) Larger
// copies are bandwidth-bound and take the kernel (the family's final ladder step).
constexpr int64_t kMemcpyMaxBytes = int64_t(4) << 20;

void copy_bytes_cuda(const void* src_ptr, void* dst_ptr, int64_t nbytes, cudaStream_t stream,
                     CopyGrid grid_kind) {
  if (grid_kind == CopyGrid::kAuto && nbytes <= kMemcpyMaxBytes) {
    C10_CUDA_CHECK(
        cudaMemcpyAsync(dst_ptr, src_ptr, size_t(nbytes), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const auto* src = static_cast<const uint8_t*>(src_ptr);
  auto* dst = static_cast<uint8_t*>(dst_ptr);
  // Head: bytes until dst reaches a 16-byte boundary (all of them for a copy under 16 bytes).
  const int head = int(std::min<int64_t>(nbytes, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16));
  switch (alignment_of(src + head)) {
    case 16: return launch_copy_vec16<16>(src, dst, nbytes, head, grid_kind, stream);
    case 8: return launch_copy_vec16<8>(src, dst, nbytes, head, grid_kind, stream);
    case 4: return launch_copy_vec16<4>(src, dst, nbytes, head, grid_kind, stream);
    case 2: return launch_copy_vec16<2>(src, dst, nbytes, head, grid_kind, stream);
    default: return launch_copy_vec16<1>(src, dst, nbytes, head, grid_kind, stream);
  }
}

template <int ElemBytes>
void launch_copy_strided(const uint8_t* src, uint8_t* dst, const StridedPair& layout,
                         int64_t numel, cudaStream_t stream) {
  const auto kernel = copy_strided_kernel<ElemBytes>;
  const int64_t grid = persistent_grid(kernel, kCopyThreads, numel, kCopyThreads);
  kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, layout, numel);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Every element size the host dispatch (dispatch_elem_bytes, copy_cuda.cpp) serves.
template void launch_copy_strided<1>(const uint8_t*, uint8_t*, const StridedPair&, int64_t,
                                     cudaStream_t);
template void launch_copy_strided<2>(const uint8_t*, uint8_t*, const StridedPair&, int64_t,
                                     cudaStream_t);
template void launch_copy_strided<4>(const uint8_t*, uint8_t*, const StridedPair&, int64_t,
                                     cudaStream_t);
template void launch_copy_strided<8>(const uint8_t*, uint8_t*, const StridedPair&, int64_t,
                                     cudaStream_t);
template void launch_copy_strided<16>(const uint8_t*, uint8_t*, const StridedPair&, int64_t,
                                      cudaStream_t);

// ---- Ladder (ladder_copy): its first two steps ------------------------------------------------

template <int ElemBytes>
void launch_copy_scalar(const uint8_t* src, uint8_t* dst, int64_t numel, cudaStream_t stream) {
  const int64_t grid = ceil_div<int64_t>(numel, kCopyThreads);
  copy_scalar_kernel<ElemBytes><<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int ElemBytes>
void launch_copy_grid_stride(const uint8_t* src, uint8_t* dst, int64_t numel,
                             cudaStream_t stream) {
  const auto kernel = copy_grid_stride_kernel<ElemBytes>;
  const int64_t grid = persistent_grid(kernel, kCopyThreads, numel, kCopyThreads);
  kernel<<<grid, kCopyThreads, 0, stream>>>(src, dst, numel);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The same element sizes as launch_copy_strided.
template void launch_copy_scalar<1>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_scalar<2>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_scalar<4>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_scalar<8>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_scalar<16>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_grid_stride<1>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_grid_stride<2>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_grid_stride<4>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_grid_stride<8>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);
template void launch_copy_grid_stride<16>(const uint8_t*, uint8_t*, int64_t, cudaStream_t);

}  // namespace cudasteps
