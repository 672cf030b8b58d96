// CPU GEMM: cache-blocked, packed, parallel over output tiles. float32 and float64 accumulate in
// their own type; float16 and bfloat16 are widened to float32 as they are packed, accumulate in
// float32 and are rounded once, in the epilogue (what torch's CPU kernels do for reduced precision).
// A reference-quality kernel: CPU speed is not a target of this project.
//
// Each task owns one kCpuTileM x kCpuTileN output tile. For each kCpuTileK slice of K it packs the
// A block row-major [TileM][TileK] and the B block row-major [TileK][TileN] (from any layout, so
// transposed operands cost one strided read per element), then runs an i-k-j loop whose inner j
// loop is a contiguous axpy the compiler vectorizes. The epilogue applies alpha, beta and the
// addend (addmm's self, linear's bias) once per output element.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <vector>

#include "gemm/gemm.h"

namespace cudasteps {
namespace {

// Output tile per task: 64 x 128 accumulators (32 KiB fp32) stay in L1/L2.
constexpr int64_t kCpuTileM = 64;
constexpr int64_t kCpuTileN = 128;
// K slice: packed A (64 x 256) + B (256 x 128) = 192 KiB fp32, an L2-sized working set.
constexpr int64_t kCpuTileK = 256;

template <typename Acc, typename T>
inline Acc load(const T* p, const gemm::Operand& op, int64_t r, int64_t c) {
  return static_cast<Acc>(op.col_major ? p[c * op.ld + r] : p[r * op.ld + c]);
}

// T: the element type of operands, addend and output; Acc: the accumulation type.
template <typename T, typename Acc>
void gemm_cpu_impl(at::Tensor& out, const gemm::Operand& a, const gemm::Operand& b,
                   const gemm::Addend& add, int64_t M, int64_t N, int64_t K, double alpha_d,
                   double beta_d) {
  const T* A = static_cast<const T*>(a.ptr);
  const T* B = static_cast<const T*>(b.ptr);
  const T* C = static_cast<const T*>(add.ptr);
  T* O = out.data_ptr<T>();
  const Acc alpha = static_cast<Acc>(alpha_d), beta = static_cast<Acc>(beta_d);
  const bool use_addend = C != nullptr && beta_d != 0.0;
  const int64_t tiles_m = (M + kCpuTileM - 1) / kCpuTileM;
  const int64_t tiles_n = (N + kCpuTileN - 1) / kCpuTileN;
  at::parallel_for(0, tiles_m * tiles_n, 1, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(kCpuTileM * kCpuTileN);
    std::vector<Acc> pa(kCpuTileM * kCpuTileK);
    std::vector<Acc> pb(kCpuTileK * kCpuTileN);
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t m0 = (tile / tiles_n) * kCpuTileM, n0 = (tile % tiles_n) * kCpuTileN;
      const int64_t tm = std::min(kCpuTileM, M - m0), tn = std::min(kCpuTileN, N - n0);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k0 = 0; k0 < K; k0 += kCpuTileK) {
        const int64_t tk = std::min(kCpuTileK, K - k0);
        for (int64_t i = 0; i < tm; ++i)
          for (int64_t k = 0; k < tk; ++k) pa[i * kCpuTileK + k] = load<Acc>(A, a, m0 + i, k0 + k);
        for (int64_t k = 0; k < tk; ++k)
          for (int64_t j = 0; j < tn; ++j) pb[k * kCpuTileN + j] = load<Acc>(B, b, k0 + k, n0 + j);
        for (int64_t i = 0; i < tm; ++i) {
          Acc* __restrict__ row = acc.data() + i * kCpuTileN;
          const Acc* __restrict__ arow = pa.data() + i * kCpuTileK;
          for (int64_t k = 0; k < tk; ++k) {
            const Acc av = arow[k];
            const Acc* __restrict__ brow = pb.data() + k * kCpuTileN;
            for (int64_t j = 0; j < tn; ++j) row[j] += av * brow[j];
          }
        }
      }
      for (int64_t i = 0; i < tm; ++i) {
        for (int64_t j = 0; j < tn; ++j) {
          Acc v = alpha * acc[i * kCpuTileN + j];
          if (use_addend) v += beta * static_cast<Acc>(C[(m0 + i) * add.s0 + (n0 + j) * add.s1]);
          O[(m0 + i) * N + (n0 + j)] = static_cast<T>(v);
        }
      }
    }
  });
}

