// sum: argument checks and the plan shared by the CPU and CUDA kernels.
//
// The input is read in place, whatever the dim set: dims of size 1 are dropped, the rest taken in
// memory order (a transposed or permuted dense tensor is as good as a contiguous one) and merged
// into alternating runs of kept and reduced dims. Each pass then removes the innermost reduced run
// with one of three kernels, reading the input (first pass) or the previous pass's small
// accumulator buffer:
//   Full  all elements of a dense block of memory (everything reduced)
//   Rows  [outer, inner], reducing inner (the innermost run is reduced)
//   Cols  [batch, rows, cols], reducing rows (a reduced run with kept dims inside it)
// For example dim=(0, 2) of a contiguous [A, B, C] is Rows [A * B, C], then Cols [1, A, B];
// dim=1 is one Cols [A, B, C]. The passes after the first read (A * B) accumulators, not the
// input, so the input is read once. Only views with gaps or overlaps (not dense) are copied first.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/checks.h"

namespace cudasteps {

struct SumArgs {
  std::vector<bool> reduced;     // per input dim (size 1 for a 0-d input)
  std::vector<int64_t> dims;     // wrapped, sorted, unique
  at::ScalarType out_dtype;
  std::vector<int64_t> out_sizes;  // keepdim applied
};

enum class SumKind { Full, Rows, Cols };

struct SumPass {
  SumKind kind = SumKind::Full;
  int64_t numel = 0;                      // Full
  int64_t outer = 0, inner = 0;           // Rows
  int64_t batch = 0, rows = 0, cols = 0;  // Cols
  int64_t out_numel() const {
    return kind == SumKind::Full ? 1 : kind == SumKind::Rows ? outer : batch * cols;
  }
};

struct SumPlan {
  bool empty = false;  // no input elements: the output is zeros
  at::Tensor input;    // the memory the first pass reads: self, a cast of it, or a dense copy
  // In order; each reads the previous one's result. None: only size-1 dims are reduced (a cast).
  std::vector<SumPass> passes;
  // The last pass writes the kept dims in memory order. When that is not their logical order,
  // out_mem_sizes are the kept dims' sizes in memory order and out_perm permutes such a view
  // into logical order (the output, not the input, is then permuted: a small copy).
  std::vector<int64_t> out_mem_sizes, out_perm;
};

// The output dtype torch.sum gives without dtype=: integer and bool inputs give int64.
at::ScalarType sum_default_dtype(at::ScalarType in);

// Validates self, dim and dtype (messages name cudasteps.sum and the argument).
SumArgs check_sum_args(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype);

// The dtype the kernel reads: self's, unless dtype= asks for a sum the kernels do not do directly
// (then self is cast to dtype first, as torch.sum does).
at::ScalarType sum_input_dtype(at::ScalarType in, at::ScalarType out);

// Chooses the passes (see the top of this file).
SumPlan plan_sum(const at::Tensor& self, const SumArgs& args);

// Writes the last pass's result (`result`, kept dims in memory order) into `out` (logical order);
// with no passes, casts the input into `out`. A no-op when the last pass wrote `out` itself.
void finish_sum(const SumPlan& plan, const at::Tensor& result, at::Tensor& out);

}  // namespace cudasteps

namespace cudasteps {

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<in_t>, TypeTag<acc_t>, TypeTag<out_t>) for the (input, output) dtype pairs the
// kernels take: fp32 -> fp32, fp64 -> fp64, half/bf16 -> themselves or fp32 (fp32 accumulation),
// integers and bool -> int64 (int64 accumulation). Bool is read as uint8 (0 or 1).
template <typename F>
void dispatch_sum_types(at::ScalarType in, at::ScalarType out, F&& f) {
  using at::ScalarType;
  switch (in) {
    case ScalarType::Float: return f(TypeTag<float>{}, TypeTag<float>{}, TypeTag<float>{});
    case ScalarType::Double: return f(TypeTag<double>{}, TypeTag<double>{}, TypeTag<double>{});
    case ScalarType::Half:
      if (out == ScalarType::Float) return f(TypeTag<at::Half>{}, TypeTag<float>{}, TypeTag<float>{});
      return f(TypeTag<at::Half>{}, TypeTag<float>{}, TypeTag<at::Half>{});
    case ScalarType::BFloat16:
      if (out == ScalarType::Float) {
        return f(TypeTag<at::BFloat16>{}, TypeTag<float>{}, TypeTag<float>{});
      }
      return f(TypeTag<at::BFloat16>{}, TypeTag<float>{}, TypeTag<at::BFloat16>{});
    case ScalarType::Bool:
    case ScalarType::Byte: return f(TypeTag<uint8_t>{}, TypeTag<int64_t>{}, TypeTag<int64_t>{});
    case ScalarType::Char: return f(TypeTag<int8_t>{}, TypeTag<int64_t>{}, TypeTag<int64_t>{});
    case ScalarType::Short: return f(TypeTag<int16_t>{}, TypeTag<int64_t>{}, TypeTag<int64_t>{});
    case ScalarType::Int: return f(TypeTag<int32_t>{}, TypeTag<int64_t>{}, TypeTag<int64_t>{});
    case ScalarType::Long: return f(TypeTag<int64_t>{}, TypeTag<int64_t>{}, TypeTag<int64_t>{});
    default: CUDASTEPS_CHECK(false, "sum", "self must be a real tensor, got ", in);
  }
}

}  // namespace cudasteps
