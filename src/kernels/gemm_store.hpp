// Where the AVX-512 GEMM kernels (gemm_f32.cpp, gemm_bf16.cpp) put a row of a
// micro-tile's f32 results.
#pragma once

#include <immintrin.h>

namespace hpu::kernels {

// p[0..cols) = alpha acc + beta p[0..cols), cols <= 16 (beta == 0 never reads
// p). Whole vectors use plain loads and stores (masked ones are slow on some
// CPUs).
__attribute__((target("avx512f"))) inline void store_f32_row(float *p, int cols, float alpha, float beta,
                                                              __m512 acc) {
  const bool whole = cols >= 16;
  const __mmask16 mask = whole ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  __m512 r = alpha == 1.0f ? acc : _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
  if (beta != 0.0f)
    r = _mm512_fmadd_ps(whole ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask, p), _mm512_set1_ps(beta), r);
  if (whole)
    _mm512_storeu_ps(p, r);
  else
    _mm512_mask_storeu_ps(p, mask, r);
}

}  // namespace hpu::kernels
