// The sm_90a instructions of the Hopper kernels, one inline wrapper each: wgmma fence, commit and
// wait; mbarriers (in this CTA or another of the cluster); TMA loads (plain and multicast) and
// stores; bulk groups; cluster rank and barrier; stores to another CTA's shared memory; warpgroup
// and named barriers; stmatrix; setmaxnreg. Outside nvcc's sm_90a pass
// (CUDASTEPS_SM90A_DEVICE, config.cuh) each compiles to nothing, or to a trap.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "gemm/tc/sm90/config.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {

// Device code (and the kernels) with internal linkage: every translation unit that
// instantiates a kernel owns its copy, registered with its own fatbin.
namespace {

// ---- PTX wrappers (sm_90a) ----
#ifdef CUDASTEPS_SM90A_DEVICE
#include "gemm/tc/sm90/wgmma.inc"
#endif

__device__ __forceinline__ void hopper_only() {
#ifndef CUDASTEPS_SM90A_DEVICE
  __trap();
#endif
}

// Orders this warpgroup's accumulator registers before the wgmmas that follow.
__device__ __forceinline__ void wgmma_fence() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// The registers stay live across the asm (the wgmma writes them asynchronously): tie them to it.
template <int N>
__device__ __forceinline__ void keep_live(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Makes this thread's generic-proxy shared-memory writes (cp.async) visible to the async proxy
// (wgmma reads), once a barrier has ordered them.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
#endif
}

// Makes barrier initialisation visible to the async proxy (TMA completes transactions on them).
__device__ __forceinline__ void fence_barrier_init() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#endif
}

// One test of the phase of parity `parity` of `bar` (the hardware may hold the thread a while
// before it answers); kClusterScope: with acquire at cluster scope (mbar_wait_cluster).
template <bool kClusterScope>
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, int parity) {
  uint32_t done = 1;
#ifdef CUDASTEPS_SM90A_DEVICE
  if constexpr (kClusterScope) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, "
                 "[%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } else {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  }
#endif
  return done != 0;
}

// Blocks until the phase of parity `parity` of `bar` has completed. A fresh barrier counts its
// (never run) phase of parity 1 as completed, so a producer waiting on "empty" with parity 1
// passes at once in the first round of the ring.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  while (!mbar_try_wait<false>(bar, parity)) {
  }
}

// One box of a 2-D tensor map (inner coordinate k, outer coordinate row) into shared memory;
// completion is counted on `bar` in bytes. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int k,
                                            int row) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row)
      : "memory");
#endif
}

// tma_load_2d with an L2 eviction priority for the lines it reads (`policy`: l2_policy's).
__device__ __forceinline__ void tma_load_2d_hinted(void* dst, const CUtensorMap* map,
                                                   uint64_t* bar, int k, int row,
                                                   uint64_t policy) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row), "l"(policy)
      : "memory");
#endif
}

// An L2 cache policy for tma_load_2d_hinted: kEvictFirst for lines read once (they go first),
// else evict_last for lines every CTA reads again (they stay longest).
template <bool kEvictFirst>
__device__ __forceinline__ uint64_t l2_policy() {
  uint64_t policy = 0;
#ifdef CUDASTEPS_SM90A_DEVICE
  if constexpr (kEvictFirst) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  }
#endif
  return policy;
}

// The same box, written to the same shared-memory offset in every CTA of the cluster named in
// `cta_mask` (bit i: CTA rank i), each CTA's copy of `bar` counting the bytes it received.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map,
                                                      uint64_t* bar, int k, int row,
                                                      uint16_t cta_mask) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(k), "r"(row), "h"(cta_mask)
      : "memory");
#endif
}

// This CTA's rank in its cluster (0 without clusters).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank = 0;
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
#endif
  return rank;
}

// Every thread of every CTA of the cluster arrives, then waits for all of them (release/acquire:
// shared-memory writes before it, barrier initialisation included, are seen by the whole cluster).
__device__ __forceinline__ void cluster_sync() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

// mbar_wait at cluster scope: it synchronizes with a release at cluster scope from another CTA of
// the cluster (the complete-tx of st_async_cluster_f32x4), so what that CTA stored is visible
// after it.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, int parity) {
  while (!mbar_try_wait<true>(bar, parity)) {
  }
}

