// The few-row path's kernels, one per ladder step (gemv.h lists the steps and why each pays), and
// the loads and conversions they share. Every kernel reads the weight (rows x K, K-contiguous) and
// the tokens (num_tokens <= 16 rows of K, K-contiguous), accumulates in fp32, and hands each sum
// to the tensor-core epilogue (gemm/epilogue.cuh: alpha, beta, the addend, the cast, the store).
//
// The weight is read exactly once, so its loads bypass L1 (ld.global.nc.L1::no_allocate) and the
// tokens, which every block reads again, keep it. A weight row's last, partial group of 8 (K not a
// multiple of 8) is read element by element; the rest with 16-byte loads (gemv_supports requires
// 16-byte aligned rows). Rows and tokens past the end are clamped to the last one for the loads
// (no branch in the loop) and dropped at the store. Sums run in a fixed order everywhere: no
// atomics, so results are bitwise reproducible.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/launch.cuh"  // wait_previous_grid, release_next_grid
#include "common/warp_reduce.cuh"
#include "gemm/epilogue.cuh"
#include "gemm/tc/sm80/mma.cuh"

namespace cudasteps {
namespace gemm {
namespace gemv {

constexpr int kVec = 8;          // elements of one 16-byte load of bf16/fp16
constexpr int kSplitWarps = 8;   // warps per block of split_k and mma, each on its own part of K
constexpr int kMmaRows = 16;     // weight rows per block of the mma kernel (mma.sync's M)
constexpr int kMmaChunk = 64;    // k per warp per step of the mma kernel: 16 per lane of a group

template <TcType T>
struct Params {
  using E = typename tc::Elem<T>::type;
  const E* weight;
  int64_t ld_weight;
  const E* tokens;
  int64_t ld_tokens;
  int64_t rows, num_tokens, K;
  // True: the weight is A, out[row, token]; false: the weight is B^T, out[token, row] (linear).
  bool weight_is_a;
  tc::Epilogue<T> epi;
  // Partial sums of a split over blocks (mma kernel, gridDim.y > 1): [split][token][row] fp32,
  // combined by combine_kernel; nullptr: the kernel applies the epilogue itself.
  float* partial;

  __device__ __forceinline__ void store(int64_t row, int64_t token, float acc) const {
    if (weight_is_a) {
      epi.store_one(row, token, acc);
    } else {
      epi.store_one(token, row, acc);
    }
  }
};

// ---- loads and conversions ----

// 16 bytes of the weight, read once: not kept in L1.
__device__ __forceinline__ uint4 load_streaming(const void* ptr) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

// Elements k..k+7 of a row of K 16-bit values as one 16-byte word; the row's last, partial group
// (or a group past its end) element by element, zeros past K.
template <bool Streaming, typename E>
__device__ __forceinline__ uint4 load8(const E* row, int64_t k, int64_t K) {
  if (k + kVec <= K) {
    return Streaming ? load_streaming(row + k) : __ldg(reinterpret_cast<const uint4*>(row + k));
  }
  const uint16_t* src = reinterpret_cast<const uint16_t*>(row);
  uint32_t words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (k + i < K) words[i / 2] |= uint32_t(src[k + i]) << (16 * (i % 2));
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// Word i (0-3) of a 16-byte load: two adjacent elements.
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <TcType T>
__device__ __forceinline__ float2 to_float2(uint32_t pair) {
  if constexpr (T == TcType::kBF16) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&pair));
  }
}

// The 8 elements of a 16-byte load as floats.
template <TcType T>
__device__ __forceinline__ void to_float8(const uint4& v, float (&f)[kVec]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = to_float2<T>(word(v, i));
    f[2 * i] = pair.x;
    f[2 * i + 1] = pair.y;
  }
}

// acc[r][t] += dot(w[r], tokens[t] at k) for one group of 8 elements of every row: each token's 8
// values are loaded and converted once and used for all Rows rows.
template <TcType T, int Rows, int Tokens>
__device__ __forceinline__ void accumulate_group(const Params<T>& p, const uint4 (&w)[Rows],
                                                 int64_t k, float (&acc)[Rows][Tokens]) {
  float wf[Rows][kVec];
#pragma unroll
  for (int r = 0; r < Rows; ++r) to_float8<T>(w[r], wf[r]);
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    if (t >= p.num_tokens) break;
    float xf[kVec];
    to_float8<T>(load8<false>(p.tokens + t * p.ld_tokens, k, p.K), xf);
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[r][t] += wf[r][i] * xf[i];
    }
  }
}

