// The tensor maps of the Hopper kernels (host code): operands and output described for the TMA
// through cuTensorMapEncodeTiled, which the driver provides (found through the runtime, so the
// extension does not link against libcuda).
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>

#include "gemm/tc/sm90/launch.cuh"

namespace cudasteps {
namespace gemm {
namespace sm90 {
namespace {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                    cudaEnableDefault, &status));
#else
    C10_CUDA_CHECK(
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &status));
#endif
    TORCH_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr,
                "cudasteps.mm: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12+)");
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// The TMA's element type: FP8 elements are moved as bytes (the TMA only copies them).
CUtensorMapDataType tma_data_type(TcType type) {
  switch (type) {
    case TcType::kBF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case TcType::kFP16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case TcType::kTF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
}

// An operand's TMA element type. float32 operands (TF32 products) load as TFLOAT32: the TMA rounds
// each value to TF32 to nearest on its way into shared memory. wgmma itself truncates a float32
// operand to TF32 (it ignores the low 13 bits), a bias toward zero that grows with K; loaded as
// float32, our TF32 products had 2.8x torch's error (cuBLAS rounds), and a rounding pass of our
// own would cost a read and a write of every operand. (The output map stays float32: a store
// must not round.)
CUtensorMapDataType tma_operand_type(TcType type) {
  return type == TcType::kTF32 ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 : tma_data_type(type);
}

}  // namespace

// An operand as a 2-D tensor map whose box is what tma_tile loads: K-major (rows x K, element
// (r, k) at base[r * ld + k]) boxes of BK x box_rows; MN-major (element (r, k) at base[k * ld + r])
// boxes of BK x BK (128 bytes of MN by BK k-rows). Out-of-bounds box elements arrive as zeros.
CUtensorMap operand_tensor_map(const void* base, bool k_major, int64_t rows, int64_t K, int64_t ld,
                               TcType type, int box_rows) {
  const int eb = tc_elem_bytes(type);
  const int bk = 128 / eb;
  const CUtensorMapDataType dtype = tma_operand_type(type);
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k_major ? K : rows), cuuint64_t(k_major ? rows : K)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * eb};
  const cuuint32_t box[2] = {cuuint32_t(bk), cuuint32_t(k_major ? box_rows : bk)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, dtype, 2, const_cast<void*>(base), dims, strides, box,
                                    elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cudasteps.mm: cuTensorMapEncodeTiled failed (error ", int(r),
              ") for a ", rows, " x ", K, (k_major ? " K-major" : " MN-major"),
              " operand with leading dimension ", ld);
  return map;
}

// The output (row-major M x N, leading dimension ldo) as the TMA stores of tc:ws_persistent see
// it: boxes of 64 rows x 128 bytes, written from the 128-byte-swizzled staging buffer.
CUtensorMap output_tensor_map(void* out, int64_t M, int64_t N, int64_t ldo, TcType type) {
  const int eb = tc_elem_bytes(type);
  const CUtensorMapDataType dtype = tma_data_type(type);
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(N), cuuint64_t(M)};
  const cuuint64_t strides[1] = {cuuint64_t(ldo) * eb};
  const cuuint32_t box[2] = {cuuint32_t(128 / eb), 64};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, dtype, 2, out, dims, strides, box, elem_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cudasteps.mm: cuTensorMapEncodeTiled failed (error ", int(r),
              ") for the ", M, " x ", N, " output");
  return map;
}

}  // namespace sm90
}  // namespace gemm
}  // namespace cudasteps
