// f32 GEMM on 512-bit (AVX-512) or 256-bit (AVX2) FMA; the method is described
// in gemm_f32.hpp, the blocking written once in gemm_f32.inc.
#include "kernels/gemm_f32.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/aligned_buffer.hpp"
#include "kernels/convert.hpp"
#include "kernels/convert_avx2.hpp"
#include "kernels/convert_avx512.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"
#include "kernels/target.hpp"

// GCC 12 reports its own _mm512_undefined_* placeholders as (maybe-)uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace hpu::kernels {

namespace {

// k per block: a block's products are summed in registers, then added to C.
constexpr int64_t kBlockK = 384;
// Bytes of packed B to keep per block (in the L2 cache while every row of A
// passes over it).
constexpr int64_t kPanelBytes = 384 << 10;

thread_local AlignedBuffer t_packed_a, t_packed_b, t_work;

// Products of a narrow C (kDotCols wide or less, judged by the whole C before
// gemm() split its columns, so that every part takes the same path) with op(A)
// stored untransposed and k long enough to fill the vectors run as dot
// products (run_dot).
constexpr int64_t kDotCols = 12, kDotMinK = 64;
// run_dot's blocks: values of k (the block of op(B), at most kDotCols x
// kDotBlockK floats, in the L1 cache) and rows of A per pass over it.
constexpr int64_t kDotBlockK = 256, kDotChunkRows = 48;
bool dot_product(const GemmShape &s) {
  return !s.trans_a && (s.n_total > 0 ? s.n_total : s.n) <= kDotCols && s.k >= kDotMinK;
}

// The element type of a dtype the kernels read or write.
template <hpuDataType_t kDt>
using Elem = std::conditional_t<kDt == HPU_FLOAT32, float, uint16_t>;

template <hpuDataType_t kDt>
inline float to_f32(Elem<kDt> x) {
  if constexpr (kDt == HPU_FLOAT32) return x;
  else if constexpr (kDt == HPU_BFLOAT16) return bf16_to_f32(x);
  else return f16_to_f32(x);
}

}  // namespace

// ---- AVX-512: f32, and bf16 or f16 widened as they are packed ------------------

HPU_TARGET_BEGIN("avx512f,avx512bw,avx512vl,fma")
namespace gemm_avx512 {
namespace {

using V = __m512;
constexpr int kW = 16;
// One k per pass: the 8 x 48 tile's 24 FMAs already outweigh its loads and
// loop instructions.
constexpr int kUnrollK = 1;
inline V zero() { return _mm512_setzero_ps(); }
inline V set1(float f) { return _mm512_set1_ps(f); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V load(const float *p) { return _mm512_load_ps(p); }
inline V loadu(const float *p) { return _mm512_loadu_ps(p); }
inline void store(float *p, V v) { _mm512_store_ps(p, v); }
inline V broadcast(const float *p) { return _mm512_set1_ps(*p); }
inline __mmask16 lanes_below(int w) {
  return w >= 16 ? __mmask16(0xFFFF) : w <= 0 ? __mmask16(0) : __mmask16((1u << w) - 1);
}

// Sixteen 16-bit values of type kDt as f32 (exact).
template <hpuDataType_t kDt>
inline V widen(__m256i h) {
  if constexpr (kDt == HPU_BFLOAT16) return _mm512_castsi512_ps(bf16_widen16(h));
  else return _mm512_cvtph_ps(h);
}

// Whole vectors use plain loads and stores (masked ones are slow on some CPUs).
template <hpuDataType_t kDt>
inline V load_n(const Elem<kDt> *p, int w) {
  if constexpr (kDt == HPU_FLOAT32) {
    return w >= kW ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes_below(w), p);
  } else {
    const __m256i h = w >= kW ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))
                              : _mm256_maskz_loadu_epi16(lanes_below(w), p);
    return widen<kDt>(h);
  }
}

// Rounds as convert.hpp's f32_to_bf16 and f32_to_f16.
template <hpuDataType_t kDt>
inline void store_n(Elem<kDt> *p, int w, V v) {
  if constexpr (kDt == HPU_FLOAT32) {
    if (w >= kW)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, lanes_below(w), v);
  } else {
    const __m256i h = kDt == HPU_BFLOAT16 ? bf16_round16(_mm512_castps_si512(v)) : f16_round16(v);
    if (w >= kW)
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), h);
    else
      _mm256_mask_storeu_epi16(p, lanes_below(w), h);
  }
}

