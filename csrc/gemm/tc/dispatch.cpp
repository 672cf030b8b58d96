// The tensor-core path's dispatcher (tc_gemm_cuda): which kernel runs a bf16/fp16/TF32 product
// (the Hopper kernels of sm90/ on a compute capability 9.0 GPU and a build with them, else the
// sm80/ kernels), and which operands must be repacked or transposed first for it to read them.
// Also runs a forced ladder step by name (TcKernel, for ladder_mm), and holds the device checks of
// both rooms (sm80::check_device, tc_hopper_available), which read ATen's cached device properties:
// the kernel units include no ATen header.
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>

#include "common/checks.h"
#include "gemm/gemm_cuda.h"
#include "gemm/gemv/gemv.h"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace {

const char* tc_kernel_name(TcKernel k) {
  switch (k) {
    case TcKernel::kMma: return "tc:mma";
    case TcKernel::kCpAsync: return "tc:ldmatrix_cp_async";
    case TcKernel::kWgmma: return "tc:wgmma";
    case TcKernel::kWgmmaTma: return "tc:wgmma_tma";
    case TcKernel::kWsPersistent: return "tc:ws_persistent";
    case TcKernel::kWsMulticast: return "tc:ws_multicast";
    case TcKernel::kWsPingPong: return "tc:ws_pingpong";
    case TcKernel::kWsTf32Rs: return "tc:ws_tf32_rs";
    case TcKernel::kGemvWarpRow: return "gemv:warp_row";
    case TcKernel::kGemvVec16: return "gemv:vec16";
    case TcKernel::kGemvRowsInFlight: return "gemv:rows_in_flight";
    case TcKernel::kGemvSplitK: return "gemv:split_k";
    case TcKernel::kGemvMma: return "gemv:mma";
    default: return "tc:final";
  }
}

bool is_hopper_kernel(TcKernel k) {
  return k == TcKernel::kWgmma || k == TcKernel::kWgmmaTma || k == TcKernel::kWsPersistent ||
         k == TcKernel::kWsMulticast || k == TcKernel::kWsPingPong || k == TcKernel::kWsTf32Rs ||
         k == TcKernel::kFinal;
}

// The Hopper ladder steps that tc:final never runs (built in one 16-bit layout only).
bool is_hopper_ladder_only(TcKernel k) {
  return k == TcKernel::kWgmma || k == TcKernel::kWgmmaTma || k == TcKernel::kWsMulticast ||
         k == TcKernel::kWsPingPong;
}

// The few-row path's ladder steps (gemv/gemv.h), or -1 for the other kernels.
int gemv_step_of(TcKernel k) {
  switch (k) {
    case TcKernel::kGemvWarpRow: return int(GemvStep::kWarpRow);
    case TcKernel::kGemvVec16: return int(GemvStep::kVec16);
    case TcKernel::kGemvRowsInFlight: return int(GemvStep::kRowsInFlight);
    case TcKernel::kGemvSplitK: return int(GemvStep::kSplitK);
    case TcKernel::kGemvMma: return int(GemvStep::kMma);
    default: return -1;
  }
}

}  // namespace

void sm80::check_device(const char* kernel) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  CUDASTEPS_CHECK(prop->major >= 8, "mm", kernel,
                  " needs a GPU of compute capability 8.0 or newer (mma.sync), got ", prop->major,
                  ".", prop->minor, " (", prop->name, ")");
}

TcProblem operand_problem(TcType type, int64_t M, int64_t N, int64_t K, const TcOperand& a,
                          const TcOperand& b, const at::Tensor& out) {
  TcProblem p;
  p.type = type;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a = a.ptr;
  p.lda = a.ld;
  p.a_kmajor = a.k_major;
  p.b = b.ptr;
  p.ldb = b.ld;
  p.b_kmajor = b.k_major;
  p.out = out.data_ptr();
  p.ldo = N;
  return p;
}

bool tc_hopper_available() {
  if (!tc_hopper_built()) return false;
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major == 9 && prop->minor == 0;
}

TcType tc_type_of(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return TcType::kBF16;
  if (dtype == at::kHalf) return TcType::kFP16;
  return TcType::kTF32;
}

