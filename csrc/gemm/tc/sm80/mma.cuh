// Device building blocks of the mma.sync tensor-core path (tc/sm80/): the warp-level MMA
// instructions, ldmatrix, TF32 rounding and the XOR swizzle of the shared-memory tiles.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8"). In a warp, lane
// l is thread t = l % 4 of group g = l / 4. Each 32-bit register holds one TF32 value or two
// adjacent 16-bit values (the lower address in the low half).
//
//   m16n8k16, bf16/fp16:  A (16 x 16, row-major):  a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
//                                                  a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//                         B (16 x 8, "col"):       b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
//   m16n8k8, tf32:        A (16 x 8):              a0 = A[g][t]    a1 = A[g+8][t]
//                                                  a2 = A[g][t+4]  a3 = A[g+8][t+4]
//                         B (8 x 8):               b0 = B[t][g]    b1 = B[t+4][g]
//   C/D (16 x 8, fp32, both shapes):               d0, d1 = C[g][2t, 2t+1]   d2, d3 = C[g+8][2t, 2t+1]
//
// So both shapes want, per register, values that are adjacent along K for one row of A (one
// column of B): a K-major tile in shared memory serves both with plain 32-bit loads, and the same
// 32-bit word offsets (16-bit pair 2t..2t+1 and TF32 element t are both word t of a row).
//
// ldmatrix.x4 loads four 8 x 8 matrices of 16-bit values; lanes 8i..8i+7 give the addresses of
// the 8 rows (16 bytes each) of matrix i, and register i of lane l receives row l / 4, values
// 2 (l % 4) and 2 (l % 4) + 1 of matrix i: exactly the a0/b0 pattern above when the rows are M
// (or N) and the 16 bytes run along K. With .trans the matrix is transposed on the way: rows in
// shared memory run along K and the 16 bytes along M (or N), the MN-major case. For TF32 a row of
// 16 bytes is 4 values and register i of lane l receives value l % 4 of row l / 4: the m16n8k8
// a0/b0 pattern, so K-major TF32 tiles load with the same instruction (there is no 32-bit
// .trans, so MN-major TF32 tiles cannot).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gemm/tc/common.cuh"

namespace cudasteps {
namespace gemm {
namespace tc {

// mma.sync, ldmatrix and cvt.rna.tf32 exist from sm_80 (ldmatrix from sm_75); a build for an
// older architecture in the arch list compiles these to a trap (the host side refuses such GPUs
// before launching).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define CUDASTEPS_TC_NO_MMA 1
#endif

// d += a @ b for one 16 x 8 x 16 bf16 tile (fp32 accumulators).
__device__ __forceinline__ void mma_16816_bf16(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
#ifndef CUDASTEPS_TC_NO_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

// d += a @ b for one 16 x 8 x 16 fp16 tile (fp32 accumulators).
__device__ __forceinline__ void mma_16816_fp16(float (&d)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
#ifndef CUDASTEPS_TC_NO_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

// d += a @ b for one 16 x 8 x 8 TF32 tile. The operand registers must hold TF32 values
// (to_tf32): the tensor cores ignore the low 13 mantissa bits, which would truncate instead of
// round.
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const uint32_t (&a)[4],
                                              const uint32_t (&b)[2]) {
#ifndef CUDASTEPS_TC_NO_MMA
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)d, (void)a, (void)b;
  __trap();
#endif
}

// fp32 -> TF32, rounded to nearest (ties away from zero), as a 32-bit register.
__device__ __forceinline__ uint32_t to_tf32(float x) {
#ifndef CUDASTEPS_TC_NO_MMA
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  (void)x;
  __trap();
  return 0;
#endif
}

// Rounds a register that holds raw fp32 bits (as ldmatrix delivers them) to TF32, in place.
__device__ __forceinline__ void round_tf32(uint32_t& r) { r = to_tf32(__uint_as_float(r)); }

// The MMA of one element type: kK is its K depth (16 for bf16/fp16, 8 for TF32).
template <TcType T>
struct Mma;

template <>
struct Mma<TcType::kBF16> {
  static constexpr int kK = 16;
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    mma_16816_bf16(d, a, b);
  }
};

template <>
struct Mma<TcType::kFP16> {
  static constexpr int kK = 16;
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    mma_16816_fp16(d, a, b);
  }
};

template <>
struct Mma<TcType::kTF32> {
  static constexpr int kK = 8;
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    mma_1688_tf32(d, a, b);
  }
};

// Four 8 x 8 16-bit matrices from shared memory; `addr`: this lane's row (16-byte aligned).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#ifndef CUDASTEPS_TC_NO_MMA
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  (void)r, (void)addr;
  __trap();
#endif
}

// The same, each matrix transposed on the way to registers.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#ifndef CUDASTEPS_TC_NO_MMA
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  (void)r, (void)addr;
  __trap();
#endif
}

// ---- the XOR swizzle of a shared-memory tile ----
//
// A tile is stored as rows of kRowChunks 16-byte chunks (the unit of cp.async and of one ldmatrix
// row). Shared memory has 32 banks of 4 bytes, i.e. 8 chunk-wide bank groups per 128 bytes; an
// access by 8 lanes of 16 bytes each is conflict-free when the 8 chunks fall into 8 different
// bank groups. Both accesses that matter touch 8 consecutive rows at the same logical chunk:
//   * ldmatrix: 8 lanes give the addresses of rows r..r+7 (r a multiple of 8) at one chunk;
//   * a cp.async store from 8 consecutive threads covers 8 consecutive chunks of one row
//     (kRowChunks >= 8) or whole rows (kRowChunks < 8).
// Unswizzled, rows of 128 bytes or more put a column of chunks into one bank group (8-way
// conflict); 64-byte rows put it into two. The swizzle stores logical chunk c of row r at
// physical chunk c ^ key(r):
//   * kRowChunks >= 8:  key = r % 8. Rows r..r+7 map chunk c to 8 different values of c % 8:
//     8 bank groups. A run of 8 aligned chunks of one row is only permuted: still 8 groups.
//   * kRowChunks = 4 (64-byte rows, two rows per 128 bytes): key = (r / 2) % 4. The bank group
//     of (r, c) is 4 (r % 2) + (c ^ key(r)): for r..r+7 the pairs (r % 2, key) are all 8
//     combinations, so 8 groups; two consecutive rows (8 chunks) are 8 groups as well.
//   * kRowChunks = 2 (32-byte rows): key = (r / 4) % 2, the same argument with 4 rows per 128 B.
// key depends on r % 8 only, so a lane may compute it once for rows r, r + 8, r + 16, ...
template <int kRowChunks>
__host__ __device__ constexpr int swizzle_key(int row) {
  static_assert(kRowChunks >= 2 && (kRowChunks & (kRowChunks - 1)) == 0,
                "rows of a power-of-two number of 16-byte chunks, at least two");
  if constexpr (kRowChunks >= 8) {
    return row & 7;
  } else {
    return (row / (8 / kRowChunks)) & (kRowChunks - 1);
  }
}

// Byte offset of logical chunk `chunk` of row `row` in a swizzled tile of kRowChunks-chunk rows.
template <int kRowChunks>
__host__ __device__ constexpr uint32_t swizzled_offset(int row, int chunk) {
  return uint32_t(row) * (kRowChunks * 16) + uint32_t((chunk ^ swizzle_key<kRowChunks>(row)) * 16);
}

}  // namespace tc
}  // namespace gemm
}  // namespace cudasteps
