// bf16 and f16 to and from f32 for 8 values in an AVX2 register: what the
// AVX2 path of convert_vec.cpp does to each vector (the bits of convert.hpp's
// scalar functions), for kernels that convert values they hold in registers.
#pragma once

#include <immintrin.h>

// The target of functions on the AVX2 path (Isa::avx2 and up).
#define HPU_AVX2 __attribute__((target("avx2,f16c,fma")))

namespace hpu::kernels {

// Eight f32 bit patterns rounded to bf16, in the low 16 bits of each lane:
// to nearest even; a NaN stays a NaN (made quiet).
HPU_AVX2 inline __m256i bf16_round8(__m256i u) {
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7F800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

// 8 bf16 values as the bits of 8 f32 values (exact).
HPU_AVX2 inline __m256i bf16_widen8(__m128i h) { return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16); }

}  // namespace hpu::kernels
