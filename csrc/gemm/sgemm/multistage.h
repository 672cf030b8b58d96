// Host interface of the multistage cp.async SGEMM (multistage_configs.cu): its configs, each
// launched through one function pointer, and the SGEMM ladder steps built on it.
#pragma once

#include <cuda_runtime.h>

#include "gemm/sgemm/tile_config.cuh"

namespace cudasteps {
namespace gemm {

struct MsEntry {
  const char* name;
  int bm, bn, bk;
  int min_blocks;  // __launch_bounds__ blocks per SM (split-K fills one wave of these)
  // true: a config-table entry (`cfg:<name>`); false: a ladder step's config. Both are
  // instantiated for row-major A and B with 16-byte aligned rows only: the dispatcher copies other
  // operands into that layout (the ladder steps take contiguous operands; the table never picks a
  // multistage config, only the sweep times them).
  bool table_config;
  // a_k: A contiguous along K (row-major); b_k: B contiguous along K (column-major). Every operand
  // row must be 16-byte aligned (the caller routes other operands elsewhere).
  void (*launch)(const SgemmParams& p, bool a_k, bool b_k, int splits, cudaStream_t stream);
};

int ms_num_entries();
const MsEntry& ms_entry(int i);

}  // namespace gemm
}  // namespace cudasteps
