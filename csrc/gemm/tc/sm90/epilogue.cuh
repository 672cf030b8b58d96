// The Hopper kernels' epilogue: what a consumer warpgroup does with its 64 x BN accumulators.
//   * store_accumulators: tc::Epilogue::store_pair per accumulator pair, straight to global memory;
//   * store_accumulators_tma: the same values staged through 128-byte-swizzled shared memory
//     (stmatrix for 16-bit outputs) and written by TMA stores, with per-element checks only in
//     tiles across the matrix edge (StageMode);
//   * store_partial and splitk_reduce_kernel: split-K's fp32 partial sums and their sum in split
//     order (deterministic), which then goes through tc::Epilogue;
//   * tail_split_fixup: the parts of a tile the tail split cut into k ranges, added up in k order
//     by the last to arrive (deterministic), which then stores the tile as any other;
//   * combine_cluster_k_parts: the skinny tiles' two k ranges, computed by the two CTAs of a
//     cluster, added in k order in the first one's shared memory (deterministic);
//   * store_accumulators_transposed: the skinny tiles' output, stored transposed through shared
//     memory as 16-byte rows;
//   * mm_bias_act_backward's stage (StageMode::kActGrad, in tc:ws_persistent's staged TMA stores
//     for A row-major and B row-major, the layout of grad @ weight): each value staged is
//     bias_act_backward's g * act'(x + bias) for the product g as mm writes it and the saved
//     product x, read in pairs; then the values staged are summed per column over each 32 rows
//     (colsum_round), the bias gradient's partial sums;
//   * scaled_mm_range's range (OutRange, flush_range): the FP8 kernel's staged stores also keep
//     each thread's largest and smallest value written, and the kernel folds them into the
//     output's range once at its end;
//   * linear_act's fused stage (StageMode::kFused, in the staged TMA stores of tc:ws_pingpong's
//     kernel, what linear_act runs, and of tc:ws_persistent's, the ladder's `fused` step and
//     linear's bias row): each value staged is act(alpha * acc + beta * addend), and aux gets
//     alpha * acc; its cost is its instruction count (stage_round_fused).
//     Done round by round as the values are staged, so that few values are live at once: applied
//     to all the accumulators first, the kernel with 128 x 256 tiles ran out of its 168 registers
//     (684 bytes of spills) and took 0.78 ms where linear and bias_act took 0.47.
// What each output element gets (alpha, beta * addend, the cast) is tc::Epilogue's
// (gemm/epilogue.cuh), the one epilogue stage of the tensor-core paths.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/launch.cuh"  // wait_previous_grid_release_next
#include "common/nan_minmax.cuh"
#include "gemm/tc/sm90/config.cuh"
#include "gemm/tc/sm90/ptx.cuh"
#include "gemm/tc/sm90/scheduler.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// Each consumer warpgroup owns 64 rows of the 128-row tile: accumulator element d[4j + 2i + c] of
// lane l in warp w sits at row 16w + l/4 + 8i, column 8j + 2(l%4) + c of its 64 x BN block.
template <TcType T, int BN>
__device__ __forceinline__ void store_accumulators(const Epilogue<T>& ep, const float (&d)[BN / 2],
                                                   int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int64_t row = m0 + warp * 16 + lane / 4;
  const int64_t col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    ep.store_pair(row, col + 8 * j, d[4 * j], d[4 * j + 1]);
    ep.store_pair(row + 8, col + 8 * j, d[4 * j + 2], d[4 * j + 3]);
  }
}

// How the epilogue turns accumulators into outputs, chosen once per tile so the per-element code
// carries no branches: kPlain (alpha * acc) and kAddend (+ beta * addend) for tiles inside the
// matrix, kEdge for tiles across its edge (every element checked: no addend read outside, zeros
// staged there, and the TMA store clips them); kFused, linear_act's stage for activation A, in any
// tile (values outside the matrix are computed and clipped by the TMA store; only the bias loads
// and aux's stores are checked).
enum class StageMode { kPlain, kAddend, kEdge, kFused, kActGrad };

// linear_act's bias for this thread's column pairs (n, n + 1), n = n0 + 8 j + 2 (t % 4), of the
// round's column blocks j = j_first .. j_first + kJs - 1, from a row of Src (the output's type, or
// float32 under autocast): zeros past N. The fused path's bias is a row (add_s0 = 0, add_s1 = 1)
// whose pairs are aligned and whose N is a multiple of the pairs (launch_typed checks), so one
// 32/64-bit load per pair. All the round's loads are issued first and only then converted: a load
// under its own branch, converted at once, waited out its whole latency before the next one was
// issued (ncu's stall samples sat on those conversions). Each load is predicated on a 32-bit
// comparison with the columns left and addressed from one base pointer (the pair's offset an
// immediate): clamping each column index in 64 bits took ten instructions per pair.
// One pair of a bias row as loaded: a 32-bit word of two 16-bit values, or a float2.
template <typename Src>
using BiasPairRaw = std::conditional_t<sizeof(Src) == 4, float2, uint32_t>;

template <typename Src, int kJs>
__device__ __forceinline__ void load_bias_row_raw(const Src* row, int64_t N, int j_first,
                                                  int64_t n0, BiasPairRaw<Src> (&raw)[kJs]) {
  using Raw = BiasPairRaw<Src>;
  const int64_t n_first = n0 + 8 * j_first + 2 * (threadIdx.x % 4);
  // Columns of the row from n_first on, capped at the round's (<= 0: none).
  const int left = int(N - n_first < 8 * kJs ? N - n_first : 8 * kJs);
  const Raw* base = reinterpret_cast<const Raw*>(row + n_first);  // read only where inside
#pragma unroll
  for (int jr = 0; jr < kJs; ++jr) raw[jr] = 8 * jr < left ? __ldg(base + 4 * jr) : Raw{};
}

// beta times a loaded pair, in fp32.
template <TcType T, typename Src>
__device__ __forceinline__ float2 bias_pair_value(const Epilogue<T>& ep, BiasPairRaw<Src> raw) {
  float2 v;
  if constexpr (sizeof(Src) == 4) {
    v = raw;
  } else {
    using Elem = tc::Elem<T>;
    const auto* pair = reinterpret_cast<const typename Elem::type*>(&raw);
    v = make_float2(Elem::to_float(pair[0]), Elem::to_float(pair[1]));
  }
  return make_float2(ep.beta * v.x, ep.beta * v.y);
}

