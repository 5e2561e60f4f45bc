// The f32 elementwise loops (elementwise_vec.inc) built once per path: scalar,
// AVX2 and AVX-512, each from the same source over its own primitives.
#include "kernels/elementwise_vec.hpp"

// GCC 12 warns about the deliberately undefined lanes inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/simd.hpp"

namespace hpu::kernels {

static_assert(static_cast<int>(Binary::min) == 5 && static_cast<int>(Unary::relu) == 7 &&
                  static_cast<int>(Unary::square) == 12,
              "elementwise_vec.inc lists the loops in the order of the enums");

#define HPU_SIMD_LOOPS "kernels/elementwise_vec.inc"
#include "kernels/simd_paths.inc"
#undef HPU_SIMD_LOOPS

const ElementwisePaths &elementwise_paths(Isa isa) { return *kSimdPaths[static_cast<int>(vector_isa(isa))]; }

const ElementwisePaths &elementwise_vec() {
  static const ElementwisePaths &p = elementwise_paths(best_isa());
  return p;
}

}  // namespace hpu::kernels
