// CUDA sum and ladder_sum: the host side of the family's CUDA kernels. Checks the arguments,
// plans the passes (reduce.h), dispatches on the (input, output) dtypes and runs each pass through
// its launcher (launch.h; kernels in kernels.cuh, instantiated in inst_sum.cu, the
// ladder's in ladder_cuda.cu). Also the two host services those launchers use: the full sum's
// per-stream scratch slots and an occupancy cache.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/launch.cuh"
#include "reduce/launch.h"
#include "reduce/reduce.h"

namespace cudasteps {
namespace reduce {
namespace {

// Each (device, stream) owns a slot of a slab allocated once per device and zeroed then: a ticket
// counter and room for one launch's partials. The last block of every launch resets its counter to
// 0, so each launch finds it at 0; launches on one stream are ordered, so they may share the slot,
// and different streams have different slots. Keeping the partials there saves every call a
// caching-allocator round trip (this op's small sizes are bound by host time).
constexpr int kScratchSlots = 256;  // PyTorch's stream pools hold fewer streams per device

struct Slot {
  unsigned* ticket = nullptr;  // null: no slot
  void* partials = nullptr;
  int64_t bytes = 0;  // room for the partials
};

// The largest grid launch_sum_full launches on this device: one wave of kFullThreads blocks. A
// slot holds its 8-byte partials, which is as many bytes as one wave of 256-thread blocks' 4-byte
// partials (the fp8 casts' amax).
int64_t max_full_grid() {
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  return int64_t(prop->multiProcessorCount) * (prop->maxThreadsPerMultiProcessor / kFullThreads);
}

// No slot when the device has no slab yet and the stream is being captured into a CUDA graph (the
// capture status is asked only then: once a stream has its slot, a call costs a map lookup), or
// when kScratchSlots streams of this device hold every slot.
Slot scratch_slot(int device, const at::cuda::CUDAStream& stream) {
  static std::mutex mu;
  struct Slab {
    uint8_t* base;
    int64_t slot_bytes;
    int used;
  };
  static std::map<int, Slab> slabs;
  static std::map<std::pair<int, int64_t>, Slot> slots;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, int64_t(stream.id()));
  auto it = slots.find(key);
  if (it != slots.end()) return it->second;
  auto slab = slabs.find(device);
  if (slab == slabs.end()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(stream.stream(), &capture));
    // cudaMalloc is not allowed while a graph is being captured.
    if (capture != cudaStreamCaptureStatusNone) return {};
    // 16 bytes of counter, then the partials; slots 128-byte aligned.
    const int64_t slot_bytes = ceil_div<int64_t>(16 + 8 * max_full_grid(), 128) * 128;
    void* p = nullptr;
    C10_CUDA_CHECK(cudaMalloc(&p, kScratchSlots * slot_bytes));  // lives for the process
    C10_CUDA_CHECK(cudaMemset(p, 0, kScratchSlots * slot_bytes));
    slab = slabs.emplace(device, Slab{static_cast<uint8_t*>(p), slot_bytes, 0}).first;
  }
  Slab& sl = slab->second;
  if (sl.used == kScratchSlots) return {};
  uint8_t* slot = sl.base + int64_t(sl.used++) * sl.slot_bytes;
  const Slot scratch{reinterpret_cast<unsigned*>(slot), slot + 16, sl.slot_bytes - 16};
  slots.emplace(key, scratch);
  return scratch;
}

}  // namespace

// The device is the one the caller's guard selected (the input's), the stream the one it launches
// on.
GridScratch grid_scratch(int64_t blocks, size_t partial_bytes, cudaStream_t stream) {
  GridScratch s;
  const int64_t bytes = blocks * int64_t(partial_bytes);
  const Slot slot = scratch_slot(current_device(), at::cuda::getCurrentCUDAStream());
  if (slot.ticket != nullptr && bytes <= slot.bytes) {
    s.partials = slot.partials;
    s.ticket = slot.ticket;
    return s;
  }
  // No slot (or too small a one): the partials, then the ticket on a 16-byte boundary.
  const int64_t ticket_at = ceil_div<int64_t>(bytes, 16) * 16;
  s.workspace = scratch_buffer(size_t(ticket_at + 16));
  s.partials = s.workspace.ptr;
  s.ticket = reinterpret_cast<unsigned*>(static_cast<uint8_t*>(s.workspace.ptr) + ticket_at);
  C10_CUDA_CHECK(cudaMemsetAsync(s.ticket, 0, sizeof(unsigned), stream));
  return s;
}

int cached_occupancy(const void* kernel, int threads) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(kernel, threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int blocks = blocks_per_sm(kernel, threads);
  cache.emplace(key, blocks);
  return blocks;
}

}  // namespace reduce