template <TcType T, typename Src, int kJs>
__device__ __forceinline__ void load_bias_row_pairs(const Epilogue<T>& ep, const Src* row,
                                                    int j_first, int64_t n0, float2 (&bias)[kJs]) {
  BiasPairRaw<Src> raw[kJs];
  load_bias_row_raw<Src, kJs>(row, ep.N, j_first, n0, raw);
#pragma unroll
  for (int jr = 0; jr < kJs; ++jr) bias[jr] = bias_pair_value<T, Src>(ep, raw[jr]);
}

// The round's bias pairs (load_bias_row_pairs) from the bias row in whichever type it has, or
// zeros without a bias.
template <TcType T, int kJs>
__device__ __forceinline__ void load_bias_pairs(const Epilogue<T>& ep, int j_first, int64_t n0,
                                                float2 (&bias)[kJs]) {
  if (ep.bias_f32 != nullptr) {
    load_bias_row_pairs<T, float, kJs>(ep, ep.bias_f32, j_first, n0, bias);
  } else if (ep.addend != nullptr) {
    load_bias_row_pairs<T, typename tc::Elem<T>::type, kJs>(ep, ep.addend, j_first, n0, bias);
  } else {
#pragma unroll
    for (int jr = 0; jr < kJs; ++jr) bias[jr] = make_float2(0.f, 0.f);
  }
}

// A tile's bias pairs read ahead: tc:fp8_ws loads them when its work unit starts, so that their
// latency passes under the unit's main loop. Read in the epilogue instead, they stalled both
// consumer warpgroups at once (they reach it together) with the tensor cores idle: the bias cost
// the FP8 FFN's first product 27 us of its 247 (H100). Read ahead (H100, e4m3, bf16 out, against
// torch._scaled_mm with the same bias, interleaved, two runs against one before): 4096^3 0.92x ->
// 0.93-0.95x, 8192^3 0.86x -> 0.89-0.90x, 4096 x 4096 x 11008 0.88x -> 0.92-0.93x, 4096 x 11008 x
// 4096 0.90x -> 0.91-0.92x, 8192 x 2048 x 8192 0.92x -> 0.93x, 8192 x 8192 x 2048 0.91x -> 0.90-0.92x
// (no spills: the 16 registers fit beside the two sets of sums). A 16-bit bias row the fused stage
// reads in pairs (Epilogue::addend_is_pair_row): one word per column pair of the tile, BN / 8
// registers.
template <TcType T, int BN>
struct BiasAhead {
  using Src = typename tc::Elem<T>::type;
  uint32_t raw[BN / 8];
  __device__ __forceinline__ void load(const Epilogue<T>& ep, int64_t n0) {
    static_assert(sizeof(Src) == 2, "read ahead: 16-bit bias rows");
    if (ep.addend_is_pair_row()) {
      load_bias_row_raw<Src, BN / 8>(ep.addend, ep.N, 0, n0, raw);
    } else {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) raw[j] = 0u;
    }
  }
  // Column blocks kJ0 .. kJ0 + kJs - 1 (a round's), as load_bias_pairs gives them.
  template <int kJ0, int kJs>
  __device__ __forceinline__ void pairs(const Epilogue<T>& ep, float2 (&bias)[kJs]) const {
#pragma unroll
    for (int jr = 0; jr < kJs; ++jr) bias[jr] = bias_pair_value<T, Src>(ep, raw[kJ0 + jr]);
  }
};

// BiasAhead where kOn, else nothing (a kernel's instances without it keep no registers for it).
template <bool kOn, TcType T, int BN>
struct BiasAheadIf : BiasAhead<T, BN> {};
template <TcType T, int BN>
struct BiasAheadIf<false, T, BN> {};

// Outputs (m, n) and (m, n + 1) of accumulator pair (j, h) of this thread (the layout above), in
// the modes other than kFused.
template <TcType T, int BN, StageMode kMode>
__device__ __forceinline__ float2 output_pair(const Epilogue<T>& ep, const float (&d)[BN / 2], int j,
                                              int h, int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128;
  const int64_t m = m0 + (t / 32) * 16 + (t % 32) / 4 + 8 * h;
  const int64_t n = n0 + 8 * j + 2 * (t % 4);
  const float a0 = ep.alpha * d[4 * j + 2 * h], a1 = ep.alpha * d[4 * j + 2 * h + 1];
  static_assert(kMode != StageMode::kFused, "the fused stage stages its rounds itself");
  if constexpr (kMode == StageMode::kPlain) {
    return make_float2(a0, a1);
  } else if constexpr (kMode == StageMode::kAddend) {
    using Src = tc::Elem<T>;
    const auto* row = ep.addend + m * ep.add_s0;
    return make_float2(a0 + ep.beta * Src::to_float(row[n * ep.add_s1]),
                       a1 + ep.beta * Src::to_float(row[(n + 1) * ep.add_s1]));
  } else {
    return make_float2(m < ep.M && n < ep.N ? ep.value(m, n, d[4 * j + 2 * h]) : 0.f,
                       m < ep.M && n + 1 < ep.N ? ep.value(m, n + 1, d[4 * j + 2 * h + 1]) : 0.f);
  }
}

// ---- scaled_mm_range: the range of the values an FP8 kernel stores ----
//
// The FP8 MLP (linear_act_linear_fp8) casts the hidden product and the hidden gradient to FP8 with
// a scale from their amax; taking that amax in the GEMM that writes them (instead of in a pass of
// its own over 128 MiB) is what lets the activation and the cast be one pass. Each consumer thread
// keeps the largest and the smallest value it stored, starting from 0 (the range is that of the
// values and 0: a tile's values outside the matrix are staged as zeros, and 0 changes no bound the
// casts take from the range), NaN-propagating: for 16-bit outputs as packed pairs, one max and one
// min instruction per pair of values, on the words the stores pack anyway; for float32 outputs per
// value. Rounding is monotone, so the range of the values as stored is the range of the packed
// words exactly. At the kernel's end every consumer warp folds its range into the workspace
// (flush_range): max/min are exact and order-free, so the result is the same on every run.

