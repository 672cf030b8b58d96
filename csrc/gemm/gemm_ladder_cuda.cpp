// The ladder op (ladder_mm): every step of the gemm family's two ladders by name. The SGEMM ladder,
// after siboehm's "How to optimize a CUDA matmul", starts with steps that are each their own
// kernel (sgemm/ladder_steps.cu: float32, 2-D, contiguous row-major operands of any size, every
// load and store bounds-checked); the later steps are configs of the SGEMM table.
//
//   naive          one thread per output; consecutive threads walk M, so their B reads are the
//                  same word and their A reads are K floats apart: uncoalesced.
//   coalesced      consecutive threads walk N: B and C accesses coalesce into 128-byte lines.
//   smem_tile      32 x 32 tiles of A and B staged in shared memory: each global value is read
//                  once per block instead of once per thread.
//   blocktile_1d   64 x 64 block tile, 8-deep K slice, each thread computes 8 outputs of one
//                  column: one Bs value reused 8 times from a register.
//   blocktile_2d   128 x 128 block tile, each thread an 8 x 8 block: 16 shared loads per 64 FMA.
//   vectorized     + 16-byte global loads, A stored transposed in shared memory, LDS.128 reads
//                  (sgemm/kernel.cuh with WarpTile = false, Stages = 1).
//   warptile       + the warp-tiled thread layout (conflict-free LDS.128, 4x4 sub-tiles), BK = 16.
//   double_buffer  + two shared buffers and register prefetch: the main config of the final kernel.
//   cp_async_multistage  the multistage kernel (sgemm/multistage.cuh): a 3-slice cp.async ring in
//                  place of the register-staged double buffer, operands kept in their global
//                  layout in shared memory (conflict-free LDS.128 of 4 k), 128x128x16, 8x8.
//   frag_double_buffer   + the next k group's fragments read while this group's FFMAs run.
//   smem_epilogue  + the output staged through shared memory, written as 16-byte coalesced rows.
//   swizzled_raster      + grouped tile order for L2 reuse (the table config
//                  cp3_128x128x16_w64x32_t8x8_fdb_se).
//   cp_async_kmajor  the cp.async ring of sgemm/kernel.cuh (the config
//                  ring3_128x256x8_w64x64_t8x16_rowfma): 128x256x8 tiles, 8x16 per thread, both
//                  shared tiles k-major (4-byte copies transpose a K-contiguous operand), so one k
//                  step is 6 LDS.128 for 128 FFMA as in double_buffer, with no register staging;
//                  the copies spread over the slice's k steps, the barrier before the last one.
//   grouped_copies the same ring on cuBLAS's 256x128x8 tile, 16x8 per thread (the config
//                  ring3_256x128x8_w64x64_t16x8_rowfma): copies a few per k step (3; 2 when both
//                  operands are K-contiguous) instead of one, and lean copy state (rows past the
//                  edge read the last row, no per-copy predicate along M or N), which keeps the
//                  8 4-byte copies of A per slice spill-free.
//   stream_k_tail  + the stream-K tail (sgemm/kernel.cuh): the tiles of the full waves as before, the
//                  last, partial wave's K iterations shared evenly by one block per SM, each
//                  tile's parts added up in block order by the block that writes its last part.
//   serpentine_fma + the FFMAs of a k step in serpentine order where that measured faster (the
//                  table config ring3_256x128x8_w64x64_t16x8; TileConfig::SerpentineFma): the same
//                  sums bit for bit, another register assignment. Row-major operands are NN:
//                  there it changes the stream-K kernel only (other layouts also sgemm_kernel).
//   swap_nn        + the NN product C = A B run as C^T = B^T A^T (the table config
//                  ring3_256x128x8_w64x64_t16x8_swapnn): both operands read as column-major, so
//                  only A's 128 rows of the tile are transposed by 4-byte copies, not 256; the
//                  epilogue stores the transposed product, whole output rows of 16 bytes.
//   blocked_sum    + the sums over K in blocks of 1024 (each thread adds its accumulators into a
//                  running total in shared memory every 128 slices): half the rounding error at
//                  K = 4096; what mm runs (where the device has the shared memory).
//   final          the dispatcher mm() uses (config table chosen by shape, split-K, the stream-K
//                  tail where it pays).
//   cfg:<name>[:s<S>|:sk|:sk<S>]  one entry of the config table by name, as mm would run it (the
//                  stream-K tail by its rule), or with split-K factor S (no stream-K tail), or with
//                  the stream-K tail whenever the last wave is partial (:sk; also below one wave),
//                  or (a ring config) split-K by S with the in-kernel fix-up (:sk<S>: every tile
//                  shared by S blocks of the stream-K kernel; no partial tensor, no second kernel).
//
// The tensor-core ladder (bf16, fp16, and float32 as TF32 whatever torch's TF32 switch says),
// any layout, run through tc_gemm_cuda:
//   tc:mma                 mma.sync on shared-memory tiles filled by plain loads (tc/sm80/)
//   tc:ldmatrix_cp_async   + ldmatrix from swizzled shared memory, multistage cp.async pipeline
//   tc:cp_async_cfg:<name> one config of that kernel by name
//   tc:wgmma               Hopper warpgroup MMA from shared memory (tc/sm90/)
//   tc:wgmma_tma           + TMA loads into a multistage ring on mbarriers
//   tc:ws_persistent       + warp specialization, persistent rasterized tiles
//   tc:ws_multicast        + clusters of two CTAs sharing the B tile through TMA multicast
//   tc:ws_pingpong         tc:ws_persistent with a tile per consumer warpgroup, the two taking
//                          turns (one's epilogue under the other's main loop)
//   tc:ws_tf32_rs          float32 only: TF32 with one MN-major operand (self column-major or
//                          mat2 row-major) loaded into wgmma's register operand, not transposed
//   tc:final               the dispatcher's choice (what mm runs for these dtypes)
//
// The few-row ladder (bf16, fp16; at most 16 rows of output, or columns; both operands K-major:
// a decode step's linear), run through tc_gemm_cuda (gemm/gemv/gemv.h has what each step buys):
//   gemv:warp_row, gemv:vec16, gemv:rows_in_flight, gemv:split_k, gemv:mma[:s<splits>][:u<2|4>]
//   gemv:final             the dispatcher's choice (the same as tc:final)
//
// Host code only (no kernels), so a C++ unit, not a CUDA one: the host compiler alone, not nvcc's
// extra passes over ATen's headers. Empty in a build without CUDA.
#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <climits>
#include <string>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gemm/gemm_cuda.h"

