// Device building blocks shared by both tensor-core GEMM paths (tc_sm80.cu: mma.sync; tc_hopper.cu:
// wgmma + TMA): element traits, cp.async, the rasterized tile order and the fused epilogue. Written
// once here so that both ladders use the same pieces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "gemm/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace tc {

// ---- element traits: storage type of a, b, out and addend per TcType ----
template <TcType T>
struct Elem;

template <>
struct Elem<TcType::kBF16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ float to_float(type v) { return __bfloat162float(v); }
  static __device__ __forceinline__ type from_float(float v) { return __float2bfloat16_rn(v); }
  // Two outputs as one 32-bit word (the lower address holds `lo`).
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

template <>
struct Elem<TcType::kFP16> {
  using type = __half;
  static __device__ __forceinline__ float to_float(type v) { return __half2float(v); }
  static __device__ __forceinline__ type from_float(float v) { return __float2half_rn(v); }
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

// TF32: float storage; the tensor cores read the upper 19 bits (the kernels round with
// cvt.rna.tf32.f32 where they stage operands through registers).
template <>
struct Elem<TcType::kTF32> {
  using type = float;
  static __device__ __forceinline__ float to_float(type v) { return v; }
  static __device__ __forceinline__ type from_float(float v) { return v; }
};

// ---- shared-memory addresses and cp.async (sm_80+) ----

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared (.cg: bypassing L1) of which only the first `src_bytes` (0..16) are
// read; the rest of the 16 shared bytes are zero-filled. This is how ragged tile edges enter the
// sum as zeros: a row past M or a chunk past K reads nothing (0), the chunk that straddles the end
// of a row reads only its valid part.
__device__ __forceinline__ void cp_async_16_bytes(void* smem, const void* gmem, int src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(src_bytes));
#else
  (void)smem, (void)gmem, (void)src_bytes;
  __trap();
#endif
}

// All 16 bytes when `pred`, else zeros.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool pred) {
  cp_async_16_bytes(smem, gmem, pred ? 16 : 0);
}

// One float global -> shared when `pred`, else a zero. 4-byte copies exist only in the .ca form
// (through L1). They let a copy land anywhere in shared memory, so a tile can be transposed on its
// way in (the SGEMM's k-major tiles of a k-contiguous operand) and rows need no 16-byte alignment.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool pred) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem),
               "r"(pred ? 4 : 0));
#else
  (void)smem, (void)gmem, (void)pred;
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---- tile order: grouped rasterization for L2 reuse ----
//
// Numbering output tiles row by row sends one wave of blocks across a full row of tiles: each block
// reads a different B panel, and the A panel they share is used once per wave. Grouping `group` rows
// of tiles and walking them column by column inside the group makes one wave cover a squarer patch,
// so the A and B panels it reads stay in L2 while the neighbours that need them run.
struct TileRaster {
  int tiles_m = 1, tiles_n = 1, group = 8;

  __host__ __device__ int count() const { return tiles_m * tiles_n; }

  // Tile `linear` (0 <= linear < count()) -> its (tile_m, tile_n).
  __host__ __device__ void coords(int linear, int& tm, int& tn) const {
    const int per_group = group * tiles_n;
    const int g = linear / per_group;
    const int first_m = g * group;
    const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
    const int in_group = linear - g * per_group;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
  }
};

// ---- epilogue: out[m, n] = alpha * acc + beta * addend[m, n], converted, bounds-checked ----
template <TcType T>
struct Epilogue {
  using E = typename Elem<T>::type;
  E* out;
  int64_t ldo;
  int64_t M, N;
  float alpha, beta;
  const E* addend;  // nullptr: none
  int64_t add_s0, add_s1;

  static Epilogue from(const TcProblem& p) {
    Epilogue e;
    e.out = static_cast<E*>(p.out);
    e.ldo = p.ldo;
    e.M = p.M;
    e.N = p.N;
    e.alpha = p.alpha;
    e.beta = p.beta;
    e.addend = p.beta != 0.f ? static_cast<const E*>(p.addend) : nullptr;
    e.add_s0 = p.add_s0;
    e.add_s1 = p.add_s1;
    return e;
  }

  __device__ __forceinline__ float value(int64_t m, int64_t n, float acc) const {
    float v = alpha * acc;
    if (addend != nullptr) v += beta * Elem<T>::to_float(addend[m * add_s0 + n * add_s1]);
    return v;
  }

  __device__ __forceinline__ void store_one(int64_t m, int64_t n, float acc) const {
    if (m < M && n < N) out[m * ldo + n] = Elem<T>::from_float(value(m, n, acc));
  }

  // Elements (m, n) and (m, n + 1), n even: one 32-bit store (16-bit types) or 64-bit store
  // (float) when both are inside and the address is aligned, else element by element.
  __device__ __forceinline__ void store_pair(int64_t m, int64_t n, float acc0, float acc1) const {
    if (m >= M || n >= N) return;
    E* dst = out + m * ldo + n;
    if (n + 1 < N && (reinterpret_cast<uintptr_t>(dst) % (2 * sizeof(E))) == 0) {
      const float v0 = value(m, n, acc0), v1 = value(m, n + 1, acc1);
      if constexpr (T == TcType::kTF32) {
        *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
      } else {
        *reinterpret_cast<uint32_t*>(dst) = Elem<T>::pack2(v0, v1);
      }
    } else {
      store_one(m, n, acc0);
      store_one(m, n + 1, acc1);
    }
  }
};

// ---- host: kernel attributes ----

// Lets `kernel` use `smem_bytes` of dynamic shared memory (above the default 48 KiB) and asks for
// the whole unified L1/shared storage as shared memory (the kernels stream operands past L1, and
// several blocks of a large ring must fit on one SM). cudaFuncSetAttribute costs host time on
// every call, so this runs once per (kernel, device).
template <typename Kernel>
void configure_smem_once(Kernel kernel, size_t smem_bytes) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;  // (kernel, device)
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel),
                                        int(c10::cuda::current_device())};
  const std::lock_guard<std::mutex> lock(mutex);
  if (done.count(key)) return;
  if (smem_bytes > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(smem_bytes)));
  }
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
  done.insert(key);
}

}  // namespace tc
}  // namespace gemm
}  // namespace cudasteps
