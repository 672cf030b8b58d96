// CUDA add and mul, the part they share: binary.h's plan (broadcasting, type promotion, host
// values) carried out by the flat and row kernels of kernels.cuh for dense operands and by a
// strided kernel for the rest (run_binary), and the launchers launch_add / launch_mul of launch.h
// built on it. inst_add_float.cu, inst_add_int.cu, inst_mul_float.cu and inst_mul_int.cu
// instantiate them, one op and one dtype group each, so that a parallel build compiles them side
// by side. Light on purpose, as kernels.cuh (nothing of ATen: about 20 s of compile time per unit).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "common/launch.cuh"
#include "common/strided.h"
#include "elementwise/functors.h"
#include "elementwise/kernels.cuh"
#include "elementwise/launch.h"

namespace cudasteps {
namespace elementwise {
namespace {

// ---- add / mul: the strided path ----------------------------------------------------------------

// out[i] = op(a[off_a(i)], b[off_b(i)]) for the contiguous output index i, offsets from the merged
// dims of p (strides 0 on broadcast dims). index_t is uint32_t when every index and offset fits,
// which makes the per-element divisions several times cheaper than 64-bit ones.
template <typename T, typename index_t, typename Op>
__global__ void __launch_bounds__(kThreads)
    strided_binary_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                          int64_t numel, StridedPair p, Op op) {
  using Acc = opmath_type<T>;
  const index_t n = static_cast<index_t>(numel);
  const index_t stride = static_cast<index_t>(gridDim.x) * kThreads;
  for (index_t i = static_cast<index_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    index_t rest = i, oa = 0, ob = 0;
#pragma unroll 4
    for (int d = p.ndim - 1; d >= 0; --d) {
      const index_t size = static_cast<index_t>(p.sizes[d]);
      const index_t idx = rest % size;
      rest /= size;
      oa += idx * static_cast<index_t>(p.out_strides[d]);
      ob += idx * static_cast<index_t>(p.in_strides[d]);
    }
    out[i] = T(op(Acc(a[oa]), Acc(b[ob])));
  }
}

// The same by rows of the last merged dim: a block-row computes its row's two base offsets once
// (the divisions), then walks the row's columns with the last dim's strides (0 or 1 for the
// broadcasts users write: x * w[:, None], x * v, a 0-dim tensor), coalesced, with no per-element
// division. Blocks along y take rows; along x, enough blocks that each thread takes about
// kRowsUnroll columns of a row (at most 64 blocks per SM across a row).
constexpr int kRowsUnroll = 4;

template <typename T, typename index_t, typename Op>
__global__ void __launch_bounds__(kThreads)
    strided_rows_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                        int64_t rows, int64_t cols, StridedPair p, Op op) {
  using Acc = opmath_type<T>;
  const int last = p.ndim - 1;
  const index_t sa = static_cast<index_t>(p.out_strides[last]);
  const index_t sb = static_cast<index_t>(p.in_strides[last]);
  const index_t n_cols = static_cast<index_t>(cols);
  const index_t c_step = static_cast<index_t>(gridDim.x) * kThreads;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    index_t rest = static_cast<index_t>(r), oa = 0, ob = 0;
    for (int d = last - 1; d >= 0; --d) {
      const index_t size = static_cast<index_t>(p.sizes[d]);
      const index_t idx = rest % size;
      rest /= size;
      oa += idx * static_cast<index_t>(p.out_strides[d]);
      ob += idx * static_cast<index_t>(p.in_strides[d]);
    }
    const T* ar = a + oa;
    const T* br = b + ob;
    T* orow = out + static_cast<index_t>(r) * n_cols;
    for (index_t c = static_cast<index_t>(blockIdx.x) * kThreads + threadIdx.x; c < n_cols; c += c_step) {
      orow[c] = T(op(Acc(ar[c * sa]), Acc(br[c * sb])));
    }
  }
}

// Largest element offset + 1 that a view of p's sizes and these strides reaches.
inline int64_t span_of(const StridedPair& p, const int64_t* strides) {
  int64_t span = 1;
  for (int d = 0; d < p.ndim; ++d) span += (p.sizes[d] - 1) * strides[d];
  return span;
}

// Last merged dims at least this long take strided_rows_kernel (half a block's columns or more:
// shorter rows would leave most of a row-block's threads idle).
constexpr int64_t kMinRowsCols = 128;

