// What both sm_80+ tensor-core kernels share on the host: the grouped tile order with its checked
// tile count, and the problem check (the device check, check_device, is tc_gemm.h's, defined in
// tc/dispatch.cpp beside ATen's device properties); and the one constant of their shared-memory
// tiles (kKBytes: 64 bytes of K per tile row, so that a config has the same footprint and k-steps
// for all three types). The ladder's story for these two steps is at the top of mma_kernel.cu.
#pragma once

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/error.h"
#include "common/launch.cuh"
#include "gemm/tc/common.cuh"
#include "gemm/tc/sm80/mma.cuh"
#include "gemm/tc/tc_gemm.h"

namespace cudasteps {
namespace gemm {
namespace sm80 {

using tc::Elem;
using tc::Epilogue;
using tc::Mma;
using tc::TileRaster;

constexpr const char* kOp = "mm";
// Bytes of K per shared-memory tile row (see the top of the file).
constexpr int kKBytes = 64;
// Rows of output tiles per group of the rasterized order (tc/common.cuh, TileRaster).
constexpr int kRasterGroup = 8;

// The grouped tile order for a tiles_m x tiles_n grid, with the tile count checked against the
// grid limit (the kernels use 32-bit tile indices).
inline TileRaster make_raster(const TcProblem& p, int bm, int bn, const char* kernel) {
  const int64_t tiles_m = ceil_div<int64_t>(p.M, bm), tiles_n = ceil_div<int64_t>(p.N, bn);
  CUDASTEPS_CHECK(tiles_m * tiles_n <= INT_MAX, kOp, kernel, ": the output of ", p.M, " x ", p.N,
                  " needs ", tiles_m * tiles_n, " tiles of ", bm, " x ", bn,
                  ", more than the grid limit of ", INT_MAX);
  TileRaster r;
  r.tiles_m = int(tiles_m);
  r.tiles_n = int(tiles_n);
  // group <= tiles_m keeps group * tiles_n (TileRaster::coords) within the tile count.
  r.group = int(std::min<int64_t>(kRasterGroup, tiles_m));
  return r;
}

inline void check_problem(const TcProblem& p, const char* kernel) {
  CUDASTEPS_CHECK(p.M > 0 && p.N > 0 && p.K > 0, kOp, kernel,
                  ": M, N and K must be positive (empty products are handled by the caller), got ",
                  p.M, " x ", p.N, " x ", p.K);
}

}  // namespace sm80
}  // namespace gemm
}  // namespace cudasteps
