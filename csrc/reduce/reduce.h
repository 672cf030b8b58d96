// sum: argument checks and the plan shared by the CPU and CUDA kernels.
//
// Every dim set is brought to one of three memory shapes, so that each backend needs only three
// kernels:
//   Full  all elements of a dense block of memory (any dim order: a sum does not care)
//   Rows  [outer, inner] contiguous, reducing inner (trailing dims)
//   Cols  [batch, rows, cols] contiguous, reducing rows (leading or middle dims)
// Any other dim set is permuted so the reduced dims come last and made contiguous with
// cudasteps::copy (the general path), which gives Rows.
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

enum class SumKind { Empty, Full, Rows, Cols };

struct SumPlan {
  SumKind kind = SumKind::Empty;
  at::Tensor input;  // the memory the kernel reads: self, a cast of it, or a contiguous copy
  int64_t numel = 0;                         // Full
  int64_t outer = 0, inner = 0;              // Rows
  int64_t batch = 0, rows = 0, cols = 0;     // Cols
};

// The output dtype torch.sum gives without dtype=: integer and bool inputs give int64.
at::ScalarType sum_default_dtype(at::ScalarType in);

// Validates self, dim and dtype (messages name cudasteps.sum and the argument).
SumArgs check_sum_args(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype);

// The dtype the kernel reads: self's, unless dtype= asks for a sum the kernels do not do directly
// (then self is cast to dtype first, as torch.sum does).
at::ScalarType sum_input_dtype(at::ScalarType in, at::ScalarType out);

// Chooses the memory shape. `min_cols`: the narrowest Cols the backend takes (narrower column
// sums go through the general path).
SumPlan plan_sum(const at::Tensor& self, const SumArgs& args, int64_t min_cols);

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