namespace cudasteps {
namespace gemm {
namespace {

constexpr const char* kOp = "ladder_mm";

// The cp.async ladder steps that are table configs: the last multistage step (every feature on),
// then the four steps of sgemm/kernel.cuh's k-major ring.
struct StepConfig {
  const char* step;
  const char* config;
};
constexpr StepConfig kTableConfigSteps[] = {
    {"swizzled_raster", "cp3_128x128x16_w64x32_t8x8_fdb_se"},
    {"cp_async_kmajor", "ring3_128x256x8_w64x64_t8x16_rowfma"},
    {"grouped_copies", "ring3_256x128x8_w64x64_t16x8_rowfma"},
    {"stream_k_tail", "ring3_256x128x8_w64x64_t16x8_rowfma"},
    {"serpentine_fma", "ring3_256x128x8_w64x64_t16x8"},
    {"swap_nn", "ring3_256x128x8_w64x64_t16x8_swapnn"},
    {"blocked_sum", "ring3_256x128x8_w64x64_t16x8_swapnn"},
};

const char* kLadderNames =
    "naive, coalesced, smem_tile, blocktile_1d, blocktile_2d, vectorized, warptile, "
    "double_buffer, cp_async_multistage, frag_double_buffer, smem_epilogue, swizzled_raster, "
    "cp_async_kmajor, grouped_copies, stream_k_tail, serpentine_fma, swap_nn, blocked_sum, final, "
    "cfg:<name>[:s<splits>|:sk|:sk<splits>], tc:mma, "
    "tc:ldmatrix_cp_async, tc:cp_async_cfg:<name>, tc:wgmma, tc:wgmma_tma, "
    "tc:ws_persistent[:bn<64|128|256>][:bm<128|192>][:s<splits>][:ts<0|1>], tc:ws_multicast, "
    "tc:ws_pingpong, "
    "tc:ws_tf32_rs, "
    "tc:final, gemv:warp_row, gemv:vec16, gemv:rows_in_flight, gemv:split_k, "
    "gemv:mma[:s<splits>][:u<2|4>], gemv:final";

// The fields of "bn<64|128|256>:bm<128|192>:s<splits>:ts<0|1>" (any may be left out), as in
// tc:ws_persistent:bn128:s4.
// Calls f(field, letters, value) for each ':'-separated field of `fields`; value is the number
// after the field's letters, or -1 when the field is not letters followed by 1-3 digits.
template <typename F>
void for_each_tuning_field(const std::string& fields, F&& f) {
  size_t pos = 0;
  while (pos <= fields.size()) {
    const size_t end = std::min(fields.find(':', pos), fields.size());
    const std::string field = fields.substr(pos, end - pos);
    const size_t digits_at = std::min(field.find_first_of("0123456789"), field.size());
    const std::string digits = field.substr(digits_at);
    const bool number = !digits.empty() && digits.size() <= 3 &&
                        digits.find_first_not_of("0123456789") == std::string::npos;
    f(field, field.substr(0, digits_at), number ? std::stoi(digits) : -1);
    pos = end + 1;
  }
}

TcTuning parse_ws_tuning(const std::string& fields, const std::string& variant) {
  TcTuning t;
  for_each_tuning_field(fields, [&](const std::string& f, const std::string& name, int value) {
    const bool is_bn = name == "bn" && (value == 64 || value == 128 || value == 256);
    const bool is_bm = name == "bm" && (value == 128 || value == 192);
    const bool is_s = name == "s" && value >= 1;
    const bool is_ts = name == "ts" && (value == 0 || value == 1);
    const bool is_bt = name == "bt" && (value == 16 || value == 32 || value == 64);
    const bool is_c = name == "c" && (value == 1 || value == 2);
    const bool is_k = name == "k" && (value == 1 || value == 2);
    const bool is_w = name == "w" && (value == 1 || value == 4);
    const bool is_g = name == "g" && (value == 1 || value == 8);  // the skinny tiles' raster group
    const bool is_h = name == "h" && (value == 0 || value == 1);  // the skinny tiles' L2 hints
    const bool is_pdl = name == "pdl" && (value == 0 || value == 1);
    CUDASTEPS_CHECK(
        is_bn || is_bm || is_s || is_ts || is_bt || is_c || is_k || is_w || is_g || is_h || is_pdl,
        kOp, "tuning fields of '", variant,
        "' must be bn64, bn128 or bn256, bm128 or bm192, s<splits> (splits >= 1), ts0 or ts1, "
        "bt16, bt32 or bt64, c1 or c2, k1 or k2, w1 or w4, g1 or g8, h0 or h1 and pdl0 or pdl1, "
        "got '",
        f, "'");
    if (is_pdl || is_h) {
      (is_pdl ? t.pdl : t.l2_hints) = value == 1;
      return;
    }
    (is_bn   ? t.bn
     : is_bm ? t.bm
     : is_s  ? t.splits
     : is_ts ? t.tail_split
     : is_bt ? t.bt
     : is_k  ? t.k_parts
     : is_w  ? t.weight_ctas
     : is_g  ? t.raster_group
             : t.ctas) = value;
  });
  return t;
}

at::Tensor ladder_tc(const at::Tensor& self, const at::Tensor& mat2, const std::string& variant) {
  const auto dtype = self.scalar_type();
  CUDASTEPS_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16, kOp,
                  "self must be bfloat16, float16 or float32 (as TF32) for variant '", variant,
                  "', got ", dtype);
  const std::string step = variant.substr(3);
  int config = -1;
  TcKernel kernel;
  TcTuning tuning;
  if (step == "mma") {
    kernel = TcKernel::kMma;
  } else if (step == "ldmatrix_cp_async") {
    kernel = TcKernel::kCpAsync;
  } else if (step.rfind("cp_async_cfg:", 0) == 0) {
    kernel = TcKernel::kCpAsync;
    const std::string name = step.substr(13);
    std::string names;
    for (int i = 0; i < tc_cp_async_num_configs(); ++i) {
      if (name == tc_cp_async_config_name(i)) config = i;
      names += (i ? ", " : "") + std::string(tc_cp_async_config_name(i));
    }
    CUDASTEPS_CHECK(config >= 0, kOp, "cp.async config must be one of ", names, ", got '", name,
                    "'");
  } else if (step == "wgmma") {
    kernel = TcKernel::kWgmma;
  } else if (step == "wgmma_tma") {
    kernel = TcKernel::kWgmmaTma;
  } else if (step == "ws_persistent") {
    kernel = TcKernel::kWsPersistent;
  } else if (step.rfind("ws_persistent:", 0) == 0) {
    // Tuning sweeps: ws_persistent[:bn<64|128|256>][:bm<128|192>][:s<splits>][:ts<0|1>] forces
    // the tile width and rows, split-K, the tail split.
    kernel = TcKernel::kWsPersistent;
    tuning = parse_ws_tuning(step.substr(14), variant);
    CUDASTEPS_CHECK((tuning.bn != 64 && tuning.bm != 192) || dtype != at::kFloat, kOp, "'",
                    variant,
                    "': 128 x 64 and 192 x 128 tiles (bn64, bm192) are built for bfloat16 and "
                    "float16 only, got ",
                    dtype);
    CUDASTEPS_CHECK(tuning.bm != 192 || tuning.bn == 0 || tuning.bn == 128, kOp, "'", variant,
                    "': 192-row tiles (bm192) are 128 wide, got bn", tuning.bn);
    CUDASTEPS_CHECK(tuning.bt == 0 || (tuning.bn == 0 && tuning.bm == 0 && tuning.splits == 0 &&
                                       tuning.tail_split < 0),
                    kOp, "'", variant,
                    "': the skinny tiles (bt<16|32|64>) take c1, c2, w1, w4, k1, k2, pdl0 and pdl1 "
                    "only");
    CUDASTEPS_CHECK(tuning.ctas != 2 || tuning.bt != 0, kOp, "'", variant,
                    "': clusters of two CTAs (c2) are built for the skinny tiles (bt<n>) only");
    CUDASTEPS_CHECK(tuning.k_parts != 2 || tuning.bt != 0, kOp, "'", variant,
                    "': the split along K in clusters (k2) is built for the skinny tiles (bt<n>) "
                    "only");
    CUDASTEPS_CHECK(tuning.weight_ctas <= 1 || tuning.bt != 0, kOp, "'", variant,
                    "': clusters sharing the token tile (w4) are built for the skinny tiles "
                    "(bt<n>) only");
    CUDASTEPS_CHECK(tuning.k_parts != 2 || (tuning.ctas != 2 && tuning.weight_ctas <= 1), kOp,
                    "'", variant,
                    "': the skinny tiles split along K (k2) do not also share operand tiles (c2, "
                    "w4)");
    CUDASTEPS_CHECK(tuning.raster_group == 0 || tuning.bt != 0, kOp, "'", variant,
                    "': the raster group (g1, g8) is the skinny tiles' (bt<n>) only");
    CUDASTEPS_CHECK(!tuning.l2_hints || (tuning.bt >= 32 && tuning.ctas != 2 &&
                                         tuning.weight_ctas <= 1 && tuning.k_parts != 2),
                    kOp, "'", variant,
                    "': the skinny tiles' L2 hints (h1) are built for bt32 and bt64 alone only");
    CUDASTEPS_CHECK(tuning.weight_ctas <= 1 || (tuning.bt != 16 && dtype == at::kBFloat16), kOp,
                    "'", variant,
                    "': clusters sharing the token tile (w4) are built for bfloat16 in bt32 and "
                    "bt64 only");
    CUDASTEPS_CHECK(tuning.bt == 0 || dtype != at::kFloat, kOp, "'", variant,
                    "': the skinny tiles (bt<16|32|64>) are built for bfloat16 and float16 only");
  } else if (step == "ws_multicast") {
    kernel = TcKernel::kWsMulticast;
  } else if (step.rfind("ws_multicast:", 0) == 0) {
    // Sweeps of the cluster kernel against tc:ws_persistent at the same tiles and split:
    // ws_multicast[:bn<128|256>][:s<splits>] (no 64-wide or 192-row tiles, no tail split).
    kernel = TcKernel::kWsMulticast;
    tuning = parse_ws_tuning(step.substr(13), variant);
    CUDASTEPS_CHECK(tuning.bn != 64 && tuning.bm == 0 && tuning.tail_split < 0 && tuning.bt == 0 &&
                        tuning.ctas == 0 && tuning.k_parts == 0 && tuning.weight_ctas == 0 &&
                        !tuning.l2_hints && tuning.raster_group == 0,
                    kOp, "'", variant,
                    "': tc:ws_multicast takes bn128, bn256, s<splits> and pdl0 or pdl1 only");
  } else if (step == "ws_pingpong") {
    kernel = TcKernel::kWsPingPong;
  } else if (step == "ws_tf32_rs") {
    CUDASTEPS_CHECK(dtype == at::kFloat, kOp, "self must be float32 (run as TF32) for variant '",
                    variant, "', got ", dtype);
    kernel = TcKernel::kWsTf32Rs;
  } else {
    CUDASTEPS_CHECK(step == "final", kOp, "variant must be one of ", kLadderNames, ", got '",
                    variant, "'");
    kernel = TcKernel::kAuto;
  }
  return tc_gemm_cuda(self, mat2, Addend{}, 1.0, 0.0, tc_type_of(dtype), kernel, config, tuning);
}

// The tuning fields of gemv:mma:<fields>: s<splits> (splits >= 1), u2 or u4 and pdl0 or pdl1
// (pdl0: ordinary launches, to time what the programmatic dependent launch buys), ':'-separated.
TcTuning parse_gemv_tuning(const std::string& fields, const std::string& variant) {
  TcTuning t;
  for_each_tuning_field(fields, [&](const std::string& f, const std::string& name, int value) {
    const bool is_s = name == "s" && value >= 1;
    const bool is_u = name == "u" && (value == 2 || value == 4);
    const bool is_pdl = name == "pdl" && (value == 0 || value == 1);
    CUDASTEPS_CHECK(is_s || is_u || is_pdl, kOp, "tuning fields of '", variant,
                    "' must be s<splits> (splits >= 1), u2 or u4 and pdl0 or pdl1, got '", f, "'");
    if (is_pdl) {
      t.pdl = value == 1;
      return;
    }
    (is_s ? t.splits : t.unroll) = value;
  });
  return t;
}

at::Tensor ladder_gemv(const at::Tensor& self, const at::Tensor& mat2, const std::string& variant) {
  const auto dtype = self.scalar_type();
  CUDASTEPS_CHECK(dtype == at::kHalf || dtype == at::kBFloat16, kOp,
                  "self must be bfloat16 or float16 for variant '", variant, "', got ", dtype);
  const std::string step = variant.substr(5);
  TcKernel kernel;
  TcTuning tuning;
  if (step == "warp_row") {
    kernel = TcKernel::kGemvWarpRow;
  } else if (step == "vec16") {
    kernel = TcKernel::kGemvVec16;
  } else if (step == "rows_in_flight") {
    kernel = TcKernel::kGemvRowsInFlight;
  } else if (step == "split_k") {
    kernel = TcKernel::kGemvSplitK;
  } else if (step == "mma") {
    kernel = TcKernel::kGemvMma;
  } else if (step.rfind("mma:", 0) == 0) {
    // Sweeps: gemv:mma:s<splits> forces the blocks that share K, u<2|4> the chunks each warp
    // keeps in flight.
    kernel = TcKernel::kGemvMma;
    tuning = parse_gemv_tuning(step.substr(4), variant);
  } else {
    CUDASTEPS_CHECK(step == "final", kOp, "variant must be one of ", kLadderNames, ", got '",
                    variant, "'");
    kernel = TcKernel::kAuto;
  }
  return tc_gemm_cuda(self, mat2, Addend{}, 1.0, 0.0, tc_type_of(dtype), kernel, -1, tuning);
}

at::Tensor ladder_mm_cuda(const at::Tensor& self, const at::Tensor& mat2,
                          c10::string_view variant_sv) {
  const std::string variant(variant_sv);
  check_mm_pair(self, mat2, kOp, "self", "mat2");
  check_device_type(self, c10::DeviceType::CUDA, kOp, "self");
  if (variant.rfind("tc:", 0) == 0) return ladder_tc(self, mat2, variant);
  if (variant.rfind("gemv:", 0) == 0) return ladder_gemv(self, mat2, variant);
  CUDASTEPS_CHECK(self.scalar_type() == at::kFloat, kOp, "self must be float32, got ",
                  self.scalar_type());

  // Variants running the production driver accept any layout.
  if (variant == "final") return gemm_cuda(self, mat2, Addend{}, 1.0, 0.0);
  if (variant == "double_buffer") {
    CUDASTEPS_CHECK(self.is_contiguous() && mat2.is_contiguous(), kOp,
                    "self and mat2 must be contiguous for variant '", variant, "', got strides ",
                    self.strides(), " and ", mat2.strides());
    return gemm_cuda(self, mat2, Addend{}, 1.0, 0.0, main_config(), 1, StreamK::kOff);
  }
  {
    // The cp.async steps: row-major operands (unaligned rows take sgemm_kernel, as in mm).
    int step_config = -1;
    for (const StepConfig& s : kTableConfigSteps)
      if (variant == s.step) step_config = find_config(s.config);
    if (step_config < 0) step_config = find_ladder_step_config(variant);
    if (step_config >= 0) {
      CUDASTEPS_CHECK(self.is_contiguous() && mat2.is_contiguous(), kOp,
                      "self and mat2 must be contiguous for variant '", variant, "', got strides ",
                      self.strides(), " and ", mat2.strides());
      // The stream-K tail from stream_k_tail on, the blocked sums from blocked_sum on; the steps
      // before them run without.
      const bool blocked = variant == "blocked_sum";
      const bool tail = blocked || variant == "stream_k_tail" || variant == "serpentine_fma" ||
                        variant == "swap_nn";
      const StreamK streamk = tail ? StreamK::kOn : StreamK::kOff;
      return gemm_cuda(self, mat2, Addend{}, 1.0, 0.0, step_config, 1, streamk, blocked);
    }
  }
  if (variant.rfind("cfg:", 0) == 0) {
    std::string name = variant.substr(4);
    int splits = 1;
    StreamK streamk = StreamK::kAuto;  // as mm would run the config
    const auto colon = name.find(':');
    if (colon != std::string::npos) {
      const std::string suffix = name.substr(colon + 1);
      name = name.substr(0, colon);
      // s<S>: split-K; sk: the stream-K tail; sk<S>: split-K with the in-kernel fix-up.
      const bool sk = suffix.rfind("sk", 0) == 0;
      const size_t digits = sk ? 2 : 1;
      CUDASTEPS_CHECK(suffix.size() >= digits && suffix.size() <= digits + 2 && suffix[0] == 's' &&
                          (suffix.size() > digits || sk) &&
                          suffix.find_first_not_of("0123456789", digits) == std::string::npos,
                      kOp, "variant suffix must be :s<splits> (e.g. :s4), :sk or :sk<splits>, got '",
                      suffix, "'");
      if (suffix.size() > digits) {
        splits = std::stoi(suffix.substr(digits));
        CUDASTEPS_CHECK(splits >= 1 && splits <= 64, kOp, "splits must be in [1, 64], got ",
                        splits);
      }
      streamk = sk ? StreamK::kOn : StreamK::kOff;
    }
    const int config = find_config(name);
    CUDASTEPS_CHECK(config >= 0, kOp, "config must be one of ", config_names(), ", got '", name,
                    "'");
    return gemm_cuda(self, mat2, Addend{}, 1.0, 0.0, config, splits, streamk);
  }

  CUDASTEPS_CHECK(self.is_contiguous() && mat2.is_contiguous(), kOp,
                  "self and mat2 must be contiguous for variant '", variant, "', got strides ",
                  self.strides(), " and ", mat2.strides());
  const bool known = variant == "naive" || variant == "coalesced" || variant == "smem_tile" ||
                     variant == "blocktile_1d" || variant == "blocktile_2d" ||
                     variant == "vectorized" || variant == "warptile";
  CUDASTEPS_CHECK(known, kOp, "variant must be one of ", kLadderNames, ", got '", variant, "'");
  return sgemm_ladder_step_cuda(self, mat2, variant);
}

}  // namespace
}  // namespace gemm

TORCH_LIBRARY_IMPL(cudasteps, CUDA, m) { m.impl("ladder_mm", &gemm::ladder_mm_cuda); }

}  // namespace cudasteps

#endif  // CUDASTEPS_WITH_CUDA
