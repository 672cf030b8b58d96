// Grid sizing from the device's own limits: never hard-code SM counts. Light on purpose (CUDA's
// runtime and c10's error checks, nothing of ATen): kernel instantiation units include it, and
// ATen's headers cost them about 20 s of compile time each. The device queries are defined once,
// in device.cpp.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

namespace cudasteps {

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// SM count of the current device (cached per device by PyTorch).
int sm_count();
// Shared memory a block of the current device may opt in to (cudaFuncAttributeMaxDynamicShared...).
size_t smem_per_block_optin();
// Index of the current CUDA device (c10's, which PyTorch's device guards set).
int current_device();
// Whether the current device takes programmatic dependent launches (compute capability 9.0+).
bool programmatic_launch_supported();
// The current device's peak DRAM bandwidth per SM, bytes per second: its memory clock (two
// transfers a clock) times its bus width, over its SMs (cached per device). 25 GB/s on an H100
// SXM, 36 on an H200.
double dram_bytes_per_s_per_sm();

// Scratch memory on the current device from PyTorch's caching allocator, for the current stream:
// freed, stream-ordered, when the last copy of the handle goes (so a kernel launched before that
// on the same stream may still use it). For split-K partial sums and similar workspaces.
struct ScratchBuffer {
  std::shared_ptr<void> owner;
  void* ptr = nullptr;
};
ScratchBuffer scratch_buffer(size_t bytes);

// Resident blocks of `kernel` per SM at `block` threads and `smem_bytes` dynamic shared memory.
// The answer depends only on the kernel and the device, and the query costs about a microsecond
// of host time, so it is cached per (kernel, block, smem, device).
template <typename Kernel>
inline int blocks_per_sm(Kernel kernel, int block, size_t smem_bytes = 0) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mutex;
  static std::map<Key, int> cache;
  const Key key{reinterpret_cast<const void*>(kernel), block, smem_bytes,
                current_device()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int blocks = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, smem_bytes));
  blocks = std::max(blocks, 1);
  cache.emplace(key, blocks);
  return blocks;
}

// Grid for a grid-stride loop over `work_items` items of `items_per_block` each: enough blocks to
// fill every SM at full occupancy ("one wave"), never more than the work needs.
template <typename Kernel>
inline int64_t persistent_grid(Kernel kernel, int block, int64_t work_items, int64_t items_per_block,
                               size_t smem_bytes = 0) {
  const int64_t needed = std::max<int64_t>(1, ceil_div<int64_t>(work_items, items_per_block));
  const int64_t resident = int64_t(sm_count()) * blocks_per_sm(kernel, block, smem_bytes);
  return std::min(needed, resident);
}

// ---- programmatic dependent launch (compute capability 9.0+) ----
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the
// kernel before it on the stream still runs: its blocks take the SMs that kernel leaves free and
// run their set-up under its tail, which in CUDA-graph replays of a few-microsecond kernel is a
// good part of its time (H100, a 32 x 4096 x 256 linear: 4.6 -> 3.7 us). Such a kernel calls
// wait_previous_grid before its first global memory access: every thread waits there until the
// grid before it has completed and its writes are visible. release_next_grid lets the next grid
// start early the same way, once every block of this one has called it (or exited); that grid
// waits likewise, so nothing this grid reads or writes is touched before it completes. Where to
// release: at once in kernels of one block per SM and in short ones (the next grid's blocks can
// only take SMs this one leaves idle, or arrive as its blocks exit); after the main loop in
// kernels that fill every SM with blocks (the few-row path's mma kernel: released at once, the
// next grid's blocks waited on SMs beside it for the whole kernel, and 8 tokens against a 4096 x
// 14336 weight ran 52.7 us against 41.9 without the launch attribute). Without the attribute, or
// before sm_90, both are no-ops.
__device__ __forceinline__ void wait_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void release_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_previous_grid_release_next() {
  wait_previous_grid();
  release_next_grid();
}

// The config of a launch (cudaLaunchKernelEx) of `grid` blocks of `block` threads, in clusters of
// `ctas` blocks (along x) where ctas > 1, and where `pdl` as a programmatic dependent launch (for
// a kernel that calls wait_previous_grid before touching memory; the caller checks the device
// takes one). Holds the attributes its config points to, so it is neither copied nor moved.
struct KernelLaunch {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attrs[2] = {};

  KernelLaunch(dim3 grid, int ctas, dim3 block, size_t smem_bytes, cudaStream_t stream,
               bool pdl) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    unsigned n = 0;
    if (ctas > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n].val.clusterDim.x = unsigned(ctas);
      attrs[n].val.clusterDim.y = 1;
      attrs[n].val.clusterDim.z = 1;
      ++n;
    }
    if (pdl) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    config.attrs = attrs;
    config.numAttrs = n;
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
};

// kernel<<<grid, block, smem_bytes, stream>>>(args...), as a programmatic dependent launch where
// `pdl` and the device takes one: for kernels that call wait_previous_grid first.
template <typename... Params, typename... Args>
void launch_dependent(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block,
                      size_t smem_bytes, cudaStream_t stream, Args&&... args) {
  const KernelLaunch launch(grid, 1, block, smem_bytes, stream,
                            pdl && programmatic_launch_supported());
  C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, std::forward<Args>(args)...));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cudasteps
