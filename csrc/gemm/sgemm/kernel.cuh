// The tiled SGEMM kernel template: the main loop over K and the kernels around it (sgemm_tile,
// sgemm_kernel, sgemm_streamk_kernel), composed of the loaders (loaders.cuh), the scheduler
// (scheduler.cuh) and the epilogue (epilogue.cuh), configured by a TileConfig (tile_config.cuh).
// Instantiated by the inst_*.cu units of the config table (configs.cuh) and by the SGEMM ladder
// (ladder_steps.cu: the `vectorized` and `warptile` steps, this kernel with features switched
// off).
//
// Problem: out[M, N] = alpha * A[M, K] @ B[K, N] + beta * C (C: optional strided addend).
//
// Structure (per block of Threads threads, one BM x BN output tile):
//   * K is walked in BK-deep slices. Each slice of A (BM x BK) and B (BK x BN) is staged through
//     registers into shared memory, both stored k-major: As[BK][BM + pad], Bs[BK][BN + pad].
//     A is therefore stored transposed, so that for a fixed k the M values a thread needs are
//     contiguous and come in with LDS.128.
//   * Global loads are 16 bytes (LDG.128) along whichever dimension is contiguous in memory: for
//     row-major A and column-major B that is K (the 4 values are then scattered to 4 k rows of the
//     shared tile: the transposed store); otherwise M or N (one STS.128).
//   * Each thread owns a TM x TN accumulator block in registers, made of (TM/4) x (TN/4) 4x4
//     sub-tiles spaced WM/(TM/4) rows and WN/(TN/4) columns apart inside its warp's WM x WN tile
//     (the warp tile). For one k, the 32 lanes of a warp read at most 8 distinct 16-byte words of
//     As (one 128-byte wavefront, the rest are broadcasts) and 8 of Bs: conflict-free LDS.128.
//     Per k a thread issues TM/4 + TN/4 LDS.128 for TM * TN FFMA (8x8: 4 loads, 64 FFMA).
//   * Stages = 2: double-buffered shared memory with register prefetch. The loads of slice t+1 are
//     issued before the FFMAs of slice t and stored to the other buffer after them, so global
//     latency hides behind math and there is one __syncthreads per slice.
//   * Stages >= 3 (sm_80+): a ring of Stages shared-memory slices filled by cp.async, global ->
//     shared with no register round trip (CpAsyncLoader), so the slices in flight hold no
//     registers. The tiles stay k-major: a K-contiguous operand is copied one float at a time
//     (4-byte cp.async), which transposes it on the way in, so the fragment loads are the same
//     LDS.128 as above. The one __syncthreads per slice sits before the last k step, whose
//     fragments are already in registers: after it the first fragments of slice t+1 load while
//     the last FFMAs of slice t run (fragments double-buffered across the slice boundary), and no
//     thread reads slice t again. So during slice t the stage of slice t-1 is free: the copies of
//     slice t+Stages-1 go there, spread over the first k steps (CopyGroup per step) instead of
//     one burst after the barrier, where both warps of a scheduler would stall on it together.
//     On an H100 the spreading took the 128x256x8 ring from 0.79-0.85x to 0.92x of cuBLAS at
//     4096^3. The copies keep little state (CpAsyncLoader): with it the 256x128x8 tile (8
//     4-byte copies of A per thread per slice) fits in 255 registers without spilling and runs
//     0.98x (it spilled 52-56 bytes before, with a predicate and a pointer per copy).
//   * Blocked sums (the ring, p.sum_block_slices > 0): every sum_block_slices slices a thread adds
//     its accumulators into a running total of its own in shared memory, past the ring, and
//     starts them again from zero; the epilogue takes total + accumulators. A straight fp32 sum
//     over K has a rounding error that grows like K (each add rounds at the size of the running
//     sum); in B blocks it grows like K / sqrt(B). A flush moves 2 x TM x TN floats per thread
//     through shared memory (all warps at once: about the time of one slice's FFMAs).
//   * Split-K (gridDim.z > 1): block z covers K range [z * k_per_split, ...) and writes its raw
//     partial sums to a workspace; splitk_epilogue_kernel adds them up and applies the epilogue.
//   * Epilogue: alpha * acc + beta * C[m * s0 + n * s1], stored as float4 when N allows; OutT
//     (an NN product run transposed, C^T = B^T A^T) stores the transposed product, float4 along M.
#pragma once