void transpose(V r[16]) {
  V t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4 g + q], in each 128-bit lane L: element 4 L + q of rows 4 g .. 4 g + 3.
  for (int g = 0; g < 4; ++g) {
    const __m512d lo = _mm512_castps_pd(t[4 * g]), hi = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d lo2 = _mm512_castps_pd(t[4 * g + 2]), hi2 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, lo2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, lo2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi, hi2));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi, hi2));
  }
  for (int q = 0; q < 4; ++q) {
    const V v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88), w0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
    const V v1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88), w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
    r[q] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + q] = _mm512_shuffle_f32x4(v0, v1, 0xdd);
    r[4 + q] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
  }
}

#include "kernels/gemm_f32.inc"

// Tile shapes as gemm_bf16_native's: 8 x 48 for wide C (24 accumulators);
// 12 rows when C is 32 or 16 wide, or 12 rows or fewer tall (one pass of a
// tile over B where 8 rows would take two).
template <hpuDataType_t kDt, hpuDataType_t kCDt>
void product(const GemmShape &s, float alpha, const Elem<kDt> *a, int64_t lda, const Elem<kDt> *b, int64_t ldb,
             float beta, Elem<kCDt> *c, int64_t ldc) {
  if (dot_product(s)) {  // R x NC of 4 x 4, 3 x 8, 2 x 12: up to 24 accumulators
    if (s.n <= 4) return run_dot<4, 4, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
    if (s.n <= 8) return run_dot<3, 8, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
    return run_dot<2, 12, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (s.n <= 16) return run_blocks<12, 1, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s.n <= 32 || s.m <= 12) return run_blocks<12, 2, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  run_blocks<8, 3, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace
}  // namespace gemm_avx512
HPU_TARGET_END

// ---- AVX2: f32, and bf16 or f16 widened as they are packed ---------------------

