// cast_fp8's CUDA kernel (launch.h): one pass over x in 32 x 32 tiles, each cast to FP8 with the
// scale, stored in place and, through a shared-memory tile, transposed (the transpose family's
// tile), while the tile's largest |x| is reduced over the warp (the reduce family's shuffle tree)
// and folded into the output amax with one atomicMax per block.
//
// The first form of the FP8 casting kernels: one byte per thread per store and 32 x 8 threads per
// tile. The 16-byte stores and larger tiles that the copy-bandwidth target asks for come next.
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "common/warp_reduce.cuh"
#include "fp8/launch.h"

namespace cudasteps {
namespace fp8 {
namespace {

constexpr int kTile = 32;      // a tile is 32 x 32 elements
constexpr int kBlockRows = 8;  // 32 x 8 threads: each thread takes 4 rows of the tile

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

struct MaxBits {
  __device__ __forceinline__ unsigned operator()(unsigned a, unsigned b) const { return max(a, b); }
};

template <typename T, Fp8Kind K>
__global__ void __launch_bounds__(kTile* kBlockRows)
    cast_fp8_kernel(const T* __restrict__ x, int64_t rows, int64_t cols,
                    const float* __restrict__ scale, uint8_t* __restrict__ out,
                    uint8_t* __restrict__ out_t, unsigned* __restrict__ amax_bits) {
  constexpr __nv_fp8_interpretation_t kFormat = K == Fp8Kind::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  __shared__ uint8_t tile[kTile][kTile + 4];  // padded rows: the transposed reads skip banks
  __shared__ unsigned warp_max[kBlockRows];
  const float s = *scale;
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t tiles = ((rows + kTile - 1) / kTile) * tiles_c;
  unsigned my_max = 0;  // bits of the largest |x| this thread saw (+0 to start)
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
    const int64_t c = c0 + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kTile / kBlockRows; ++i) {
      const int lr = threadIdx.y + i * kBlockRows;
      const int64_t r = r0 + lr;
      uint8_t q = 0;
      if (r < rows && c < cols) {
        const float v = to_float(x[r * cols + c]);
        my_max = max(my_max, __float_as_uint(fabsf(v)));
        q = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, kFormat);
        out[r * cols + c] = q;
      }
      tile[lr][threadIdx.x] = q;
    }
    if (out_t != nullptr) {
      __syncthreads();
      // out_t is [cols, rows]: thread x now walks along r (the tile's rows) for columns c0 + lr.
      const int64_t r = r0 + threadIdx.x;
#pragma unroll
      for (int i = 0; i < kTile / kBlockRows; ++i) {
        const int lc = threadIdx.y + i * kBlockRows;
        const int64_t cc = c0 + lc;
        if (r < rows && cc < cols) out_t[cc * rows + r] = tile[threadIdx.x][lc];
      }
      __syncthreads();  // the tile is rewritten by the next iteration
    }
  }
  my_max = warp_allreduce<unsigned, MaxBits>(my_max);
  if (threadIdx.x == 0) warp_max[threadIdx.y] = my_max;
  __syncthreads();
  if (threadIdx.y == 0 && threadIdx.x == 0) {
    unsigned m = 0;
    for (int w = 0; w < kBlockRows; ++w) m = max(m, warp_max[w]);
    atomicMax(amax_bits, m);
  }
}

template <typename T, Fp8Kind K>
void launch_typed(const void* x, int64_t rows, int64_t cols, const float* scale, uint8_t* out,
                  uint8_t* out_t, unsigned* amax_bits, int sm_count, cudaStream_t stream) {
  const int64_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  // Enough blocks to fill the GPU several times over; each walks its tiles (64-bit indices).
  const int64_t grid = std::max<int64_t>(1, std::min<int64_t>(tiles, int64_t(sm_count) * 16));
  cast_fp8_kernel<T, K><<<unsigned(grid), dim3(kTile, kBlockRows), 0, stream>>>(
      static_cast<const T*>(x), rows, cols, scale, out, out_t, amax_bits);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <Fp8Kind K>
void launch_kind(SrcType src, const void* x, int64_t rows, int64_t cols, const float* scale,
                 uint8_t* out, uint8_t* out_t, unsigned* amax_bits, int sm_count,
                 cudaStream_t stream) {
  switch (src) {
    case SrcType::kHalf:
      return launch_typed<__half, K>(x, rows, cols, scale, out, out_t, amax_bits, sm_count, stream);
    case SrcType::kBFloat16:
      return launch_typed<__nv_bfloat16, K>(x, rows, cols, scale, out, out_t, amax_bits, sm_count,
                                            stream);
    default:
      return launch_typed<float, K>(x, rows, cols, scale, out, out_t, amax_bits, sm_count, stream);
  }
}

}  // namespace

void launch_cast_fp8(SrcType src, Fp8Kind kind, const void* x, int64_t rows, int64_t cols,
                     const float* scale, uint8_t* out, uint8_t* out_t, unsigned* amax_bits,
                     int sm_count, cudaStream_t stream) {
  if (kind == Fp8Kind::kE4M3) {
    launch_kind<Fp8Kind::kE4M3>(src, x, rows, cols, scale, out, out_t, amax_bits, sm_count, stream);
  } else {
    launch_kind<Fp8Kind::kE5M2>(src, x, rows, cols, scale, out, out_t, amax_bits, sm_count, stream);
  }
}

}  // namespace fp8
}  // namespace cudasteps
