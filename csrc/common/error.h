// The one error macro of every op, alone in a light header (c10's TORCH_CHECK and nothing of ATen),
// so that kernel instantiation units can raise the project's errors without paying for ATen's
// headers (about 20 s of compile time per unit). Messages follow one pattern, so that users can
// grep them: "cudasteps.<op>: <arg> must be <expected>, got <actual>" (checks.h has the tensor
// checks built on it).
#pragma once

#include <c10/util/Exception.h>

// TORCH_CHECK with the "cudasteps.<op>: " prefix.
#define CUDASTEPS_CHECK(cond, op, ...) TORCH_CHECK((cond), "cudasteps.", op, ": ", __VA_ARGS__)