// Four floats to `dst`'s address in the shared memory of cluster CTA `cta` (distributed shared
// memory; `dst` 16-byte aligned), an asynchronous store that completes 16 bytes of the
// transaction count of the barrier at `bar`'s address in that CTA (a release at cluster scope): a
// thread there that sees the barrier's phase complete through mbar_wait_cluster sees the floats,
// with no fence on either side.
__device__ __forceinline__ void st_async_cluster_f32x4(void* dst, uint64_t* bar, uint32_t cta,
                                                       float a, float b, float c, float d) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "{\n.reg .b32 remote, remote_bar;\n"
      "mapa.shared::cluster.u32 remote, %0, %2;\n"
      "mapa.shared::cluster.u32 remote_bar, %1, %2;\n"
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [remote], {%3, %4, %5, %6}, "
      "[remote_bar];\n}\n" ::"r"(smem_u32(dst)),
      "r"(smem_u32(bar)), "r"(cta), "f"(a), "f"(b), "f"(c), "f"(d)
      : "memory");
#endif
}

// Arrives on the barrier at the address of `bar` in the shared memory of cluster CTA `cta`
// (which may be this one). Plain arrive (release at CTA scope, what the consumers need: their
// wgmmas have finished reading the stage): with .release.cluster the multicast kernel ran at half
// speed on an H100, each arrive apparently waiting for the wgmmas still in flight.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(cta)
      : "memory");
#endif
}

// One box of shared memory (written in the 128-byte swizzle) to a 2-D tensor map at (col, row);
// the parts of the box outside the tensor are not written. Completion is tracked per thread with
// bulk groups (commit, then wait until the shared memory has been read).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int col,
                                             int row) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
      "r"(smem_u32(src)), "r"(col), "r"(row)
      : "memory");
#endif
}

__device__ __forceinline__ void bulk_commit() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// Waits until this thread's committed bulk stores have finished reading shared memory.
__device__ __forceinline__ void bulk_wait_read() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

// Waits until this thread's committed bulk stores are complete.
__device__ __forceinline__ void bulk_wait() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}

// A barrier of one warpgroup (128 threads) on hardware barrier `id` (0 is __syncthreads's).
__device__ __forceinline__ void warpgroup_barrier(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

// warpgroup_barrier that also returns whether `pred` held for any of the 128 threads.
__device__ __forceinline__ bool warpgroup_barrier_or(int id, bool pred) {
  uint32_t any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n"
      " selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(any)
      : "r"(uint32_t(pred)), "r"(id)
      : "memory");
  return any != 0;
}

__device__ __forceinline__ uint8_t* align_1024(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Stores four 8 x 8 matrices of 16-bit elements to shared memory (sm_90): lanes 8q..8q+7 give the
// row addresses of matrix q, and register q of every lane holds its fragment of matrix q (lane l:
// row l/4, columns 2(l%4) and 2(l%4) + 1), the accumulator layout of mma and wgmma.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#else
  (void)addr, (void)r0, (void)r1, (void)r2, (void)r3;
  hopper_only();
#endif
}

template <int N>
__device__ __forceinline__ void zero(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) d[i] = 0.f;
}

// The register split of the warp-specialized kernels (one CTA per SM): the producer warpgroup,
// where one thread issues the TMA, gives registers back; each consumer warpgroup takes them for
// its accumulators. With two consumer warpgroups (384 threads) 128 x 40 + 256 x 232 registers fit
// the SM's 64K; with three (512 threads, tc:ws_persistent's 192-row tiles) 128 x 40 + 384 x 152.
__device__ __forceinline__ void producer_registers() {
#ifdef CUDASTEPS_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
}

template <int kConsumers = 2>
__device__ __forceinline__ void consumer_registers() {
  static_assert(kConsumers >= 1 && kConsumers <= 3, "one to three consumer warpgroups");
#ifdef CUDASTEPS_SM90A_DEVICE
  if constexpr (kConsumers <= 2) {  // one: 232 is more than its 64 x 64 block needs
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 152;\n");
  }
#endif
}

// `threads` threads (a multiple of 32) meet at hardware barrier `id`: bar.sync waits for them,
// bar.arrive counts this warp in without waiting (the producer side of a signal).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
