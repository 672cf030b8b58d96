// The elementwise family's CUDA kernels and their generic launch templates, shared by its kernel
// units (bias_act_cuda.cu: bias_act and its ladder; the inst_backward_*.cu units through
// bias_act_backward.cuh: the backward and sum_leading; the inst_add_*.cu and inst_mul_*.cu units
// through binary_kernels.cuh), each of which
// instantiates what it uses behind the typed launchers of launch.h. Light on purpose (CUDA's
// runtime, c10's Half/BFloat16 and error checks, the project's light headers; nothing of ATen):
// ATen's headers cost a kernel unit about 20 s of compile time. The host side (checks, dtype
// dispatch, allocation, streams) is elementwise_cuda.cpp and binary_cuda.cpp.
// Internal linkage: every unit owns the kernels it instantiates.
//
// add/mul follow the plan of binary.h (broadcasting, type promotion, host values); their dense
// cases take the two kernel shapes below, the rest a strided kernel (strided_binary_kernel: one
// output element per thread, offsets from merged dims with 0 strides on broadcast dims, 32-bit
// index math when it fits). bias_act and sum_leading make their inputs contiguous first. Outputs
// are contiguous. The two kernel shapes:
//
// * flat_kernel: out[i] = op(a[i], b[i]) (or op(a[i], 0)) over the whole tensor, for same-shape
//   add/mul and bias-free activations. One 16-byte vector per thread per tile of kFlatThreads
//   vectors and one block per tile ("one-shot" grid: blocks sweep memory in address order, which
//   the copy family measured fastest on the H100), a scalar tail done by block 0, and a VEC = 1
//   instantiation when any pointer is not 16-byte aligned.
//
// * rowvec_kernel / rowgrad_kernel: x viewed as (rows, cols), a per-feature vector v indexed by
//   column. A block is col_threads x row_threads = 256 threads; each thread owns VEC adjacent
//   columns for its whole life, so it loads its VEC bias values into registers once and never
//   computes an index modulo cols. A block works on chunks of kRowUnroll x row_threads adjacent
//   rows (thread ty takes rows ty, ty + row_threads, ...: kRowUnroll independent 16-byte loads in
//   flight), chunk blockIdx.y, blockIdx.y + gridDim.y, ... With col_threads = 32 a warp reads
//   32 x 16 B = 512 contiguous bytes of one row per access (four full 128-byte lines). The
//   16-byte path needs cols % VEC == 0 and 16-byte aligned pointers (then every row start is
//   aligned too); otherwise VEC = 1.
//   The forward (rowvec) launches one block per chunk (one-shot, as flat_kernel). The backward
//   (rowgrad) launches one wave of blocks, each looping over chunks, because it also sums its
//   d = f(grad, x, bias) values per column: in registers over its rows, then over the block's
//   row_threads through shared memory in a fixed order, then one fp32 partial per
//   (blockIdx.y, column) that finalize_colsum_kernel sums over blockIdx.y in order. One wave keeps
//   that partial buffer small (gridDim.y rows of cols floats). The grid depends only on the shape
//   and the device, so grad_bias is bitwise reproducible run to run (no atomics).
//
// Both row kernels can also emit the amax of what they compute (bias_act_amax and its backward:
// the dynamic scale of the FP8 cast that reads their output, without a pass of its own): each
// thread keeps the largest |value| it wrote (as float bits, common/amax.cuh), and each block folds
// its threads' into one float32 word with at most one atomicMax (an integer max: exact, and the
// same bits whatever the order). The values are the ones written, rounded to T. Without an amax
// (a null pointer) the per-element max still runs (two integer instructions per element, under
// the memory time) and only the fold is skipped.
//
// fp16/bf16 gelu runs FastGelu (functors.h) forward and backward: at eight elements per 16-byte
// vector, erff (and expf in the derivative) made the arithmetic as long as the memory time, and a
// warp computing has no loads in flight. Measured on an H100, bf16 8192 x 8192 fwd+bwd: 69% of
// copy bandwidth with erff, 79-84% with an earlier erfc fit (two exponentials per element);
// FastGelu's own figures are in functors.h.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/amax.cuh"
#include "common/error.h"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "elementwise/functors.h"

