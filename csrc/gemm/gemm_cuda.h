// The CUDA GEMM drivers of both paths, shared by the op layer (gemm_cuda.cpp: mm, addmm, linear)
// and the ladder op (gemm_ladder_cuda.cpp): the SGEMM's (gemm_cuda, sgemm/dispatch.cpp) and the
// tensor cores' (tc_gemm_cuda, tc/dispatch.cpp), and the operand repacks both use (operands.cpp).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "gemm/gemm.h"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {

// The stream-K tail of the ring configs (sgemm/kernel.cuh): kAuto where it pays (streamk_pays in
// sgemm/dispatch.cpp), or forced off / on (on: whenever the tiles leave a partial last wave).
enum class StreamK { kAuto, kOff, kOn };

// out[M, N] = alpha * a @ b + beta * addend, freshly allocated and contiguous. a, b: 2-D float32
// or float64 CUDA tensors of any strides (checked by the caller). force_config: an index into the
// config table (-1: chosen by shape); force_splits: split-K factor (0: chosen by shape); streamk:
// the stream-K tail of a ring config; kOn with splits > 1 is split-K with the in-kernel fix-up (the
// stream-K kernel shares every tile among `splits` blocks and adds the parts up itself);
// blocked_sums: the ring configs sum K in blocks (sgemm/kernel.cuh; off for the ladder steps before
// blocked_sum).
at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                     double beta, int force_config = -1, int force_splits = 0,
                     StreamK streamk = StreamK::kAuto, bool blocked_sums = true);

// The tensor-core kernels ladder_mm can force by name ("tc:<step>"); kAuto is the dispatcher's
// choice (what mm / addmm / linear run): kFinal on Hopper, kCpAsync elsewhere. kFinal is the
// Hopper kernels' own choice (tc_hopper_final_launch): ws_persistent, or ws_tf32_rs for TF32 with
// an MN-major operand where tc_hopper_tf32_rs_wanted says so.
enum class TcKernel {
  kAuto,
  kMma,
  kCpAsync,
  kWgmma,
  kWgmmaTma,
  kWsPersistent,
  kWsMulticast,
  kWsPingPong,
  kWsTf32Rs,
  kFinal,
  // The few-row path's ladder (gemm/gemv/gemv.h); kFinal and kAuto take kGemvMma where
  // gemv_wanted.
  kGemvWarpRow,
  kGemvVec16,
  kGemvRowsInFlight,
  kGemvSplitK,
  kGemvMma
};

// linear_act's fused epilogue, asked of tc_gemm_cuda: out = act(alpha * a @ b + beta * addend),
// and, with want_aux, `aux` set to alpha * a @ b ([M, N], contiguous, out's dtype); the addend (a
// bias row) may be float32. Only tc:ws_pingpong's and tc:ws_persistent's kernels (Hopper) run
// it, with M, N and K all positive: the op layer decides (gemm_cuda.cpp, linear_act) and runs the
// two-pass form otherwise.
// mm_bias_act_backward's stage instead where act_input is defined (the saved product x of
// bias_act, [M, N], contiguous, out's dtype): out = (alpha * a @ b) * act'(x + addend), the
// addend a bias row, and with want_col_partials `col_partials` set to the column sums of out per
// 32 rows ([ceil(M / 32), N] float32, summed in order by the caller). Only tc:ws_persistent's
// kernel (Hopper) runs it, unsplit, with a row-major and b row-major (others are repacked), M, N
// and K positive and N a multiple of 8.
struct TcFusion {
  elementwise::Act act = elementwise::Act::kNone;
  bool want_aux = false;
  at::Tensor aux;
  at::Tensor act_input;
  bool want_col_partials = false;
  at::Tensor col_partials;
};

// out[M, N] = alpha * a @ b + beta * addend on tensor cores: a, b bf16/fp16 (`type` kBF16/kFP16), or
// float32 with type kTF32. Any strides (operands the chosen kernel cannot read in place are
// repacked or transposed first). cp_async_config: a tc_cp_async config index for kCpAsync (-1:
// chosen by shape). tuning: forced tile width / split-K of the Hopper persistent kernels (sweeps),
// or (tuning.splits) the blocks that share K in the gemv mma step. fusion: linear_act's epilogue
// (kernel must be kWsPersistent or kWsPingPong).
at::Tensor tc_gemm_cuda(const at::Tensor& a, const at::Tensor& b, const Addend& add, double alpha,
                        double beta, TcType type, TcKernel kernel = TcKernel::kAuto,
                        int cp_async_config = -1, TcTuning tuning = {},
                        TcFusion* fusion = nullptr);