// out = alpha * a @ b + beta * addend, out freshly allocated [M, N] contiguous.
at::Tensor gemm_cpu(const at::Tensor& a_t, const at::Tensor& b_t, const gemm::Addend& add,
                    double alpha, double beta) {
  const int64_t M = a_t.size(0), K = a_t.size(1), N = b_t.size(1);
  at::Tensor out = at::empty({M, N}, a_t.options().memory_format(at::MemoryFormat::Contiguous));
  if (M == 0 || N == 0) return out;
  const gemm::Operand a = gemm::make_operand(a_t);
  const gemm::Operand b = gemm::make_operand(b_t);
  switch (a_t.scalar_type()) {
    case at::kFloat: gemm_cpu_impl<float, float>(out, a, b, add, M, N, K, alpha, beta); break;
    case at::kDouble: gemm_cpu_impl<double, double>(out, a, b, add, M, N, K, alpha, beta); break;
    case at::kHalf: gemm_cpu_impl<at::Half, float>(out, a, b, add, M, N, K, alpha, beta); break;
    default: gemm_cpu_impl<at::BFloat16, float>(out, a, b, add, M, N, K, alpha, beta); break;
  }
  return out;
}

at::Tensor mm_cpu(const at::Tensor& self, const at::Tensor& mat2) {
  gemm::check_mm_pair(self, mat2, "mm", "self", "mat2");
  return gemm_cpu(self, mat2, gemm::Addend{}, 1.0, 0.0);
}

// mm.dtype: a float32 output of bf16/fp16 operands, from the operands widened to float32 (their
// products are exact there, and the sums float32 sums, as the CUDA kernels' fp32 accumulators).
at::Tensor mm_dtype_cpu(const at::Tensor& self, const at::Tensor& mat2, at::ScalarType out_dtype) {
  gemm::check_mm_pair(self, mat2, "mm", "self", "mat2");
  gemm::check_mm_out_dtype(self, out_dtype);
  if (out_dtype == self.scalar_type()) return gemm_cpu(self, mat2, gemm::Addend{}, 1.0, 0.0);
  return gemm_cpu(self.to(at::kFloat), mat2.to(at::kFloat), gemm::Addend{}, 1.0, 0.0);
}

at::Tensor addmm_cpu(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                     const at::Scalar& beta, const at::Scalar& alpha) {
  gemm::check_mm_pair(mat1, mat2, "addmm", "mat1", "mat2");
  gemm::check_addmm_self(self, mat1, mat1.size(0), mat2.size(1));
  const double beta_d = beta.toDouble();
  gemm::Addend add;
  if (beta_d != 0.0) add = gemm::make_addend(self, mat1.size(0), mat2.size(1));
  return gemm_cpu(mat1, mat2, add, alpha.toDouble(), beta_d);
}

at::Tensor linear_cpu(const at::Tensor& input, const at::Tensor& weight,
                      const c10::optional<at::Tensor>& bias) {
  gemm::check_linear_args(input, weight, bias);
  const int64_t N = weight.size(0);
  const at::Tensor x = gemm::flatten_input(input);
  gemm::Addend add;
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) add = gemm::make_bias_addend(*bias, N);
  at::Tensor out = gemm_cpu(x, weight.t(), add, 1.0, has_bias ? 1.0 : 0.0);
  return out.view(gemm::linear_out_shape(input, N));
}

}  // namespace

TORCH_LIBRARY_IMPL(cudasteps, CPU, m) {
  m.impl("mm", &mm_cpu);
  m.impl("mm.dtype", &mm_dtype_cpu);
  m.impl("addmm", &addmm_cpu);
  m.impl("linear", &linear_cpu);
}

}  // namespace cudasteps