namespace cudasteps {
namespace elementwise {
namespace {

constexpr int kThreads = 256;  // row kernels: 32 column threads x 8 row threads (see above)
// Flat kernel block size and one vector per thread per tile: the copy family's measured best on
// the H100 (1 GiB: 1 x 512 threads 3.01 TB/s vs 4 x 256 2.98 TB/s).
constexpr int kFlatThreads = 512;
// Column threads of a rowvec/rowgrad block when there are enough rows: one warp spans one row
// segment of 32 x 16 B (coalesced, 4 full lines) and the 8 warps of a block take 8 rows, so the
// backward's cross-thread column reduction is 8-deep through shared memory.
constexpr int kMaxColThreads = 32;
// Rows each thread keeps in flight (independent 16-byte loads issued before the first use):
// 4 x 16 B x 2048 resident threads = 128 KiB per SM for the forward, twice that for the
// backward (grad and x), comfortably above what Little's law asks for ~3 TB/s.
constexpr int kRowUnroll = 4;

template <typename T>
constexpr int vec16_elems() {
  return elems_per_vec16<T>();
}

// ---- per-feature vector ----------------------------------------------------------------------

// Loads v[c0 .. c0 + VEC) (v of type T or fp32; null means zeros) into registers, once per thread.
template <typename T, int VEC, typename Acc>
__device__ __forceinline__ void load_feature(const void* v, bool v_is_float, int64_t c0,
                                             Acc (&out)[VEC]) {
  if (v == nullptr) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) out[k] = Acc(0);
  } else if (v_is_float) {
    const float* p = static_cast<const float*>(v) + c0;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out[k] = Acc(p[k]);
  } else {
    const T* p = static_cast<const T*>(v) + c0;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out[k] = Acc(p[k]);
  }
}

// ---- flat kernel ---------------------------------------------------------------------------

template <typename T, int VEC, bool kHasB, typename Op>
__device__ __forceinline__ Vec<T, VEC> apply_vec(const Vec<T, VEC>& a, const Vec<T, VEC>& b, Op op) {
  using Acc = opmath_type<T>;
  Vec<T, VEC> o;
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    o.val[k] = T(op(Acc(a.val[k]), kHasB ? Acc(b.val[k]) : Acc(0)));
  }
  return o;
}

// The functor a kernel's loop applies: op itself, or for a DeviceValueOp (an operand that is one
// element in GPU memory) that element read once, here, into a ValueRightOp / ValueLeftOp, instead
// of a load per element that the compiler cannot hoist past the output's stores.
template <typename Op>
__device__ __forceinline__ Op bind_operand(const Op& op) {
  return op;
}

template <typename Op, typename T, bool kRight>
__device__ __forceinline__ auto bind_operand(const DeviceValueOp<Op, T, kRight>& op) {
  using Acc = opmath_type<T>;
  const Acc v = Acc(*op.value);
  if constexpr (kRight) {
    return ValueRightOp<Op, Acc>{op.op, v};
  } else {
    return ValueLeftOp<Op, Acc>{op.op, v};
  }
}

template <typename T, int VEC, bool kHasB, typename Op>
__global__ void __launch_bounds__(kFlatThreads)
    flat_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                int64_t numel, Op unbound_op) {
  using V = Vec<T, VEC>;
  using Acc = opmath_type<T>;
  const auto op = bind_operand(unbound_op);
  const int64_t n_vec = numel / VEC;
  const V* av = reinterpret_cast<const V*>(a);
  const V* bv = reinterpret_cast<const V*>(b);
  V* ov = reinterpret_cast<V*>(out);
  // One-shot grid: normally one iteration; the loop covers grids capped at INT_MAX blocks.
  const int64_t stride = int64_t(gridDim.x) * kFlatThreads;
  for (int64_t i = int64_t(blockIdx.x) * kFlatThreads + threadIdx.x; i < n_vec; i += stride) {
    const V ra = av[i];
    V rb;
    if constexpr (kHasB) rb = bv[i];
    ov[i] = apply_vec<T, VEC, kHasB>(ra, rb, op);
  }
  // Scalar tail: the last numel % VEC (< 16) elements.
  if (blockIdx.x == 0) {
    const int64_t t = n_vec * VEC + threadIdx.x;
    if (t < numel) out[t] = T(op(Acc(a[t]), kHasB ? Acc(b[t]) : Acc(0)));
  }
}