#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "gemm/sgemm/epilogue.cuh"
#include "gemm/sgemm/loaders.cuh"
#include "gemm/sgemm/scheduler.cuh"
#include "gemm/sgemm/tile_config.cuh"
#include "gemm/tc/common.cuh"

namespace cudasteps {
namespace gemm {

// One block's work on output tile `tile` over the K range [k_begin, k_end): the main loop (the
// ring or the register-staged buffers), then the epilogue: alpha * acc + beta * C into the output
// (or, split-K, into block z's partial output). StreamK: the block's sums are one part of the
// tile; they go to the workspace, and the block that writes the tile's last part adds up all the
// parts in block order (a fixed order whichever block comes last: deterministic) and stores them.
// ALayoutK: A is contiguous along K (row-major); BLayoutK: B is contiguous along K (column-major).
// OutT: the product is the transpose of the output (the dispatcher runs an NN product C = A B as
// C^T = B^T A^T, whose operands need only A's 4-byte transposing copies for the smaller side of the
// tile); element (m, n) goes to out[n * M + m], 16-byte stores along m.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool StreamK = false,
          bool OutT = false>
__device__ __forceinline__ void sgemm_tile(const SgemmParams& p, float* smem, int tile,
                                           int64_t k_begin, int64_t k_end,
                                           const StreamKParams& sk = StreamKParams{}) {
  int tid;
  if constexpr (StreamK) {  // see sgemm_streamk_kernel
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  } else {
    tid = threadIdx.x;
  }

  int64_t m0, n0;
  tile_origin<Cfg>(p, tile, m0, n0);

  const int num_slices = k_end > k_begin ? int((k_end - k_begin + Cfg::BK - 1) / Cfg::BK) : 0;

  int row0, col0, row_step, col_step;
  thread_origin<Cfg>(tid, row0, col0, row_step, col_step);

  float acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
    for (int c = 0; c < Cfg::TN; ++c) acc[r][c] = 0.f;

  // A stage holds As[BK][BM + pad], then Bs[BK][BN + pad] kBOffset floats on.
  constexpr int kBOffset = Cfg::BK * Cfg::kStrideA;
  auto stage_a = [&](int s) { return smem + s * Cfg::kStageFloats; };
  auto stage_b = [&](int s) { return smem + s * Cfg::kStageFloats + kBOffset; };

  // The thread's TM values of A and TN values of B at depth k of the slice held in (As, Bs).
  struct Frag {
    float a[Cfg::TM], b[Cfg::TN];
  };
  auto load_frag = [&](Frag& f, const float* __restrict__ As, const float* __restrict__ Bs,
                       int k) {
    load_fragment<Cfg::TM>(f.a, As + k * Cfg::kStrideA + row0, row_step);
    load_fragment<Cfg::TN>(f.b, Bs + k * Cfg::kStrideB + col0, col_step);
  };
  constexpr bool kSerpentine =
      Vec && (Cfg::SerpentineFma & fma_order_bit(ALayoutK, BLayoutK, StreamK)) != 0;
  // TM x TN outer product of one k (odd rows right to left when kSerpentine).
  auto fma_frag = [&](const Frag& f) {
#pragma unroll
    for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
      for (int i = 0; i < Cfg::TN; ++i) {
        const int c = kSerpentine && (r & 1) ? Cfg::TN - 1 - i : i;
        acc[r][c] = fmaf(f.a[r], f.b[c], acc[r][c]);
      }
  };
  // Every k of the slice held in (As, Bs).
  auto compute_slice = [&](const float* __restrict__ As, const float* __restrict__ Bs) {
#pragma unroll Cfg::KUnroll
    for (int k = 0; k < Cfg::BK; ++k) {
      Frag f;
      load_frag(f, As, Bs, k);
      fma_frag(f);
    }
  };

  // Slice base pointers, advanced by one slice per step; remaining extents clamped to int.
  const float* a_tile = ALayoutK ? p.a + m0 * p.lda + k_begin : p.a + k_begin * p.lda + m0;
  const float* b_tile = BLayoutK ? p.b + n0 * p.ldb + k_begin : p.b + k_begin * p.ldb + n0;
  const int64_t a_step = ALayoutK ? Cfg::BK : Cfg::BK * p.lda;
  const int64_t b_step = BLayoutK ? Cfg::BK : Cfg::BK * p.ldb;
  const int m_rem = int(min(p.M - m0, int64_t(Cfg::BM)));
  const int n_rem = int(min(p.N - n0, int64_t(Cfg::BN)));
  int k_rem = int(min(k_end - k_begin, int64_t(INT_MAX)));

  if constexpr (Cfg::Stages >= 3) {
    // The cp.async ring.
    using CopyA = CpAsyncLoader<Cfg::BM, Cfg::BK, Cfg::kThreads, ALayoutK, Vec>;
    using CopyB = CpAsyncLoader<Cfg::BN, Cfg::BK, Cfg::kThreads, BLayoutK, Vec>;
    CopyA copy_a(a_tile, p.lda, m_rem, tid);
    CopyB copy_b(b_tile, p.ldb, n_rem, tid);
    // The k step of the slice being computed that issues copy c of the next slice: A's copies
    // first, then B's, kGroup of them per step, all before the step that holds the barrier.
    constexpr int kGroup = !Vec                  ? Cfg::CopyGroupUnaligned
                           : ALayoutK && BLayoutK ? Cfg::CopyGroupKK
                                                  : Cfg::CopyGroup;
    auto copy_step = [](int c) { return (c / kGroup) % (Cfg::BK - 1); };
    // The copies of one slice (k < 0), or those of them that go with k step `k`, into the stage
    // at float offset `stage` of the ring. live false (past the last slice): they read nothing and
    // write zeros to a stage that is not read again, which keeps the loop free of branches.
    auto copies = [&](int k, int stage, bool live) {
      const int k_in = live ? k_rem : 0;
#pragma unroll
      for (int j = 0; j < CopyA::kPerThread; ++j)
        if (k < 0 || copy_step(j) == k)
          copy_a.issue_one(j, smem + stage, copy_a.k_limit(k_in));
#pragma unroll
      for (int j = 0; j < CopyB::kPerThread; ++j)
        if (k < 0 || copy_step(CopyA::kPerThread + j) == k)
          copy_b.issue_one(j, smem + stage + kBOffset, copy_b.k_limit(k_in));
    };
    // Stages are addressed by float offset, stepped with an add and a wrap: a stage index times
    // the stage size is an IMAD, which waits for the FMA pipe behind the FFMAs (ncu: most of the
    // loop's math-pipe-throttle stalls sat on two such IMADs right before the barrier).
    constexpr int kRingFloats = Cfg::Stages * Cfg::kStageFloats;
    auto next_stage = [](int off) {
      return off + Cfg::kStageFloats == kRingFloats ? 0 : off + Cfg::kStageFloats;
    };
    auto next_slice = [&] {
      tc::cp_async_commit();
      copy_a.advance(a_step);
      copy_b.advance(b_step);
      k_rem -= Cfg::BK;
    };
    // The step that issues the slice's last copies (then commits its group).
    constexpr int kCopies = CopyA::kPerThread + CopyB::kPerThread;
    constexpr int kLastCopyStep =
        (kCopies - 1) / kGroup < Cfg::BK - 2 ? (kCopies - 1) / kGroup : Cfg::BK - 2;
    // Prologue: slices 0 .. Stages-2 in flight, one commit group each (empty past the last).
#pragma unroll
    for (int s = 0; s < Cfg::Stages - 1; ++s) {
      copies(-1, s * Cfg::kStageFloats, s < num_slices);
      next_slice();
    }
    // The thread's running total of the blocked sums: element r * TN + c at total[that *
    // kThreads] (consecutive threads, consecutive words: no bank conflicts). Scalar accesses: a
    // 16-byte access would pin the accumulators to aligned register quads (see the stream-K
    // epilogue below).
    float* total = smem + kRingFloats + tid;
    bool summed = false;  // the total holds blocks
    if (num_slices > 0) {
      tc::cp_async_wait<Cfg::Stages - 2>();
      __syncthreads();
      Frag f[2];
      load_frag(f[0], stage_a(0), stage_b(0), 0);
      int read = 0, write = (Cfg::Stages - 1) * Cfg::kStageFloats;  // stage offsets
      int block_left = p.sum_block_slices > 0 ? p.sum_block_slices : INT_MAX;
      for (int t = 0; t < num_slices; ++t) {
        const float* As = smem + read;
        const float* Bs = As + kBOffset;
        // Slice t+Stages-1 goes to the stage of slice t-1, free since the last barrier.
        const bool live = t + Cfg::Stages - 1 < num_slices;
#pragma unroll
        for (int k = 0; k < Cfg::BK; ++k) {
          Frag& next = f[(k + 1) & 1];
          if (k + 1 < Cfg::BK) {
            load_frag(next, As, Bs, k + 1);
            copies(k, write, live);
            if (k == kLastCopyStep) next_slice();
          } else {
            // Slices 0 .. t+Stages-1 are committed: waiting down to Stages-2 groups completes
            // slice t+1, and the barrier publishes it. Every thread's loads from slice t are
            // behind it too (this step's fragments are in registers): slice t's stage is free
            // for the copies of the next iteration.
            tc::cp_async_wait<Cfg::Stages - 2>();
            __syncthreads();
            write = read;
            read = next_stage(read);
            // (After the last slice this reads a stage that is not used: harmless, no branch.)
            load_frag(next, smem + read, smem + read + kBOffset, 0);
          }
          fma_frag(f[k & 1]);
        }
        // End of a block of slices (not the last one: the epilogue adds that): into the total.
        if (--block_left == 0 && t + 1 < num_slices) {
          block_left = p.sum_block_slices;
#pragma unroll
          for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
            for (int c = 0; c < Cfg::TN; ++c) {
              float* q = total + (r * Cfg::TN + c) * Cfg::kThreads;
              *q = summed ? *q + acc[r][c] : acc[r][c];
              acc[r][c] = 0.f;
            }
          summed = true;
        }
      }
    }
    tc::cp_async_wait<0>();  // only empty groups can remain; none may outlive the block
    if (summed) {
#pragma unroll
      for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
        for (int c = 0; c < Cfg::TN; ++c)
          acc[r][c] = total[(r * Cfg::TN + c) * Cfg::kThreads] + acc[r][c];
    }
  } else if (num_slices > 0) {
    // The register-staged loaders. B's element (k, n): "x" is n, K-contiguous when column-major.
    TileLoader<Cfg::BM, Cfg::BK, Cfg::kThreads, ALayoutK, Vec> load_a;
    TileLoader<Cfg::BN, Cfg::BK, Cfg::kThreads, BLayoutK, Vec> load_b;
    load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
    load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
    load_a.store(stage_a(0), tid);
    load_b.store(stage_b(0), tid);
    __syncthreads();
    for (int t = 0; t < num_slices; ++t) {
      const bool has_next = t + 1 < num_slices;
      if (has_next) {
        a_tile += a_step;
        b_tile += b_step;
        k_rem -= Cfg::BK;
      }
      if constexpr (Cfg::Stages == 2) {
        const int cur = t & 1;
        // Prefetch: the global loads of slice t+1 are in flight during the FFMAs of slice t.
        if (has_next) {
          load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
          load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
        }
        compute_slice(stage_a(cur), stage_b(cur));
        // The other buffer was last read in iteration t-1, which ended with a barrier.
        if (has_next) {
          load_a.store(stage_a(cur ^ 1), tid);
          load_b.store(stage_b(cur ^ 1), tid);
        }
        __syncthreads();
      } else {
        compute_slice(stage_a(0), stage_b(0));
        __syncthreads();  // everyone is done reading before the buffer is overwritten
        if (has_next) {
          load_a.load(a_tile, p.lda, m_rem, k_rem, tid);
          load_b.load(b_tile, p.ldb, n_rem, k_rem, tid);
          load_a.store(stage_a(0), tid);
          load_b.store(stage_b(0), tid);
          __syncthreads();
        }
      }
    }
  }

  if constexpr (StreamK) {
    // Where the parts live is recomputed here from the kernel parameters, not kept in registers
    // through the main loop. Tail tile t's parts are those of blocks b_first .. b_last, in order.
    const int ipt = sk.iters_per_tile;
    const int t = tile - sk.dp_tiles;
    const int b_first = streamk_block_of(sk, int64_t(t) * ipt);
    const int parts = streamk_block_of(sk, int64_t(t + 1) * ipt - 1) - b_first + 1;
    const int64_t kSlot = int64_t(Cfg::BM) * Cfg::BN;
    // A block's first slot holds the tile its range begins in, its second the next tile. Only
    // block b_first's range can begin before tile t (in tile t - 1).
    const int first_seg = streamk_begin(sk, b_first) < int64_t(t) * ipt ? 1 : 0;
    auto slot_of = [&](int q) -> const float* {  // part q's slot
      return sk.workspace + ((int64_t(b_first) + q) * 2 + (q == 0 ? first_seg : 0)) * kSlot;
    };
    // The part, times alpha, into the block's slot (tile-local, row-major). The product matters
    // for speed: a 16-byte store straight from the accumulators pins them to aligned register
    // quads, which puts them in the register banks of the B fragment (ptxas then leaves about
    // 2/3 of the FFMAs with a bank conflict, and the main loop runs 3-4% slower).
    // With OutT the slot is in output order (column-major in the tile), so that the last block's
    // stores are whole output rows.
    const int b = blockIdx.x;
    float* own = sk.workspace +
                 (int64_t(b) * 2 + (streamk_begin(sk, b) < int64_t(t) * ipt ? 1 : 0)) * kSlot;
    if constexpr (OutT) {
#pragma unroll
      for (int i = 0; i < Cfg::kSubM; ++i)
#pragma unroll
        for (int c = 0; c < Cfg::TN; ++c)
          __stcg(reinterpret_cast<float4*>(own + (col0 + (c / 4) * col_step + (c % 4)) * Cfg::BM +
                                           row0 + i * row_step),
                 make_float4(p.alpha * acc[i * 4][c], p.alpha * acc[i * 4 + 1][c],
                             p.alpha * acc[i * 4 + 2][c], p.alpha * acc[i * 4 + 3][c]));
    } else {
#pragma unroll
      for (int r = 0; r < Cfg::TM; ++r)
#pragma unroll
        for (int j = 0; j < Cfg::kSubN; ++j)
          __stcg(reinterpret_cast<float4*>(own + (row0 + (r / 4) * row_step + (r % 4)) * Cfg::BN +
                                           col0 + j * col_step),
                 make_float4(p.alpha * acc[r][j * 4], p.alpha * acc[r][j * 4 + 1],
                             p.alpha * acc[r][j * 4 + 2], p.alpha * acc[r][j * 4 + 3]));
    }
    // Publish the part, then count it (the classic last-block pattern: no block waits on another).
    __threadfence();
    __syncthreads();
    __shared__ int is_last;
    if (tid == 0) {
      is_last = atomicAdd(sk.counters + t, 1) == parts - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    // Every part is written: the last block adds them up in part order (its own part too, read
    // back: the order, and so the result, must not depend on which block came last) and stores
    // the tile, float4 chunks spread over the threads so that the stores coalesce. The
    // accumulators are dead by now, which leaves the registers for loads in flight.
    tile_origin<Cfg>(p, tile, m0, n0);
    const bool vec_out = ((OutT ? p.M : p.N) % 4 == 0) &&
                         ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0);
    constexpr int kChunks = Cfg::BM * Cfg::BN / 4, kUnroll = 8;
    for (int c0 = tid; c0 < kChunks; c0 += Cfg::kThreads * kUnroll) {
      float4 sum[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) sum[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      // Unrolled over parts too, so that the loads of several parts are in flight together.
#pragma unroll 4
      for (int q = 0; q < parts; ++q) {
        const float4* slot = reinterpret_cast<const float4*>(slot_of(q));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * Cfg::kThreads;
          if (c < kChunks) {
            const float4 v = __ldcg(slot + c);
            sum[u].x += v.x;
            sum[u].y += v.y;
            sum[u].z += v.z;
            sum[u].w += v.w;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + u * Cfg::kThreads;
        float v[4] = {sum[u].x, sum[u].y, sum[u].z, sum[u].w};
        if constexpr (OutT) {
          const int64_t n = n0 + c * 4 / Cfg::BM, m = m0 + c * 4 % Cfg::BM;
          if (c < kChunks && n < p.N) store_out4_t(p, p.out, m, n, v, vec_out);
        } else {
          const int64_t m = m0 + c * 4 / Cfg::BN, n = n0 + c * 4 % Cfg::BN;
          if (c < kChunks && m < p.M) store_out4(p, p.out, m, n, v, vec_out);
        }
      }
    }
    return;
  }
  // Epilogue. The output (and the split-K workspace) is row-major with leading dimension N.
  // The tile origin is recomputed rather than kept live through the main loop (registers).
  tile_origin<Cfg>(p, tile, m0, n0);
  float* out = p.out + int64_t(blockIdx.z) * p.out_split_stride;
  const bool vec_out =
      ((OutT ? p.M : p.N) % 4 == 0) && ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0);
  if constexpr (OutT) {
    // Each 4x4 sub-tile, column by column: 4 rows of the kernel's product, contiguous in out.
#pragma unroll
    for (int i = 0; i < Cfg::kSubM; ++i) {
      const int64_t m = m0 + row0 + i * row_step;
      if (m >= p.M) continue;
#pragma unroll
      for (int c = 0; c < Cfg::TN; ++c) {
        const int64_t n = n0 + col0 + (c / 4) * col_step + (c % 4);
        if (n >= p.N) continue;
        float v[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) v[r] = p.alpha * acc[i * 4 + r][c];
        store_out4_t(p, out, m, n, v, vec_out);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < Cfg::TM; ++r) {
      const int64_t m = m0 + row0 + (r / 4) * row_step + (r % 4);
      if (m >= p.M) continue;
#pragma unroll
      for (int j = 0; j < Cfg::kSubN; ++j) {
        const int64_t n = n0 + col0 + j * col_step;
        float v[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] = p.alpha * acc[r][j * 4 + c];
        store_out4(p, out, m, n, v, vec_out);
      }
    }
  }
}

// One output tile per block (blockIdx.x, grouped order), K split over gridDim.z.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    sgemm_kernel(const SgemmParams p) {
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int64_t k_begin = int64_t(blockIdx.z) * p.k_per_split;
  const int64_t k_end = p.K < k_begin + p.k_per_split ? p.K : k_begin + p.k_per_split;
  sgemm_tile<Cfg, ALayoutK, BLayoutK, Vec, false, OutT>(p, smem, blockIdx.x, k_begin, k_end);
}

// The tail's blocks (StreamKParams): block b computes its part of one or two tail tiles.
template <class Cfg, bool ALayoutK, bool BLayoutK, bool Vec, bool OutT = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::MinBlocks)
    sgemm_streamk_kernel(const SgemmParams p, const StreamKParams sk) {
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int ipt = sk.iters_per_tile;
  const int64_t begin = streamk_begin(sk, blockIdx.x), end = streamk_begin(sk, blockIdx.x + 1);
  // One sgemm_tile call site in a loop of at most two parts. (The tile's thread index is read
  // opaquely in stream-K mode: otherwise the compiler hoists the tile's setup out of this loop
  // and keeps it live through the main loop, which then spills.)
  for (int64_t it = begin; it < end;) {
    const int t = int(it / ipt);
    const int kb = int(it % ipt);
    const int ke = end - it < ipt - kb ? kb + int(end - it) : ipt;
    // Every thread is done with the ring and the last-part flag of the first part.
    if (it != begin) __syncthreads();
    sgemm_tile<Cfg, ALayoutK, BLayoutK, Vec, true, OutT>(p, smem, sk.dp_tiles + t,
                                                         int64_t(kb) * Cfg::BK,
                                                         min(int64_t(ke) * Cfg::BK, p.K), sk);
    it += ke - kb;
  }
}

}  // namespace gemm
}  // namespace cudasteps