// One thread's range of the values it stored (output type T; kTF32: float32).
template <TcType T>
struct OutRange {
  static constexpr bool kPacked = T != TcType::kTF32;
  uint32_t hi = 0u, lo = 0u;  // two packed 16-bit zeros, or the bits of 0.0f
  __device__ __forceinline__ void add(float2 v) {
    if constexpr (kPacked) {
      const uint32_t w = tc::Elem<T>::pack2(v.x, v.y);  // the word the stores write
      hi = max_nan_x2<T == TcType::kBF16>(hi, w);  // (NaN-propagating: common/nan_minmax.cuh)
      lo = min_nan_x2<T == TcType::kBF16>(lo, w);
    } else {
      hi = __float_as_uint(max_nan(max_nan(__uint_as_float(hi), v.x), v.y));
      lo = __float_as_uint(min_nan(min_nan(__uint_as_float(lo), v.x), v.y));
    }
  }
  __device__ __forceinline__ float largest() const {
    if constexpr (kPacked) {
      const float2 p = tc::Elem<T>::unpack2(hi);
      return max_nan(p.x, p.y);
    } else {
      return __uint_as_float(hi);
    }
  }
  __device__ __forceinline__ float smallest() const {
    if constexpr (kPacked) {
      const float2 p = tc::Elem<T>::unpack2(lo);
      return min_nan(p.x, p.y);
    } else {
      return __uint_as_float(lo);
    }
  }
};

