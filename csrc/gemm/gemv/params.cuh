// The few-row path's launch-side helpers, shared by its two units (ladder_steps.cu: the SIMT
// steps; gemv.cu: the tensor-core step, the split over blocks and gemv_launch): a TcProblem seen
// as weight and tokens (Params), and the token-count buckets the kernels are instantiated for.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "gemm/gemv/gemv.h"
#include "gemm/gemv/kernels.cuh"

namespace cudasteps {
namespace gemm {
namespace gemv {

// The weight is the operand with more rows: B^T when M is the short side (linear's x @ W^T), A
// when N is.
template <TcType T>
Params<T> make_params(const TcProblem& p) {
  using E = typename Params<T>::E;
  Params<T> q;
  q.weight_is_a = p.M > p.N;
  q.weight = static_cast<const E*>(q.weight_is_a ? p.a : p.b);
  q.ld_weight = q.weight_is_a ? p.lda : p.ldb;
  q.tokens = static_cast<const E*>(q.weight_is_a ? p.b : p.a);
  q.ld_tokens = q.weight_is_a ? p.ldb : p.lda;
  q.rows = q.weight_is_a ? p.M : p.N;
  q.num_tokens = q.weight_is_a ? p.N : p.M;
  q.K = p.K;
  q.epi = tc::Epilogue<T>::from(p);
  q.partial = nullptr;
  return q;
}

// Calls f(std::integral_constant<int, Tokens>) with the smallest bucket (1, 2, 4, 8, 16) that
// holds `num_tokens`: the kernels keep Tokens accumulators per row, so one decode token does not
// pay for sixteen.
template <typename F>
void with_token_bucket(int64_t num_tokens, F&& f) {
  if (num_tokens <= 1) {
    f(std::integral_constant<int, 1>{});
  } else if (num_tokens <= 2) {
    f(std::integral_constant<int, 2>{});
  } else if (num_tokens <= 4) {
    f(std::integral_constant<int, 4>{});
  } else if (num_tokens <= 8) {
    f(std::integral_constant<int, 8>{});
  } else {
    f(std::integral_constant<int, 16>{});
  }
}

// The SIMT steps (warp_row, vec16, rows_in_flight, split_k), in ladder_steps.cu.
void simt_launch(const TcProblem& p, GemvStep step, cudaStream_t stream);

}  // namespace gemv
}  // namespace gemm
}  // namespace cudasteps