// ---- step warp_row: one warp per weight row, 2-byte loads ----
template <TcType T, int Tokens>
__global__ void __launch_bounds__(256) warp_row_kernel(Params<T> p) {
  using Elem = tc::Elem<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= p.rows) return;  // the whole warp: the shuffles below see every lane
  const auto* w = p.weight + row * p.ld_weight;
  float acc[Tokens] = {};
  for (int64_t k = lane; k < p.K; k += kWarpSize) {
    const float wk = Elem::to_float(w[k]);
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      if (t < p.num_tokens) acc[t] += wk * Elem::to_float(p.tokens[t * p.ld_tokens + k]);
    }
  }
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const float sum = warp_sum(acc[t]);
    if (lane == 0 && t < p.num_tokens) p.store(row, t, sum);
  }
}

// ---- step vec16: the same with 16-byte loads ----
template <TcType T, int Tokens>
__global__ void __launch_bounds__(256) vec16_kernel(Params<T> p) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= p.rows) return;
  const auto* w = p.weight + row * p.ld_weight;
  float acc[1][Tokens] = {};
  for (int64_t k = int64_t(lane) * kVec; k < p.K; k += kWarpSize * kVec) {
    const uint4 wv[1] = {load8<true>(w, k, p.K)};
    accumulate_group<T, 1, Tokens>(p, wv, k, acc);
  }
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const float sum = warp_sum(acc[0][t]);
    if (lane == 0 && t < p.num_tokens) p.store(row, t, sum);
  }
}

// One warp's part of a Rows-row group: k from `k_begin` in steps of `k_step`, Unroll groups of 8
// per row loaded before any is used, so Rows * Unroll 16-byte weight loads are in flight per lane.
template <TcType T, int Rows, int Tokens, int Unroll>
__device__ __forceinline__ void accumulate_rows(const Params<T>& p, int64_t row0, int64_t k_begin,
                                                int64_t k_step, float (&acc)[Rows][Tokens]) {
  const typename Params<T>::E* w[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) w[r] = p.weight + min(row0 + r, p.rows - 1) * p.ld_weight;
  for (int64_t k0 = k_begin; k0 < p.K; k0 += k_step * Unroll) {
    uint4 wv[Unroll][Rows];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int64_t k = k0 + u * k_step;
#pragma unroll
      for (int r = 0; r < Rows; ++r) wv[u][r] = load8<true>(w[r], k, p.K);
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const int64_t k = k0 + u * k_step;
      if (k < p.K) accumulate_group<T, Rows, Tokens>(p, wv[u], k, acc);
    }
  }
}

// ---- step rows_in_flight: Rows weight rows per warp, Unroll groups in flight ----
template <TcType T, int Tokens, int Rows, int Unroll>
__global__ void __launch_bounds__(256) rows_in_flight_kernel(Params<T> p) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 =
      (int64_t(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize) * Rows;
  if (row0 >= p.rows) return;
  float acc[Rows][Tokens] = {};
  accumulate_rows<T, Rows, Tokens, Unroll>(p, row0, int64_t(lane) * kVec, kWarpSize * kVec, acc);
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0 && row0 + r < p.rows && t < p.num_tokens) p.store(row0 + r, t, sum);
    }
  }
}

// ---- step split_k: kSplitWarps warps on the same Rows rows, K interleaved among them ----
// Warp w reads groups w*32 + lane, (w + kSplitWarps)*32 + lane, ...: at any moment the block's
// warps read neighbouring 512-byte pieces of each row. The warps' sums meet in shared memory and
// are added in warp order.
template <TcType T, int Tokens, int Rows, int Unroll>
__global__ void __launch_bounds__(kSplitWarps* kWarpSize) split_k_kernel(Params<T> p) {
  __shared__ float parts[kSplitWarps][Rows][Tokens];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int64_t row0 = int64_t(blockIdx.x) * Rows;
  float acc[Rows][Tokens] = {};
  accumulate_rows<T, Rows, Tokens, Unroll>(p, row0, (int64_t(warp) * kWarpSize + lane) * kVec,
                                           int64_t(kSplitWarps) * kWarpSize * kVec, acc);
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0) parts[warp][r][t] = sum;
    }
  }
  __syncthreads();
  const int r = threadIdx.x / Tokens, t = threadIdx.x % Tokens;
  if (r < Rows && row0 + r < p.rows && t < p.num_tokens) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) sum += parts[w][r][t];
    p.store(row0 + r, t, sum);
  }
}