// mm.dtype's a @ b of bf16/fp16 operands into a float32 output (the fp32 accumulators written
// unrounded) on the Hopper kernels: true when they can take it (tc_hopper_available(), sizes
// within the TMA's 32-bit coordinates), else the caller computes it otherwise.
bool tc_f32_out_supported(const at::Tensor& a, const at::Tensor& b);
// Any strides (operands not TMA-describable are repacked first); needs tc_f32_out_supported.
at::Tensor tc_gemm_f32_out_cuda(const at::Tensor& a, const at::Tensor& b);

// The TcType of a bf16/fp16 tensor, or kTF32 for float32.
TcType tc_type_of(at::ScalarType dtype);

// Index of the config named `name` (e.g. "128x128x16_w64x32_t8x8", or a multistage config such as
// "cp3_128x128x16_w64x32_t8x8_fdb_se"), or -1.
int find_config(const std::string& name);
// Index of the config of an SGEMM ladder step that runs the multistage kernel with a subset of its
// features ("cp_async_multistage", "frag_double_buffer", "smem_epilogue"), or -1.
int find_ladder_step_config(const std::string& step);
// Index of the double-buffered 128x128 main config (the `double_buffer` ladder step).
int main_config();
// "name1, name2, ...": for error messages.
std::string config_names();
// The SGEMM ladder's first steps, each its own kernel (sgemm/ladder_steps.cu; this host side in
// sgemm/dispatch.cpp): naive, coalesced, smem_tile, blocktile_1d, blocktile_2d, vectorized,
// warptile. self, mat2: contiguous float32 (checked by the caller, with the variant's name).
at::Tensor sgemm_ladder_step_cuda(const at::Tensor& self, const at::Tensor& mat2,
                                  const std::string& variant);

// ---- operands as the kernels read them (operands.cpp) ----

// One operand of a TcProblem: `k_major` as in TcProblem (A row-major, B column-major).
struct TcOperand {
  at::Tensor holder;
  const void* ptr = nullptr;
  int64_t ld = 0;
  bool k_major = true;
};

// out[M, N] (contiguous, leading dimension N) = a @ b of these operands (read as tc_operand or
// tc_repack left them): the problem's type, shape, operands and output; alpha 1, no addend, no
// fusion, until the caller sets them (tc_gemm_cuda, tc_gemm_f32_out_cuda, scaled_mm).
TcProblem operand_problem(TcType type, int64_t M, int64_t N, int64_t K, const TcOperand& a,
                          const TcOperand& b, const at::Tensor& out);

// The shortest leading dimension, at least `cols`, that starts every row on a 16-byte boundary.
int64_t padded_ld(int64_t cols, int64_t elem_bytes);
// `t` (rows x cols) read in place: row- or column-major (make_operand copies other strides). A
// leading dimension that never steps (one row of a row-major matrix) is set to a 16-byte multiple
// so that alignment checks look at what matters.
TcOperand tc_operand(const at::Tensor& t, bool is_b);
bool tc_operand_aligned(const TcOperand& o, int64_t elem_bytes);
// One row of A or one column of B whose K elements are adjacent, described as K-major whichever
// layout tc_operand named (a size-1 dimension takes any stride; a decode step's [K, 1] operand is
// one). For the few-row path, which reads K-major operands only.
void tc_vector_as_k_major(TcOperand& o, bool is_b);
// `t` rewritten into a fresh buffer whose rows are padded to 16 bytes, in the layout `k_major`
// asks for (A row-major / B column-major when true): cudasteps::copy_ when that is the layout
// `current` already has (one pass), cudasteps::transpose_ when it flips it (one pass, or two when
// the rows are padded: transpose_ writes a non-contiguous out through a contiguous buffer).
TcOperand tc_repack(const at::Tensor& t, const TcOperand& current, bool is_b, bool k_major);

}  // namespace gemm
}  // namespace cudasteps
