// The few-row (decode-sized) path of the tensor-core dtypes: products whose output has at most
// kGemvMaxTokens rows (or columns), such as a decode step's `linear` (1-16 tokens against a
// 4096 x 14336 weight). They are memory-bound: the time is the time to read the large operand (the
// weight) once, and a tiled GEMM, which fills 128-row tiles with 1-16 rows of data and splits K
// over too few blocks, reads it at two thirds of the copy bandwidth. The kernels here stream the
// weight with 16-byte loads, keep many loads in flight per SM, split K inside a block and combine
// the parts in a fixed order (bitwise reproducible), and take the products on the tensor cores.
//
// Terms: the *weight* is the operand with many rows (`rows`, each K-contiguous), the *tokens* the
// operand with at most kGemvMaxTokens rows (K-contiguous too). In TcProblem terms (tc_gemm.h) that
// is A = tokens, B = weight^T (linear's x @ W^T) when M is small, or A = weight, B = tokens^T when
// N is small (the product the other way round); both operands must be K-major.
//
// Its ladder (`ladder_mm` variants gemv:<step>), each step a kernel of gemv/kernels.cuh:
//   warp_row        one warp per weight row, 2-byte loads, fp32 FMAs, a warp-shuffle sum
//   vec16           the same with 16-byte loads (8 elements per lane per load)
//   rows_in_flight  four weight rows per warp and two k steps unrolled: eight 16-byte loads in
//                   flight per lane, each token's values reused for four rows
//   split_k         eight warps per block on the same rows, K split among them, the parts combined
//                   through shared memory in warp order: enough warps when there are few rows
//   mma             the split_k layout with the products on the tensor cores (mma.sync m16n8k16):
//                   the fp32 FMAs of the steps above (M per weight element) cap the SIMT kernels
//                   below the memory bound at 16 tokens
// On Hopper the dispatcher gives some 2-16-token linears to the skinny tiles of the sm90 room
// instead (gemv_wanted, tc_hopper_decode_skinny_wanted).
// Light on purpose (no ATen header): the instantiation units include it.
#pragma once

#include <cuda_runtime.h>

#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {

// The most rows (or columns) of an output the few-row path takes: two 8-column tiles of mma.sync.
constexpr int64_t kGemvMaxTokens = 16;

enum class GemvStep { kWarpRow, kVec16, kRowsInFlight, kSplitK, kMma };

// True when the few-row kernels can take `p`: bf16/fp16, min(M, N) <= kGemvMaxTokens, both
// operands K-major with 16-byte aligned rows.
bool gemv_supports(const TcProblem& p);
// True when the dispatcher should run `p` on the few-row path: gemv_supports(p), unless the
// Hopper kernels' skinny tiles run it faster (tc_hopper_decode_skinny_wanted: 9-16 tokens against
// large weights, 8-16 on GPUs with fast DRAM per SM, or long K against a weight of half the SMs'
// tiles; sm90/scheduler.cuh's decode_skinny_tiles).
bool gemv_wanted(const TcProblem& p);
// Runs `p` with the kernel of ladder step `step`. Needs gemv_supports(p). splits: for kMma, the
// number of blocks that share each row group's K (partial sums added in order by a second
// kernel); 0 lets the launcher choose.
// unroll: for kMma, the 64-wide chunks of K a warp loads before it multiplies (2 or 4; 0 lets
// the launcher choose).
void gemv_launch(const TcProblem& p, GemvStep step, int splits, int unroll, cudaStream_t stream);
// The step the dispatcher runs for `p` (gemv_wanted): split_k for one token, whose SIMT FMAs keep
// up with the memory and which needs no tensor-core fragments' padding to 8 tokens; mma otherwise.
GemvStep gemv_final_step(const TcProblem& p);

}  // namespace gemm
}  // namespace cudasteps
