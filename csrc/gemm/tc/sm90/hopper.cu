// Hopper tensor-core GEMM (sm_90a): warpgroup MMA (wgmma) on 128-byte-swizzled shared-memory tiles,
// the three Hopper steps of the tensor-core ladder:
//
//   tc:wgmma          2 consumer warpgroups (256 threads), operands brought by every thread with
//                     cp.async into a multistage ring written in the TMA's 128-byte swizzle, then
//                     wgmma from shared memory. What changes from mma.sync: one instruction per
//                     warpgroup computes a 64 x N x 16 product, operands never pass through
//                     registers, and the issue slots the ldmatrix/mma stream took are free.
//   tc:wgmma_tma      + the tensor memory accelerator: one thread issues cp.async.bulk.tensor per
//                     operand tile, completion counted in bytes on an mbarrier per stage; no
//                     address arithmetic or predication in the main loop, edges zero-filled by TMA.
//   tc:ws_persistent  + warp specialization: a producer warpgroup (registers given back with
//                     setmaxnreg) keeps the ring full while two consumer warpgroups (setmaxnreg up)
//                     run wgmma; full/empty mbarriers instead of block-wide barriers, one k-tile
//                     of wgmmas kept in flight while the previous stage is released; one block
//                     per SM walking the output tiles in a grouped (L2-friendly) order, so the
//                     loads of one tile overlap the epilogue of the last; the epilogue stages the
//                     output through swizzled shared memory (stmatrix; per-element checks only
//                     in tiles across the matrix edge) and writes it with TMA stores.
//                     Outputs too small to fill the SMs are split along K (fp32 partials, added
//                     in a fixed order).
//   tc:ws_multicast   + clusters of two CTAs on vertically adjacent tiles: each loads its own A
//                     and half of the shared B tile, multicast by TMA into both rings, so each
//                     CTA pulls 2/3 of the bytes out of L2. Measured no faster than
//                     tc:ws_persistent on an H100, so mm keeps the latter (see
//                     tc_hopper_final_launch).
//   tc:ws_pingpong    tc:ws_persistent with a 128 x 128 tile per consumer warpgroup: the two
//                     take turns at the main loop, so one's epilogue runs under the other's.
//   tc:fp8_ws         FP8 operands (scaled_mm): tc:ws_persistent with 128 x 128 tiles and k32
//                     wgmmas, each k-tile's sums added into fp32 registers (two-level
//                     accumulation), the per-tensor scales read on the device by the epilogue.
//                     (Ladder only: tc:fp8_multicast, the same in tc:ws_multicast's clusters, and
//                     tc:fp8_ws256, 256 x 128 tiles; both slower: launch_fp8.)
//   tc:ws_tf32_rs     TF32 only, one operand MN-major (mm's row-major B): tc:ws_persistent's
//                     producer and ring, but each consumer thread loads that operand's fragment
//                     from shared memory into registers, wgmma's other operand form, instead of
//                     having the operand transposed first (TF32 wgmma reads shared memory
//                     K-major only). tc:final runs it for such operands but where few tiles
//                     favour transposing and splitting K (tc_hopper_tf32_rs_wanted).
//
// Tiles: BM = 128 (one 64-row wgmma per consumer warpgroup), BN = 256 or 128, BK = one 128-byte
// swizzle row of K (64 bf16/fp16 or 32 tf32). tc:ws_persistent with 16-bit operands also runs
// 128 x 64 tiles and 192 x 128 ones (three consumer warpgroups) where they fill the SMs better
// (persistent_bn, persistent_bm: scheduler.cuh). bf16/fp16 operands are read in place in either
// layout (the wgmma transpose bits; MN-major tiles are 128-byte blocks of k-rows), TF32 ones
// K-major only (A row-major, B column-major, as linear's x and weight are; the dispatcher
// transposes others) except through tc:ws_tf32_rs. Operands must be TMA-describable (16-byte
// aligned base and leading dimension): tc_hopper_supports() says so, and the dispatcher transposes
// or repacks the rest.
//
// Build: the units of this room are compiled for sm_90a only (setup.py gives them
// -gencode=arch=compute_90a,code=sm_90a when the arch list has 9.0, and defines
// CUDASTEPS_HOPPER_KERNELS); in a build without 9.0 they compile to stubs and
// tc_hopper_available() is false.
//
// This file: the entry points of tc_gemm.h (tc_hopper_*, tc_ws_*_launch) and the dispatch from a
// TcProblem's type and layout to the instantiations of instances.h. The parts: config.cuh,
// ptx.cuh, mainloop.cuh, scheduler.cuh, epilogue.cuh, kernels.cuh, rs_kernel.cuh, launch.cuh.
// No ATen header here (about 20 s of compile time for a kernel unit): tc_hopper_available(),
// which reads the device's compute capability, is tc/dispatch.cpp's, from tc_hopper_built().
#include <c10/util/Exception.h>