template <typename T, bool kHasB, typename Op>
void launch_flat(const T* a, const T* b, T* out, int64_t numel, Op op, cudaStream_t stream) {
  constexpr int kVec = vec16_elems<T>();
  const bool aligned = is_aligned(a, kVecBytes) && is_aligned(out, kVecBytes) &&
                       (!kHasB || is_aligned(b, kVecBytes));
  const int vec = aligned ? kVec : 1;
  const int64_t tiles = std::max<int64_t>(1, ceil_div<int64_t>(numel / vec, kFlatThreads));
  const int64_t grid = std::min<int64_t>(tiles, INT_MAX);
  if (aligned) {
    flat_kernel<T, kVec, kHasB, Op><<<grid, kFlatThreads, 0, stream>>>(a, b, out, numel, op);
  } else {
    flat_kernel<T, 1, kHasB, Op><<<grid, kFlatThreads, 0, stream>>>(a, b, out, numel, op);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- row kernels ---------------------------------------------------------------------------

// Column threads per block: up to kMaxColThreads, as many as the columns need; wider (fewer row
// threads) when there are fewer rows than row threads, so that few-row tensors keep the block busy.
inline int pick_col_threads(int64_t rows, int64_t cols, int vec) {
  const int64_t n_vec = ceil_div<int64_t>(cols, vec);
  int col_threads = 1;
  while (col_threads < kMaxColThreads && col_threads < n_vec) col_threads *= 2;
  while (col_threads < kThreads && col_threads < n_vec && kThreads / col_threads > rows) col_threads *= 2;
  return col_threads;
}

struct RowGrid {
  dim3 grid;
  int col_threads;
};

// col_tiles blocks across the columns; across the rows, one block per chunk of
// kRowUnroll x row_threads rows (one_shot), or as many as make one wave of resident blocks.
template <typename Kernel>
RowGrid row_grid(Kernel kernel, int64_t rows, int64_t cols, int vec, bool one_shot, const char* op) {
  RowGrid g;
  g.col_threads = pick_col_threads(rows, cols, vec);
  const int row_threads = kThreads / g.col_threads;
  const int64_t col_tiles = ceil_div<int64_t>(cols, int64_t(g.col_threads) * vec);
  CUDASTEPS_CHECK(col_tiles <= INT_MAX, op, "x must have at most ",
                  int64_t(INT_MAX) * g.col_threads * vec, " columns, got ", cols);
  const int64_t row_chunks = ceil_div<int64_t>(rows, int64_t(row_threads) * kRowUnroll);
  int64_t grid_y = row_chunks;
  if (!one_shot) {
    // Rounded down: a grid a few blocks over one wave would run those blocks as a second wave
    // after the first finishes, nearly doubling the time (each block loops over many chunks).
    const int64_t resident = int64_t(sm_count()) * blocks_per_sm(kernel, kThreads);
    grid_y = std::min<int64_t>(grid_y, std::max<int64_t>(1, resident / col_tiles));
  }
  grid_y = std::max<int64_t>(1, std::min<int64_t>(grid_y, 65535));
  g.grid = dim3(static_cast<unsigned>(col_tiles), static_cast<unsigned>(grid_y));
  return g;
}

// The bits of |v| for the amax (a float's; double, which no FP8 cast reads, gives none).
template <typename T>
__device__ __forceinline__ unsigned amax_bits_of(T v) {
  if constexpr (std::is_same<T, double>::value) {
    return 0u;
  } else {
    return abs_bits(float(v));
  }
}

// out[r, c] = op(a[r, c], v[c]); with amax_bits, also raises *amax_bits to the largest |out|.
template <typename T, int VEC, typename Op>
__global__ void __launch_bounds__(kThreads)
    rowvec_kernel(const T* __restrict__ a, const void* __restrict__ v, bool v_is_float,
                  T* __restrict__ out, int64_t rows, int64_t cols, int col_threads, Op op,
                  unsigned* __restrict__ amax_bits) {
  using V = Vec<T, VEC>;
  using Acc = opmath_type<T>;
  const int row_threads = kThreads / col_threads;
  const int tx = threadIdx.x % col_threads;
  const int ty = threadIdx.x / col_threads;
  const int64_t c0 = (int64_t(blockIdx.x) * col_threads + tx) * VEC;
  unsigned my_max = 0;  // bits of the largest |out| this thread wrote
  if (c0 < cols) {  // no early return: the amax fold below has barriers
    Acc vv[VEC];
    load_feature<T, VEC>(v, v_is_float, c0, vv);
    const int64_t chunk_rows = int64_t(row_threads) * kRowUnroll;
    for (int64_t base = int64_t(blockIdx.y) * chunk_rows + ty; base < rows;
         base += int64_t(gridDim.y) * chunk_rows) {
      // kRowUnroll loads issued before the first use. Rows past the end (last chunk only) load
      // the last row instead, so the loads need no predicate; their results are not stored.
      V in[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = std::min<int64_t>(base + int64_t(u) * row_threads, rows - 1);
        in[u] = *reinterpret_cast<const V*>(a + r * cols + c0);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = base + int64_t(u) * row_threads;
        V o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.val[k] = T(op(Acc(in[u].val[k]), vv[k]));
        if (r < rows) {
          *reinterpret_cast<V*>(out + r * cols + c0) = o;
#pragma unroll
          for (int k = 0; k < VEC; ++k) my_max = max(my_max, amax_bits_of(o.val[k]));
        }
      }
    }
  }
  if (amax_bits != nullptr) {
    __shared__ unsigned scratch[kThreads / kWarpSize];
    fold_block_amax<kThreads>(my_max, scratch, amax_bits);
  }
}

// amax_bits: null, or a float32 word set to +0 by the caller (see rowvec_kernel).
template <typename T, typename Op>
void launch_rowvec(const T* a, const void* v, bool v_is_float, T* out, int64_t rows, int64_t cols,
                   Op op, cudaStream_t stream, const char* name, unsigned* amax_bits = nullptr) {
  constexpr int kVec = vec16_elems<T>();
  if (cols % kVec == 0 && is_aligned(a, kVecBytes) && is_aligned(out, kVecBytes)) {
    const auto kernel = rowvec_kernel<T, kVec, Op>;
    const RowGrid g = row_grid(kernel, rows, cols, kVec, /*one_shot=*/true, name);
    kernel<<<g.grid, kThreads, 0, stream>>>(a, v, v_is_float, out, rows, cols, g.col_threads, op,
                                            amax_bits);
  } else {
    const auto kernel = rowvec_kernel<T, 1, Op>;
    const RowGrid g = row_grid(kernel, rows, cols, 1, /*one_shot=*/true, name);
    kernel<<<g.grid, kThreads, 0, stream>>>(a, v, v_is_float, out, rows, cols, g.col_threads, op,
                                            amax_bits);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Register budget of the backward: 3 blocks per SM (at most 85 registers) for 2- and 4-byte types,
// with kRowUnroll rows in flight. The fp32 gelu backward needs 80 (64 spilled its erff, and no
// bound at all let ptxas take 94: 2 blocks per SM); the fp16/bf16 one (FastGelu) about as many.
// When the 16-bit backward had the previous erfc fit (two exponentials), it took 99 registers
// uncapped and ran best at 2 rows in flight and 4 blocks per SM; with FastGelu's one exponential,
// 4 rows at 3 blocks per SM measured 0.141 ms against 0.145 ms (bf16 8192 x 8192, H100, standalone
// kernels). fp64 is uncapped.
template <typename T>
constexpr int grad_min_blocks() {
  return sizeof(T) <= 4 ? 3 : 1;
}

// d[r, c] = op(g[r, c], a[r, c], v[c]); out[r, c] = d when kWriteOut; partials[blockIdx.y, c] =
// the block's sum of d over its rows (every column of the block's tile, every blockIdx.y); with
// amax_bits (kWriteOut), *amax_bits raised to the largest |out|.
template <typename T, int VEC, bool kHasA, bool kWriteOut, typename Op>
__global__ void __launch_bounds__(kThreads, grad_min_blocks<T>())
    rowgrad_kernel(const T* __restrict__ g, const T* __restrict__ a, const void* __restrict__ v,
                   bool v_is_float, T* __restrict__ out, opmath_type<T>* __restrict__ partials,
                   int64_t rows, int64_t cols, int col_threads, Op op,
                   unsigned* __restrict__ amax_bits) {
  using V = Vec<T, VEC>;
  using Acc = opmath_type<T>;
  __shared__ Acc column_sums[kThreads * VEC];
  const int row_threads = kThreads / col_threads;
  const int tx = threadIdx.x % col_threads;
  const int ty = threadIdx.x / col_threads;
  const int64_t c0 = (int64_t(blockIdx.x) * col_threads + tx) * VEC;
  const bool active = c0 < cols;  // no early return: the barrier below needs every thread
  Acc acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = Acc(0);
  [[maybe_unused]] unsigned my_max = 0;  // bits of the largest |out| this thread wrote
  if (active) {
    Acc vv[VEC];
    load_feature<T, VEC>(v, v_is_float, c0, vv);
    const int64_t chunk_rows = int64_t(row_threads) * kRowUnroll;
    for (int64_t base = int64_t(blockIdx.y) * chunk_rows + ty; base < rows;
         base += int64_t(gridDim.y) * chunk_rows) {
      // 2 x kRowUnroll loads issued before the first use. Rows past the end (last chunk only)
      // load the last row instead, so the loads need no predicate; their d is neither stored nor
      // summed.
      V gin[kRowUnroll];
      [[maybe_unused]] V ain[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = std::min<int64_t>(base + int64_t(u) * row_threads, rows - 1);
        gin[u] = *reinterpret_cast<const V*>(g + r * cols + c0);
        if constexpr (kHasA) ain[u] = *reinterpret_cast<const V*>(a + r * cols + c0);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = base + int64_t(u) * row_threads;
        const bool valid = r < rows;
        [[maybe_unused]] V o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const Acc d = op(Acc(gin[u].val[k]), kHasA ? Acc(ain[u].val[k]) : Acc(1), vv[k]);
          if constexpr (kWriteOut) o.val[k] = T(d);
          acc[k] += valid ? d : Acc(0);
        }
        if constexpr (kWriteOut) {
          if (valid) {
            *reinterpret_cast<V*>(out + r * cols + c0) = o;
#pragma unroll
            for (int k = 0; k < VEC; ++k) my_max = max(my_max, amax_bits_of(o.val[k]));
          }
        }
      }
    }
  }
  // Sum over the block's row threads in a fixed order: thread (tx, 0) adds rows ty = 0, 1, ...
  // Written once per block, so the VEC-way bank conflicts of this layout cost nothing measurable.
#pragma unroll
  for (int k = 0; k < VEC; ++k) column_sums[threadIdx.x * VEC + k] = acc[k];
  __syncthreads();
  if (ty == 0 && active) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      Acc s = Acc(0);
      for (int j = 0; j < row_threads; ++j) s += column_sums[(j * col_threads + tx) * VEC + k];
      if (c0 + k < cols) partials[int64_t(blockIdx.y) * cols + c0 + k] = s;
    }
  }
  if constexpr (kWriteOut) {
    if (amax_bits != nullptr) {
      // column_sums is free again once the partials are written: the barrier in the fold orders
      // its reuse (scratch needs kThreads / 32 values, column_sums has kThreads * VEC).
      __syncthreads();
      fold_block_amax<kThreads>(my_max, reinterpret_cast<unsigned*>(column_sums), amax_bits);
    }
  }
}

// out[c] = scale * sum_p partials[p, c], p in order: the deterministic second pass.
template <typename Acc, typename OutT>
__global__ void __launch_bounds__(kThreads)
    finalize_colsum_kernel(const Acc* __restrict__ partials, int parts, int64_t cols, Acc scale,
                           OutT* __restrict__ out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += stride) {
    Acc s = Acc(0);
    for (int p = 0; p < parts; ++p) s += partials[int64_t(p) * cols + c];
    out[c] = OutT(s * scale);
  }
}

