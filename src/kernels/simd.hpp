// The primitives of each vector path (scalar, AVX2, AVX-512) that the f32
// loops are written in, one namespace per path. A loop file (*_vec.inc) is
// included once per path inside an anonymous namespace within that path's
// namespace, and for the vector paths between the same HPU_TARGET_BEGIN and
// HPU_TARGET_END (kernels/target.hpp) as here, so that the primitives inline:
//   V, M       the vector and comparison-mask types; kW lanes
//   load(p), store(p, v), splat(f)
//   add, sub, mul, div, max(a, b) = a > b ? a : b, min(a, b) = a < b ? a : b,
//   sqrt, neg, abs, gt(a, b) -> M, is_nan(a) -> M, select(m, a, b) = m ? a : b
// Each is one IEEE operation per lane (add/sub/mul/div/sqrt round the same in
// every lane width; the files that include this one are compiled with
// -ffp-contract=off, see HPU_EXACT_FP_SOURCES in CMakeLists.txt, so nothing
// is fused into an FMA): a loop gives the scalar path's bits on every path. GCC 12 warns
// (-Wmaybe-uninitialized) about the deliberately undefined lanes inside the
// AVX-512 intrinsics: the loop files' .cpp turn that warning off.
#pragma once

#include <cstddef>
#include <cstdint>

#include <immintrin.h>

#include "kernels/target.hpp"

namespace hpu::kernels::simd {

namespace scalar {
using V = float;
using M = bool;
constexpr size_t kW = 1;
inline V load(const float *p) { return *p; }
inline void store(float *p, V v) { *p = v; }
inline V splat(float f) { return f; }
inline V add(V a, V b) { return a + b; }
inline V sub(V a, V b) { return a - b; }
inline V mul(V a, V b) { return a * b; }
inline V div(V a, V b) { return a / b; }
inline V max(V a, V b) { return a > b ? a : b; }
inline V min(V a, V b) { return a < b ? a : b; }
inline V sqrt(V a) { return __builtin_sqrtf(a); }
inline V neg(V a) { return -a; }
inline V abs(V a) { return __builtin_fabsf(a); }
inline M gt(V a, V b) { return a > b; }
inline M is_nan(V a) { return a != a; }
inline V select(M m, V a, V b) { return m ? a : b; }
}  // namespace scalar

HPU_TARGET_BEGIN("avx2,fma,f16c")
namespace avx2 {
using V = __m256;
using M = __m256;  // all-ones lanes where true
constexpr size_t kW = 8;
inline V load(const float *p) { return _mm256_loadu_ps(p); }
inline void store(float *p, V v) { _mm256_storeu_ps(p, v); }
inline V splat(float f) { return _mm256_set1_ps(f); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V div(V a, V b) { return _mm256_div_ps(a, b); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }  // a > b ? a : b, as MAXPS defines it
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline V sqrt(V a) { return _mm256_sqrt_ps(a); }
inline V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
inline V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline M is_nan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
inline V select(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
}  // namespace avx2
HPU_TARGET_END

HPU_TARGET_BEGIN("avx512f,avx512bw,avx512vl")
namespace avx512 {
using V = __m512;
using M = __mmask16;
constexpr size_t kW = 16;
inline V load(const float *p) { return _mm512_loadu_ps(p); }
inline void store(float *p, V v) { _mm512_storeu_ps(p, v); }
inline V splat(float f) { return _mm512_set1_ps(f); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline V sqrt(V a) { return _mm512_sqrt_ps(a); }
inline V neg(V a) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
inline V abs(V a) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MAX)));
}
inline M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline M is_nan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
inline V select(M m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); }
}  // namespace avx512
HPU_TARGET_END

}  // namespace hpu::kernels::simd