// A float as an unsigned that orders as the floats do (negatives' bits inverted, positives' sign
// bit set), every NaN the largest key; and back.
__device__ __forceinline__ unsigned order_key(float f) {
  if (f != f) return 0xffffffffu;
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float from_order_key(unsigned k) {
  if (k == 0xffffffffu) return __uint_as_float(0x7fc00000u);
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Folds this warp's ranges into the workspace bits[0..3] (zeroed before the launch): bits[0] the
// key of the largest value, bits[1] the key of minus the smallest, bits[2] the count of warps done.
// The last of the `warps` consumer warps of the grid to count itself writes (max, min) to
// range_out. Every consumer warp of the grid calls it once, at the kernel's end.
template <TcType T>
__device__ __forceinline__ void flush_range(const OutRange<T>& r, unsigned* bits,
                                            float* range_out, unsigned warps) {
  const unsigned hi = __reduce_max_sync(0xffffffffu, order_key(r.largest()));
  const unsigned neg_lo = __reduce_max_sync(0xffffffffu, order_key(-r.smallest()));
  if (threadIdx.x % 32 != 0) return;
  atomicMax(bits, hi);
  atomicMax(bits + 1, neg_lo);
  __threadfence();  // this warp's keys are visible GPU-wide before it is counted
  if (atomicAdd(bits + 2, 1u) != warps - 1) return;
  __threadfence();
  range_out[0] = from_order_key(atomicMax(bits, 0u));  // (an atomic read: no stale copy)
  range_out[1] = -from_order_key(atomicMax(bits + 1, 0u));
}

// Columns of one round of the staged TMA stores of a 64 x BN block of output type T: kStoreBoxes
// boxes of 128 bytes of columns, or the whole block where it is narrower (128 x 64 tiles of a
// 16-bit output: one box).
template <TcType T, int BN>
constexpr int store_round_cols() {
  constexpr int kBoxCols = 128 / tc_elem_bytes(T);
  constexpr int kCols = HopperCfg<T, BN>::kStoreBoxes * kBoxCols;
  return kCols < BN ? kCols : BN;
}

// The 16-bit staging of one stmatrix_x4: this lane's place in `staging` for column blocks j0 and
// j0 + 1 (lane 8q + i gives row i of matrix q: rows 8(q % 2) + i of the warp's 16, column block
// j0 + q / 2) and the four pairs (j0, h 0), (j0, h 1), (j0 + 1, h 0), (j0 + 1, h 1) of the thread.
template <TcType T, int kRoundCols>
__device__ __forceinline__ void stage_pairs_16bit(uint8_t* staging, int j0, float2 v00, float2 v01,
                                                  float2 v10, float2 v11) {
  using Out = tc::Elem<T>;
  constexpr int kBoxCols = 64;  // 128 bytes of 16-bit values
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  const int q = lane / 8, i = lane % 8;
  const int r = warp * 16 + 8 * (q % 2) + i;  // the row this lane addresses (r % 8 == i)
  const int c = 8 * (j0 + q / 2);              // first column of this lane's 8 x 8 matrix
  const int box = (c % kRoundCols) / kBoxCols, chunk = (c % kBoxCols) / 8;
  stmatrix_x4(smem_u32(staging + box * (64 * 128) + r * 128 + ((chunk ^ i) * 16)),
              Out::pack2(v00.x, v00.y), Out::pack2(v01.x, v01.y), Out::pack2(v10.x, v10.y),
              Out::pack2(v11.x, v11.y));
}

// Writes columns [kRound * kRoundCols, (kRound + 1) * kRoundCols) of this warpgroup's 64 x BN block
// into `staging`: kStoreBoxes boxes of 64 rows x 128 bytes in the 128-byte swizzle (16-byte chunk
// c of row r sits at chunk c ^ (r % 8)). 16-bit outputs go out with stmatrix, two 16 x 8 column
// blocks per instruction (stage_pairs_16bit); fp32 outputs with 8-byte stores, which the swizzle
// keeps free of bank conflicts (the 8 rows a warp writes at once land in 8 different 16-byte bank
// groups). Every mode but kFused (stage_round_fused).
template <TcType T, int BN, StageMode kMode, int kRound, bool kRange>
__device__ __forceinline__ void stage_round(const Epilogue<T>& ep, const float (&d)[BN / 2], int64_t m0,
                                            int64_t n0, uint8_t* staging, OutRange<T>& range) {
  using E = typename tc::Elem<T>::type;
  constexpr int kBoxCols = 128 / int(sizeof(E));
  constexpr int kRoundCols = store_round_cols<T, BN>();
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  constexpr int kJ0 = kRound * kRoundCols / 8, kJs = kRoundCols / 8;  // this round's column blocks
  if constexpr (T == TcType::kTF32) {
#pragma unroll
    for (int j = kJ0; j < kJ0 + kJs; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 + lane / 4 + 8 * h;  // row in the warpgroup's 64
        const int c = 8 * j + 2 * (lane % 4);         // column in the tile
        const int box = (c % kRoundCols) / kBoxCols, byte = (c % kBoxCols) * 4;
        const float2 v = output_pair<T, BN, kMode>(ep, d, j, h, m0, n0);
        if constexpr (kRange) range.add(v);
        *reinterpret_cast<float2*>(staging + box * (64 * 128) + r * 128 +
                                   (((byte / 16) ^ (r % 8)) * 16) + byte % 16) = v;
      }
    }
  } else {
#pragma unroll
    for (int j0 = kJ0; j0 < kJ0 + kJs; j0 += 2) {
      const float2 v00 = output_pair<T, BN, kMode>(ep, d, j0, 0, m0, n0),
                   v01 = output_pair<T, BN, kMode>(ep, d, j0, 1, m0, n0),
                   v10 = output_pair<T, BN, kMode>(ep, d, j0 + 1, 0, m0, n0),
                   v11 = output_pair<T, BN, kMode>(ep, d, j0 + 1, 1, m0, n0);
      if constexpr (kRange) {
        range.add(v00);
        range.add(v01);
        range.add(v10);
        range.add(v11);
      }
      stage_pairs_16bit<T, kRoundCols>(staging, j0, v00, v01, v10, v11);
    }
  }
}

// linear_act's fused stage for one round (16-bit outputs; stage_round's layout): aux gets
// alpha * acc rounded to the output type (kAux, the kernels' outputs that have an aux; without it,
// linear_act's inference and linear's bias, the aux stores' predicated instructions are not there
// to take issue slots), and each value is act(that rounded product + beta * bias): bias_act's
// value on linear's output, bit for bit (the activation without the rounding would be a little
// more exact, but the training forward runs linear then bias_act, and a model's outputs must not
// depend on whether autograd records). Act none keeps the single rounding of
// alpha * acc + beta * bias: linear's bias row, the plain stage's value.
// Outside the matrix the values are computed but never stored (the TMA store clips them); only
// the bias loads and aux's stores are checked, and which of this thread's aux rows and column
// blocks lie inside is worked out once per round (N is a multiple of the pairs: n < N implies
// n + 1 < N). The activation runs on the 8 values of one stmatrix (elementwise::act_values).
// What this stage costs is its instruction count: under tc:ws_pingpong's main loop each
// instruction of the epilogue still takes about a cycle from the tensor pipe (ncu, H100, 8192 x
// 2048 -> 8192 bf16: plain 74M warp instructions 0.42 ms, relu 99M 0.45 ms, gelu 139M 0.51 ms,
// gelu with its values' chains side by side or one by one alike). Hence the lean FastGelu and
// FastGeluTanh (elementwise/functors.h) and the stage without aux.
// kRange (scaled_mm_range with a bias row: act none, no aux): each value staged also goes into
// `range`, but for rows past M (computed from zeros plus the bias, never stored) 0.
template <TcType T, int BN, int kRound, Act A, bool kAux, bool kRange>
__device__ __forceinline__ void stage_round_fused(const Epilogue<T>& ep, const float (&d)[BN / 2],
                                                  int64_t m0, int64_t n0, uint8_t* staging,
                                                  OutRange<T>& range,
                                                  const BiasAhead<T, BN>* ahead) {
  static_assert(T != TcType::kTF32, "linear_act's fused stage is built for 16-bit outputs");
  using E = typename tc::Elem<T>::type;
  constexpr int kRoundCols = store_round_cols<T, BN>();
  constexpr int kJ0 = kRound * kRoundCols / 8, kJs = kRoundCols / 8;  // this round's column blocks
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  float2 bias[kJs];
  if (ahead != nullptr) {
    ahead->template pairs<kJ0, kJs>(ep, bias);
  } else {
    load_bias_pairs<T, kJs>(ep, kJ0, n0, bias);
  }
  // aux: this thread's rows m, m + 8 and its columns n + 8 jr (jr < kJs) of the round.
  const int64_t m = m0 + warp * 16 + lane / 4, n = n0 + 8 * kJ0 + 2 * (lane % 4);
  E* const aux = kAux && ep.aux != nullptr ? ep.aux + m * ep.ldo + n : nullptr;
  const bool aux_row[2] = {aux != nullptr && m < ep.M, aux != nullptr && m + 8 < ep.M};
  uint32_t aux_cols = 0;  // bit jr: column block kJ0 + jr lies inside
#pragma unroll
  for (int jr = 0; jr < kJs; ++jr) aux_cols |= uint32_t(n + 8 * jr < ep.N) << jr;
#pragma unroll
  for (int j0 = kJ0; j0 < kJ0 + kJs; j0 += 2) {
    float z[8];  // pairs (j0, h 0), (j0, h 1), (j0 + 1, h 0), (j0 + 1, h 1)
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int j = j0 + p / 2, h = p % 2, jr = j - kJ0;
      const float a0 = ep.alpha * d[4 * j + 2 * h], a1 = ep.alpha * d[4 * j + 2 * h + 1];
      const uint32_t written = tc::Elem<T>::pack2(a0, a1);  // the product as linear writes it
      if (kAux && aux_row[h] && ((aux_cols >> jr) & 1u)) {
        *reinterpret_cast<uint32_t*>(aux + h * 8 * ep.ldo + 8 * jr) = written;
      }
      const float2 product = A == Act::kNone ? make_float2(a0, a1) : tc::Elem<T>::unpack2(written);
      z[2 * p] = product.x + bias[jr].x;
      z[2 * p + 1] = product.y + bias[jr].y;
    }
    elementwise::act_values<A, E, 8>(z);
    if constexpr (kRange) {
      const bool row_in[2] = {m < ep.M, m + 8 < ep.M};
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        range.add(row_in[p % 2] ? make_float2(z[2 * p], z[2 * p + 1]) : make_float2(0.f, 0.f));
      }
    }
    stage_pairs_16bit<T, kRoundCols>(staging, j0, make_float2(z[0], z[1]), make_float2(z[2], z[3]),
                                     make_float2(z[4], z[5]), make_float2(z[6], z[7]));
  }
}

