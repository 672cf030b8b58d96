// Device building blocks shared by both tensor-core GEMM paths (tc/sm80/: mma.sync; tc/sm90/:
// wgmma + TMA): cp.async, the rasterized tile order and the kernel-attribute helper, with the
// epilogue stage and element traits of gemm/epilogue.cuh. Written once here so that both ladders
// use the same pieces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "common/launch.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace tc {

// ---- shared-memory addresses and cp.async (sm_80+) ----

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared (.cg: bypassing L1) of which only the first `src_bytes` (0..16) are
// read; the rest of the 16 shared bytes are zero-filled. This is how ragged tile edges enter the
// sum as zeros: a row past M or a chunk past K reads nothing (0), the chunk that straddles the end
// of a row reads only its valid part.
__device__ __forceinline__ void cp_async_16_bytes(void* smem, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(src_bytes));
#else
  (void)smem, (void)gmem, (void)src_bytes;
  __trap();
#endif
}

// All 16 bytes when `pred`, else zeros.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool pred) {
  cp_async_16_bytes(smem, gmem, pred ? 16 : 0);
}

// One float global -> shared when `pred`, else a zero. 4-byte copies exist only in the .ca form
// (through L1). They let a copy land anywhere in shared memory, so a tile can be transposed on its
// way in (the SGEMM's k-major tiles of a k-contiguous operand) and rows need no 16-byte alignment.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(pred ? 4 : 0));
#else
  (void)smem, (void)gmem, (void)pred;
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---- tile order: grouped rasterization for L2 reuse ----
//
// Numbering output tiles row by row sends one wave of blocks across a full row of tiles: each block
// reads a different B panel, and the A panel they share is used once per wave. Grouping `group` rows
// of tiles and walking them column by column inside the group makes one wave cover a squarer patch,
// so the A and B panels it reads stay in L2 while the neighbours that need them run.
struct TileRaster {
  int tiles_m = 1, tiles_n = 1, group = 8;

  __host__ __device__ int count() const { return tiles_m * tiles_n; }

  // Tile `linear` (0 <= linear < count()) -> its (tile_m, tile_n).
  __host__ __device__ void coords(int linear, int& tm, int& tn) const {
    const int per_group = group * tiles_n;
    const int g = linear / per_group;
    const int first_m = g * group;
    const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
    const int in_group = linear - g * per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
  }
};

// ---- host: kernel attributes ----

// Lets `kernel` use `smem_bytes` of dynamic shared memory (above the default 48 KiB) and asks for
// the whole unified L1/shared storage as shared memory (the kernels stream operands past L1, and
// several blocks of a large ring must fit on one SM). cudaFuncSetAttribute costs host time on
// every call, so this runs once per (kernel, device).
template <typename Kernel>
void configure_smem_once(Kernel kernel, size_t smem_bytes) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;  // (kernel, device)
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel),
                                        current_device()};
  const std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key)) return;
  if (smem_bytes > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(smem_bytes)));
  }
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
  done.insert(key);
}

}  // namespace tc
}  // namespace gemm
}  // namespace cudasteps