#include <climits>

#include "common/launch.cuh"
#include "gemm/tc/sm90/instances.h"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace {

using sm90::choose_tail_split;
using sm90::decode_skinny_tiles;
using sm90::few_rows_split_k;
using sm90::HopperKernel;
using sm90::kSplitMax;
using sm90::launch_layout;
using sm90::launch_rs_typed;
using sm90::persistent_bn;
using sm90::skinny_tiles;

void launch_rs(const TcProblem& p, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_rs_supports(p), "cudasteps.mm: tc:ws_tf32_rs cannot take this problem");
  const bool swap = p.a_kmajor;  // A K-major, B MN-major: B is the register operand
  // 128-row tiles along R, BN along S: 256 wide where those tiles still give every SM one (the
  // kernel never splits K, so persistent_bn's estimate, which counts on the tail split, is not
  // its).
  const int64_t rows = swap ? p.N : p.M, cols = swap ? p.M : p.N;
  const bool wide = ceil_div<int64_t>(rows, 128) * ceil_div<int64_t>(cols, 256) >= sm_count();
  const int bn = p.tuning.bn != 0 ? p.tuning.bn : wide ? 256 : 128;
  if (swap) {
    bn == 256 ? launch_rs_typed<256, true>(p, stream) : launch_rs_typed<128, true>(p, stream);
  } else {
    bn == 256 ? launch_rs_typed<256, false>(p, stream) : launch_rs_typed<128, false>(p, stream);
  }
}

// mm.dtype's float32 output of 16-bit operands: tc:ws_persistent's kernel (as tc:final runs it),
// every layout read in place.
template <TcType T>
void launch_f32_out(const TcProblem& p, cudaStream_t stream) {
  using sm90::launch_layout_f32_out;
  if (p.a_kmajor) {
    p.b_kmajor ? launch_layout_f32_out<T, true, true>(p, stream)
               : launch_layout_f32_out<T, true, false>(p, stream);
  } else {
    p.b_kmajor ? launch_layout_f32_out<T, false, true>(p, stream)
               : launch_layout_f32_out<T, false, false>(p, stream);
  }
}

template <TcType T>
void launch_type(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  if constexpr (T == TcType::kTF32) {
    launch_layout<T, true, true>(p, which, stream);  // tc_hopper_supports: K-major only
  } else if (p.a_kmajor) {
    if (p.b_kmajor) {
      launch_layout<T, true, true>(p, which, stream);
    } else {
      launch_layout<T, true, false>(p, which, stream);
    }
  } else if (p.b_kmajor) {
    launch_layout<T, false, true>(p, which, stream);
  } else {
    launch_layout<T, false, false>(p, which, stream);
  }
}