// mm_bias_act_backward's stage for one round (16-bit outputs; stage_round's layout): the product
// alpha * acc rounded to the output type (grad @ weight as mm writes it), then each value
// bias_act_backward's own g * act'(x + bias) (BiasActGradOpFor: the same functor, the same fp32
// operations) for the saved product x at the same place and the bias row: that op's value on mm's
// output, bit for bit. x is read in pairs (N is a multiple of 8: the host checks), all of the
// round's loads issued before the first is used, and only inside the matrix (zeros outside, where
// the values are computed but clipped by the TMA store and left out of the column sums).
template <TcType T, int BN, int kRound, Act A>
__device__ __forceinline__ void stage_round_act_grad(const Epilogue<T>& ep,
                                                     const float (&d)[BN / 2], int64_t m0,
                                                     int64_t n0, uint8_t* staging) {
  static_assert(T != TcType::kTF32, "mm_bias_act_backward's stage is built for 16-bit outputs");
  using E = typename tc::Elem<T>::type;
  using GradOp = elementwise::BiasActGradOpFor<A, E>;
  constexpr int kRoundCols = store_round_cols<T, BN>();
  constexpr int kJ0 = kRound * kRoundCols / 8, kJs = kRoundCols / 8;  // this round's column blocks
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  float2 bias[kJs];
  load_bias_pairs<T, kJs>(ep, kJ0, n0, bias);
  // x: this thread's rows m, m + 8 and its column pairs n + 8 jr (jr < kJs) of the round.
  const int64_t m = m0 + warp * 16 + lane / 4, n = n0 + 8 * kJ0 + 2 * (lane % 4);
  const int left = int(ep.N - n < 8 * kJs ? ep.N - n : 8 * kJs);  // columns from n on (<= 0: none)
  const uint32_t* x = reinterpret_cast<const uint32_t*>(ep.act_input + m * ep.ldo + n);
  const int64_t x_row8 = 4 * ep.ldo;  // 8 rows on, in pairs
  uint32_t raw[2][kJs];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool row_in = m + 8 * h < ep.M;
#pragma unroll
    for (int jr = 0; jr < kJs; ++jr) {
      raw[h][jr] = row_in && 8 * jr < left ? __ldg(x + h * x_row8 + 4 * jr) : 0u;
    }
  }
#pragma unroll
  for (int j0 = kJ0; j0 < kJ0 + kJs; j0 += 2) {
    float z[8];  // pairs (j0, h 0), (j0, h 1), (j0 + 1, h 0), (j0 + 1, h 1)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int j = j0 + q / 2, h = q % 2, jr = j - kJ0;
      const float2 g = tc::Elem<T>::unpack2(
          tc::Elem<T>::pack2(ep.alpha * d[4 * j + 2 * h], ep.alpha * d[4 * j + 2 * h + 1]));
      const float2 xv = tc::Elem<T>::unpack2(raw[h][jr]);
      z[2 * q] = GradOp()(g.x, xv.x, bias[jr].x);
      z[2 * q + 1] = GradOp()(g.y, xv.y, bias[jr].y);
    }
    stage_pairs_16bit<T, kRoundCols>(staging, j0, make_float2(z[0], z[1]), make_float2(z[2], z[3]),
                                     make_float2(z[4], z[5]), make_float2(z[6], z[7]));
  }
}

// The bias gradient's partial sums of one round of mm_bias_act_backward's stage, read back from
// `staging` (the values as written, rounded to the output type, as torch sums the gradient it
// wrote) once the round is staged: thread t sums column pair t % 64 of the round's 128 columns
// over rows 32 (t / 64) .. + 31 of the warpgroup's 64, in row order, and writes the pair to
// col_partials[(m0 / 32) + t / 64][n]: each (32-row group, column) written by one thread, so the
// sums that add those groups up in order (sum_leading) are the same on every run. A warp reads one
// whole 128-byte staged row per load (the swizzle permutes its 16-byte chunks only): no bank
// conflicts. Rows past M (computed, never stored) are left out; groups wholly past M not written.
template <TcType T, int BN, int kRound>
__device__ __forceinline__ void colsum_round(const Epilogue<T>& ep, int64_t m0, int64_t n0,
                                             const uint8_t* staging) {
  constexpr int kRoundCols = store_round_cols<T, BN>();
  static_assert(kRoundCols == 128 && sizeof(typename tc::Elem<T>::type) == 2,
                "the column sums read rounds of 128 16-bit columns (two 64-column boxes)");
  const int t = threadIdx.x % 128;
  const int c = 2 * (t % 64), half = t / 64;  // the pair's first column in the round; its rows
  const int64_t row0 = m0 + 32 * half, n = n0 + kRound * kRoundCols + c;
  if (row0 >= ep.M || n >= ep.N) return;  // (N is even: n + 1 < N too)
  const int64_t rows_left = ep.M - row0;
  const int rows = rows_left < 32 ? int(rows_left) : 32;
  const uint8_t* box = staging + (c / 64) * (64 * 128) + (c % 8) * 2;
  const int chunk = (c % 64) / 8;
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int r = 32 * half + i;  // the staged row (the warpgroup's 64)
    if (i < rows) {
      const float2 v = tc::Elem<T>::unpack2(
          *reinterpret_cast<const uint32_t*>(box + r * 128 + ((chunk ^ (r % 8)) * 16)));
      s0 += v.x;
      s1 += v.y;
    }
  }
  *reinterpret_cast<float2*>(ep.col_partials + (row0 / 32) * ep.N + n) = make_float2(s0, s1);
}

// The same outputs through shared memory and TMA stores: each round stages kStoreBoxes boxes
// (64 rows x 128 bytes of columns), then one thread stores them with the TMA, which clips them at
// the matrix edge. The stores run on while the warpgroup starts its next tile; only their reads of
// `staging` are waited for, before `staging` is written again. Round kRound, then the next: the
// rounds are template arguments, so every accumulator index is a constant (a runtime round index
// leaves ptxas unsure which registers the epilogue reads, and it then serializes the wgmmas).
// kRange: each value staged also goes into `range` (scaled_mm_range; the plain, addend and edge
// modes).
template <TcType T, int BN, StageMode kMode, Act A = Act::kNone, bool kAux = false,
          bool kRange = false, int kRound = 0>
