// Every instantiation of the Hopper launch templates (launch.cuh), each compiled in its own unit
// (inst_<type>_<layout>.cu, inst_<type>_f32_out.cu, inst_<type>_skinny.cu, inst_tf32_rs.cu,
// inst_fp8_<type of A>.cu) so that a parallel build compiles them side by side.
// Declared extern here, so that hopper.cu, which dispatches to them, instantiates none itself.
// Layout names as in the SGEMM table: A then B, N for row-major and T for column-major, e.g. "nt"
// for A row-major and B column-major (both K-major), the layout of linear's x @ weight.t().
#pragma once

#include "gemm/tc/sm90/launch.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

extern template void launch_layout<TcType::kBF16, true, true>(const TcProblem&, HopperKernel,
                                                              cudaStream_t);
extern template void launch_layout<TcType::kBF16, true, false>(const TcProblem&, HopperKernel,
                                                               cudaStream_t);
extern template void launch_layout<TcType::kBF16, false, true>(const TcProblem&, HopperKernel,
                                                               cudaStream_t);
extern template void launch_layout<TcType::kBF16, false, false>(const TcProblem&, HopperKernel,
                                                                cudaStream_t);
extern template void launch_layout<TcType::kFP16, true, true>(const TcProblem&, HopperKernel,
                                                              cudaStream_t);
extern template void launch_layout<TcType::kFP16, true, false>(const TcProblem&, HopperKernel,
                                                               cudaStream_t);
extern template void launch_layout<TcType::kFP16, false, true>(const TcProblem&, HopperKernel,
                                                               cudaStream_t);
extern template void launch_layout<TcType::kFP16, false, false>(const TcProblem&, HopperKernel,
                                                                cudaStream_t);
extern template void launch_layout<TcType::kTF32, true, true>(const TcProblem&, HopperKernel,
                                                              cudaStream_t);
// mm.dtype's float32 output of 16-bit operands, every layout (inst_<type>_f32_out.cu).
extern template void launch_layout_f32_out<TcType::kBF16, true, true>(const TcProblem&,
                                                                      cudaStream_t);
extern template void launch_layout_f32_out<TcType::kBF16, true, false>(const TcProblem&,
                                                                       cudaStream_t);
extern template void launch_layout_f32_out<TcType::kBF16, false, true>(const TcProblem&,
                                                                       cudaStream_t);
extern template void launch_layout_f32_out<TcType::kBF16, false, false>(const TcProblem&,
                                                                        cudaStream_t);
extern template void launch_layout_f32_out<TcType::kFP16, true, true>(const TcProblem&,
                                                                      cudaStream_t);
extern template void launch_layout_f32_out<TcType::kFP16, true, false>(const TcProblem&,
                                                                       cudaStream_t);
extern template void launch_layout_f32_out<TcType::kFP16, false, true>(const TcProblem&,
                                                                       cudaStream_t);
extern template void launch_layout_f32_out<TcType::kFP16, false, false>(const TcProblem&,
                                                                        cudaStream_t);
// The skinny tiles of few-row linears (launch_skinny: bf16 and fp16, 16-, 32- and 64-token tiles,
// alone and in clusters; inst_<type>_skinny.cu), apart from the nt units that call them.
extern template void launch_skinny<TcType::kBF16, 16>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_skinny<TcType::kBF16, 32>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_skinny<TcType::kBF16, 64>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_skinny<TcType::kFP16, 16>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_skinny<TcType::kFP16, 32>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_skinny<TcType::kFP16, 64>(const TcProblem&, const SkinnyTiles&,
                                                      cudaStream_t);
extern template void launch_fp8<TcType::kE4M3, TcType::kBF16>(const TcProblem&, cudaStream_t);
extern template void launch_fp8<TcType::kE4M3, TcType::kTF32>(const TcProblem&, cudaStream_t);
extern template void launch_fp8<TcType::kE5M2, TcType::kBF16>(const TcProblem&, cudaStream_t);
extern template void launch_fp8<TcType::kE5M2, TcType::kTF32>(const TcProblem&, cudaStream_t);
extern template void launch_rs_typed<128, false>(const TcProblem&, cudaStream_t);
extern template void launch_rs_typed<128, true>(const TcProblem&, cudaStream_t);
extern template void launch_rs_typed<256, false>(const TcProblem&, cudaStream_t);
extern template void launch_rs_typed<256, true>(const TcProblem&, cudaStream_t);

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
