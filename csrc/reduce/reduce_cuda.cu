// CUDA sum: three device kernels on the warp -> block primitives of common/*_reduce.cuh.
//
//   sum_full_kernel  all elements, one launch: each block reduces a grid-stride share (16-byte
//                    loads) to a partial in its stream's scratch slot; the last block to finish (a
//                    ticket from an integer atomic, used for ordering only) adds the partials in a
//                    fixed order.
//   sum_rows_kernel  [outer, inner] reducing inner: a warp per row for short rows, a block per row
//                    (or per row segment, plus a second pass over the segments) for long ones.
//   sum_cols_kernel  [batch, rows, cols] reducing rows: threads walk columns (a warp reads 512
//                    contiguous bytes per row), row ranges split across blocks when the columns
//                    alone cannot fill the GPU, then a second pass over the splits.
//   sum_cols_flat_kernel  the same shape with many outputs (batch * cols): a thread per output.
// Any dim set is a sequence of these passes over the input in place (reduce.h).
//
// Determinism: every grid, split and combine order depends only on the shape, the dtype and the
// SM count, and no floating-point atomics are used, so a result is bitwise reproducible on a
// given GPU model. Accuracy: each thread keeps a few independent running sums over its share,
// above which the block and grid combine in balanced trees.
//
// Ladder (ladder_sum, fp32, contiguous): smem_tree -> syncwarp -> shfl -> coop_groups ->
// grid_stride_vec -> single_pass (the kernel sum() runs).

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/block_reduce.cuh"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "reduce/reduce.h"

namespace cudasteps {
namespace {

// ---- Loads ------------------------------------------------------------------------------------

// Elements of T in one 16-byte load.
template <typename T>
constexpr int kVec = elems_per_vec16<T>();

// Element k of the 16 bytes in `words`, extracted with shifts so that everything stays in
// registers (a memcpy of the whole vector into a char or half array put it on the stack).
template <typename T>
__device__ __forceinline__ T element_of(const uint32_t (&words)[4], int k) {
  T v;
  if constexpr (sizeof(T) == 8) {
    const uint64_t bits = uint64_t(words[2 * k]) | (uint64_t(words[2 * k + 1]) << 32);
    memcpy(&v, &bits, 8);
  } else if constexpr (sizeof(T) == 4) {
    memcpy(&v, &words[k], 4);
  } else if constexpr (sizeof(T) == 2) {
    const uint16_t bits = uint16_t(words[k / 2] >> (16 * (k % 2)));
    memcpy(&v, &bits, 2);
  } else {
    const uint8_t bits = uint8_t(words[k / 4] >> (8 * (k % 4)));
    memcpy(&v, &bits, 1);
  }
  return v;
}

// N elements from p: one 16-byte load when N elements are 16 bytes (p then 16-byte aligned).
template <typename T, int N>
__device__ __forceinline__ void load_pack(const T* p, T (&vals)[N]) {
  if constexpr (N * sizeof(T) == kVecBytes) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < N; ++k) vals[k] = element_of<T>(words, k);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) vals[k] = p[k];
  }
}

// v[0] = v[0] + ... + v[2W - 1] as a balanced tree. A template recursion rather than a halving
// loop: every index is a compile-time constant, so v stays in registers (the loop form left a
// 16 x int64 array on the stack).
template <int W, typename A>
__device__ __forceinline__ void tree_fold(A* v) {
  if constexpr (W > 0) {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] += v[k + W];
    tree_fold<W / 2>(v);
  }
}

// Sum of a pack, as a balanced tree.
template <typename acc_t, typename T, int N>
__device__ __forceinline__ acc_t pack_sum(const T (&vals)[N]) {
  acc_t v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = static_cast<acc_t>(vals[k]);
  tree_fold<N / 2>(v);
  return v[0];
}

// Elements before p reaches a 16-byte boundary (p is element-aligned, as every tensor is).
template <typename T>
__host__ __device__ __forceinline__ int64_t head_elems(const T* p, int64_t n) {
  const int64_t bytes = (kVecBytes - int64_t(reinterpret_cast<uintptr_t>(p) % kVecBytes)) % kVecBytes;
  const int64_t elems = bytes / int64_t(sizeof(T));
  return elems < n ? elems : n;
}

// 16-byte loads each thread issues before adding any of them: with 2048 resident threads per SM,
// 4 x 16 B each is 128 KiB in flight per SM, several times what Little's law asks for ~3 TB/s.
constexpr int kLoadUnroll = 4;