void launch(const TcProblem& p, HopperKernel which, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_supports(p), "cudasteps.mm: the Hopper kernels cannot take this problem");
  TORCH_CHECK(!tc_is_fp8(p.type), "cudasteps.mm: FP8 operands run tc:fp8_ws (tc_fp8_launch)");
  // An MN-major TF32 operand goes to launch_rs (the ladder's tc:ws_tf32_rs) or is transposed by
  // the dispatcher.
  TORCH_CHECK(p.type != TcType::kTF32 || (p.a_kmajor && p.b_kmajor),
              "cudasteps.mm: the shared-memory TF32 kernels read K-major operands only");
  if (p.out_fp32) {
    TORCH_CHECK((p.type == TcType::kBF16 || p.type == TcType::kFP16) &&
                    which == HopperKernel::kWarpSpecialized,
                "cudasteps.mm: a float32 output is built for bfloat16 or float16 operands in "
                "tc:ws_persistent's kernel only");
    return p.type == TcType::kBF16 ? launch_f32_out<TcType::kBF16>(p, stream)
                                   : launch_f32_out<TcType::kFP16>(p, stream);
  }
  switch (p.type) {
    case TcType::kBF16: return launch_type<TcType::kBF16>(p, which, stream);
    case TcType::kFP16: return launch_type<TcType::kFP16>(p, which, stream);
    default: return launch_type<TcType::kTF32>(p, which, stream);
  }
}

// tc:ws_persistent's tiles for an M x N output (k_tiles of K) as tc:final runs it for TF32 or
// linear_act's fused stage (launch_layout's tile width without the 128 x 64 tiles, which neither
// takes), or -1 past what problem_params accepts.
int64_t final_tiles(int64_t M, int64_t N, int64_t K, int64_t k_tiles) {
  if (k_tiles >= INT_MAX) return -1;
  const int64_t tiles = ceil_div<int64_t>(M, 128) *
                        ceil_div<int64_t>(N, persistent_bn(M, N, K, int(k_tiles), 0, false));
  return tiles > INT_MAX / kSplitMax ? -1 : tiles;
}

}  // namespace

bool tc_hopper_built() {
#ifdef CUDASTEPS_HOPPER_KERNELS
  return true;
#else
  return false;
#endif
}

bool tc_hopper_supports(const TcProblem& p) {
  // TMA coordinates are 32-bit. TF32 wgmma reads shared-memory operands K-major only: one
  // MN-major operand is read through registers (tc:ws_tf32_rs), two are not read.
  const bool layouts_ok = p.type != TcType::kTF32 || p.a_kmajor || p.b_kmajor;
  return tc_hopper_available() && tc_operands_16b_aligned(p) && layouts_ok && p.M < INT_MAX &&
         p.N < INT_MAX && p.K < INT_MAX;
}

bool tc_hopper_rs_supports(const TcProblem& p) {
  return tc_hopper_supports(p) && p.type == TcType::kTF32 && p.a_kmajor != p.b_kmajor;
}

