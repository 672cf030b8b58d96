// Instantiation of the tc:ldmatrix_cp_async kernel (cp_async.cuh) for config Cfg128x128: every type
// (bf16, fp16, TF32) and operand layout. One unit per config, for a parallel build.
#include "gemm/tc/sm80/cp_async.cuh"

namespace cudasteps {
namespace gemm {
namespace sm80 {
namespace cp_async_step {

template void launch_config<Cfg128x128>(const TcProblem&, int, cudaStream_t);

}  // namespace cp_async_step
}  // namespace sm80
}  // namespace gemm
}  // namespace cudasteps
