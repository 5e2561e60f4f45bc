// The fused optimizer loops (optim_vec.inc) built once per path: scalar, AVX2
// and AVX-512, each from the same source over its own primitives.
#include "kernels/optim_vec.hpp"

// GCC 12 warns about the deliberately undefined lanes inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/simd.hpp"

namespace hpu::kernels {

#define HPU_SIMD_LOOPS "kernels/optim_vec.inc"
#include "kernels/simd_paths.inc"
#undef HPU_SIMD_LOOPS

const OptimPaths &optim_paths(Isa isa) { return *kSimdPaths[static_cast<int>(vector_isa(isa))]; }

const OptimPaths &optim_vec() {
  static const OptimPaths &p = optim_paths(best_isa());
  return p;
}

}  // namespace hpu::kernels