// TF32 with an MN-major operand: transposing it reads and writes each of its elements once, while
// the product's flops per element grow with the other operand's extent E (M where B is MN-major,
// N where A is): the transpose's share is about 4 x 360 TFLOP/s / (3 TB/s x E) = 480 / E of the
// product's time on an H100, a tenth at E = 4096, half at E = 1024. tc:ws_tf32_rs reads the
// operand in place, through registers, and ran slower than tc:ws_persistent until its epilogue
// was mended (the H200 figures below; starting the two warpgroups a k-tile or two apart gained
// nothing). Both measured on an H100 (2026-11-27,
// fresh inputs per call, interleaved with torch.mm; ratio torch / ours, the transpose and
// tc:ws_persistent against tc:ws_tf32_rs):
//   B row-major (E = M):  512 x 4096 x 4096 0.80x / 1.30x, 768 x 0.69x / 0.79x, 1024 x 0.75x /
//     0.87x, 1536 x 0.86x / 0.79x, 2048 x 0.80x / 0.78x, 3072 x 1.04x / 0.99x, 4096^3 0.99x /
//     0.85x; 1024 x 8192 x 8192 0.66x / 0.89x, 2048 x 0.81x / 0.89x, 4096 x 0.92x / 0.91x, 8192^3
//     1.01x / 0.89x; 8192 x 8192 x 2048 1.18x / 0.80x; 4096 x 1024 x 4096 1.05x / 0.92x.
//   A column-major (E = N):  4096 x 1024 x 4096 0.67x / 0.76x, 1024 x 4096 x 4096 0.89x / 0.78x.
//   Both MN-major (tc:ws_tf32_rs transposes B):  1024 x 1024 x 8192 0.83x / 0.74x, 2048 x 2048 x
//     8192 1.05x / 1.05x, 4096^3 1.31x / 1.18x.
// (Before the TMA rounded TF32 operands, tensor_map.cu, tc:ws_tf32_rs measured ahead at 4096^3
// too, 0.424-0.443 ms against 0.460-0.466, and ran every such product that needed no split-K.)
//   Few rows against a row-major B (E = M, 32-64 tiles; the transpose's product split along K):
//     32 x 4096 x 4096 0.56x / 0.90x, 64 x 0.46x / 0.72x, 128 x 0.57x / 0.86x, 256 x 0.51x /
//     0.81x, 64 x 8192 x 8192 0.37x / 0.90x (2026-11-27, the same way). The rule's other side,
//     few columns against a column-major A (E = N): tc:final (now tc:ws_tf32_rs) 4096 x 32 / 64 /
//     128 / 256 x 4096 0.91x / 0.70x / 0.93x / 0.73x, 8192 x 64 x 8192 0.87x; A made row-major
//     by torch's copy, then tc:final, 0.16-0.30x. (scripts/tile_sweep.py --dtype tf32 times
//     these: --shapes 64x4096x4096:NN,4096x64x4096:TT --variants tc:ws_tf32_rs.)
// So (and until that mend, E at most 1024): exactly one MN-major operand, with at least half the
// SMs' worth of 128 x 128 tiles, or fewer tiles but a transposed operand wide enough (T columns: N
// for a row-major B, M for a column-major A) that its transpose, 8 K T bytes at the HBM's rate,
// outlasts what the register kernel's idle SMs lose (one wave of tiles each through all of K:
// (sms - tiles) tiles' 2 x 128^2 K flops at the tensor cores' TF32 rate). That rate over the HBM's
// is about 120 flop/byte on an H100 (360 TFLOP/s measured, 3 TB/s): T >= 34 (sms - tiles). So
// 32-256 rows x 4096 columns (32 tiles, T >= 3400) read B through registers, and 512 x 512 x 8192
// (16 tiles, T = 512) transposes and splits K. (After the mend, H200: 1000^3, 64 tiles, ran 34.4
// us through registers against 43.1 transposed, where the rule transposes; 1024^2 x 8192 87.5
// against 84.9 and 512^2 x 8192 86.8 against 57.9, where it rightly does. The fixed costs of the
// transpose and the split, not in the estimate, decide short products: a sweep to come.)
// The report's TF32 squares on the H200 (2026-11-28, tile_sweep.py --dtype tf32, us, torch.mm in
// brackets): 4096^3 with B row-major (transposed, then tc:ws_persistent) 426.4 [400.7], 0.94x, and
// with B column-major (both K-major, no transpose) 425.1 [416.7], 0.98x; tc:ws_tf32_rs 496.6.
// Under ncu (4096^3) cuBLAS's nn kernel (sm90_xmma_gemm_..._tf32f32_f32_nn_n_tilesize128x256x32)
// ran 346.0 us with no transpose before it; ours transposed B (36.1 us), then 339.9. ncu's source
// counters of that nn kernel show it reads the MN-major operand through registers too (scalar LDS,
// HGMMA 64x256x8 with a register A, one commit group per k8 step, up to three in flight), so
// tc:ws_tf32_rs could match it: its consumers then stalled mostly on the tensor pipe, and a
// quarter of the warps' samples fell in the epilogue, whose checked pair stores (store_pair)
// unroll to about 17k instructions. Unchecked float2 stores for tiles wholly inside the output
// (rs_kernel.cuh) took it from 419 to 338 us under ncu (tc:ws_persistent 332 on K-major operands;
// the commit group per k8 step alone: 419 either way). tile_sweep.py, the same day, us [torch]:
// 4096^3 B row-major 372.3 [386.2] against the transpose's 408.4, A column-major 375.6 [380.4]
// against 417.7, 8192^3 3057.6 [3057.4] against 3197.0, 2048 x 8192 x 8192 755.7 [771.1]
// against 915.1, 2048^3 54.9 [53.3] against 61.9, 4096 x 1024 x 4096 111.3 [119.4] against
// 114.7. So every product with one MN-major operand reads it through registers, but those with
// too few tiles to fill the SMs and an operand narrow enough to transpose cheaply (which then split
// K: tc:ws_tf32_rs never does).
bool tc_hopper_tf32_rs_wanted(int64_t M, int64_t N, bool a_kmajor, bool b_kmajor) {
  if (a_kmajor == b_kmajor) return false;
  const int64_t transposed_extent = b_kmajor ? M : N;
  const int64_t tiles = ceil_div<int64_t>(M, 128) * ceil_div<int64_t>(N, 128);
  const int64_t sms = sm_count();
  return 2 * tiles >= sms || 34 * (sms - tiles) <= transposed_extent;
}