namespace {

using reduce::BlockReduce;
using reduce::ladder_grid_stride_vec;
using reduce::ladder_multi_pass;
using reduce::launch_sum_cols;
using reduce::launch_sum_full;
using reduce::launch_sum_rows;

template <typename src_t, typename acc_t, typename res_t>
void run_pass_cuda(const src_t* x, const SumPass& p, res_t* out, cudaStream_t stream) {
  switch (p.kind) {
    case SumKind::Full: return launch_sum_full<src_t, acc_t, res_t>(x, p.numel, out, stream);
    case SumKind::Rows:
      return launch_sum_rows<src_t, acc_t, res_t>(x, p.outer, p.inner, out, stream);
    case SumKind::Cols:
      return launch_sum_cols<src_t, acc_t, res_t>(x, p.batch, p.rows, p.cols, out, stream);
  }
}

at::Tensor sum_cuda(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  const SumArgs args = check_sum_args(self, dim, keepdim, dtype);
  const auto out_options = self.options().dtype(args.out_dtype);
  const c10::cuda::CUDAGuard guard(self.device());
  const SumPlan plan = plan_sum(self, args);
  if (plan.empty) return at::zeros(args.out_sizes, out_options);
  at::Tensor out = at::empty(args.out_sizes, out_options);
  if (plan.passes.empty()) {  // only size-1 dims reduced: a cast
    finish_sum(plan, at::Tensor(), out);
    return out;
  }
  const at::Tensor& x = plan.input;
  at::Tensor result = plan.out_perm.empty() ? out : at::empty({out.numel()}, out_options);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  dispatch_sum_types(x.scalar_type(), args.out_dtype, [&](auto in_tag, auto acc_tag, auto out_tag) {
    using in_t = typename decltype(in_tag)::type;
    using acc_t = typename decltype(acc_tag)::type;
    using out_t = typename decltype(out_tag)::type;
    // Between passes: a buffer of accumulators (fp32 for half, int64 for integers), much smaller
    // than the input (each pass divides the element count by a reduced run's size).
    at::Tensor prev;
    const size_t n = plan.passes.size();
    for (size_t i = 0; i < n; ++i) {
      const SumPass& p = plan.passes[i];
      const bool first = i == 0, last = i + 1 == n;
      at::Tensor next = last ? result
                             : at::empty({p.out_numel()},
                                         x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      const auto* in = static_cast<const in_t*>(x.const_data_ptr());
      if (first && last) {
        run_pass_cuda<in_t, acc_t, out_t>(in, p, static_cast<out_t*>(next.data_ptr()), stream);
      } else if (first) {
        run_pass_cuda<in_t, acc_t, acc_t>(in, p, next.data_ptr<acc_t>(), stream);
      } else if (last) {
        run_pass_cuda<acc_t, acc_t, out_t>(prev.const_data_ptr<acc_t>(), p,
                                           static_cast<out_t*>(next.data_ptr()), stream);
      } else {
        run_pass_cuda<acc_t, acc_t, acc_t>(prev.const_data_ptr<acc_t>(), p, next.data_ptr<acc_t>(),
                                           stream);
      }
      prev = next;
    }
  });
  finish_sum(plan, result, out);
  return out;
}

at::Tensor ladder_sum_cuda(const at::Tensor& self, c10::string_view variant) {
  constexpr const char* op = "ladder_sum";
  check_dtype(self, op, "self", {at::kFloat});
  CUDASTEPS_CHECK(self.is_contiguous(), op, "self must be contiguous, got strides ", self.strides());
  at::Tensor out = at::zeros({}, self.options());
  const int64_t n = self.numel();
  const bool known = variant == "smem_tree" || variant == "syncwarp" || variant == "shfl" ||
                     variant == "coop_groups" || variant == "grid_stride_vec" ||
                     variant == "single_pass";
  CUDASTEPS_CHECK(known, op,
                  "variant must be one of smem_tree, syncwarp, shfl, coop_groups, grid_stride_vec, "
                  "single_pass, got '",
                  std::string(variant), "'");
  if (n == 0) return out;
  const c10::cuda::CUDAGuard guard(self.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* x = self.const_data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (variant == "smem_tree") {
    ladder_multi_pass<BlockReduce::SmemTree>(x, n, o, stream);
  } else if (variant == "syncwarp") {
    ladder_multi_pass<BlockReduce::SyncWarp>(x, n, o, stream);
  } else if (variant == "shfl") {
    ladder_multi_pass<BlockReduce::Shfl>(x, n, o, stream);
  } else if (variant == "coop_groups") {
    ladder_multi_pass<BlockReduce::CoopGroups>(x, n, o, stream);
  } else if (variant == "grid_stride_vec") {
    ladder_grid_stride_vec(x, n, o, stream);
  } else {
    launch_sum_full<float, float, float>(x, n, o, stream);
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("sum", &sum_cuda);
  m.impl("ladder_sum", &ladder_sum_cuda);
}

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
