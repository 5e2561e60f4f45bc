// bf16 and f16 to and from f32 for 16 values in an AVX-512 register: what the
// AVX-512 path of convert_vec.cpp does to each vector (the bits of
// convert.hpp's scalar functions), for kernels that convert values they hold
// in registers.
#pragma once

#include <immintrin.h>

// The target of functions on an AVX-512 path (Isa::avx512 and up).
#define HPU_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace hpu::kernels {

// Rounds to nearest even; a NaN stays a NaN (made quiet).
HPU_AVX512 inline __m256i bf16_round16(__m512i u) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
  const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), qbit = _mm512_set1_epi32(0x00400000);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, half));
  r = _mm512_mask_or_epi32(r, nan, u, qbit);
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

HPU_AVX512 inline __m256i f16_round16(__m512 x) {
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// 16 bf16 values as the bits of 16 f32 values (exact).
HPU_AVX512 inline __m512i bf16_widen16(__m256i h) { return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16); }

}  // namespace hpu::kernels