// ---- step mma: the split_k layout, products on the tensor cores ----
// A block owns kMmaRows = 16 weight rows (mma.sync's A tile) and its kSplitWarps warps split K;
// gridDim.y > 1 splits K over blocks too (partial sums, combine_kernel adds them in order).
// TokenTiles 8-token tiles are mma's B (n = 8 each). Lane (g, t) of the warp (g = lane / 4,
// t = lane % 4) loads 16 consecutive elements, k in [16t, 16t + 16) of a 64-wide chunk, of weight
// rows g and g + 8 and of token g (and g + 8): two 16-byte loads each. Its 8 pairs P0..P7 feed
// the 4 mma steps of the chunk directly from those registers, P(2s) as a0/a1/b0 and P(2s+1) as
// a2/a3/b1 of step s. That assigns each physical k to one logical k of one step, the same for A
// and B, so the sum is the same product, with no shared-memory staging and no shuffles.
template <TcType T, int TokenTiles, int Unroll>
__global__ void __launch_bounds__(kSplitWarps* kWarpSize) mma_kernel(Params<T> p) {
  constexpr int kTokens = 8 * TokenTiles;
  __shared__ float parts[kSplitWarps][kMmaRows][kTokens];
  wait_previous_grid();  // launch_mma launches it as a programmatic dependent
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * kMmaRows;
  const auto* w_lo = p.weight + min(row0 + g, p.rows - 1) * p.ld_weight;
  const auto* w_hi = p.weight + min(row0 + g + 8, p.rows - 1) * p.ld_weight;
  const typename Params<T>::E* x[TokenTiles];
#pragma unroll
  for (int tt = 0; tt < TokenTiles; ++tt) {
    x[tt] = p.tokens + min(int64_t(8 * tt + g), p.num_tokens - 1) * p.ld_tokens;
  }
  // This block's share of K (gridDim.y parts of whole chunks), interleaved over its warps.
  const int64_t chunks = (p.K + kMmaChunk - 1) / kMmaChunk;
  const int64_t per_split = (chunks + gridDim.y - 1) / gridDim.y;
  const int64_t k_end = min(p.K, int64_t(blockIdx.y + 1) * per_split * kMmaChunk);
  const int64_t k_step = int64_t(kSplitWarps) * kMmaChunk;
  float d[TokenTiles][4] = {};
  for (int64_t k0 = int64_t(blockIdx.y) * per_split * kMmaChunk + int64_t(warp) * kMmaChunk;
       k0 < k_end; k0 += k_step * Unroll) {
    uint4 lo[Unroll][2], hi[Unroll][2], xv[Unroll][TokenTiles][2];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t k = k0 + u * k_step + 16 * t + kVec * h;
        const int64_t k_in = k < k_end ? k : p.K;  // past this block's share: zeros
        lo[u][h] = load8<true>(w_lo, k_in, p.K);
        hi[u][h] = load8<true>(w_hi, k_in, p.K);
#pragma unroll
        for (int tt = 0; tt < TokenTiles; ++tt) xv[u][tt][h] = load8<false>(x[tt], k_in, p.K);
      }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int h = s / 2, i = 2 * (s % 2);  // pairs 2s and 2s + 1: words i, i + 1 of load h
        const uint32_t a[4] = {word(lo[u][h], i), word(hi[u][h], i), word(lo[u][h], i + 1),
                               word(hi[u][h], i + 1)};
#pragma unroll
        for (int tt = 0; tt < TokenTiles; ++tt) {
          const uint32_t b[2] = {word(xv[u][tt][h], i), word(xv[u][tt][h], i + 1)};
          if constexpr (T == TcType::kBF16) {
            tc::mma_16816_bf16(d[tt], a, b);
          } else {
            tc::mma_16816_fp16(d[tt], a, b);
          }
        }
      }
    }
  }
  // Only now may the next grid's blocks take the SMs this one's leave (common/launch.cuh).
  release_next_grid();
  // d[tt]: d0, d1 = (row g, tokens 8tt + 2t, +1), d2, d3 = (row g + 8, the same tokens).
#pragma unroll
  for (int tt = 0; tt < TokenTiles; ++tt) {
    parts[warp][g][8 * tt + 2 * t] = d[tt][0];
    parts[warp][g][8 * tt + 2 * t + 1] = d[tt][1];
    parts[warp][g + 8][8 * tt + 2 * t] = d[tt][2];
    parts[warp][g + 8][8 * tt + 2 * t + 1] = d[tt][3];
  }
  __syncthreads();
  // One output per thread, consecutive threads on consecutive rows (linear's output: contiguous).
  const int r = threadIdx.x % kMmaRows, token = threadIdx.x / kMmaRows;
  if (token < kTokens && row0 + r < p.rows && token < p.num_tokens) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) sum += parts[w][r][token];
    if (p.partial != nullptr) {
      p.partial[(int64_t(blockIdx.y) * p.num_tokens + token) * p.rows + row0 + r] = sum;
    } else {
      p.store(row0 + r, token, sum);
    }
  }
}

// The parts of a split over blocks, added in split order, through the epilogue. One thread per
// output, rows fastest.
template <TcType T>
__global__ void __launch_bounds__(256) combine_kernel(Params<T> p, int splits) {
  wait_previous_grid_release_next();  // launched as a programmatic dependent, like mma_kernel
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.rows * p.num_tokens) return;
  const int64_t token = i / p.rows, row = i % p.rows;
  float sum = 0.f;
  for (int s = 0; s < splits; ++s) sum += p.partial[s * p.rows * p.num_tokens + i];
  p.store(row, token, sum);
}

}  // namespace gemv
}  // namespace gemm
}  // namespace cudasteps
