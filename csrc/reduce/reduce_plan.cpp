// sum: argument checks and the choice of memory shape (reduce.h), shared by CPU and CUDA.
#include <algorithm>

#include "common/typed_op.h"
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

SumPlan plan_sum(const at::Tensor& self, const SumArgs& args) {
  SumPlan plan;
  at::Tensor x = self;
  const auto in_dtype = sum_input_dtype(self.scalar_type(), args.out_dtype);
  if (in_dtype != x.scalar_type()) x = x.to(in_dtype);
  if (x.numel() == 0) {
    plan.empty = true;
    return plan;
  }
  // Gaps (x[:, ::2]) or overlaps (expanded views): the kernels need dense memory.
  if (!x.is_non_overlapping_and_dense()) x = copy_op(x);
  plan.input = x;

  // Dims of size > 1 in memory order (outermost first). Two such dims of a dense tensor never share
  // a stride, so the order is unique.
  std::vector<int64_t> big;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) > 1) big.push_back(d);
  }
  std::stable_sort(big.begin(), big.end(),
                   [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });

  struct Run {
    bool reduced;
    int64_t size;
  };
  std::vector<Run> runs;  // outermost first; adjacent dims of a dense tensor always merge
  std::vector<int64_t> kept_mem;
  for (int64_t d : big) {
    const bool r = args.reduced[d];
    if (!r) kept_mem.push_back(d);
    if (!runs.empty() && runs.back().reduced == r) {
      runs.back().size *= x.size(d);
    } else {
      runs.push_back({r, x.size(d)});
    }
  }
  if (!std::is_sorted(kept_mem.begin(), kept_mem.end())) {
    std::vector<int64_t> logical = kept_mem;
    std::sort(logical.begin(), logical.end());
    for (int64_t d : kept_mem) plan.out_mem_sizes.push_back(x.size(d));
    for (int64_t d : logical) {
      plan.out_perm.push_back(std::find(kept_mem.begin(), kept_mem.end(), d) - kept_mem.begin());
    }
  }

  if (kept_mem.empty()) {
    SumPass pass;
    pass.kind = SumKind::Full;
    pass.numel = x.numel();
    plan.passes.push_back(pass);
    return plan;
  }
  auto prod = [&](size_t begin, size_t end) {
    int64_t p = 1;
    for (size_t i = begin; i < end; ++i) p *= runs[i].size;
    return p;
  };
  while (runs.size() > 1 || (runs.size() == 1 && runs[0].reduced)) {
    SumPass pass;
    if (runs.back().reduced) {
      pass.kind = SumKind::Rows;
      pass.inner = runs.back().size;
      pass.outer = prod(0, runs.size() - 1);
      runs.pop_back();
    } else {
      // runs = [..., kept, reduced, kept]: the reduced run just outside the innermost kept one.
      const size_t j = runs.size() - 2;
      pass.kind = SumKind::Cols;
      pass.batch = prod(0, j);
      pass.rows = runs[j].size;
      pass.cols = runs.back().size;
      runs.erase(runs.begin() + j);
      if (j > 0) {  // the kept runs on both sides are now adjacent
        runs[j - 1].size *= runs[j].size;
        runs.erase(runs.begin() + j);
      }
    }
    plan.passes.push_back(pass);
  }
  return plan;
}

void finish_sum(const SumPlan& plan, const at::Tensor& result, at::Tensor& out) {
  if (plan.passes.empty()) {  // only size-1 dims reduced: a cast in logical order
    out.copy_(plan.input.reshape(out.sizes()));
    return;
  }
  if (plan.out_perm.empty()) {
    if (!result.is_same(out)) out.copy_(result.view(out.sizes()));
    return;
  }
  std::vector<int64_t> logical_sizes;
  for (int64_t i : plan.out_perm) logical_sizes.push_back(plan.out_mem_sizes[i]);
  out.view(logical_sizes).copy_(result.view(plan.out_mem_sizes).permute(plan.out_perm));
}

}  // namespace cudasteps
