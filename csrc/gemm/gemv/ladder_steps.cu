// The few-row path's SIMT ladder steps (gemv.h): warp_row, vec16, rows_in_flight and split_k, for
// every token bucket (params.cuh), and their launches. split_k (what gemv:final runs for one token)
// is instantiated for bf16 and fp16; the three steps before it, which only the ladder runs (on
// bf16: the report's ladder rows), for bf16 alone: their fp16 twins cost compile time on every
// build for rows no report showed.
#include <c10/cuda/CUDAException.h>

#include "common/launch.cuh"
#include "gemm/gemv/params.cuh"

namespace cudasteps {
namespace gemm {
namespace gemv {
namespace {

constexpr int kBlock = 256;        // warps_row, vec16, rows_in_flight: 8 warps, each its own rows
constexpr int kRowsPerWarp = 4;    // rows_in_flight and split_k
constexpr int kUnroll = 2;

template <TcType T>
void launch_typed(const TcProblem& problem, GemvStep step, cudaStream_t stream) {
  const Params<T> p = make_params<T>(problem);
  const int64_t warps = kBlock / kWarpSize;
  with_token_bucket(p.num_tokens, [&](auto tokens) {
    constexpr int Tokens = decltype(tokens)::value;
    if constexpr (T == TcType::kBF16) {
      switch (step) {
        case GemvStep::kWarpRow:
          warp_row_kernel<T, Tokens><<<ceil_div<int64_t>(p.rows, warps), kBlock, 0, stream>>>(p);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        case GemvStep::kVec16:
          vec16_kernel<T, Tokens><<<ceil_div<int64_t>(p.rows, warps), kBlock, 0, stream>>>(p);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        case GemvStep::kRowsInFlight:
          rows_in_flight_kernel<T, Tokens, kRowsPerWarp, kUnroll>
              <<<ceil_div<int64_t>(p.rows, warps * kRowsPerWarp), kBlock, 0, stream>>>(p);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
          return;
        default:
          break;
      }
    }
    split_k_kernel<T, Tokens, kRowsPerWarp, kUnroll>
        <<<ceil_div<int64_t>(p.rows, kRowsPerWarp), kSplitWarps * kWarpSize, 0, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

void simt_launch(const TcProblem& p, GemvStep step, cudaStream_t stream) {
  if (p.type == TcType::kBF16) {
    launch_typed<TcType::kBF16>(p, step, stream);
  } else {
    TORCH_CHECK(step == GemvStep::kSplitK,
                "cudasteps.ladder_mm: the few-row ladder's steps gemv:warp_row, gemv:vec16 and "
                "gemv:rows_in_flight are built for bfloat16 only, got float16 (gemv:split_k, "
                "gemv:mma and gemv:final take both)");
    launch_typed<TcType::kFP16>(p, step, stream);
  }
}

}  // namespace gemv
}  // namespace gemm
}  // namespace cudasteps