at::Tensor tc_gemm_cuda(const at::Tensor& a_t, const at::Tensor& b_t, const Addend& add_in,
                        double alpha, double beta, TcType type, TcKernel kernel,
                        int cp_async_config, TcTuning tuning, TcFusion* fusion) {
  const int64_t M = a_t.size(0), K = a_t.size(1), N = b_t.size(1);
  at::Tensor out = at::empty({M, N}, a_t.options().memory_format(at::MemoryFormat::Contiguous));
  if (fusion != nullptr) {
    TORCH_CHECK((kernel == TcKernel::kWsPersistent || kernel == TcKernel::kWsPingPong) && M > 0 &&
                    N > 0 && K > 0,
                "cudasteps.linear_act: the fused epilogue needs tc:ws_persistent or "
                "tc:ws_pingpong and a non-empty product (the op layer runs the two-pass form "
                "otherwise)");
    if (fusion->want_aux) fusion->aux = at::empty_like(out);
    if (fusion->act_input.defined()) {
      TORCH_CHECK(kernel == TcKernel::kWsPersistent && N % 8 == 0 &&
                      fusion->act_input.is_contiguous() && fusion->act_input.size(0) == M &&
                      fusion->act_input.size(1) == N &&
                      fusion->act_input.scalar_type() == a_t.scalar_type(),
                  "cudasteps.mm_bias_act_backward: the fused stage needs tc:ws_persistent, N a "
                  "multiple of 8 and a contiguous [M, N] saved product of the operands' dtype");
      if (fusion->want_col_partials) {
        fusion->col_partials = at::empty({(M + 31) / 32, N}, a_t.options().dtype(at::kFloat));
      }
    }
  }
  if (M == 0 || N == 0) return out;
  const c10::cuda::CUDAGuard guard(a_t.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Addend add = add_in;
  if (beta == 0.0) add.ptr = nullptr;
  if (K == 0) {  // alpha * (empty sum) + beta * C, computed in fp32 and rounded once
    if (add.ptr == nullptr) return out.zero_();
    return out.copy_(add.holder.to(at::kFloat).mul(beta).expand({M, N}));
  }

  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  CUDASTEPS_CHECK(prop->major >= 8, "mm", "tensor-core GEMM (", a_t.scalar_type(),
                  ") needs a GPU of compute capability 8.0 or newer, got ", prop->major, ".",
                  prop->minor, " (", prop->name, ")");
  const int64_t eb = a_t.element_size();
  TcOperand a = tc_operand(a_t, false);
  TcOperand b = tc_operand(b_t, true);

  // A forced few-row step (gemv:<step>) reads its operands as they are: both K-major, or
  // gemv_launch refuses them (the dispatcher takes that path only where gemv_wanted). kFinal (the
  // ladder's final step) and kAuto are the dispatcher's choice; it may be the few-row path,
  // decided below once the operands are known. For either, a one-token operand whose K elements
  // are adjacent counts as K-major, whatever its strides say of its size-1 dimension.
  const int gemv_step = gemv_step_of(kernel);
  const bool dispatcher_choice = kernel == TcKernel::kAuto || kernel == TcKernel::kFinal;
  if (type != TcType::kTF32 && std::min(M, N) <= kGemvMaxTokens &&
      (gemv_step >= 0 || dispatcher_choice)) {
    tc_vector_as_k_major(a, false);
    tc_vector_as_k_major(b, true);
  }
  if (kernel == TcKernel::kAuto) {
    kernel = tc_hopper_available() ? TcKernel::kFinal : TcKernel::kCpAsync;
  }
  if (fusion != nullptr && fusion->act_input.defined()) {
    // mm_bias_act_backward's stage is built into the kernels of grad @ weight's layout only: A
    // row-major, B row-major.
    if (!a.k_major) a = tc_repack(a_t, a, false, true);
    if (b.k_major) b = tc_repack(b_t, b, true, false);
  } else if (fusion != nullptr) {
    // linear_act's fused stage is built into the K-major layout's kernels only (x @ weight^T).
    if (!a.k_major) a = tc_repack(a_t, a, false, true);
    if (!b.k_major) b = tc_repack(b_t, b, true, true);
  }
  if (is_hopper_kernel(kernel)) {
    CUDASTEPS_CHECK(tc_hopper_available(), "ladder_mm", tc_kernel_name(kernel),
                    " needs a compute capability 9.0 GPU and a build for it (sm_90a), got ",
                    prop->major, ".", prop->minor);
    // TF32 wgmma reads shared-memory operands K-major only (bf16/fp16 are read in place either
    // way). tc:ws_tf32_rs, and tc:final where tc_hopper_tf32_rs_wanted says so, read one MN-major
    // operand through registers: of two, B is transposed once by cudasteps::transpose. For the
    // other kernels each MN-major operand is transposed.
    const bool rs = kernel == TcKernel::kWsTf32Rs ||
                    (kernel == TcKernel::kFinal && type == TcType::kTF32 &&
                     tc_hopper_tf32_rs_wanted(M, N, a.k_major, b.k_major));
    if (type == TcType::kTF32 && rs) {
      if (!a.k_major && !b.k_major) b = tc_repack(b_t, b, true, true);
      CUDASTEPS_CHECK(kernel == TcKernel::kFinal || !(a.k_major && b.k_major), "ladder_mm",
                      "tc:ws_tf32_rs reads one operand MN-major (self column-major or mat2 "
                      "row-major), got self row-major and mat2 column-major: tc:ws_persistent "
                      "reads that layout");
    } else if (type == TcType::kTF32) {
      CUDASTEPS_CHECK(!is_hopper_ladder_only(kernel), "ladder_mm", tc_kernel_name(kernel),
                      " is built for bfloat16 only (the TF32 ladder runs tc:ws_persistent, "
                      "tc:ws_tf32_rs and tc:final), got float32");
      if (!a.k_major) a = tc_repack(a_t, a, false, true);
      if (!b.k_major) b = tc_repack(b_t, b, true, true);
    } else if (type == TcType::kFP16 && is_hopper_ladder_only(kernel)) {
      // fp16: of the ladder-only kernels only tc:ws_pingpong is built, for two K-major operands
      // (ladder_kernels_built, pingpong_built, tc/sm90/launch.cuh): others are transposed.
      CUDASTEPS_CHECK(kernel == TcKernel::kWsPingPong, "ladder_mm", tc_kernel_name(kernel),
                      " is built for bfloat16 only (the fp16 ladder runs tc:ws_persistent, "
                      "tc:ws_pingpong and tc:final), got float16");
      if (!a.k_major) a = tc_repack(a_t, a, false, true);
      if (!b.k_major) b = tc_repack(b_t, b, true, true);
    } else if (is_hopper_ladder_only(kernel) &&
               !(kernel == TcKernel::kWsPingPong && a.k_major && b.k_major)) {
      // bf16: the ladder-only kernels are built for A row-major and B row-major alone
      // (ladder_kernels_built, tc/sm90/launch.cuh); other layouts are transposed into it.
      // tc:ws_pingpong also reads two K-major operands in place (pingpong_built), the layout of
      // linear_act's fused stage.
      if (!a.k_major) a = tc_repack(a_t, a, false, true);
      if (b.k_major) b = tc_repack(b_t, b, true, false);
    }
  }
  if (kernel != TcKernel::kMma) {
    if (!tc_operand_aligned(a, eb)) a = tc_repack(a_t, a, false, a.k_major);
    if (!tc_operand_aligned(b, eb)) b = tc_repack(b_t, b, true, b.k_major);
  }

  TcProblem p = operand_problem(type, M, N, K, a, b, out);
  p.alpha = float(alpha);
  p.beta = float(beta);
  p.addend = add.ptr;
  p.add_s0 = add.s0;
  p.add_s1 = add.s1;
  p.tuning = tuning;
  if (fusion != nullptr) {
    p.act = fusion->act;
    p.aux = fusion->want_aux ? fusion->aux.data_ptr() : nullptr;
    // A float32 bias of 16-bit operands (autocast leaves linear_act's bias in float32).
    p.addend_fp32 = add.ptr != nullptr && type != TcType::kTF32 &&
                    add.holder.scalar_type() == at::kFloat;
    if (fusion->act_input.defined()) {
      p.act_input = fusion->act_input.const_data_ptr();
      p.col_partials = fusion->want_col_partials ? fusion->col_partials.data_ptr<float>() : nullptr;
      p.tuning.splits = 1;  // split-K's reduce does not apply the stage
    }
  }

  if (gemv_step >= 0) {
    gemv_launch(p, GemvStep(gemv_step), tuning.splits, tuning.unroll, stream);
    return out;
  }
  if (dispatcher_choice && gemv_wanted(p)) {
    gemv_launch(p, gemv_final_step(p), 0, 0, stream);
    return out;
  }

  if (is_hopper_kernel(kernel) && !tc_hopper_supports(p)) {
    // Sizes past the TMA's 32-bit coordinates: a forced ladder step refuses, the dispatcher
    // takes the sm_80 path.
    CUDASTEPS_CHECK(kernel == TcKernel::kFinal, "ladder_mm", tc_kernel_name(kernel),
                    " cannot take a [", M, ", ", K, "] x [", K, ", ", N, "] product");
    kernel = TcKernel::kCpAsync;
  }
  if (kernel == TcKernel::kCpAsync && !tc_cp_async_supports(p)) {
    // A layout the cp.async kernel does not read (tf32 MN-major): transpose to K-major.
    if (!p.a_kmajor) {
      a = tc_repack(a_t, a, false, true);
      p.a = a.ptr, p.lda = a.ld, p.a_kmajor = true;
    }
    if (!p.b_kmajor) {
      b = tc_repack(b_t, b, true, true);
      p.b = b.ptr, p.ldb = b.ld, p.b_kmajor = true;
    }
    CUDASTEPS_CHECK(tc_cp_async_supports(p), "ladder_mm", tc_kernel_name(kernel),
                    " cannot read these operands");
  }
  switch (kernel) {
    case TcKernel::kMma: tc_mma_launch(p, stream); break;
    case TcKernel::kCpAsync: tc_cp_async_launch(p, cp_async_config, stream); break;
    case TcKernel::kWgmma: tc_wgmma_launch(p, stream); break;
    case TcKernel::kWgmmaTma: tc_wgmma_tma_launch(p, stream); break;
    case TcKernel::kWsPersistent: tc_ws_persistent_launch(p, stream); break;
    case TcKernel::kWsMulticast: tc_ws_multicast_launch(p, stream); break;
    case TcKernel::kWsPingPong: tc_ws_pingpong_launch(p, stream); break;
    case TcKernel::kWsTf32Rs: tc_ws_tf32_rs_launch(p, stream); break;
    default: tc_hopper_final_launch(p, stream); break;
  }
  return out;
}

bool tc_f32_out_supported(const at::Tensor& a, const at::Tensor& b) {
  const auto dtype = a.scalar_type();
  return (dtype == at::kBFloat16 || dtype == at::kHalf) && tc_hopper_available() &&
         a.size(0) < INT_MAX && a.size(1) < INT_MAX && b.size(1) < INT_MAX;
}

at::Tensor tc_gemm_f32_out_cuda(const at::Tensor& a_t, const at::Tensor& b_t) {
  const int64_t M = a_t.size(0), K = a_t.size(1), N = b_t.size(1);
  at::Tensor out = at::empty({M, N}, a_t.options().dtype(at::kFloat));
  if (M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();
  TORCH_CHECK(tc_f32_out_supported(a_t, b_t),
              "cudasteps.mm: a float32 output of 16-bit operands runs on the Hopper kernels only");
  const c10::cuda::CUDAGuard guard(a_t.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t eb = a_t.element_size();
  // bf16/fp16 operands are read in place in either layout; only rows the TMA cannot describe
  // (a base or leading dimension off 16 bytes) are repacked.
  TcOperand a = tc_operand(a_t, false);
  TcOperand b = tc_operand(b_t, true);
  if (!tc_operand_aligned(a, eb)) a = tc_repack(a_t, a, false, a.k_major);
  if (!tc_operand_aligned(b, eb)) b = tc_repack(b_t, b, true, b.k_major);
  TcProblem p = operand_problem(tc_type_of(a_t.scalar_type()), M, N, K, a, b, out);
  p.out_fp32 = true;
  tc_hopper_final_launch(p, stream);
  return out;
}

}  // namespace gemm
}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
