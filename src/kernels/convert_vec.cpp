// Vector paths of the f32 <-> bf16/f16 conversions. bf16 rounding is done with
// integer arithmetic exactly as the scalar path does it (the AVX-512 BF16
// instruction VCVTNEPS2BF16 flushes subnormals, so it is not used). f16 uses
// the hardware conversion (F16C / AVX-512F) with round-to-nearest-even, which
// matches the scalar path bit for bit; the tests check all 2^32 patterns.
#include "kernels/convert_vec.hpp"

// GCC 12 warns about the deliberately undefined lanes inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/convert.hpp"
#include "kernels/convert_avx2.hpp"
#include "kernels/convert_avx512.hpp"

namespace hpu::kernels {

namespace {

// ---- scalar -------------------------------------------------------------------

void f32_to_bf16_scalar(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
void bf16_to_f32_scalar(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}
void f32_to_f16_scalar(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}
void f16_to_f32_scalar(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

// ---- AVX2 (+F16C) -------------------------------------------------------------

HPU_AVX2 void f32_to_bf16_avx2(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i lo = bf16_round8(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i)));
    __m256i hi = bf16_round8(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i + 8)));
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), packed);
  }
  f32_to_bf16_scalar(src + i, dst + i, n - i);
}

HPU_AVX2 void bf16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = bf16_widen8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), w);
  }
  bf16_to_f32_scalar(src + i, dst + i, n - i);
}

HPU_AVX2 void f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i), h);
  }
  f32_to_f16_scalar(src + i, dst + i, n - i);
}

HPU_AVX2 void f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i))));
  f16_to_f32_scalar(src + i, dst + i, n - i);
}

// ---- AVX-512 ------------------------------------------------------------------

// Full vectors in the main loops; only the tail uses masked loads and stores
// (masked stores are slow on some CPUs, AMD Zen 4 among them).
HPU_AVX512 inline __mmask16 tail_mask(size_t left) { return __mmask16((1u << left) - 1); }

HPU_AVX512 void f32_to_bf16_avx512(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), bf16_round16(_mm512_loadu_si512(src + i)));
  if (i == n) return;
  __mmask16 live = tail_mask(n - i);
  _mm256_mask_storeu_epi16(dst + i, live, bf16_round16(_mm512_maskz_loadu_epi32(live, src + i)));
}

HPU_AVX512 void bf16_to_f32_avx512(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_si512(dst + i, bf16_widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i))));
  if (i == n) return;
  __mmask16 live = tail_mask(n - i);
  _mm512_mask_storeu_epi32(dst + i, live, bf16_widen16(_mm256_maskz_loadu_epi16(live, src + i)));
}

HPU_AVX512 void f32_to_f16_avx512(const float *src, uint16_t *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + i), f16_round16(_mm512_loadu_ps(src + i)));
  if (i == n) return;
  __mmask16 live = tail_mask(n - i);
  _mm256_mask_storeu_epi16(dst + i, live, f16_round16(_mm512_maskz_loadu_ps(live, src + i)));
}

HPU_AVX512 void f16_to_f32_avx512(const uint16_t *src, float *dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i))));
  if (i == n) return;
  __mmask16 live = tail_mask(n - i);
  _mm512_mask_storeu_ps(dst + i, live, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, src + i)));
}

const ConvertPaths kPaths[] = {
    {f32_to_bf16_scalar, bf16_to_f32_scalar, f32_to_f16_scalar, f16_to_f32_scalar},
    {f32_to_bf16_avx2, bf16_to_f32_avx2, f32_to_f16_avx2, f16_to_f32_avx2},
    {f32_to_bf16_avx512, bf16_to_f32_avx512, f32_to_f16_avx512, f16_to_f32_avx512},
};

const ConvertPaths &best() {
  static const ConvertPaths &p = kPaths[static_cast<int>(vector_isa(best_isa()))];
  return p;
}

}  // namespace

const ConvertPaths &convert_paths(Isa isa) { return kPaths[static_cast<int>(vector_isa(isa))]; }

void f32_to_bf16_n(const float *src, uint16_t *dst, size_t n) { best().f32_to_bf16(src, dst, n); }
void bf16_to_f32_n(const uint16_t *src, float *dst, size_t n) { best().bf16_to_f32(src, dst, n); }
void f32_to_f16_n(const float *src, uint16_t *dst, size_t n) { best().f32_to_f16(src, dst, n); }
void f16_to_f32_n(const uint16_t *src, float *dst, size_t n) { best().f16_to_f32(src, dst, n); }

}  // namespace hpu::kernels
