// CPU sum: pairwise (cascade) summation, parallel over fixed chunks, so the result is accurate
// (error grows with log n, not n) and bitwise identical whatever the thread count.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "reduce/reduce.h"

namespace cudasteps {
namespace {

// Leaf of the pairwise tree: 256 elements summed by 8 interleaved accumulators (which the compiler
// vectorizes); above it the halves are summed recursively.
constexpr int64_t kPairwiseLeaf = 256;
constexpr int kLeafLanes = 8;
// Full sums are cut into chunks of this many elements, independent of the thread count, so the
// tree (and the result) never depends on how many threads run.
constexpr int64_t kFullChunk = 1 << 16;
// Column sums: each task owns kColBlock columns (1 KiB of fp32 per row, enough for the prefetcher); rows are summed in blocks of kColRowLeaf (plain
// running sums over few rows keep the error small), and the blocks pairwise.
constexpr int64_t kColBlock = 256;
constexpr int64_t kColRowLeaf = 16;
// Below this many elements per task, parallel_for's thread start costs more than the work.
constexpr int64_t kMinElemsPerTask = 32768;

template <typename acc_t, typename in_t>
acc_t pairwise_sum(const in_t* p, int64_t n) {
  if (n <= kPairwiseLeaf) {
    acc_t lanes[kLeafLanes] = {};
    int64_t i = 0;
    for (; i + kLeafLanes <= n; i += kLeafLanes) {
      for (int l = 0; l < kLeafLanes; ++l) lanes[l] += static_cast<acc_t>(p[i + l]);
    }
    acc_t tail = acc_t(0);
    for (; i < n; ++i) tail += static_cast<acc_t>(p[i]);
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
           ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
  }
  // Split at a multiple of the leaf (always < n for n > kPairwiseLeaf).
  const int64_t half = (n / 2 + kPairwiseLeaf - 1) / kPairwiseLeaf * kPairwiseLeaf;
  return pairwise_sum<acc_t>(p, half) + pairwise_sum<acc_t>(p + half, n - half);
}

template <typename in_t, typename acc_t, typename out_t>
void sum_full_cpu(const in_t* x, int64_t n, out_t* out) {
  const int64_t chunks = (n + kFullChunk - 1) / kFullChunk;
  std::vector<acc_t> partials(chunks);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t lo = c * kFullChunk;
      partials[c] = pairwise_sum<acc_t>(x + lo, std::min(kFullChunk, n - lo));
    }
  });
  *out = static_cast<out_t>(pairwise_sum<acc_t>(partials.data(), chunks));
}

template <typename in_t, typename acc_t, typename out_t>
void sum_rows_cpu(const in_t* x, int64_t outer, int64_t inner, out_t* out) {
  const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / inner);
  at::parallel_for(0, outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      out[r] = static_cast<out_t>(pairwise_sum<acc_t>(x + r * inner, inner));
    }
  });
}

// Sums `rows` rows (leading dimension `ld`) of `width` <= kColBlock columns into acc.
template <typename in_t, typename acc_t>
void col_block_sum(const in_t* x, int64_t rows, int64_t ld, int64_t width, acc_t* acc) {
  if (rows <= kColRowLeaf) {
    for (int64_t c = 0; c < width; ++c) acc[c] = acc_t(0);
    for (int64_t r = 0; r < rows; ++r) {
      const in_t* row = x + r * ld;
      for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<acc_t>(row[c]);
    }
    return;
  }
  const int64_t half = (rows / 2 + kColRowLeaf - 1) / kColRowLeaf * kColRowLeaf;
  acc_t second[kColBlock];
  col_block_sum(x, half, ld, width, acc);
  col_block_sum(x + half * ld, rows - half, ld, width, second);
  for (int64_t c = 0; c < width; ++c) acc[c] += second[c];
}

template <typename in_t, typename acc_t, typename out_t>
void sum_cols_cpu(const in_t* x, int64_t batch, int64_t rows, int64_t cols, out_t* out) {
  const int64_t col_blocks = (cols + kColBlock - 1) / kColBlock;
  const int64_t tasks = batch * col_blocks;
  const int64_t grain = std::max<int64_t>(1, kMinElemsPerTask / (rows * kColBlock));
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
    acc_t acc[kColBlock];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / col_blocks;
      const int64_t c0 = (t % col_blocks) * kColBlock;
      const int64_t width = std::min(kColBlock, cols - c0);
      col_block_sum(x + b * rows * cols + c0, rows, cols, width, acc);
      for (int64_t c = 0; c < width; ++c) out[b * cols + c0 + c] = static_cast<out_t>(acc[c]);
    }
  });
}

template <typename src_t, typename acc_t, typename res_t>
void run_pass_cpu(const src_t* x, const SumPass& p, res_t* out) {
  switch (p.kind) {
    case SumKind::Full: return sum_full_cpu<src_t, acc_t, res_t>(x, p.numel, out);
    case SumKind::Rows: return sum_rows_cpu<src_t, acc_t, res_t>(x, p.outer, p.inner, out);
    case SumKind::Cols: return sum_cols_cpu<src_t, acc_t, res_t>(x, p.batch, p.rows, p.cols, out);
  }
}

at::Tensor sum_cpu(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  const SumArgs args = check_sum_args(self, dim, keepdim, dtype);
  const auto out_options = self.options().dtype(args.out_dtype);
  const SumPlan plan = plan_sum(self, args);
  if (plan.empty) return at::zeros(args.out_sizes, out_options);
  at::Tensor out = at::empty(args.out_sizes, out_options);
  if (plan.passes.empty()) {
    finish_sum(plan, at::Tensor(), out);
    return out;
  }
  const at::Tensor& x = plan.input;
  at::Tensor result = plan.out_perm.empty() ? out : at::empty({out.numel()}, out_options);
  dispatch_sum_types(x.scalar_type(), args.out_dtype, [&](auto in_tag, auto acc_tag, auto out_tag) {
    using in_t = typename decltype(in_tag)::type;
    using acc_t = typename decltype(acc_tag)::type;
    using out_t = typename decltype(out_tag)::type;
    // Between passes: a buffer of accumulators (fp32 for half, int64 for integers).
    at::Tensor prev;
    const size_t n = plan.passes.size();
    for (size_t i = 0; i < n; ++i) {
      const SumPass& p = plan.passes[i];
      const bool first = i == 0, last = i + 1 == n;
      at::Tensor next = last ? result
                             : at::empty({p.out_numel()},
                                         x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      if (first && last) {
        run_pass_cpu<in_t, acc_t, out_t>(static_cast<const in_t*>(x.const_data_ptr()), p,
                                         static_cast<out_t*>(next.data_ptr()));
      } else if (first) {
        run_pass_cpu<in_t, acc_t, acc_t>(static_cast<const in_t*>(x.const_data_ptr()), p,
                                         next.data_ptr<acc_t>());
      } else if (last) {
        run_pass_cpu<acc_t, acc_t, out_t>(prev.const_data_ptr<acc_t>(), p,
                                          static_cast<out_t*>(next.data_ptr()));
      } else {
        run_pass_cpu<acc_t, acc_t, acc_t>(prev.const_data_ptr<acc_t>(), p, next.data_ptr<acc_t>());
      }
      prev = next;
    }
  });
  finish_sum(plan, result, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) { m.impl("sum", &sum_cpu); }

}  // namespace cudasteps