bool tc_hopper_decode_skinny_wanted(const TcProblem& p) {
  const bool half = p.type == TcType::kBF16 || p.type == TcType::kFP16;
  // decode_skinny_tiles takes 2-16 tokens (rows) alone.
  return half && !p.out_fp32 && p.a_kmajor && p.b_kmajor && tc_hopper_supports(p) &&
         decode_skinny_tiles(p.M, p.N, p.K, sm_count(), dram_bytes_per_s_per_sm()).bt != 0;
}

bool tc_hopper_tail_split_wanted(int64_t M, int64_t N, int64_t K, TcType type) {
  // tc:ws_persistent's tail-split choice (tail_split_scratch) for this size; none for the 16-bit
  // few-row outputs that launch_layout runs in skinny tiles (skinny_tiles) or splits along K
  // (few_rows_split_k).
  if (type != TcType::kTF32 &&
      (skinny_tiles(M, N, K, sm_count(), dram_bytes_per_s_per_sm()).bt != 0 ||
       few_rows_split_k(M, N, sm_count()))) {
    return false;
  }
  const int64_t k_tiles = ceil_div<int64_t>(K, 128 / tc_elem_bytes(type));
  const int64_t tiles = final_tiles(M, N, K, k_tiles);
  return tiles >= 0 &&
         choose_tail_split(int(tiles), int(k_tiles), sm_count(), -1).first > 0;
}

void tc_wgmma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kCpAsync, stream);
}

void tc_wgmma_tma_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kTma, stream);
}

void tc_ws_persistent_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kWarpSpecialized, stream);
}

void tc_ws_multicast_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kMulticast, stream);
}

void tc_ws_pingpong_launch(const TcProblem& p, cudaStream_t stream) {
  launch(p, HopperKernel::kPingPong, stream);
}

void tc_ws_tf32_rs_launch(const TcProblem& p, cudaStream_t stream) { launch_rs(p, stream); }