template <typename T, typename Op>
void launch_strided_binary(const StridedPair& p, const T* a, const T* b, T* out, int64_t numel, Op op,
                           cudaStream_t stream) {
  // p: views of the broadcast shape; strides are >= 0 (expand gives 0, never negative).
  const int64_t max_blocks = int64_t(sm_count()) * 64;
  const bool small = numel <= INT32_MAX && span_of(p, p.out_strides) <= INT32_MAX &&
                     span_of(p, p.in_strides) <= INT32_MAX;
  const int64_t cols = p.sizes[p.ndim - 1];
  if (cols >= kMinRowsCols) {
    // Rows long enough to fill a block: the row kernel.
    const int64_t rows = numel / cols;
    const dim3 rows_grid(unsigned(std::min(ceil_div<int64_t>(cols, kRowsUnroll * kThreads), max_blocks)),
                         unsigned(std::min<int64_t>(rows, 65535)));
    if (small) {
      strided_rows_kernel<T, uint32_t><<<rows_grid, kThreads, 0, stream>>>(a, b, out, rows, cols, p, op);
    } else {
      strided_rows_kernel<T, int64_t><<<rows_grid, kThreads, 0, stream>>>(a, b, out, rows, cols, p, op);
    }
  } else {
    const int64_t grid = std::min(ceil_div<int64_t>(numel, kThreads), max_blocks);
    if (small) {
      strided_binary_kernel<T, uint32_t><<<grid, kThreads, 0, stream>>>(a, b, out, numel, p, op);
    } else {
      strided_binary_kernel<T, int64_t><<<grid, kThreads, 0, stream>>>(a, b, out, numel, p, op);
    }
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Runs `op` (a functor over the math type) on the operands of `args` into args.out: the kernel of
// the plan's path. `name` names the op in messages.
template <typename T, typename BaseOp>
void run_binary(const BinaryArgs<T>& args, BaseOp op, cudaStream_t stream, const char* name) {
  using Acc = opmath_type<T>;
  const T* a = args.self;
  const T* b = args.other;
  T* o = args.out;
  switch (args.path) {
    case BinaryPath::kFlat:
      launch_flat<T, true>(a, b, o, args.numel, op, stream);
      return;
    case BinaryPath::kFlatValue:
      if (args.value_operand == ValueOperand::kOther) {
        launch_flat<T, false>(a, nullptr, o, args.numel, ValueRightOp<BaseOp, Acc>{op, args.value},
                              stream);
      } else {
        launch_flat<T, false>(b, nullptr, o, args.numel, ValueLeftOp<BaseOp, Acc>{op, args.value},
                              stream);
      }
      return;
    case BinaryPath::kFlatDeviceOther:  // b: the one element (flat_kernel binds it)
      launch_flat<T, false>(a, nullptr, o, args.numel, DeviceValueOp<BaseOp, T, true>{op, b},
                            stream);
      return;
    case BinaryPath::kFlatDeviceSelf:
      launch_flat<T, false>(b, nullptr, o, args.numel, DeviceValueOp<BaseOp, T, false>{op, a},
                            stream);
      return;
    case BinaryPath::kRowVec:
      launch_rowvec<T>(a, b, false, o, args.rows, args.cols, op, stream, name);
      return;
    case BinaryPath::kVecRow:
      launch_rowvec<T>(b, a, false, o, args.rows, args.cols, SwappedOp<BaseOp>{op}, stream, name);
      return;
    case BinaryPath::kStrided:
      // A host value with a strided tensor: the tensor stands in for both operands and the value
      // goes in the functor (one kernel shape for all strided cases).
      if (args.value_operand == ValueOperand::kOther) {
        launch_strided_binary<T>(args.strided, a, a, o, args.numel,
                                 ValueRightOp<BaseOp, Acc>{op, args.value}, stream);
      } else if (args.value_operand == ValueOperand::kSelf) {
        launch_strided_binary<T>(args.strided, b, b, o, args.numel,
                                 ValueLeftOp<BaseOp, Acc>{op, args.value}, stream);
      } else {
        launch_strided_binary<T>(args.strided, a, b, o, args.numel, op, stream);
      }
      return;
    case BinaryPath::kEmpty: return;
  }
}

}  // namespace

// ---- the launchers of launch.h ----------------------------------------------------------------

template <typename T>
void launch_add(const BinaryArgs<T>& args, opmath_type<T> alpha, cudaStream_t stream) {
  run_binary(args, AddOp<opmath_type<T>>{alpha}, stream, "add");
}

template <typename T>
void launch_mul(const BinaryArgs<T>& args, cudaStream_t stream) {
  run_binary(args, MulOp{}, stream, "mul");
}

}  // namespace elementwise
}  // namespace cudasteps