__device__ __forceinline__ void store_rounds_tma(const Epilogue<T>& ep, const CUtensorMap* map_out,
                                                 const float (&d)[BN / 2], int64_t m0, int64_t n0,
                                                 uint8_t* staging, int bar_id,
                                                 OutRange<T>& range,
                                                 const BiasAhead<T, BN>* ahead = nullptr) {
  using E = typename tc::Elem<T>::type;
  constexpr int kBoxCols = 128 / int(sizeof(E));
  constexpr int kRoundCols = store_round_cols<T, BN>();
  constexpr int kBoxes = kRoundCols / kBoxCols;
  const int t = threadIdx.x % 128;
  // The last round's stores (of this tile or the one before) must have read `staging`; they are
  // waited for only now, so a tile's final stores run on under the next tile's main loop.
  if (t == 0) bulk_wait_read();
  warpgroup_barrier(bar_id);
  if constexpr (kMode == StageMode::kFused) {
    stage_round_fused<T, BN, kRound, A, kAux, kRange>(ep, d, m0, n0, staging, range, ahead);
  } else if constexpr (kMode == StageMode::kActGrad) {
    stage_round_act_grad<T, BN, kRound, A>(ep, d, m0, n0, staging);
  } else {
    stage_round<T, BN, kMode, kRound, kRange>(ep, d, m0, n0, staging, range);
  }
  fence_proxy_async();  // the TMA (async proxy) reads what these generic stores wrote
  warpgroup_barrier(bar_id);
  if (t == 0) {
#pragma unroll
    for (int box = 0; box < kBoxes; ++box) {
      tma_store_2d(map_out, staging + box * (64 * 128), int(n0) + kRound * kRoundCols + box * kBoxCols,
                   int(m0));
    }
    bulk_commit();
  }
  // The round's values are staged (the barrier above): their column sums, read while the TMA
  // store reads them too; the next round's barrier keeps `staging` until every thread is done.
  if constexpr (kMode == StageMode::kActGrad) {
    if (ep.col_partials != nullptr) colsum_round<T, BN, kRound>(ep, m0, n0, staging);
  }
  if constexpr ((kRound + 1) * kRoundCols < BN) {
    store_rounds_tma<T, BN, kMode, A, kAux, kRange, kRound + 1>(ep, map_out, d, m0, n0, staging,
                                                                bar_id, range, ahead);
  }
}

// This warpgroup's 64 x BN block at (m0, n0) through store_rounds_tma, in the mode its place needs.
// kFusable: the kernel takes linear_act's fused stage (tc:ws_pingpong's and tc:ws_persistent's
// for 16-bit K-major operands; the others are not built with it). There a bias row that the fused
// stage can read in pairs (linear's bias) takes it too, with no activation and no aux: kAddend's
// one 16-bit load per value cost linear 8% over the plain product (8192 x 2048 -> 8192 bf16, H100).
// kNoAuxActs: the stage for each activation is also built without aux (tc:ws_pingpong's, what
// linear_act runs: 6.7% faster at 8192 x 2048 -> 8192 with gelu_tanh, H100); elsewhere an
// activation without aux runs the aux build with its stores predicated off. The no-aux builds
// took the bf16/fp16 nt units from about 19 to 30 s of compile on the 16-core GPU machine.
// kActGradBuilt: the kernel also takes mm_bias_act_backward's stage (tc:ws_persistent's for
// 16-bit operands, A row-major and B row-major: grad @ weight), one build per activation.
// kBiasPairs (the FP8 kernel, whose operand and output types differ, so not kFusable): the fused
// stage built for act none without aux alone, for a bias row read in pairs (scaled_mm's bias);
// `ahead`, where given, holds that row's pairs for this tile, read when its unit began (BiasAhead).
// kRange: every value stored also goes into `range` (scaled_mm_range; the FP8 kernel's modes other
// than kActGrad).
template <TcType T, int BN, bool kFusable = false, bool kNoAuxActs = false,
          bool kActGradBuilt = false, bool kBiasPairs = false, bool kRange = false>
__device__ __forceinline__ void store_accumulators_tma(const Epilogue<T>& ep,
                                                       const CUtensorMap* map_out,
                                                       const float (&d)[BN / 2], int64_t m0,
                                                       int64_t n0, uint8_t* staging, int bar_id,
                                                       OutRange<T>* range_in = nullptr,
                                                       const BiasAhead<T, BN>* ahead = nullptr) {
  static_assert(!kRange || (!kFusable && !kActGradBuilt), "the range: the FP8 kernel's modes");
  OutRange<T> unused;
  OutRange<T>& range = kRange ? *range_in : unused;
  if constexpr (kActGradBuilt) {
    if (ep.act_grad()) {  // (before the fused stage's test: its bias is a pair row too)
      return tc::with_act(ep.act, [&](auto act) {
        store_rounds_tma<T, BN, StageMode::kActGrad, decltype(act)::value>(ep, map_out, d, m0, n0,
                                                                           staging, bar_id, range);
      });
    }
  }
  if constexpr (kFusable) {
    if (ep.fused() || ep.addend_is_pair_row()) {  // the latter: act none, no aux
      return tc::with_act(ep.act, [&](auto act) {
        constexpr Act A = decltype(act)::value;
        if constexpr (kNoAuxActs || A == Act::kNone) {
          if (ep.aux == nullptr) {
            return store_rounds_tma<T, BN, StageMode::kFused, A, false>(ep, map_out, d, m0, n0,
                                                                        staging, bar_id, range);
          }
        }
        store_rounds_tma<T, BN, StageMode::kFused, A, true>(ep, map_out, d, m0, n0, staging,
                                                           bar_id, range);
      });
    }
  }
  if constexpr (kBiasPairs) {
    if (ep.addend_is_pair_row()) {
      return store_rounds_tma<T, BN, StageMode::kFused, Act::kNone, false, kRange>(
          ep, map_out, d, m0, n0, staging, bar_id, range, ahead);
    }
  }
  if (m0 + 64 > ep.M || n0 + BN > ep.N) {
    store_rounds_tma<T, BN, StageMode::kEdge, Act::kNone, false, kRange>(ep, map_out, d, m0, n0,
                                                                         staging, bar_id, range);
  } else if (ep.addend != nullptr) {
    store_rounds_tma<T, BN, StageMode::kAddend, Act::kNone, false, kRange>(ep, map_out, d, m0, n0,
                                                                           staging, bar_id, range);
  } else {
    store_rounds_tma<T, BN, StageMode::kPlain, Act::kNone, false, kRange>(ep, map_out, d, m0, n0,
                                                                          staging, bar_id, range);
  }
}

