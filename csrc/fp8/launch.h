// The CUDA launcher of cast_fp8 (kernels.cu) as the host side (cast_fp8.cpp) calls it. Light on
// purpose (CUDA's runtime and nothing of ATen): the kernel unit includes it, and ATen's headers
// would cost it about 20 s of compile time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cudasteps {
namespace elementwise {
enum class Act;  // elementwise/functors.h
}  // namespace elementwise
namespace fp8 {

// Which FP8 format an output holds.
enum class Fp8Kind { kE4M3, kE5M2 };

// Which type the input holds.
enum class SrcType { kFloat, kHalf, kBFloat16 };

// Which kernel form casts (kernels.cu): the steps of the cast's ladder, naive first; kAuto is what
// cast_fp8 runs (kTile128 where the 16-byte forms fit, else kTile32).
enum class CastForm { kTile32, kVec16, kVec16Prefetch, kTile128, kAuto };

// Where a cast's scale comes from: `scale`, one float32 on the device; or, with scale null, the
// dynamic scale fmax / *amax (1 where amax is 0 or NaN), computed by every block from an amax that
// x's producer took (bias_act_amax), with 1 / scale written to *scale_inv and the amax copied to
// *amax_out (the op's own output) by block 0.
struct CastScale {
  const float* scale = nullptr;
  const float* amax = nullptr;
  float fmax = 0.0f;
  float* scale_inv = nullptr;
  float* amax_out = nullptr;
};

// Whether the 16-byte forms (kVec16, kVec16Prefetch, kTile128) can cast this x: rows and cols
// multiples of 16, x 16-byte aligned.
bool cast_fp8_vector_form_fits(const void* x, int64_t rows, int64_t cols);

// Where a cast's amax goes: *amax = max |x| (float32; NaN if x holds one), written by the grid's
// last block once every block has left its largest in `partials` and taken `ticket` (0 on entry,
// left 0): no word to zero before the launch and no atomic on the result (amax.cuh's
// grid_max_bits). `partials` holds cast_fp8_max_grid(sm_count) words. amax null: none taken
// (cast_fp8_dynamic, whose amax comes before the cast).
struct CastAmax {
  float* amax = nullptr;
  unsigned* partials = nullptr;
  unsigned* ticket = nullptr;
};

// The most blocks any cast form launches on a device of `sm_count` SMs (one wave of 256-thread
// blocks): the partials CastAmax needs room for.
int64_t cast_fp8_max_grid(int sm_count);

// x: a contiguous [rows, cols] matrix of `src`; scale: see CastScale. Writes
// out[r][c] = fp8(x[r][c] * scale) (round to nearest even, saturated to the format's largest finite
// value; NaN stays NaN), out_t[c][r] = out[r][c] when out_t is not null, and the amax (CastAmax).
// One pass over x, in the kernel form `form` (kAuto: tile128 where cast_fp8_vector_form_fits, else
// tile32; a vector form asked for must fit).
void launch_cast_fp8(SrcType src, Fp8Kind kind, const void* x, int64_t rows, int64_t cols,
                     CastScale scale, uint8_t* out, uint8_t* out_t, const CastAmax& amax,
                     int sm_count, cudaStream_t stream, CastForm form = CastForm::kAuto);

// act_cast_fp8 (g null) and act_grad_cast_fp8's kernel, the wide form (x, and g where given, must
// fit it: cast_fp8_vector_form_fits; both [rows, cols], contiguous): out = fp8(v * s) and out_t its
// transpose for v = act(x) (e4m3) or v = g * act'(x) (e5m2), each rounded to src's type as
// bias_act / bias_act_backward write it; s = fmax / bound, the bound taken from `range` (two floats
// on the device: the largest and the smallest value of x, or of g), with scale.fmax,
// scale.scale_inv (1 / s, written) and scale.amax_out (the bound, written where not null). With g,
// col_partials ([ceil(rows / 128), cols] float32) gets v's column sums over each 128 rows.
void launch_act_cast_fp8(SrcType src, elementwise::Act act, const void* x, const void* g,
                         const float* range, int64_t rows, int64_t cols, CastScale scale,
                         uint8_t* out, uint8_t* out_t, float* col_partials, cudaStream_t stream);

// cast_fp8_dynamic's first launch: amax = max |x| over x's n elements (x contiguous), scale =
// fmax / amax (1 where amax is 0 or NaN) and scale_inv = 1 / scale, each a float on the device.
// `grid` blocks (amax_scale_grid); with more than one, `partials` holds grid unsigneds and
// `ticket` is an unsigned that is 0 on entry and left 0 (reduce's full-sum scratch slot, or a
// zeroed workspace). n > 0.
int amax_scale_grid(int64_t n, int sm_count);
void launch_amax_scale(SrcType src, const void* x, int64_t n, float fmax, int grid,
                       unsigned* partials, unsigned* ticket, float* scale, float* scale_inv,
                       float* amax, cudaStream_t stream);

}  // namespace fp8
}  // namespace cudasteps