// Runs rowgrad over (rows, cols) and, when sum_out is not null, finalizes the column sums into it
// scaled by `scale`.
// sum_out: of type T, or fp32 when sum_out_is_float (the host checks that it is one of the two).
// The partials live in a scratch buffer of the current device (the caller's device guard), from
// PyTorch's caching allocator on the current stream.
// amax_bits (kWriteOut only): null, or a float32 word set to +0 by the caller.
template <typename T, bool kHasA, bool kWriteOut, typename Op>
void launch_rowgrad(const T* g, const T* a, const void* v, bool v_is_float, T* out, void* sum_out,
                    bool sum_out_is_float, double scale, int64_t rows, int64_t cols, Op op,
                    cudaStream_t stream, const char* name, unsigned* amax_bits = nullptr) {
  using Acc = opmath_type<T>;
  constexpr int kVec = vec16_elems<T>();
  const bool vec_ok = cols % kVec == 0 && is_aligned(g, kVecBytes) &&
                      (!kHasA || is_aligned(a, kVecBytes)) && (!kWriteOut || is_aligned(out, kVecBytes));
  auto run = [&](auto kernel, int vec) {
    const RowGrid rg = row_grid(kernel, rows, cols, vec, /*one_shot=*/false, name);
    const ScratchBuffer partials_buffer = scratch_buffer(size_t(rg.grid.y) * size_t(cols) * sizeof(Acc));
    Acc* const partials = static_cast<Acc*>(partials_buffer.ptr);
    kernel<<<rg.grid, kThreads, 0, stream>>>(g, a, v, v_is_float, out, partials, rows, cols,
                                             rg.col_threads, op, amax_bits);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (sum_out == nullptr) return;
    const int64_t grid = std::min<int64_t>(ceil_div<int64_t>(cols, kThreads), int64_t(sm_count()) * 8);
    if (sum_out_is_float) {
      finalize_colsum_kernel<Acc, float><<<grid, kThreads, 0, stream>>>(
          partials, int(rg.grid.y), cols, Acc(scale), static_cast<float*>(sum_out));
    } else {
      finalize_colsum_kernel<Acc, T><<<grid, kThreads, 0, stream>>>(
          partials, int(rg.grid.y), cols, Acc(scale), static_cast<T*>(sum_out));
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (vec_ok) {
    run(rowgrad_kernel<T, kVec, kHasA, kWriteOut, Op>, kVec);
  } else {
    run(rowgrad_kernel<T, 1, kHasA, kWriteOut, Op>, 1);
  }
}

// flat_kernel's op(a, b) for a bias-free backward: a = x, b = grad, d = GradOp(g, x, 0).
template <typename GradOp>
struct XGradOp {
  GradOp op;
  template <typename Acc>
  __device__ __forceinline__ Acc operator()(Acc x, Acc g) const {
    return op(g, x, Acc(0));
  }
};

}  // namespace
}  // namespace elementwise
}  // namespace cudasteps
