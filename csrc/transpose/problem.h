// The one problem every transpose kernel solves (transpose.h reduces each input layout to it),
// shared by the host code and the kernels. Light on purpose (no ATen header): the CUDA kernel
// unit takes it by value, and ATen's headers would cost that unit about 20 s of compile time.
#pragma once

#include <cstdint>

namespace cudasteps {

struct TransposeProblem {
  int64_t batch;            // number of matrices (product of the leading dims)
  int64_t rows;             // M: input rows = output columns
  int64_t cols;             // N: input columns = output rows
  int64_t in_batch_stride;  // elements between matrices of the input
  int64_t in_row_stride;    // elements between input rows (column stride is 1)
};

}  // namespace cudasteps
