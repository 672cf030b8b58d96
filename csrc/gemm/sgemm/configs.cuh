// The SGEMM's config table, as types: every TileConfig the table names (Cfg*), with the launch
// templates that pick a kernel instantiation for an operand layout and alignment (launch_cfg,
// launch_streamk) and the table entry that points to them (ConfigEntry, entry<>). The templates
// are instantiated in the inst_*.cu units, a few configs each, so that a parallel build compiles
// them side by side; the extern declarations at the end keep every other unit from instantiating
// them again. ConfigEntry and smem_fits are in launch.h, which the host code reads too; the table
// itself is dispatch_kernels.cu's, the measured dispatch table and the choice among them
// dispatch.cpp's. No ATen header here: it would cost every instantiation unit about 20 s of
// compile time.
#pragma once

#include <c10/cuda/CUDAException.h>

#include <type_traits>

#include "common/launch.cuh"
#include "gemm/sgemm/kernel.cuh"
#include "gemm/sgemm/launch.h"
#include "gemm/tc/common.cuh"

namespace cudasteps {
namespace gemm {

//                        BM   BN  BK  WM  WN TM TN St Warp  MinBlk KUnroll
using CfgMain = TileConfig<128, 128, 8, 64, 32, 8, 8, 2, true, 2, 1>;
using CfgBK16 = TileConfig<128, 128, 16, 64, 32, 8, 8, 2, true, 2, 1>;
using CfgW32x64 = TileConfig<128, 128, 8, 32, 64, 8, 8, 2, true, 2, 1>;
using CfgOcc1 = TileConfig<128, 128, 16, 64, 32, 8, 8, 2, true, 1, 16>;
using CfgMid = TileConfig<128, 64, 16, 64, 32, 8, 8, 2, true, 3, 1>;
using CfgSmall = TileConfig<64, 64, 16, 32, 32, 8, 4, 2, true, 4, 16>;
// Larger thread tiles (8x16 / 16x8: 128 accumulators, 6 LDS.128 per 128 FFMA instead of 4 per
// 64), not chosen by shape yet: runnable by name for measurement.
using CfgWide = TileConfig<128, 256, 8, 64, 64, 8, 16, 2, true, 1, 8>;
using CfgTall = TileConfig<256, 128, 8, 64, 64, 16, 8, 2, true, 1, 8>;
using CfgW64x64 = TileConfig<128, 128, 16, 64, 64, 8, 16, 2, true, 2, 1>;
// The cp.async ring (Stages >= 3, sm_80+): the k loop is always fully unrolled there.
// CopyGroup: copies issued per k step (aligned; both operands K-contiguous; unaligned).
// Each ring config comes in two FFMA orders (TileConfig::SerpentineFma): the table's, serpentine
// wherever that measured faster (H100, 4096^3, against row order), and a `_rowfma` twin in row
// order everywhere, which the ladder steps before serpentine_fma run.
//   128x256 (8x16 per thread): serpentine everywhere (NN +2.4%, NT +1.8%, TN +4.6%, TT +8.7%).
//   256x128 (16x8 per thread): serpentine except sgemm_kernel NN (0.8% slower there); sgemm_kernel
//   TN +3%, NT +2%, TT +1.4%; the stream-K kernel's gain shows in NN with the tail on: 0.996x ->
//   1.005-1.011x of cuBLAS.
constexpr unsigned kAllSerpentine = 0xffu;
constexpr unsigned kRingTallSerpentine = kAllSerpentine & ~fma_order_bit(true, false, false);
using CfgRingWide = TileConfig<128, 256, 8, 64, 64, 8, 16, 3, true, 1, 8, 4, 3, 1, kAllSerpentine>;
using CfgRingWideRowFma = TileConfig<128, 256, 8, 64, 64, 8, 16, 3, true, 1, 8, 4, 3, 1>;
using CfgRingTall =
    TileConfig<256, 128, 8, 64, 64, 16, 8, 3, true, 1, 8, 3, 2, 1, kRingTallSerpentine>;
using CfgRingTallRowFma = TileConfig<256, 128, 8, 64, 64, 16, 8, 3, true, 1, 8, 3, 2, 1>;

// A launch's dynamic shared memory (with the blocked sums' totals when they are on), after
// configuring the kernel once per device: the dynamic shared memory above 48 KiB (for the ring,
// room for the totals where the device has it) and, for the ring, the whole carveout as shared
// memory.
template <class Cfg, class Kernel>
size_t kernel_smem(Kernel kernel, const SgemmParams& p) {
  constexpr size_t kWithSums = Cfg::kSmemBytes + Cfg::kSumBytes;
  if constexpr (Cfg::Stages >= 3) {
    tc::configure_smem_once(kernel, smem_fits(kWithSums) ? kWithSums : Cfg::kSmemBytes);
    return p.sum_block_slices > 0 ? kWithSums : Cfg::kSmemBytes;
  } else {
    if constexpr (Cfg::kSmemBytes > 48 * 1024) tc::configure_smem_once(kernel, Cfg::kSmemBytes);
    return Cfg::kSmemBytes;
  }
}

template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
void launch_one(const SgemmParams& p, int splits, cudaStream_t stream) {
  auto kernel = sgemm_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
  const size_t smem = kernel_smem<Cfg>(kernel, p);
  const dim3 grid(unsigned(p.tiles_m) * unsigned(p.tiles_n), 1, unsigned(splits));
  kernel<<<grid, Cfg::kThreads, smem, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The stream-K tail (StreamKParams in scheduler.cuh): sgemm_kernel on the full waves' tiles
// [0, dp_tiles), then sgemm_streamk_kernel on the tail.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
void launch_streamk_one(const SgemmParams& p, const StreamKParams& sk, cudaStream_t stream) {
  if (sk.dp_tiles > 0) {
    auto kernel = sgemm_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
    const size_t smem = kernel_smem<Cfg>(kernel, p);
    kernel<<<unsigned(sk.dp_tiles), Cfg::kThreads, smem, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  auto kernel = sgemm_streamk_kernel<Cfg, ALayoutK, BLayoutK, Vec, OutT>;
  const size_t smem = kernel_smem<Cfg>(kernel, p);
  kernel<<<unsigned(sk.blocks), Cfg::kThreads, smem, stream>>>(p, sk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Calls f(ALayoutK, BLayoutK, Vec, OutT), each a std::bool_constant, for the operands' layouts
// and alignment: the one place that maps run-time flags onto the 8 kernel instantiations, and, for
// a SwapNN config, `swapped` (an aligned NN product swapped into C^T = B^T A^T by gemm_cuda) onto
// the ninth: the TT instantiation storing the transposed output. A RowMajorOnly config has one
// instantiation, row-major A and B with aligned rows, into which gemm_cuda repacks the others.
// That is every config which only the ladder, the config sweep and `cfg:<name>` run (the
// dispatcher picks CfgRingTall with its swapped twin, CfgMid and CfgSmall): the ladder runs them on
// row-major operands, and the sweep times the other layouts with the copy (the dispatch table never
// picked one of them). Their 8 instantiations (16 with the stream-K kernel) took 9-16 s of compile
// time per unit on a 2-core machine; one takes about 1 s.
template <bool SwapNN, bool RowMajorOnly = false, class F>
void with_instantiation(bool a_k, bool b_k, bool vec, bool swapped, F&& f) {
  if constexpr (RowMajorOnly) {
    TORCH_CHECK(a_k && !b_k && vec && !swapped,
                "cudasteps.mm: the ladder-only SGEMM configs are built for row-major operands with "
                "16-byte aligned rows only (the dispatcher repacks others)");
    return f(std::true_type{}, std::false_type{}, std::true_type{}, std::false_type{});
  } else {  // (an else, not a fall-through: the code below would instantiate the other seven)
    if constexpr (SwapNN) {
      if (swapped) {
        return f(std::false_type{}, std::true_type{}, std::true_type{}, std::true_type{});
      }
    }
    auto pick_vec = [&](auto a, auto b) {
      if (vec) return f(a, b, std::true_type{}, std::false_type{});
      return f(a, b, std::false_type{}, std::false_type{});
    };
    auto pick_b = [&](auto a) {
      if (b_k) return pick_vec(a, std::true_type{});
      return pick_vec(a, std::false_type{});
    };
    if (a_k) return pick_b(std::true_type{});
    return pick_b(std::false_type{});
  }
}

template <class Cfg, bool SwapNN, bool RowMajorOnly = false>
void launch_streamk(const SgemmParams& p, const StreamKParams& sk, bool a_k, bool b_k, bool vec,
                    bool swapped, cudaStream_t stream) {
  with_instantiation<SwapNN, RowMajorOnly>(a_k, b_k, vec, swapped, [&](auto a, auto b, auto v,
                                                                      auto t) {
    launch_streamk_one<Cfg, decltype(a)::value, decltype(b)::value, decltype(v)::value,
                       decltype(t)::value>(p, sk, stream);
  });
}

// Picks the instantiation for the operands' layouts and alignment (with_instantiation).
template <class Cfg, bool SwapNN, bool RowMajorOnly = false>
void launch_cfg(const SgemmParams& p, bool a_k, bool b_k, bool vec, bool swapped, int splits,
                cudaStream_t stream) {
  with_instantiation<SwapNN, RowMajorOnly>(a_k, b_k, vec, swapped, [&](auto a, auto b, auto v,
                                                                      auto t) {
    launch_one<Cfg, decltype(a)::value, decltype(b)::value, decltype(v)::value,
               decltype(t)::value>(p, splits, stream);
  });
}

template <class Cfg, bool SwapNN = false, bool RowMajorOnly = false>
constexpr ConfigEntry entry(const char* name) {
  static_assert(!SwapNN || Cfg::Stages >= 3, "swapped NN products: the ring configs only");
  static_assert(!(RowMajorOnly && SwapNN), "a swapped NN product is not row-major");
  if constexpr (Cfg::Stages >= 3) {
    return ConfigEntry{name,
                       Cfg::BM,
                       Cfg::BN,
                       Cfg::BK,
                       Cfg::MinBlocks,
                       Cfg::kSmemBytes + Cfg::kSumBytes,
                       SwapNN,
                       RowMajorOnly,
                       &launch_cfg<Cfg, SwapNN, RowMajorOnly>,
                       &launch_streamk<Cfg, SwapNN, RowMajorOnly>};
  } else {
    return ConfigEntry{name,         Cfg::BM, Cfg::BN, Cfg::BK, Cfg::MinBlocks, 0, false,
                       RowMajorOnly, &launch_cfg<Cfg, false, RowMajorOnly>, nullptr};
  }
}

// ---- the instantiations, one inst_*.cu unit each group ----
// The dispatcher's configs in every layout: inst_ring_256x128.cu, inst_small.cu. The ladder-only
// configs, row-major alone: inst_ladder_tiles.cu (register-staged), inst_ladder_rings.cu (rings).
extern template void launch_cfg<CfgMain, false, true>(const SgemmParams&, bool, bool, bool,
                                                      bool, int, cudaStream_t);
extern template void launch_cfg<CfgBK16, false, true>(const SgemmParams&, bool, bool, bool,
                                                      bool, int, cudaStream_t);
extern template void launch_cfg<CfgW32x64, false, true>(const SgemmParams&, bool, bool, bool,
                                                        bool, int, cudaStream_t);
extern template void launch_cfg<CfgOcc1, false, true>(const SgemmParams&, bool, bool, bool,
                                                      bool, int, cudaStream_t);
extern template void launch_cfg<CfgW64x64, false, true>(const SgemmParams&, bool, bool, bool,
                                                        bool, int, cudaStream_t);
extern template void launch_cfg<CfgMid, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                               cudaStream_t);
extern template void launch_cfg<CfgSmall, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                                 cudaStream_t);
extern template void launch_cfg<CfgWide, false, true>(const SgemmParams&, bool, bool, bool,
                                                      bool, int, cudaStream_t);
extern template void launch_cfg<CfgTall, false, true>(const SgemmParams&, bool, bool, bool,
                                                      bool, int, cudaStream_t);
extern template void launch_cfg<CfgRingWide, false, true>(const SgemmParams&, bool, bool, bool,
                                                          bool, int, cudaStream_t);
extern template void launch_streamk<CfgRingWide, false, true>(const SgemmParams&,
                                                              const StreamKParams&, bool, bool,
                                                              bool, bool, cudaStream_t);
extern template void launch_cfg<CfgRingWideRowFma, false, true>(const SgemmParams&, bool, bool,
                                                                bool, bool, int, cudaStream_t);
extern template void launch_streamk<CfgRingWideRowFma, false, true>(const SgemmParams&,
                                                                    const StreamKParams&, bool,
                                                                    bool, bool, bool,
                                                                    cudaStream_t);
extern template void launch_cfg<CfgRingTall, false>(const SgemmParams&, bool, bool, bool, bool, int,
                                                    cudaStream_t);
extern template void launch_streamk<CfgRingTall, false>(const SgemmParams&, const StreamKParams&,
                                                        bool, bool, bool, bool, cudaStream_t);
extern template void launch_cfg<CfgRingTall, true>(const SgemmParams&, bool, bool, bool, bool, int,
                                                   cudaStream_t);
extern template void launch_streamk<CfgRingTall, true>(const SgemmParams&, const StreamKParams&,
                                                       bool, bool, bool, bool, cudaStream_t);
extern template void launch_cfg<CfgRingTallRowFma, false, true>(const SgemmParams&, bool, bool,
                                                                bool, bool, int, cudaStream_t);
extern template void launch_streamk<CfgRingTallRowFma, false, true>(const SgemmParams&,
                                                                    const StreamKParams&, bool,
                                                                    bool, bool, bool,
                                                                    cudaStream_t);

}  // namespace gemm
}  // namespace cudasteps