// This thread's share (lane `lane` of a group of `group` threads) of the sum of x[0, n): the
// aligned body in 16-byte loads, the unaligned head and tail element by element.
template <typename in_t, typename acc_t>
__device__ __forceinline__ acc_t strided_share(const in_t* __restrict__ x, int64_t n, int64_t lane,
                                               int64_t group) {
  constexpr int V = kVec<in_t>;
  const int64_t head = head_elems(x, n);
  const int64_t n_vec = (n - head) / V;
  const in_t* body = x + head;
  acc_t acc[kLoadUnroll];
#pragma unroll
  for (int u = 0; u < kLoadUnroll; ++u) acc[u] = acc_t(0);
  int64_t i = lane;
  for (; i + (kLoadUnroll - 1) * group < n_vec; i += kLoadUnroll * group) {
    in_t vals[kLoadUnroll][V];
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) load_pack(body + (i + u * group) * V, vals[u]);
#pragma unroll
    for (int u = 0; u < kLoadUnroll; ++u) acc[u] += pack_sum<acc_t>(vals[u]);
  }
  // Fewer than kLoadUnroll loads left (the grid rarely divides the input): still all in flight
  // before the first add. A loop over them would wait a full memory latency per load, and the
  // lanes that drew the remainder would finish that many round trips after the others: for a
  // small sum, whose every lane loads once, that tail is most of the kernel's time.
  // The raw 16 bytes are held until the adds (4 registers each, where unpacked 1-byte elements
  // widened to int64 took 16 x 2).
  if (i < n_vec) {
    uint4 raw[kLoadUnroll - 1];
#pragma unroll
    for (int u = 0; u < kLoadUnroll - 1; ++u) {
      if (i + u * group < n_vec) {
        raw[u] = *reinterpret_cast<const uint4*>(body + (i + u * group) * V);
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadUnroll - 1; ++u) {
      if (i + u * group < n_vec) {
        const uint32_t words[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
        in_t vals[V];
#pragma unroll
        for (int k = 0; k < V; ++k) vals[k] = element_of<in_t>(words, k);
        acc[u] += pack_sum<acc_t>(vals);
      }
    }
  }
  // head < V and tail < V elements: lanes 0..V-1 take one of each.
  const int64_t tail_begin = head + n_vec * V;
  if (lane < head) acc[0] += static_cast<acc_t>(x[lane]);
  if (lane < n - tail_begin) acc[1 % kLoadUnroll] += static_cast<acc_t>(x[tail_begin + lane]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}
static_assert(kLoadUnroll == 4, "strided_share combines exactly four accumulators");

// Resident blocks per SM of `kernel` at `threads` threads, asked once per kernel instantiation
// (the occupancy query costs host time; every GPU of a process is assumed to be one model).
template <typename Kernel>
int cached_blocks_per_sm(Kernel kernel, int threads) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int blocks = blocks_per_sm(kernel, threads);
  cache.emplace(key, blocks);
  return blocks;
}

// ---- Full reduction: single pass ----------------------------------------------------------------

// 512 threads: 16 warps to hide latency per block, 4 blocks per SM at full occupancy. The grid is
// at most one wave, so the last block adds at most a few hundred partials.
constexpr int kFullThreads = 512;

// Each (device, stream) owns a slot of a slab allocated once per device and zeroed then: a ticket
// counter and room for one launch's partials. The last block of every launch resets its counter to
// 0, so each launch finds it at 0; launches on one stream are ordered, so they may share the slot,
// and different streams have different slots. Keeping the partials there saves every call a
// caching-allocator round trip (this op's small sizes are bound by host time).
constexpr int kScratchSlots = 256;  // PyTorch's stream pools hold fewer streams per device

struct FullSumScratch {
  unsigned* ticket = nullptr;  // null: no slot (use a per-call workspace)
  void* partials = nullptr;    // room for `capacity` partials of up to 8 bytes
  int64_t capacity = 0;
};

// The largest grid launch_sum_full launches on this device: one wave of kFullThreads blocks.
int64_t max_full_grid() {
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  return int64_t(prop->multiProcessorCount) * (prop->maxThreadsPerMultiProcessor / kFullThreads);
}

// No slot when the device has no slab yet and the stream is being captured into a CUDA graph (the
// capture status is asked only then: once a stream has its slot, a call costs a map lookup), or
// when kScratchSlots streams of this device hold every slot.
FullSumScratch full_sum_scratch(int device, const at::cuda::CUDAStream& stream) {
  static std::mutex mu;
  struct Slab {
    uint8_t* base;
    int64_t slot_bytes;
    int used;
  };
  static std::map<int, Slab> slabs;
  static std::map<std::pair<int, int64_t>, FullSumScratch> slots;
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
  const FullSumScratch scratch{reinterpret_cast<unsigned*>(slot), slot + 16,
                               (sl.slot_bytes - 16) / 8};
  slots.emplace(key, scratch);
  return scratch;
}

template <typename in_t, typename acc_t, typename out_t>
__global__ void __launch_bounds__(kFullThreads)
    sum_full_kernel(const in_t* __restrict__ x, int64_t n, acc_t* __restrict__ partials,
                    unsigned* __restrict__ ticket, out_t* __restrict__ out) {
  __shared__ acc_t scratch[kFullThreads / kWarpSize];
  __shared__ bool is_last;
  const acc_t mine = strided_share<in_t, acc_t>(x, n, int64_t(blockIdx.x) * kFullThreads + threadIdx.x,
                                                int64_t(gridDim.x) * kFullThreads);
  const acc_t block_total = block_sum<kFullThreads>(mine, scratch);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) *out = static_cast<out_t>(block_total);
    return;
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_total;
    __threadfence();  // the partial is visible device-wide before the ticket is taken
    is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // Fixed order: thread t adds partials t, t + 512, ...; then the block tree. Volatile loads skip
  // L1, which may hold nothing of these lines anyway but is not coherent across SMs.
  const volatile acc_t* vp = partials;
  acc_t acc = acc_t(0);
  for (int b = threadIdx.x; b < int(gridDim.x); b += kFullThreads) acc += vp[b];
  acc = block_sum<kFullThreads>(acc, scratch);
  if (threadIdx.x == 0) {
    *out = static_cast<out_t>(acc);
    *ticket = 0u;  // ready for the next launch on this stream
  }
}

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_full(const in_t* x, int64_t n, out_t* out, const at::Tensor& like,
                     cudaStream_t raw_stream) {
  const auto kernel = sum_full_kernel<in_t, acc_t, out_t>;
  // 16-byte loads of an aligned input (a misaligned one has one fewer, plus the scalar head and
  // tail). The grid divides them exactly where it can: for 2^20 fp32, 128 blocks whose every lane
  // issues kLoadUnroll loads once, where one block more would leave lanes with fewer.
  const int64_t n_vec = ceil_div<int64_t>(n, kVec<in_t>);
  const int64_t per_block = int64_t(kFullThreads) * kLoadUnroll;  // 16-byte loads per block pass
  // A function-local static per instantiation: no lock on this, the latency-critical path.
  static const int blocks_per_sm_full = blocks_per_sm(kernel, kFullThreads);
  const int64_t resident = int64_t(sm_count()) * blocks_per_sm_full;
  const int64_t grid = std::max<int64_t>(1, std::min(ceil_div(n_vec, per_block), resident));
  acc_t* partials = nullptr;
  unsigned* ticket = nullptr;
  at::Tensor workspace;
  if (grid > 1) {
    const FullSumScratch scratch =
        full_sum_scratch(like.get_device(), at::cuda::getCurrentCUDAStream());
    static_assert(sizeof(acc_t) <= 8, "a scratch slot holds partials of up to 8 bytes");
    if (grid <= scratch.capacity) {
      ticket = scratch.ticket;
      partials = static_cast<acc_t*>(scratch.partials);
    } else {
      // No slot: partials and a counter zeroed by a memset (a graph node under capture) from the
      // caching allocator, which keeps them per stream.
      const int64_t partial_bytes = ceil_div<int64_t>(grid * int64_t(sizeof(acc_t)), 16) * 16;
      workspace = at::empty({partial_bytes + 16}, like.options().dtype(at::kByte));
      partials = reinterpret_cast<acc_t*>(workspace.data_ptr());
      ticket = reinterpret_cast<unsigned*>(static_cast<uint8_t*>(workspace.data_ptr()) +
                                           partial_bytes);
      C10_CUDA_CHECK(cudaMemsetAsync(ticket, 0, sizeof(unsigned), raw_stream));
    }
  }
  kernel<<<grid, kFullThreads, 0, raw_stream>>>(x, n, partials, ticket, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- Row sums -----------------------------------------------------------------------------------

// Rows up to this many elements get one warp each (8 warps, 8 rows, per block); longer rows get a
// block of kRowBlockThreads.
constexpr int64_t kWarpRowMax = 2048;
constexpr int kRowWarpThreads = 256;
constexpr int kRowBlockThreads = 256;
// A row is split into segments (second pass over the segment sums) only when there are too few
// rows to fill the GPU, and never into segments shorter than this.
constexpr int64_t kMinRowSegment = 16384;
// Blocks of the warp-per-row kernel: rows are walked grid-stride beyond this many waves.
constexpr int64_t kRowWaves = 32;

// out[r] = sum of row r of [outer, inner] (leading dimension inner), one warp per row.
template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kRowWarpThreads)
    sum_rows_warp_kernel(const in_t* __restrict__ x, int64_t outer, int64_t inner,
                         res_t* __restrict__ out) {
  constexpr int kWarps = kRowWarpThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarpSize; row < outer;
       row += int64_t(gridDim.x) * kWarps) {
    acc_t acc = strided_share<in_t, acc_t>(x + row * inner, inner, lane, kWarpSize);
    acc = warp_sum(acc);
    if (lane == 0) out[row] = static_cast<res_t>(acc);
  }
}