HPU_TARGET_BEGIN("avx2,fma,f16c")
namespace gemm_avx2 {
namespace {

using V = __m256;
constexpr int kW = 8;
// Four k per pass: with 12 FMAs per k, the loop's pointer and counter updates
// would otherwise take issue slots and FMA ports (integer adds may run on the
// FMA ports) from the FMAs.
constexpr int kUnrollK = 4;
inline V zero() { return _mm256_setzero_ps(); }
inline V set1(float f) { return _mm256_set1_ps(f); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V load(const float *p) { return _mm256_load_ps(p); }
inline V loadu(const float *p) { return _mm256_loadu_ps(p); }
inline void store(float *p, V v) { _mm256_store_ps(p, v); }
inline V broadcast(const float *p) { return _mm256_broadcast_ss(p); }
// All ones in the lanes below w.
inline __m256i lanes_below(int w) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Eight 16-bit values of type kDt as f32 (exact).
template <hpuDataType_t kDt>
inline V widen(__m128i h) {
  if constexpr (kDt == HPU_BFLOAT16) return _mm256_castsi256_ps(bf16_widen8(h));
  else return _mm256_cvtph_ps(h);
}

// Parts of vectors of 16-bit values go through a copy on the stack.
template <hpuDataType_t kDt>
inline V load_n(const Elem<kDt> *p, int w) {
  if constexpr (kDt == HPU_FLOAT32) {
    if (w >= kW) return _mm256_loadu_ps(p);
    return w <= 0 ? zero() : _mm256_maskload_ps(p, lanes_below(w));
  } else {
    if (w >= kW) return widen<kDt>(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    alignas(16) uint16_t part[8] = {};
    if (w > 0) std::memcpy(part, p, static_cast<size_t>(w) * 2);
    return widen<kDt>(_mm_load_si128(reinterpret_cast<const __m128i *>(part)));
  }
}

// Rounds as convert.hpp's f32_to_bf16 and f32_to_f16.
template <hpuDataType_t kDt>
inline void store_n(Elem<kDt> *p, int w, V v) {
  if constexpr (kDt == HPU_FLOAT32) {
    if (w >= kW)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, lanes_below(w), v);
  } else {
    __m128i h;
    if constexpr (kDt == HPU_BFLOAT16) {
      const __m256i r = bf16_round8(_mm256_castps_si256(v));
      h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    } else {
      h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    if (w >= kW) return _mm_storeu_si128(reinterpret_cast<__m128i *>(p), h);
    alignas(16) uint16_t part[8];
    _mm_store_si128(reinterpret_cast<__m128i *>(part), h);
    std::memcpy(p, part, static_cast<size_t>(w) * 2);
  }
}

void transpose(V r[8]) {
  V t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4 g + q], in each 128-bit lane L: element 4 L + q of rows 4 g .. 4 g + 3.
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

#include "kernels/gemm_f32.inc"

// 4 x 24 tiles for wide C: 12 accumulators, 3 vectors of B and a broadcast
// of the 16 registers, the fewest loads per k (7) of any 12-accumulator
// tile; 6 x 16 when C is 16 wide, 12 x 8 when it is 8 wide.
template <hpuDataType_t kDt, hpuDataType_t kCDt>
void product(const GemmShape &s, float alpha, const Elem<kDt> *a, int64_t lda, const Elem<kDt> *b, int64_t ldb,
             float beta, Elem<kCDt> *c, int64_t ldc) {
  if (dot_product(s)) {  // R x NC of 2 x 4, 1 x 12: up to 12 accumulators
    if (s.n <= 4) return run_dot<2, 4, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
    return run_dot<1, 12, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (s.n <= 8) return run_blocks<12, 1, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s.n <= 16) return run_blocks<6, 2, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  run_blocks<4, 3, kDt, kCDt>(s, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace
}  // namespace gemm_avx2
HPU_TARGET_END

namespace {

// The product on the path's kernel with A and B of kDt and C of kCDt.
template <hpuDataType_t kDt, hpuDataType_t kCDt>
void product_on(GemmPath path, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
                int64_t ldb, float beta, void *c, int64_t ldc) {
  const auto *ta = static_cast<const Elem<kDt> *>(a), *tb = static_cast<const Elem<kDt> *>(b);
  auto *tc = static_cast<Elem<kCDt> *>(c);
  if (path == GemmPath::avx512_f32) return gemm_avx512::product<kDt, kCDt>(s, alpha, ta, lda, tb, ldb, beta, tc, ldc);
  gemm_avx2::product<kDt, kCDt>(s, alpha, ta, lda, tb, ldb, beta, tc, ldc);
}

}  // namespace

GemmPath gemm_f32_native_path(hpuDataType_t dt) {
  static const Isa isa = vector_isa(best_isa());
  if (dt != HPU_FLOAT32 && dt != HPU_BFLOAT16 && dt != HPU_FLOAT16) return GemmPath::blas;
  if (isa == Isa::avx512) return GemmPath::avx512_f32;
  if (isa == Isa::avx2) return GemmPath::avx2_f32;
  return GemmPath::blas;
}

bool gemm_f32_native_supported() { return gemm_f32_native_path(HPU_FLOAT32) != GemmPath::blas; }

void gemm_f32_native(const GemmShape &s, hpuDataType_t dt, float alpha, const void *a, int64_t lda, const void *b,
                     int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  const GemmPath path = gemm_f32_native_path(dt);
  if (path == GemmPath::blas || (c_dt != dt && c_dt != HPU_FLOAT32))
    fail(HPU_ERROR_INTERNAL, "gemm_f32_native: no kernel for %s inputs and a %s result at this level",
         dtype_name(dt), dtype_name(c_dt));
  switch (dt) {
    case HPU_FLOAT32: return product_on<HPU_FLOAT32, HPU_FLOAT32>(path, s, alpha, a, lda, b, ldb, beta, c, ldc);
    case HPU_BFLOAT16:
      if (c_dt == HPU_FLOAT32)
        return product_on<HPU_BFLOAT16, HPU_FLOAT32>(path, s, alpha, a, lda, b, ldb, beta, c, ldc);
      return product_on<HPU_BFLOAT16, HPU_BFLOAT16>(path, s, alpha, a, lda, b, ldb, beta, c, ldc);
    default:
      if (c_dt == HPU_FLOAT32)
        return product_on<HPU_FLOAT16, HPU_FLOAT32>(path, s, alpha, a, lda, b, ldb, beta, c, ldc);
      return product_on<HPU_FLOAT16, HPU_FLOAT16>(path, s, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

}  // namespace hpu::kernels