// The final kernel is ws_persistent. Measured on an H100:
//   - ws_multicast ran within +-3% of it (bf16, 4096^3, 8192^3 and the FFN shapes in all three
//     layouts; scripts/tc_sweep.py), the run-to-run noise, with no shape consistently faster: the
//     L2 traffic that multicast halves is not what limits these tiles.
//   - ws_pingpong, timed against it on the same buffers call after call (8 interleaved rounds),
//     ran 1.5-6% ahead where K <= 2048 (8192 x 8192 x 2048 NT and NN, 8192 x 8192 x 1024,
//     4096 x 4096 x 2048) and within +-1.5% at K = 4096-8192 (20-25% behind on 4097 x 4095 x
//     4099, where 128 x 128 tiles double the edge waste). But in the benchmark's regime, a new
//     input set per call (operands not in L2), tc:final running ping-pong for K <= 2048 measured
//     the FFN's grad_y @ W2 (8192 x 8192 x 2048, NN) at 0.513-0.517 ms in two full runs, against
//     0.467 ms for ws_persistent, and x @ W1^T no faster (0.431 ms against 0.427 ms). So neither
//     is chosen.
//   - Two changes to tc:ws_persistent's epilogue, tried on the 16-bit products as launch_fp8's
//     notes record them for FP8 (H100, 2026-11-27, fresh inputs per call, interleaved with
//     torch.mm; bf16 4096^3 and 8192^3 NN, the FFN step's six products, three of them with a
//     float32 output): direct stores from the accumulators instead of the staged TMA stores ran
//     8-31% slower on every shape (FFN fwd linear1 1.00x -> 0.77x torch, grad_W1 float32 out
//     1.04x -> 0.73x); consumer warpgroup 1 started 1-3 k-tiles behind warpgroup 0 (so that one
//     warpgroup's wgmmas could run under the other's epilogue) measured mixed: in a first run
//     8192^3 1.03x -> 1.04-1.05x and FFN fwd linear1 1.00x -> 1.04-1.05x but grad_x 1.00x ->
//     0.96x; in the next two 4096^3 1.02x -> 0.94-0.95x and 0.97x -> 0.97x, 8192^3 1.02x ->
//     1.00x and 1.09x -> 1.06x, FFN fwd linear1 1.00-1.01x -> 0.99-1.01x. Not kept.
//   - What the epilogue costs (2026-11-27, run-time switches in one build, bf16 NT, 128 x 256
//     tiles, scripts/tile_sweep.py; ratio to torch for 8192 x 8192 x 1024 / 8192 x 8192 x 2048):
//     as kept 0.97-1.00 / 0.97-0.99; no epilogue at all 1.16-1.21 / 1.06-1.10; neither staging nor
//     TMA stores (barriers, fence, wait) 1.08-1.09 / 1.04-1.05; the call with nothing in it
//     1.11-1.12 / 1.06 (at K = 4096-8192 and 4096^3: 0.96-0.99 -> 0.98-1.04 without it). The
//     short-K products lose their tiles' epilogues, as the FP8 kernel does (launch_fp8).
//
// TF32 with one MN-major operand runs tc:ws_tf32_rs where tc_hopper_tf32_rs_wanted says so (the
// dispatcher transposes the operand otherwise).
void tc_hopper_final_launch(const TcProblem& p, cudaStream_t stream) {
  if (p.type == TcType::kTF32 && p.a_kmajor != p.b_kmajor) {
    launch_rs(p, stream);
  } else {
    launch(p, HopperKernel::kWarpSpecialized, stream);
  }
}

bool tc_hopper_fp8_supports(const TcProblem& p) {
  return tc_hopper_supports(p) && tc_is_fp8(p.type) && p.b_type == TcType::kE4M3 && p.a_kmajor &&
         p.b_kmajor && (p.out_type == TcType::kBF16 || p.out_type == TcType::kTF32) &&
         p.act == elementwise::Act::kNone && p.aux == nullptr && !p.addend_fp32;
}

// tc:fp8_ws, the only FP8 kernel: FP8 wgmmas take K-major operands only (the dispatcher
// transposes others), and the products of both FP8 pairs it builds (A e4m3 or e5m2, B e4m3: the
// forward's and the backward's of linear_fp8) run at the same rate.
void tc_fp8_launch(const TcProblem& p, cudaStream_t stream) {
  TORCH_CHECK(tc_hopper_fp8_supports(p), "cudasteps.scaled_mm: tc:fp8_ws cannot take this problem");
  const bool e5m2 = p.type == TcType::kE5M2, fp32_out = p.out_type == TcType::kTF32;
  if (e5m2) {
    fp32_out ? sm90::launch_fp8<TcType::kE5M2, TcType::kTF32>(p, stream)
             : sm90::launch_fp8<TcType::kE5M2, TcType::kBF16>(p, stream);
  } else {
    fp32_out ? sm90::launch_fp8<TcType::kE4M3, TcType::kTF32>(p, stream)
             : sm90::launch_fp8<TcType::kE4M3, TcType::kBF16>(p, stream);
  }
}

}  // namespace gemm
}  // namespace cudasteps
