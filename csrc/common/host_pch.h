// The headers every host C++ unit of the extension parses (ATen, the op registration API, and
// with CUDA the stream and device-guard API), compiled once per build into a precompiled header
// (setup.py, "Precompiled host headers") that the compiler loads in about 2 s, where parsing them
// costs each unit 5-10 s. Not torch/autograd.h: only the five autograd units use it, and it made
// the precompiled header a third larger and slower to load for all 26. setup.py passes `-include` of it to
// every .cpp unit, none to the .cu units (which include no ATen header). Units still include what
// they use themselves: without the precompiled copy (another compiler, a failed build of it) the
// build is the same, only slower. No `#pragma once`: the compiler reads this file as its main
// file when it precompiles it, and `-include` names it once per unit.

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#ifdef CUDASTEPS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif
