// The skinny tiles of few-row linears for fp16 operands (launch_skinny, launch.cuh): 64 weight rows
// by 16, 32 or 64 tokens, alone, in clusters sharing operand tiles, or split along K in pairs.
// Apart from inst_fp16_nt.cu, which calls them, so that a parallel build compiles the two side
// by side.
#include "gemm/tc/sm90/instances.h"

namespace cudasteps {
namespace gemm {
namespace sm90 {

template void launch_skinny<TcType::kFP16, 16>(const TcProblem&, const SkinnyTiles&, cudaStream_t);
template void launch_skinny<TcType::kFP16, 32>(const TcProblem&, const SkinnyTiles&, cudaStream_t);
template void launch_skinny<TcType::kFP16, 64>(const TcProblem&, const SkinnyTiles&, cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
