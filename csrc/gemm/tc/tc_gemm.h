// The tensor-core GEMM path: one problem description shared by the mma.sync kernels (sm_80+,
// tc/sm80/) and the Hopper wgmma/TMA kernels (sm_90a, tc/sm90/), and their entry points.
// tc/dispatch.cpp (the dispatcher) fills a TcProblem and picks a kernel by GPU, shape, alignment and
// layout; ladder_mm runs any of them by name ("tc:<step>").
//
//   out[M, N] = alpha * (A[M, K] @ B[K, N]) + beta * C[m, n]
//
// Element types: bf16 or fp16 operands, addend and output (fp32 accumulation), or, for kTF32,
// float operands, addend and output with the products taken in TF32 (operands rounded to 10
// mantissa bits by the tensor cores, fp32 accumulation), as cuBLAS does with TF32 on. FP8
// operands (kE4M3, kE5M2: scaled_mm's, Hopper only) have their own output type (out_type).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "elementwise/functors.h"  // Act: linear_act's fused activation

namespace cudasteps {
namespace gemm {

// Element types. kE4M3 / kE5M2 (float8_e4m3fn / float8_e5m2) are operand types only: an FP8
// product's output and addend have TcProblem::out_type (kBF16, kFP16, or kTF32 for float32).
enum class TcType : int { kBF16 = 0, kFP16 = 1, kTF32 = 2, kE4M3 = 3, kE5M2 = 4 };

__host__ __device__ constexpr bool tc_is_fp8(TcType t) {
  return t == TcType::kE4M3 || t == TcType::kE5M2;
}

// Bytes of one element of the type (an operand's; for 16-bit and TF32 problems also the output's
// and addend's).
__host__ __device__ constexpr int tc_elem_bytes(TcType t) {
  return t == TcType::kTF32 ? 4 : tc_is_fp8(t) ? 1 : 2;
}

// Tile width and rows, split-K factor and tail split of the Hopper persistent kernels, forced by a
// ladder variant (tc:ws_persistent:bn<64|128|256>:bm<128|192>:s<splits>:ts<0|1>) for tuning
// sweeps; 0 (tail_split: -1) lets the launcher choose.
// The few-row path's mma step reads splits as the blocks that share K, and unroll (2 or 4) as the
// 64-wide chunks of K each warp loads before it multiplies (gemv:mma:s<splits>:u<unroll>).
struct TcTuning {
  // Tile rows: tc:fp8_ws's 0 (128) or 256 (tc:fp8_ws256, the ladder's fp8_ws256);
  // tc:ws_persistent's 0 (the launcher's choice), 128 or 192 (bm192: 192 x 128 tiles, 16-bit).
  int bm = 0;
  int bn = 0;
  int splits = 0;
  int unroll = 0;
  int tail_split = -1;  // 0: never, 1: the last wave's tiles whatever the waves (tc:ws_persistent)
  int ctas = 0;  // 2: tc:fp8_ws in clusters of two CTAs (tc:fp8_multicast, the ladder's); else one
  int bt = 0;    // 16, 32, 64: tc:ws_persistent's skinny tiles (64 weight rows by bt tokens)
  // 2: the skinny tiles split along K over clusters of two CTAs (rank 1's sums added into rank
  // 0's through distributed shared memory); 0: not split.
  int k_parts = 0;
  // The skinny tiles' weight tiles per cluster (4: that many CTAs share each token tile, each
  // loading its slice and multicasting it; with ctas 2 also sharing the weight tile: w4:c2, 4 x 2
  // clusters; the ladder's sweeps only); 0: one.
  int weight_ctas = 0;
  // The skinny tiles' h1 (unclustered, bt32 and bt64): the weight's loads evict-first from L2, the
  // tokens' evict-last.
  bool l2_hints = false;
  // The skinny tiles' raster group (0 or g1: the token tiles of one weight tile on consecutive
  // CTAs, their default; g8: the other kernels' order, 8 weight tiles down before the next token
  // tile, the skinny tiles' before 2026-11-27).
  int raster_group = 0;
  // The persistent kernels' programmatic dependent launch (common/launch.cuh's KernelLaunch): on
  // but where the ladder's pdl0 turns it off, to time what it buys.
  bool pdl = true;
  // tc:fp8_ws's consumer warpgroups started L k-tiles apart (the ladder's fp8_ws:st<L>, 1-4, a
  // trial: HopperParams::stagger); 0: together.
  int stagger = 0;
};

struct TcProblem {
  TcType type = TcType::kBF16;
  int64_t M = 0, N = 0, K = 0;
  // A (M x K): element (m, k) at a[m * lda + k] when a_kmajor (row-major), else a[k * lda + m].
  const void* a = nullptr;
  int64_t lda = 0;
  bool a_kmajor = true;
  // B (K x N): element (k, n) at b[n * ldb + k] when b_kmajor (column-major, e.g. linear's
  // weight.t()), else b[k * ldb + n] (row-major).
  const void* b = nullptr;
  int64_t ldb = 0;
  bool b_kmajor = true;
  // out: row-major [M, N] with leading dimension ldo (>= N).
  void* out = nullptr;
  int64_t ldo = 0;
  float alpha = 1.f, beta = 0.f;
  // Optional addend C[m, n] at addend[m * add_s0 + n * add_s1] (strides may be 0: a bias row or a
  // broadcast addmm self); nullptr: none. Read only when beta != 0.
  const void* addend = nullptr;
  int64_t add_s0 = 0, add_s1 = 0;
  // linear_act's fused epilogue (tc:ws_pingpong's and tc:ws_persistent's kernels for 16-bit
  // K-major operands, and split-K's reduce, only):
  // out[m, n] = act(alpha * acc + beta * C[m, n]), and aux (when not nullptr; out's type and
  // leading dimension) gets alpha * acc, the product before the addend, which the backward reads.
  elementwise::Act act = elementwise::Act::kNone;
  void* aux = nullptr;
  // The fused stage's addend (a bias row) is float32, not the output's type: bf16/fp16 autocast
  // casts linear_act's input and weight but leaves its bias in float32.
  bool addend_fp32 = false;
  // mm_bias_act_backward's stage (tc:ws_persistent's kernel for 16-bit operands, A row-major and
  // B row-major, unsplit, only): with act_input (a contiguous [M, N] matrix of the output's type,
  // leading dimension ldo: the saved product x of bias_act), out[m, n] = g * act'(x[m, n] +
  // beta * C[n]) for g = alpha * acc rounded to the output's type and C the bias row (the addend,
  // as for linear_act); col_partials (when not nullptr: [ceil(M / 32), N] float32) gets the
  // column sums of out, as written, over each 32 rows, which the op adds up in order.
  const void* act_input = nullptr;
  float* col_partials = nullptr;
  // FP8 products (type kE4M3 or kE5M2, the type of a; scaled_mm): b's type, the output's (and
  // addend's) type, and per-tensor scales on the device (one float each, or nullptr): the
  // epilogue multiplies alpha by *scale_a * *scale_b, read in the kernel, so the host never
  // waits for them. Unused for other types.
  TcType b_type = TcType::kE4M3;
  TcType out_type = TcType::kBF16;
  // 16-bit operands (kBF16, kFP16) only: a float32 output (and addend, none for mm.dtype), the
  // accumulators written unrounded (mm.dtype; tc:ws_persistent's kernel as tc:final runs it).
  bool out_fp32 = false;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  // scaled_mm_range (tc:fp8_ws with TMA stores, unsplit, only): range_out (two floats) gets the
  // largest and the smallest value of the output as written, taken with 0 (max(0, max out),
  // min(0, min out); NaN where out holds one), through range_bits, four unsigneds zeroed before the
  // launch (each consumer warp's order-preserving keys folded in by atomicMax, and a count of the
  // warps done; the last decodes them). Both nullptr: no range.
  unsigned* range_bits = nullptr;
  float* range_out = nullptr;
  TcTuning tuning;
};

// True when a matrix at `ptr` with leading dimension `ld` (elements of `elem_bytes`) can be read
// with 16-byte accesses: the base 16-byte aligned and every row starting on a 16-byte boundary.
inline bool tc_rows_16b_aligned(const void* ptr, int64_t ld, int64_t elem_bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * elem_bytes) % 16 == 0;
}

// True when both operands of `p` can be read with 16-byte accesses (the cp.async and TMA paths
// need it).
inline bool tc_operands_16b_aligned(const TcProblem& p) {
  const int64_t eb = tc_elem_bytes(p.type);
  return tc_rows_16b_aligned(p.a, p.lda, eb) && tc_rows_16b_aligned(p.b, p.ldb, eb);
}

// ---- sm_80+ (mma.sync), tc/sm80/ ----

// Ladder step tc:mma: mma.sync on shared-memory tiles filled by plain (bounds-checked, scalar)
// loads. Any layout, any alignment, any shape; the fallback for operands the faster kernels
// cannot read.
void tc_mma_launch(const TcProblem& p, cudaStream_t stream);

// Ladder step tc:ldmatrix_cp_async: ldmatrix from swizzled shared memory fed by a multistage
// cp.async pipeline. Needs tc_cp_async_supports(p) (16-byte aligned operands; layouts the
// kernel reads); `config` indexes its tile table (-1: chosen by shape).
bool tc_cp_async_supports(const TcProblem& p);
void tc_cp_async_launch(const TcProblem& p, int config, cudaStream_t stream);
int tc_cp_async_num_configs();
const char* tc_cp_async_config_name(int config);

namespace sm80 {
// Refuses a GPU without mma.sync (compute capability below 8.0) for `kernel`: both launchers
// above call it. Defined in tc/dispatch.cpp, beside ATen's cached device properties (the kernel
// units include no ATen header).
void check_device(const char* kernel);
}  // namespace sm80

// ---- sm_90a (wgmma, TMA), tc/sm90/; compiled only when the arch list has 9.0 ----

// True when this build has the Hopper kernels (the sm90 room compiled for sm_90a; hopper.cu).
bool tc_hopper_built();
// True when tc_hopper_built() and the current device is compute capability 9.0 (tc/dispatch.cpp).
bool tc_hopper_available();
// True when the Hopper kernels can take `p` (tc_hopper_available(), TMA-describable operands;
// for TF32 at least one K-major operand).
bool tc_hopper_supports(const TcProblem& p);
// True when tc:ws_tf32_rs can take `p`: tc_hopper_supports(p), TF32, exactly one MN-major operand.
bool tc_hopper_rs_supports(const TcProblem& p);
// True when tc:final runs a TF32 product (M x N) whose operands are K-major as a_kmajor and
// b_kmajor say on tc:ws_tf32_rs, reading its one MN-major operand in place, instead of having it
// transposed for tc:ws_persistent: where the transpose costs much next to the product.
bool tc_hopper_tf32_rs_wanted(int64_t M, int64_t N, bool a_kmajor, bool b_kmajor);
// True when tc:final runs a decode-sized product `p` (x @ weight^T, 2-16 tokens on M, 16-bit,
// both operands K-major) in the skinny tiles (scheduler.cuh's decode_skinny_tiles) rather than on
// the few-row path (gemv/), which takes the other products of at most kGemvMaxTokens rows.
bool tc_hopper_decode_skinny_wanted(const TcProblem& p);
// True when tc:ws_persistent's kernel, as tc:final runs it, cuts the last wave's tiles of this
// product (16-bit or TF32 operands of `type`) into k ranges (the tail split), which
// tc:ws_pingpong's kernel does not: linear_act then fuses its epilogue into the former, so that
// its product stays bitwise linear's.
bool tc_hopper_tail_split_wanted(int64_t M, int64_t N, int64_t K, TcType type);
// Ladder steps tc:wgmma, tc:wgmma_tma, tc:ws_persistent, tc:ws_multicast (the same kernel in
// clusters of two CTAs that multicast the shared B tile), tc:ws_pingpong (each consumer warpgroup
// owns a tile, the two take turns), and the final choice among the persistent kernels.
void tc_wgmma_launch(const TcProblem& p, cudaStream_t stream);
void tc_wgmma_tma_launch(const TcProblem& p, cudaStream_t stream);
void tc_ws_persistent_launch(const TcProblem& p, cudaStream_t stream);
void tc_ws_multicast_launch(const TcProblem& p, cudaStream_t stream);
void tc_ws_pingpong_launch(const TcProblem& p, cudaStream_t stream);
// tc:ws_tf32_rs: TF32 with one MN-major operand, which each consumer thread loads from shared
// memory into wgmma's register operand (TF32 wgmma reads shared-memory operands K-major only).
// Needs tc_hopper_rs_supports(p).
void tc_ws_tf32_rs_launch(const TcProblem& p, cudaStream_t stream);
void tc_hopper_final_launch(const TcProblem& p, cudaStream_t stream);

// FP8 (scaled_mm): the wgmma FP8 kernel, tc:ws_persistent's producer, ring and scheduler with
// 128 x 128 tiles and FP8's k32 wgmmas, each k-tile's sums promoted into fp32 registers (the FP8
// tensor cores accumulate with fewer bits than fp32). True when it takes `p`: Hopper, both operands
// K-major and TMA-describable, a e4m3 or e5m2 with b e4m3, output bf16 or float32
// (out_type kBF16 or kTF32).
bool tc_hopper_fp8_supports(const TcProblem& p);
void tc_fp8_launch(const TcProblem& p, cudaStream_t stream);

}  // namespace gemm
}  // namespace cudasteps
