// The tc:ldmatrix_cp_async step's entry points (tc_gemm.h): which operands it reads, the choice
// of a config by the output's size, and the dispatch to the config's instantiation (cp_async.cuh,
// inst_cp_async_*.cu). No ATen header here (a kernel unit would pay about 20 s of compile time
// for it): the shared-memory limit comes from common/launch.cuh, the device check from
// tc/dispatch.cpp.
#include "common/launch.cuh"
#include "gemm/tc/sm80/cp_async.cuh"

namespace cudasteps {
namespace gemm {
namespace sm80 {
namespace cp_async_step {
namespace {

int64_t tiles_of(const TcProblem& p, int config) {
  return ceil_div<int64_t>(p.M, kConfigBM[config]) * ceil_div<int64_t>(p.N, kConfigBN[config]);
}

// The largest tile that still gives every SM work: 128x256 when it fills two waves (fewer
// blocks, each reading 3/4 of the bytes per MMA of 128x128), 128x128 when it fills one, then
// 64x128 and 64x64 for outputs that would leave SMs idle. A config whose shared memory exceeds
// the device's per-block limit is skipped (today all of them fit the 99 KiB per block of the
// smallest sm_80+ parts; the check keeps larger future entries safe).
int choose_config(const TcProblem& p) {
  const int sms = sm_count();
  const size_t smem_limit = smem_per_block_optin();
  auto fits = [&](int c) { return kConfigSmem[c] <= smem_limit; };
  if (fits(kCfg128x256) && tiles_of(p, kCfg128x256) >= 2 * int64_t(sms)) return kCfg128x256;
  if (fits(kCfg128x128) && tiles_of(p, kCfg128x128) >= sms) return kCfg128x128;
  if (fits(kCfg64x128) && tiles_of(p, kCfg64x128) >= sms) return kCfg64x128;
  return kCfg64x64;
}

}  // namespace
}  // namespace cp_async_step
}  // namespace sm80

bool tc_cp_async_supports(const TcProblem& p) {
  // TF32 fragments need the non-transposing ldmatrix: K-major operands only.
  return tc_operands_16b_aligned(p) && (p.type != TcType::kTF32 || (p.a_kmajor && p.b_kmajor));
}

int tc_cp_async_num_configs() { return sm80::cp_async_step::kNumConfigs; }

const char* tc_cp_async_config_name(int config) {
  CUDASTEPS_CHECK(config >= 0 && config < sm80::cp_async_step::kNumConfigs, sm80::kOp,
                  "tc:ldmatrix_cp_async config index must be in [0, ", sm80::cp_async_step::kNumConfigs,
                  "), got ", config);
  return sm80::cp_async_step::kConfigNames[config];
}

void tc_cp_async_launch(const TcProblem& p, int config, cudaStream_t stream) {
  using namespace sm80;
  using namespace sm80::cp_async_step;
  check_problem(p, "tc:ldmatrix_cp_async");
  check_device("tc:ldmatrix_cp_async");
  CUDASTEPS_CHECK(tc_cp_async_supports(p), sm80::kOp,
                  "tc:ldmatrix_cp_async needs 16-byte aligned operands with leading dimensions "
                  "of a multiple of 16 bytes (and K-major operands for TF32), got a_kmajor=",
                  p.a_kmajor, ", lda=", p.lda, ", b_kmajor=", p.b_kmajor, ", ldb=", p.ldb);
  CUDASTEPS_CHECK(config >= -1 && config < kNumConfigs, sm80::kOp,
                  "tc:ldmatrix_cp_async config index must be -1 (by shape) or in [0, ",
                  kNumConfigs, "), got ", config);
  if (config < 0) config = choose_config(p);
  const size_t smem_limit = smem_per_block_optin();
  CUDASTEPS_CHECK(kConfigSmem[config] <= smem_limit, sm80::kOp, "tc:ldmatrix_cp_async config ",
                  kConfigNames[config], " needs ", kConfigSmem[config],
                  " bytes of shared memory per block, this GPU allows ", smem_limit);
  switch (config) {
    case 0: launch_config<Cfg128x128>(p, config, stream); break;
    case 1: launch_config<Cfg128x256>(p, config, stream); break;
    case 2: launch_config<Cfg128x128W8>(p, config, stream); break;
    case 3: launch_config<Cfg64x128>(p, config, stream); break;
    default: launch_config<Cfg64x64>(p, config, stream); break;
  }
}

}  // namespace gemm
}  // namespace cudasteps
