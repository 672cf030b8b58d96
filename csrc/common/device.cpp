// The device queries of launch.cuh, defined once here, where ATen's headers are included anyway.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>

#include "common/launch.cuh"

namespace cudasteps {

int sm_count() {
  return at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

size_t smem_per_block_optin() {
  return size_t(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin);
}

int current_device() {
  return int(c10::cuda::current_device());
}

bool programmatic_launch_supported() {
  return at::cuda::getCurrentDeviceProperties()->major >= 9;
}

double dram_bytes_per_s_per_sm() {
  static std::mutex mutex;
  static std::map<int, double> known;  // device -> bytes per second per SM
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device);
  if (it != known.end()) return it->second;
  // cudaDeviceProp lost its memory clock in CUDA 13; the attribute stays.
  int clock_khz = 0, bus_bits = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  const double per_sm = 2.0 * 1e3 * double(clock_khz) * double(bus_bits) / 8.0 / sm_count();
  known.emplace(device, per_sm);
  return per_sm;
}

ScratchBuffer scratch_buffer(size_t bytes) {
  auto tensor = std::make_shared<at::Tensor>(at::empty(
      {int64_t(bytes)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, current_device())));
  ScratchBuffer buffer;
  buffer.ptr = tensor->data_ptr();
  buffer.owner = std::move(tensor);
  return buffer;
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