// Split-K partial sums of a consumer warpgroup's 64 x BN block, fp32, bounds-checked.
template <int BN>
__device__ __forceinline__ void store_partial(float* partial, int64_t M, int64_t N,
                                              const float (&d)[BN / 2], int64_t m0, int64_t n0) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int64_t row = m0 + warp * 16 + lane / 4;
  const int64_t col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = row + 8 * h, n = col + 8 * j;
      if (m >= M) continue;
      if (n < N) partial[m * N + n] = d[4 * j + 2 * h];
      if (n + 1 < N) partial[m * N + n + 1] = d[4 * j + 2 * h + 1];
    }
  }
}

// The skinny tiles split along K over a cluster of two CTAs (wgmma_ws_kernel's kClusterK): both
// CTAs take the same tile, rank 0 its lower k range and rank 1 the upper one. Rank 1 stores its
// sums (this thread's BN / 2) into rank 0's `parts` (64 x BN floats of distributed shared memory,
// laid out by thread so that each warp writes 512 contiguous bytes per store) by asynchronous
// stores that count their bytes on rank 0's part_full, and goes on to its next unit; rank 0 (one
// thread) expects those bytes, waits for them, adds them to its own sums, the lower range's first
// (the same order every run, no atomics), and stores the tile. part_empty (in rank 1) counts rank
// 0's 128 readers, so that rank 1 writes a unit's sums only once the last unit's are read; `phase`
// flips per unit. No fence on either side: the stores' completion on part_full, waited for at
// cluster scope, makes them visible, and rank 0 arrives on part_empty only after the values it
// read were added (the multicast kernel's ring stages are handed back the same way). Returns
// whether this CTA stores the tile (rank 0).
template <int BN>
__device__ __forceinline__ bool combine_cluster_k_parts(float (&d)[BN / 2], float* parts,
                                                        uint64_t* part_full,
                                                        uint64_t* part_empty, uint32_t rank,
                                                        int& phase) {
  static_assert(BN % 8 == 0, "four floats per store");
  const int t = threadIdx.x % 128;
  float4* slots = reinterpret_cast<float4*>(parts);
  const bool stores = rank == 0;
  if (!stores) {
    mbar_wait(part_empty, phase ^ 1);  // a fresh barrier's parity-1 phase counts as done
#pragma unroll
    for (int q = 0; q < BN / 8; ++q) {
      st_async_cluster_f32x4(&slots[q * 128 + t], part_full, 0, d[4 * q], d[4 * q + 1],
                             d[4 * q + 2], d[4 * q + 3]);
    }
  } else {
    if (t == 0) mbar_arrive_expect_tx(part_full, 64 * BN * sizeof(float));
    mbar_wait_cluster(part_full, phase);
#pragma unroll
    for (int q = 0; q < BN / 8; ++q) {
      const float4 v = slots[q * 128 + t];
      d[4 * q] += v.x;
      d[4 * q + 1] += v.y;
      d[4 * q + 2] += v.z;
      d[4 * q + 3] += v.w;
    }
    mbar_arrive_cluster(part_empty, 1);
  }
  phase ^= 1;
  return stores;
}

// Calls fn(tl, fl, acc) for each of this thread's accumulators of a skinny tile: acc is the sum
// for the tile's token tl and feature fl (the wgmma fragment's column and row).
template <int BN, typename Fn>
__device__ __forceinline__ void for_each_transposed(const float (&d)[BN / 2], Fn fn) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int f = warp * 16 + lane / 4;  // this thread's first feature (+ 8: its second)
  const int c = 2 * (lane % 4);        // its first token (+ 1, + 8 j)
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int e = 0; e < 2; ++e) fn(c + 8 * j + e, f + 8 * h, d[4 * j + 2 * h + e]);
    }
  }
}

// The skinny tiles' store (launch_skinny): their kernel computes D' = W x^T, the weight's rows
// times the tokens, whose element (m', n') is the output's (n', m'); `ep` is the original
// problem's (out[token][feature]). The tile's tokens start at n0; those before n_first (a last
// tile moved back, b_tile_origin) belong to the tile before and are not stored.
// Each thread's accumulators hold two features 8 apart for pairs of tokens: stored element by
// element, the 8 lanes of a quad column write 16 bytes of each of 4 output rows per store, 32
// stores per thread. So the values, cast to the output type, are written transposed into
// `staging` (one padded row of 64 features per token: HopperCfg::kTransposeRowBytes), and each
// token's 128 bytes go out from there as 16-byte stores (element by element at the weight's last,
// partial tile, or where the output's rows are not 16-byte aligned). Element by element the
// stores cost about 3 us of a few-row linear: on an H100 (CUDA-graph replays) 64 tokens x (4096
// -> 4096) took 17.0 us with them and 13.8 us with no store at all; with K = 64, 4.7 against 1.8
// us; through shared memory 16.1 and 3.7. value_of(token, feature, acc): the value to store, for
// (token, feature) inside the output.
template <TcType T, int BN, typename ValueOf>
__device__ __forceinline__ void store_transposed_rows(const Epilogue<T>& ep,
                                                      const float (&d)[BN / 2], int64_t m0,
                                                      int64_t n0, int64_t n_first,
                                                      uint8_t* staging, ValueOf value_of) {
  using E = typename tc::Elem<T>::type;
  static_assert(sizeof(E) == 2, "the skinny tiles: 16-bit outputs");
  constexpr int kRow = HopperCfg<T, BN, 64>::kTransposeRowBytes;
  warpgroup_barrier(1);  // the previous tile's reads of the staging are done
  for_each_transposed<BN>(d, [&](int tl, int fl, float acc) {
    const int64_t token = n0 + tl, feature = m0 + fl;
    const float v = token < ep.M && feature < ep.N ? value_of(token, feature, acc) : 0.f;
    *reinterpret_cast<E*>(staging + tl * kRow + fl * 2) = tc::Elem<T>::from_float(v);
  });
  warpgroup_barrier(1);
  const int t = threadIdx.x % 128;
  const bool rows_aligned = reinterpret_cast<uintptr_t>(ep.out) % 16 == 0 && ep.ldo % 8 == 0;
  // Token tl's features 8 ch .. 8 ch + 7: eight threads a row, BN rows.
  for (int i = t; i < BN * 8; i += 128) {
    const int tl = i / 8, ch = i % 8;
    const int64_t token = n0 + tl, feature = m0 + 8 * ch;
    if (token < n_first || token >= ep.M || feature >= ep.N) continue;
    const uint8_t* src = staging + tl * kRow + ch * 16;
    E* dst = ep.out + token * ep.ldo + feature;
    if (rows_aligned && feature + 8 <= ep.N) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int e = 0; e < 8 && feature + e < ep.N; ++e) dst[e] = reinterpret_cast<const E*>(src)[e];
    }
  }
}