// out[task] = sum of segment (task % segments) of row (task / segments), one block per task.
template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kRowBlockThreads)
    sum_rows_block_kernel(const in_t* __restrict__ x, int64_t outer, int64_t inner, int64_t segments,
                          int64_t segment_len, res_t* __restrict__ out) {
  __shared__ acc_t scratch[kRowBlockThreads / kWarpSize];
  const int64_t tasks = outer * segments;
  // The loop bound is uniform across the block, so every thread reaches block_sum's barriers.
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t row = task / segments;
    const int64_t begin = (task % segments) * segment_len;
    const int64_t len = std::min(segment_len, inner - begin);
    acc_t acc = strided_share<in_t, acc_t>(x + row * inner + begin, len, threadIdx.x, kRowBlockThreads);
    acc = block_sum<kRowBlockThreads>(acc, scratch);
    if (threadIdx.x == 0) out[task] = static_cast<res_t>(acc);
  }
}

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_rows(const in_t* x, int64_t outer, int64_t inner, out_t* out, const at::Tensor& like,
                     cudaStream_t stream) {
  if (inner <= kWarpRowMax) {
    const auto kernel = sum_rows_warp_kernel<in_t, acc_t, out_t>;
    constexpr int64_t kWarps = kRowWarpThreads / kWarpSize;
    const int64_t cap = kRowWaves * sm_count() * cached_blocks_per_sm(kernel, kRowWarpThreads);
    const int64_t grid = std::min(ceil_div(outer, kWarps), cap);
    kernel<<<grid, kRowWarpThreads, 0, stream>>>(x, outer, inner, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  const auto kernel_out = sum_rows_block_kernel<in_t, acc_t, out_t>;
  const int64_t resident = int64_t(sm_count()) * cached_blocks_per_sm(kernel_out, kRowBlockThreads);
  int64_t segments = 1;
  if (outer < resident) {
    segments = std::min(ceil_div(resident, outer), std::max<int64_t>(1, inner / kMinRowSegment));
  }
  // Segment starts at multiples of 16 elements keep them 16-byte aligned whenever the row is.
  const int64_t segment_len = ceil_div<int64_t>(ceil_div(inner, segments), 16) * 16;
  segments = ceil_div(inner, segment_len);
  const int64_t tasks = outer * segments;
  const int64_t grid = std::min<int64_t>(tasks, kRowWaves * resident);
  if (segments == 1) {
    kernel_out<<<grid, kRowBlockThreads, 0, stream>>>(x, outer, inner, 1, segment_len, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  at::Tensor partials = at::empty({tasks * int64_t(sizeof(acc_t))}, like.options().dtype(at::kByte));
  acc_t* p = reinterpret_cast<acc_t*>(partials.data_ptr());
  sum_rows_block_kernel<in_t, acc_t, acc_t>
      <<<grid, kRowBlockThreads, 0, stream>>>(x, outer, inner, segments, segment_len, p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // Second pass: the segment sums of each row, a short row each.
  const auto second = sum_rows_warp_kernel<acc_t, acc_t, out_t>;
  const int64_t grid2 = ceil_div<int64_t>(outer, kRowWarpThreads / kWarpSize);
  second<<<grid2, kRowWarpThreads, 0, stream>>>(p, outer, segments, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- Column sums --------------------------------------------------------------------------------

// A block is kColThreadsX x kColThreadsY: x walks columns (32 threads x 16 bytes = 512 contiguous
// bytes of a row per warp, four whole 128-byte lines), y walks rows 8 apart.
constexpr int kColThreadsX = 32;
constexpr int kColThreadsY = 8;
constexpr int kColThreads = kColThreadsX * kColThreadsY;
// Rows each thread loads before adding (loads in flight).
constexpr int kColUnroll = 4;
// Splits never cover fewer rows than this (each thread then still has kColUnroll rows or more).
constexpr int64_t kMinRowsPerSplit = kColThreadsY * kColUnroll;
constexpr int64_t kMaxGridY = 65535;

// Sums rows [split * rows_per_split, ...) of [batch, rows, cols] for a tile of kColThreadsX * VC
// columns. VC columns per thread: kVec (one 16-byte load) when every row start is 16-byte aligned,
// else 1. out is [batch, gridDim.y, cols] (gridDim.y == 1: the final [batch, cols]).
template <typename in_t, typename acc_t, typename res_t, int VC>
__global__ void __launch_bounds__(kColThreads)
    sum_cols_kernel(const in_t* __restrict__ x, int64_t batch, int64_t rows, int64_t cols,
                    int64_t rows_per_split, res_t* __restrict__ out) {
  // [y][column within thread][x]: the stores and the loads of the final add are conflict-free
  // (consecutive x, consecutive words).
  __shared__ acc_t partial[kColThreadsY][VC][kColThreadsX];
  constexpr int64_t kTileCols = int64_t(kColThreadsX) * VC;
  const int64_t tiles_per_batch = ceil_div(cols, kTileCols);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t split = blockIdx.y;
  const int64_t r_begin = split * rows_per_split;
  const int64_t r_end = std::min(rows, r_begin + rows_per_split);
  for (int64_t tile = blockIdx.x; tile < batch * tiles_per_batch; tile += gridDim.x) {
    const int64_t b = tile / tiles_per_batch;
    const int64_t col = (tile % tiles_per_batch) * kTileCols + int64_t(tx) * VC;
    // col < cols means all VC columns exist: when VC > 1, cols is a multiple of VC.
    const bool active = col < cols;
    const in_t* base = x + b * rows * cols + col;
    acc_t acc[VC];
#pragma unroll
    for (int c = 0; c < VC; ++c) acc[c] = acc_t(0);
    if (active) {
      int64_t r = r_begin + ty;
      for (; r + (kColUnroll - 1) * kColThreadsY < r_end; r += kColUnroll * kColThreadsY) {
        in_t vals[kColUnroll][VC];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) load_pack(base + (r + u * kColThreadsY) * cols, vals[u]);
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) {
#pragma unroll
          for (int c = 0; c < VC; ++c) acc[c] += static_cast<acc_t>(vals[u][c]);
        }
      }
      for (; r < r_end; r += kColThreadsY) {
        in_t vals[VC];
        load_pack(base + r * cols, vals);
#pragma unroll
        for (int c = 0; c < VC; ++c) acc[c] += static_cast<acc_t>(vals[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < VC; ++c) partial[ty][c][tx] = acc[c];
    __syncthreads();
    if (ty == 0 && active) {
      res_t* dst = out + (b * gridDim.y + split) * cols + col;
#pragma unroll
      for (int c = 0; c < VC; ++c) {
        // Balanced tree over the 8 row phases.
        acc_t s[kColThreadsY];
#pragma unroll
        for (int y = 0; y < kColThreadsY; ++y) s[y] = partial[y][c][tx];
        tree_fold<kColThreadsY / 2>(s);
        dst[c] = static_cast<res_t>(s[0]);
      }
    }
    __syncthreads();  // partial is rewritten by the next tile
  }
}

template <typename in_t, typename acc_t, typename res_t>
void launch_cols_pass(const in_t* x, int64_t batch, int64_t rows, int64_t cols, int64_t splits,
                      res_t* out, cudaStream_t stream) {
  constexpr int V = kVec<in_t>;
  const bool vec = cols % V == 0 && is_aligned(x, kVecBytes);
  const int64_t tile_cols = int64_t(kColThreadsX) * (vec ? V : 1);
  const int64_t tiles = batch * ceil_div(cols, tile_cols);
  const int64_t rows_per_split = ceil_div(rows, splits);
  splits = ceil_div(rows, rows_per_split);
  const int64_t grid_x = std::min<int64_t>(tiles, int64_t(1) << 30);
  const dim3 grid{unsigned(grid_x), unsigned(splits), 1u};
  const dim3 block{unsigned(kColThreadsX), unsigned(kColThreadsY), 1u};
  if (vec) {
    sum_cols_kernel<in_t, acc_t, res_t, V><<<grid, block, 0, stream>>>(x, batch, rows, cols,
                                                                        rows_per_split, out);
  } else {
    sum_cols_kernel<in_t, acc_t, res_t, 1><<<grid, block, 0, stream>>>(x, batch, rows, cols,
                                                                        rows_per_split, out);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Column sums with many batches of narrow rows ([4096, 33, 517] summed over dim 1): one thread
// per output (b, c), walking its column down the rows with kFlatColUnroll loads in flight. A warp
// covers 32 adjacent outputs, so each of its loads is 32 adjacent elements of one row (or two
// rows at a batch boundary): coalesced whatever cols is, with no idle lanes in partial tiles,
// which the tile kernel has when cols is not a multiple of its 32 x 16-byte tile.
constexpr int kFlatColThreads = 256;
constexpr int kFlatColUnroll = 8;

template <typename in_t, typename acc_t, typename res_t>
__global__ void __launch_bounds__(kFlatColThreads)
    sum_cols_flat_kernel(const in_t* __restrict__ x, int64_t batch, int64_t rows, int64_t cols,
                         res_t* __restrict__ out) {
  const int64_t n = batch * cols;
  const int64_t stride = int64_t(gridDim.x) * kFlatColThreads;
  for (int64_t o = int64_t(blockIdx.x) * kFlatColThreads + threadIdx.x; o < n; o += stride) {
    const int64_t b = o / cols;
    const in_t* col = x + b * rows * cols + (o - b * cols);
    acc_t acc[4] = {acc_t(0), acc_t(0), acc_t(0), acc_t(0)};
    int64_t r = 0;
    for (; r + kFlatColUnroll <= rows; r += kFlatColUnroll) {
      in_t v[kFlatColUnroll];
#pragma unroll
      for (int u = 0; u < kFlatColUnroll; ++u) v[u] = col[(r + u) * cols];
#pragma unroll
      for (int u = 0; u < kFlatColUnroll; ++u) acc[u % 4] += static_cast<acc_t>(v[u]);
    }
    for (; r < rows; ++r) acc[0] += static_cast<acc_t>(col[r * cols]);  // constant index: registers
    out[o] = static_cast<res_t>((acc[0] + acc[1]) + (acc[2] + acc[3]));
  }
}

// The flat kernel wants enough outputs to give every resident thread one (then every load of the
// GPU is in flight at once); with fewer outputs the tile kernel, which also splits the rows
// across blocks, keeps the GPU busy instead.
constexpr int64_t kFlatColMinOutputsPerSm = 2048;

template <typename in_t, typename acc_t, typename out_t>
void launch_sum_cols(const in_t* x, int64_t batch, int64_t rows, int64_t cols, out_t* out,
                     const at::Tensor& like, cudaStream_t stream) {
  if (batch > 1 && batch * cols >= kFlatColMinOutputsPerSm * sm_count()) {
    const int64_t grid = std::min<int64_t>(ceil_div<int64_t>(batch * cols, kFlatColThreads),
                                           int64_t(sm_count()) * 64);
    sum_cols_flat_kernel<in_t, acc_t, out_t><<<grid, kFlatColThreads, 0, stream>>>(x, batch, rows, cols, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  constexpr int V = kVec<in_t>;
  const bool vec = cols % V == 0 && is_aligned(x, kVecBytes);
  const int64_t tiles = batch * ceil_div<int64_t>(cols, int64_t(kColThreadsX) * (vec ? V : 1));
  const int64_t resident =
      int64_t(sm_count()) * cached_blocks_per_sm(sum_cols_kernel<in_t, acc_t, out_t, V>, kColThreads);
  // Split the rows only as far as one wave of blocks: a partial second wave would idle most SMs.
  int64_t splits = 1;
  if (tiles < resident) {
    splits = std::min({resident / tiles, ceil_div(rows, kMinRowsPerSplit), kMaxGridY});
    splits = std::max<int64_t>(splits, 1);
  }
  if (splits == 1) {
    launch_cols_pass<in_t, acc_t, out_t>(x, batch, rows, cols, 1, out, stream);
    return;
  }
  const int64_t rows_per_split = ceil_div(rows, splits);
  splits = ceil_div(rows, rows_per_split);
  at::Tensor partials =
      at::empty({batch * splits * cols * int64_t(sizeof(acc_t))}, like.options().dtype(at::kByte));
  acc_t* p = reinterpret_cast<acc_t*>(partials.data_ptr());
  launch_cols_pass<in_t, acc_t, acc_t>(x, batch, rows, cols, splits, p, stream);
  // Second pass: [batch, splits, cols] -> [batch, cols], the splits in order.
  launch_cols_pass<acc_t, acc_t, out_t>(p, batch, splits, cols, 1, out, stream);
}

template <typename src_t, typename acc_t, typename res_t>
void run_pass_cuda(const src_t* x, const SumPass& p, res_t* out, const at::Tensor& like,
                   cudaStream_t stream) {
  switch (p.kind) {
    case SumKind::Full: return launch_sum_full<src_t, acc_t, res_t>(x, p.numel, out, like, stream);
    case SumKind::Rows:
      return launch_sum_rows<src_t, acc_t, res_t>(x, p.outer, p.inner, out, like, stream);
    case SumKind::Cols:
      return launch_sum_cols<src_t, acc_t, res_t>(x, p.batch, p.rows, p.cols, out, like, stream);
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
        run_pass_cuda<in_t, acc_t, out_t>(in, p, static_cast<out_t*>(next.data_ptr()), x, stream);
      } else if (first) {
        run_pass_cuda<in_t, acc_t, acc_t>(in, p, next.data_ptr<acc_t>(), x, stream);
      } else if (last) {
        run_pass_cuda<acc_t, acc_t, out_t>(prev.const_data_ptr<acc_t>(), p,
                                           static_cast<out_t*>(next.data_ptr()), x, stream);
      } else {
        run_pass_cuda<acc_t, acc_t, acc_t>(prev.const_data_ptr<acc_t>(), p, next.data_ptr<acc_t>(),
                                           x, stream);
      }
      prev = next;
    }
  });
  finish_sum(plan, result, out);
  return out;
}

// ---- Ladder -------------------------------------------------------------------------------------

namespace cg = cooperative_groups;

// Steps 1-4 share one kernel shape (Harris's "first add during load"): 256 threads, each adding two
// elements 256 apart, one partial per block, and as many passes as it takes to reach one value.
// They differ only in how the block reduces its 256 values.
constexpr int kLadderThreads = 256;
constexpr int kLadderWarps = kLadderThreads / kWarpSize;

enum class BlockReduce { SmemTree, SyncWarp, Shfl, CoopGroups };

template <BlockReduce kind>
__device__ __forceinline__ float ladder_block_reduce(float v, float* sdata) {
  const int tid = threadIdx.x;
  if constexpr (kind == BlockReduce::SmemTree) {
    // Halving tree in shared memory, a barrier per level: 8 barriers, and half the threads idle
    // at every level.
    sdata[tid] = v;
    __syncthreads();
    for (int s = kLadderThreads / 2; s > 0; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }
    return sdata[0];
  } else if constexpr (kind == BlockReduce::SyncWarp) {
    // Down to 64 values with block barriers, then the last warp alone, ordered by __syncwarp
    // (each lane reads before any lane writes, then writes before any lane reads again).
    sdata[tid] = v;
    __syncthreads();
    for (int s = kLadderThreads / 2; s > kWarpSize; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }
    float x = 0.0f;
    if (tid < kWarpSize) {
      x = sdata[tid];
#pragma unroll
      for (int s = kWarpSize; s > 0; s >>= 1) {
        x += sdata[tid + s];
        __syncwarp();
        sdata[tid] = x;
        __syncwarp();
      }
    }
    return x;  // valid in thread 0
  } else if constexpr (kind == BlockReduce::Shfl) {
    // The common primitives: register shuffles inside each warp, one barrier for the warp sums.
    return block_sum<kLadderThreads>(v, sdata);
  } else {
    // cooperative_groups: the same two-level shape written with thread_block_tile and cg::reduce.
    const cg::thread_block block = cg::this_thread_block();
    const cg::thread_block_tile<kWarpSize> warp = cg::tiled_partition<kWarpSize>(block);
    const float warp_total = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0) sdata[warp.meta_group_rank()] = warp_total;
    block.sync();
    float total = 0.0f;
    if (warp.meta_group_rank() == 0) {
      const float mine = warp.thread_rank() < kLadderWarps ? sdata[warp.thread_rank()] : 0.0f;
      total = cg::reduce(warp, mine, cg::plus<float>());
    }
    return total;  // valid in warp 0
  }
}

template <BlockReduce kind>
__global__ void __launch_bounds__(kLadderThreads)
    ladder_pass_kernel(const float* __restrict__ in, int64_t n, float* __restrict__ out) {
  __shared__ float sdata[kLadderThreads];
  const int64_t i = int64_t(blockIdx.x) * (2 * kLadderThreads) + threadIdx.x;
  float v = 0.0f;
  if (i < n) v = in[i];
  if (i + kLadderThreads < n) v += in[i + kLadderThreads];
  v = ladder_block_reduce<kind>(v, sdata);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

template <BlockReduce kind>
void ladder_multi_pass(const float* x, int64_t n, float* out, const at::Tensor& like,
                       cudaStream_t stream) {
  const float* cur = x;
  at::Tensor current;  // holds `cur` while the pass reading it is launched
  int64_t m = n;
  while (true) {
    const int64_t blocks = ceil_div<int64_t>(m, 2 * kLadderThreads);
    float* dst = out;
    at::Tensor next;
    if (blocks > 1) {
      next = at::empty({blocks}, like.options());
      dst = next.data_ptr<float>();
    }
    ladder_pass_kernel<kind><<<blocks, kLadderThreads, 0, stream>>>(cur, m, dst);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (blocks == 1) return;
    // Freeing `current` now is safe: the caching allocator reuses it only for work queued later
    // on this stream, which runs after the pass that reads it.
    current = next;
    cur = dst;
    m = blocks;
  }
}

// Step 5: a grid of one wave; each thread first sums many float4s (grid stride, 4 loads in
// flight), then the shuffle block reduce; a second one-block kernel adds the block partials.
__global__ void __launch_bounds__(kLadderThreads)
    ladder_grid_stride_vec_kernel(const float* __restrict__ x, int64_t n, float* __restrict__ out) {
  __shared__ float scratch[kLadderWarps];
  float v = strided_share<float, float>(x, n, int64_t(blockIdx.x) * kLadderThreads + threadIdx.x,
                                        int64_t(gridDim.x) * kLadderThreads);
  v = block_sum<kLadderThreads>(v, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

void ladder_grid_stride_vec(const float* x, int64_t n, float* out, const at::Tensor& like,
                            cudaStream_t stream) {
  const auto kernel = ladder_grid_stride_vec_kernel;
  const int64_t resident = int64_t(sm_count()) * cached_blocks_per_sm(kernel, kLadderThreads);
  const int64_t grid = std::max<int64_t>(
      1, std::min(ceil_div<int64_t>(n / 4 + 1, int64_t(kLadderThreads) * kLoadUnroll), resident));
  at::Tensor partials = at::empty({grid}, like.options());
  kernel<<<grid, kLadderThreads, 0, stream>>>(x, n, partials.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  kernel<<<1, kLadderThreads, 0, stream>>>(partials.data_ptr<float>(), grid, out);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
    ladder_multi_pass<BlockReduce::SmemTree>(x, n, o, self, stream);
  } else if (variant == "syncwarp") {
    ladder_multi_pass<BlockReduce::SyncWarp>(x, n, o, self, stream);
  } else if (variant == "shfl") {
    ladder_multi_pass<BlockReduce::Shfl>(x, n, o, self, stream);
  } else if (variant == "coop_groups") {
    ladder_multi_pass<BlockReduce::CoopGroups>(x, n, o, self, stream);
  } else if (variant == "grid_stride_vec") {
    ladder_grid_stride_vec(x, n, o, self, stream);
  } else {
    launch_sum_full<float, float, float>(x, n, o, self, stream);
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) {
  m.impl("sum", &sum_cuda);
  m.impl("ladder_sum", &ladder_sum_cuda);
}

}  // namespace cudasteps
