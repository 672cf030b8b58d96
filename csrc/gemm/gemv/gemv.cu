// The few-row path's entry points (gemv.h): which problems it takes (gemv_supports, gemv_wanted),
// its final kernel (the mma step, with K split over blocks where the weight has too few rows to
// fill the GPU) and the launch of any ladder step.
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <climits>

#include "common/error.h"
#include "common/launch.cuh"
#include "gemm/gemv/params.cuh"

namespace cudasteps {
namespace gemm {
namespace {

// Chunks of K each warp loads before it multiplies, unless a sweep forces it (gemv:mma:u<n>):
// four for up to 8 tokens and K up to kMaxKForUnroll4 (more loads in flight where the kernel is
// short: 2-4% on an H100 at 4096 -> 4096, 14336 -> 4096 and 8192 -> 1024 with 8 tokens), two
// otherwise (four take 163 registers with 16 tokens, and lose 5-20% there; with K = 14336 two are
// 3% ahead). Three (126 registers with 16 tokens, two blocks of 256 threads per SM as with two, half
// again the loads in flight) lost to two everywhere (H100, 2026-11-28, gemv_sweep.py, graph
// replays, 9-16 tokens, us, two / three): 4096 -> 4096 14.6-15.0 / 15.3-15.7; 4096 -> 14336 (a
// 14336 x 4096 weight) 42.9-44.8 / 44.3-45.8 (cuBLAS 42.1-43.1); 14336 -> 4096 42.5-43.4 /
// 46.0-47.3. Not kept.
// Two more trials against the 9-16-token gap, not kept (2026-11-28, gemv_sweep.py, us; H100 /
// H200): two 16-row groups per block sharing each token fragment (half the tokens' loads; u1 93
// registers, u2 127) slower everywhere, 16 x (4096 -> 14336) u2 46.8 against 44.8 / 48.0 against
// 41.2, 16 x (4096 -> 4096) 18.6 against 15.1 / 15.2 against 13.2; registers capped for three
// blocks per SM (__launch_bounds__' minimum, 80 registers, 48 bytes of stack) 16 x (4096 ->
// 14336) 44.3 against 41.2 on the H200. Under ncu (H200, 16 x (4096 -> 14336)) this kernel moved
// 2.76 TB/s from DRAM at 25% occupancy, cuBLAS's (nvjet_sm90_tst_64x16_64x16_2x1: TMA and wgmma,
// 64 weight rows by 16 tokens a tile) 3.76 TB/s at 14%. That form is the skinny tiles' bt16
// (sm90/scheduler.cuh's decode_skinny_tiles), which the dispatcher now takes there.
constexpr int64_t kMaxKForUnroll4 = 8192;

// Blocks of the mma kernel that split K: enough blocks for every SM to hold as many as it can,
// while each warp keeps at least kMinChunksPerWarp chunks of 64 (short loops do not pay for their
// partial sums). splits = 0 asks for the rule; any value is clamped to [1, min(chunks,
// kMaxSplits)].
constexpr int64_t kMinChunksPerWarp = 4;
constexpr int64_t kMaxSplits = 64;

// pdl: the kernels as programmatic dependent launches (common/launch.cuh; all but the ladder's
// gemv:mma:pdl0): in a decode step's CUDA graph each starts under the tail of the kernel before.
template <TcType T, int TokenTiles, int Unroll>
void launch_mma(gemv::Params<T> p, int splits, bool pdl, cudaStream_t stream) {
  auto* kernel = gemv::mma_kernel<T, TokenTiles, Unroll>;
  constexpr int block = gemv::kSplitWarps * kWarpSize;
  const int64_t row_blocks = ceil_div<int64_t>(p.rows, gemv::kMmaRows);
  const int64_t chunks = ceil_div<int64_t>(p.K, gemv::kMmaChunk);
  if (splits <= 0) {
    const int64_t resident = int64_t(sm_count()) * blocks_per_sm(kernel, block);
    const int64_t by_occupancy = std::max<int64_t>(1, resident / row_blocks);
    const int64_t by_length = std::max<int64_t>(1, chunks / (gemv::kSplitWarps * kMinChunksPerWarp));
    splits = int(std::min<int64_t>(by_occupancy, by_length));
  }
  splits = int(std::max<int64_t>(1, std::min<int64_t>({splits, chunks, kMaxSplits})));
  ScratchBuffer scratch;
  if (splits > 1) {
    scratch = scratch_buffer(size_t(splits) * p.rows * p.num_tokens * sizeof(float));
    p.partial = static_cast<float*>(scratch.ptr);
  }
  launch_dependent(pdl, kernel, dim3(unsigned(row_blocks), unsigned(splits)), dim3(block), 0,
                   stream, p);
  if (splits > 1) {
    const int64_t outputs = p.rows * p.num_tokens;
    launch_dependent(pdl, gemv::combine_kernel<T>,
                     dim3(unsigned(ceil_div<int64_t>(outputs, 256))), dim3(256), 0, stream, p,
                     splits);
  }
}

template <TcType T, int TokenTiles>
void launch_mma_unrolled(const gemv::Params<T>& p, int splits, int unroll, bool pdl,
                         cudaStream_t stream) {
  if (unroll == 0) unroll = p.num_tokens <= 8 && p.K <= kMaxKForUnroll4 ? 4 : 2;
  if (unroll == 4) {
    launch_mma<T, TokenTiles, 4>(p, splits, pdl, stream);
  } else {
    launch_mma<T, TokenTiles, 2>(p, splits, pdl, stream);
  }
}

template <TcType T>
void launch_mma_typed(const TcProblem& problem, int splits, int unroll, cudaStream_t stream) {
  const gemv::Params<T> p = gemv::make_params<T>(problem);
  if (p.num_tokens <= 8) {
    launch_mma_unrolled<T, 1>(p, splits, unroll, problem.tuning.pdl, stream);
  } else {
    launch_mma_unrolled<T, 2>(p, splits, unroll, problem.tuning.pdl, stream);
  }
}

}  // namespace

bool gemv_supports(const TcProblem& p) {
  return (p.type == TcType::kBF16 || p.type == TcType::kFP16) && p.M > 0 && p.N > 0 && p.K > 0 &&
         std::min(p.M, p.N) <= kGemvMaxTokens && p.a_kmajor && p.b_kmajor &&
         tc_operands_16b_aligned(p) && std::max(p.M, p.N) <= int64_t(gemv::kMmaRows) * INT32_MAX;
}

bool gemv_wanted(const TcProblem& p) {
  return gemv_supports(p) && !tc_hopper_decode_skinny_wanted(p);
}

GemvStep gemv_final_step(const TcProblem& p) {
  return std::min(p.M, p.N) == 1 ? GemvStep::kSplitK : GemvStep::kMma;
}

void gemv_launch(const TcProblem& p, GemvStep step, int splits, int unroll, cudaStream_t stream) {
  CUDASTEPS_CHECK(gemv_supports(p), "ladder_mm",
                  "the gemv steps take bf16/fp16 products with at most ", kGemvMaxTokens,
                  " rows (or columns) of output and both operands K-major, got [", p.M, ", ", p.K,
                  "] x [", p.K, ", ", p.N, "]");
  if (step != GemvStep::kMma) {
    gemv::simt_launch(p, step, stream);
  } else if (p.type == TcType::kBF16) {
    launch_mma_typed<TcType::kBF16>(p, splits, unroll, stream);
  } else {
    launch_mma_typed<TcType::kFP16>(p, splits, unroll, stream);
  }
}

}  // namespace gemm
}  // namespace cudasteps
