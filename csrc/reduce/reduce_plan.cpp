// sum: argument checks and the choice of memory shape (reduce.h), shared by CPU and CUDA.
#include <algorithm>
#include <numeric>

#include "common/autograd.h"
#include "reduce/reduce.h"

namespace cudasteps {
namespace {

constexpr const char* kOp = "sum";

bool is_integral_input(at::ScalarType t) {
  return at::isIntegralType(t, /*includeBool=*/true);
}

bool is_supported_input(at::ScalarType t) {
  using at::ScalarType;
  switch (t) {
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long: return true;
    default: return false;
  }
}

// True when x's memory is row-major in the dim order `perm` (size-1 dims ignored), checked on
// sizes and strides without building the permuted view (a view costs host time).
bool contiguous_in_order(const at::Tensor& x, const std::vector<int64_t>& perm) {
  int64_t expected = 1;
  for (auto it = perm.rbegin(); it != perm.rend(); ++it) {
    const int64_t size = x.size(*it);
    if (size == 1) continue;
    if (x.stride(*it) != expected) return false;
    expected *= size;
  }
  return true;
}

at::Tensor copy_op(const at::Tensor& x) {
  static const auto op = typed_op<at::Tensor(const at::Tensor&)>("copy");
  return op.call(x);
}

}  // namespace

at::ScalarType sum_default_dtype(at::ScalarType in) {
  return is_integral_input(in) ? at::ScalarType::Long : in;
}

SumArgs check_sum_args(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  using at::ScalarType;
  const auto in = self.scalar_type();
  CUDASTEPS_CHECK(is_supported_input(in), kOp,
                  "self must be Float, Double, Half, BFloat16, an integer type or Bool, got ", in);
  SumArgs args;
  if (dtype.has_value()) {
    const auto d = *dtype;
    CUDASTEPS_CHECK(d == ScalarType::Float || d == ScalarType::Double || d == ScalarType::Half ||
                        d == ScalarType::BFloat16 || d == ScalarType::Long,
                    kOp, "dtype must be Float, Double, Half, BFloat16 or Long, got ", d);
    args.out_dtype = d;
  } else {
    args.out_dtype = sum_default_dtype(in);
  }

  const int64_t ndim = self.dim();
  const int64_t wrap = std::max<int64_t>(ndim, 1);  // a 0-d tensor takes dim 0 or -1, as torch
  args.reduced.assign(wrap, false);
  if (!dim.has_value() || dim->empty()) {
    args.reduced.assign(wrap, true);
  } else {
    for (int64_t d : *dim) {
      CUDASTEPS_CHECK(d >= -wrap && d < wrap, kOp, "dim must be in the range [", -wrap, ", ",
                      wrap - 1, "], got ", d);
      const int64_t w = d < 0 ? d + wrap : d;
      CUDASTEPS_CHECK(!args.reduced[w], kOp, "dim must not repeat a dimension, got ", *dim);
      args.reduced[w] = true;
    }
  }
  for (int64_t d = 0; d < wrap; ++d) {
    if (args.reduced[d]) args.dims.push_back(d);
  }
  for (int64_t d = 0; d < ndim; ++d) {
    if (!args.reduced[d]) {
      args.out_sizes.push_back(self.size(d));
    } else if (keepdim) {
      args.out_sizes.push_back(1);
    }
  }
  return args;
}

at::ScalarType sum_input_dtype(at::ScalarType in, at::ScalarType out) {
  using at::ScalarType;
  if (out == sum_default_dtype(in)) return in;
  if ((in == ScalarType::Half || in == ScalarType::BFloat16) && out == ScalarType::Float) return in;
  return out;  // cast first, then the plain sum of `out`, whose default dtype is `out` itself
}

SumPlan plan_sum(const at::Tensor& self, const SumArgs& args, int64_t min_cols) {
  SumPlan plan;
  at::Tensor x = self;
  const auto in_dtype = sum_input_dtype(self.scalar_type(), args.out_dtype);
  if (in_dtype != x.scalar_type()) x = x.to(in_dtype);
  if (x.numel() == 0) return plan;  // Empty: zeros of the output shape

  const int64_t ndim = x.dim();
  std::vector<int64_t> kept, reduced;        // all dims, kept ones first in perm_row
  std::vector<int64_t> kept_big, reduced_big;  // dims of size > 1
  for (int64_t d = 0; d < ndim; ++d) {
    (args.reduced[d] ? reduced : kept).push_back(d);
    if (x.size(d) > 1) (args.reduced[d] ? reduced_big : kept_big).push_back(d);
  }
  auto prod = [&](const std::vector<int64_t>& ds) {
    int64_t p = 1;
    for (int64_t d : ds) p *= x.size(d);
    return p;
  };

  if (kept_big.empty()) {
    plan.kind = SumKind::Full;
    plan.input = x.is_non_overlapping_and_dense() ? x : copy_op(x);
    plan.numel = x.numel();
    return plan;
  }

  std::vector<int64_t> perm_row = kept;
  perm_row.insert(perm_row.end(), reduced.begin(), reduced.end());
  if (contiguous_in_order(x, perm_row)) {
    plan.kind = SumKind::Rows;
    plan.input = x;
    plan.outer = prod(kept_big);
    plan.inner = prod(reduced_big);
    return plan;
  }
  std::vector<int64_t> perm_col = reduced;
  perm_col.insert(perm_col.end(), kept.begin(), kept.end());
  if (prod(kept_big) >= min_cols && contiguous_in_order(x, perm_col)) {
    plan.kind = SumKind::Cols;
    plan.input = x;
    plan.batch = 1;
    plan.rows = prod(reduced_big);
    plan.cols = prod(kept_big);
    return plan;
  }
  // [kept..., reduced..., kept...] in a contiguous tensor: a batch of column sums.
  std::vector<int64_t> natural(ndim);
  std::iota(natural.begin(), natural.end(), 0);
  if (contiguous_in_order(x, natural)) {
    std::vector<int64_t> big;
    for (int64_t d = 0; d < ndim; ++d) {
      if (x.size(d) > 1) big.push_back(d);
    }
    // Runs of equal class: expect kept, reduced, kept.
    std::vector<std::pair<bool, int64_t>> runs;  // (reduced?, product of sizes)
    for (int64_t d : big) {
      const bool r = args.reduced[d];
      if (!runs.empty() && runs.back().first == r) {
        runs.back().second *= x.size(d);
      } else {
        runs.emplace_back(r, x.size(d));
      }
    }
    if (runs.size() == 3 && !runs[0].first && runs[1].first && runs[2].second >= min_cols) {
      plan.kind = SumKind::Cols;
      plan.input = x;
      plan.batch = runs[0].second;
      plan.rows = runs[1].second;
      plan.cols = runs[2].second;
      return plan;
    }
  }
  // General path: reduced dims last, materialized contiguous, then a row sum.
  plan.kind = SumKind::Rows;
  plan.input = copy_op(x.permute(perm_row));
  plan.outer = prod(kept_big);
  plan.inner = prod(reduced_big);
  return plan;
}

}  // namespace cudasteps