// The skinny tiles' store: linear's value (Epilogue::value), or linear_act's fused stage
// (fused_value_as: the value the staged TMA stores compute), through store_transposed_rows; with
// the fused stage's aux output too, element by element (store_one_fused_as).
template <TcType T, int BN>
__device__ __forceinline__ void store_accumulators_transposed(const Epilogue<T>& ep,
                                                              const float (&d)[BN / 2], int64_t m0,
                                                              int64_t n0, int64_t n_first,
                                                              uint8_t* staging) {
  if (!ep.fused()) {
    auto linear_value = [&](int64_t m, int64_t n, float acc) { return ep.value(m, n, acc); };
    store_transposed_rows<T, BN>(ep, d, m0, n0, n_first, staging, linear_value);
    return;
  }
  // The activation is dispatched on once, outside the unrolled loops: inside them (a switch per
  // element) the 64-token tiles' accumulators went to the stack, main loop included.
  tc::with_act(ep.act, [&](auto act) {
    constexpr elementwise::Act A = decltype(act)::value;
    if (ep.aux == nullptr) {
      auto fused_value = [&](int64_t m, int64_t n, float acc) {
        return ep.template fused_value_as<A>(m, n, acc);
      };
      store_transposed_rows<T, BN>(ep, d, m0, n0, n_first, staging, fused_value);
      return;
    }
    for_each_transposed<BN>(d, [&](int tl, int fl, float acc) {
      if (n0 + tl >= n_first) ep.template store_one_fused_as<A>(n0 + tl, m0 + fl, acc);
    });
  });
}

// The tail split's fixup for one consumer warpgroup's 64 x BN block of a tile cut into k ranges
// (unit u, u.part >= 0): its sums go to the workspace (the CTA's place there), and the last part
// of the tile to arrive (counted in tail.arrived) adds every part up in k order (each read back
// from the workspace, its own too): the same fp32 sums whichever CTA comes last, and no CTA waits
// for another. Returns true for that last part, d then holding the tile's sums for the epilogue;
// false for the others. The workspace is thread-major (float4 v of thread t at v * 128 + t), so a
// warp's accesses are whole 512-byte lines, written and read through L2 (st.cg / ld.cg: no L1 holds
// a stale copy). A part's float4s are loaded kChunk at a time, all in flight at once: one load in
// flight per thread made the sum of 8 parts take longer than their products.
template <int BN>
__device__ __forceinline__ bool tail_split_fixup(const HopperParams& p, const WorkUnit& u, int cwg,
                                                 float (&d)[BN / 2], int bar_id) {
  constexpr int kVecs = BN / 8;                     // float4s per thread
  constexpr int kChunk = kVecs < 16 ? kVecs : 16;  // float4s in flight per thread (<= 64 registers)
  const int t = threadIdx.x % 128;
  const int local = u.tile - (p.raster.count() - p.tail.tiles);
  const float4* first = reinterpret_cast<const float4*>(p.tail.workspace) +
                        (int64_t(local) * p.tail.parts * 2 + cwg) * (kVecs * 128) + t;
  auto part = [&](int j) { return first + int64_t(j) * 2 * (kVecs * 128); };
  float4* mine = const_cast<float4*>(part(u.part));
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    __stcg(mine + v * 128, make_float4(d[4 * v], d[4 * v + 1], d[4 * v + 2], d[4 * v + 3]));
  }
  __threadfence();  // this thread's part is visible GPU-wide before the count says it is there
  warpgroup_barrier(bar_id);  // every thread's part is written and fenced
  bool complete = false;
  if (t == 0) complete = atomicAdd(p.tail.arrived + 2 * local + cwg, 1) == p.tail.parts - 1;
  if (!warpgroup_barrier_or(bar_id, complete)) return false;
  __threadfence();  // the other parts' counts were seen: read their sums after
#pragma unroll
  for (int v0 = 0; v0 < kVecs; v0 += kChunk) {
#pragma unroll
    for (int v = v0; v < v0 + kChunk; ++v) {
      const float4 x = __ldcg(part(0) + v * 128);
      d[4 * v] = x.x, d[4 * v + 1] = x.y, d[4 * v + 2] = x.z, d[4 * v + 3] = x.w;
    }
    for (int j = 1; j < p.tail.parts; ++j) {
      float4 x[kChunk];
#pragma unroll
      for (int v = 0; v < kChunk; ++v) x[v] = __ldcg(part(j) + (v0 + v) * 128);
#pragma unroll
      for (int v = 0; v < kChunk; ++v) {
        d[4 * (v0 + v)] += x[v].x;
        d[4 * (v0 + v) + 1] += x[v].y;
        d[4 * (v0 + v) + 2] += x[v].z;
        d[4 * (v0 + v) + 3] += x[v].w;
      }
    }
  }
  return true;
}

// out = epilogue(sum over splits of partial[s]), the splits added in order 0, 1, ...
template <TcType T>
__global__ void splitk_reduce_kernel(const float* __restrict__ partial, int splits,
                                     const Epilogue<T> ep_in) {
  wait_previous_grid_release_next();  // launch_splitk_reduce may launch it as a dependent
  const Epilogue<T> ep = ep_in.with_device_scales();
  const int64_t total = ep.M * ep.N;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) sum += partial[int64_t(s) * total + i];
    if (ep.fused()) {
      ep.store_one_fused(i / ep.N, i % ep.N, sum);
    } else {
      ep.store_one(i / ep.N, i % ep.N, sum);
    }
  }
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
