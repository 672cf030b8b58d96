// Size tests that are safe on symbolic sizes (torch.export / torch.compile with dynamic shapes).
//
// Reading sizes() of a tensor with symbolic sizes pins every dynamic size to the traced value (the
// batch "specialized to a constant"); code that may run while tracing reads sym_sizes() and
// compares SymInts. A SymInt comparison that the symbol's range decides (a backed dynamic size is
// >= 2, so "== 1" is false) adds no guard. What it cannot decide, it guards on, unless it is asked
// as below.
#pragma once

#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>

namespace cudasteps {

// True when the size is known to be 1. A dynamic size that could be 1 only at run time counts as
// not 1, with no guard: torch's own broadcasting and at::sum_to decide the same way. Newer torch
// releases spell this guard_or_false; older ones only have the size-oblivious guard, which takes a
// dynamic size as >= 2 and so answers this test the same.
inline bool known_size_one(const c10::SymInt& size) {
#ifdef TORCH_GUARD_OR_FALSE
  return TORCH_GUARD_OR_FALSE(size.sym_eq(1));
#else
  return TORCH_GUARD_SIZE_OBLIVIOUS(size.sym_eq(1));
#endif
}

}  // namespace cudasteps
