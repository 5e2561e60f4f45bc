// f32 GEMM with AVX-512 FMA; the method is described in gemm_f32.hpp.
#include "kernels/gemm_f32.hpp"

#include <immintrin.h>

#include <algorithm>

#include "kernels/aligned_buffer.hpp"
#include "kernels/cpu.hpp"
#include "kernels/gemm_store.hpp"

// GCC 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define HPU_F32 __attribute__((target("avx512f,avx512vl,fma")))

namespace hpu::kernels {

namespace {

// k per block: a block's products are summed in registers, then added to C.
constexpr int64_t kBlockK = 384;
// Bytes of packed B to keep per block (in the L2 cache while every row of A
// passes over it).
constexpr int64_t kPanelBytes = 384 << 10;

thread_local AlignedBuffer t_packed_a, t_packed_b;

// Where a micro-tile's results go: c (row stride ldc) = alpha acc + beta c;
// beta == 0 never reads c.
struct Out {
  float *c;
  int64_t ldc;
  float alpha, beta;
};

// One MR x (16 NV) tile of C over kc values of k. Element (i, p) of op(A) is
// at a[i rs + p cs] (a packed sliver: rs 1, cs MR); rows >= `rows` reuse the
// last valid row and are not stored. b is a packed sliver: 16 NV floats per k.
template <int MR, int NV>
__attribute__((noinline)) HPU_F32 void micro_kernel(int64_t kc, const float *a, int64_t rs, int64_t cs, int rows,
                                                     const float *b, const Out &o, int64_t row0, int64_t col0,
                                                     int cols) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const float *ar[MR];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) ar[i] = a + std::min(i, rows - 1) * rs;
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + (p * NV + v) * 16);
    const int64_t at = p * cs;
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(ar[i][at]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if (cols > 16 * v)
        store_f32_row(o.c + (row0 + i) * o.ldc + col0 + 16 * v, cols - 16 * v, o.alpha, o.beta, acc[i][v]);
  }
}

// r[c] = column c of the 16 x 16 block whose rows are r[0..15].
HPU_F32 void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
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
    const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88), w0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
    const __m512 v1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88),
                 w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
    r[q] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + q] = _mm512_shuffle_f32x4(v0, v1, 0xdd);
    r[4 + q] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
  }
}

// Packs rows k0 .. k0+kc and columns j0 .. j0+nc of op(B) into slivers of nr
// columns: sliver s, k p, column j -> dst[(s kc + p) nr + j]. Missing columns
// are zero.
HPU_F32 void pack_b(const float *b, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr,
                    float *dst) {
  for (int64_t s = 0; s * nr < nc; ++s) {
    float *out = dst + s * kc * nr;
    const int64_t js = j0 + s * nr;
    const int width = static_cast<int>(std::min<int64_t>(nr, nc - s * nr));
    if (!trans) {
      // op(B) = B, stored k x n: rows of `width` floats.
      for (int64_t p = 0; p < kc; ++p) {
        const float *row = b + (k0 + p) * ldb + js;
        for (int v = 0; v * 16 < nr; ++v) {
          const int w = width - 16 * v;
          const __mmask16 mask = w >= 16 ? __mmask16(0xFFFF) : w <= 0 ? __mmask16(0) : __mmask16((1u << w) - 1);
          _mm512_store_ps(out + p * nr + 16 * v, _mm512_maskz_loadu_ps(mask, row + 16 * v));
        }
      }
      continue;
    }
    // op(B) = B^T, B stored n x k: column j of op(B) is row js + j of B.
    for (int v = 0; v * 16 < nr; ++v) {
      const int w = std::max(0, std::min(16, width - 16 * v));
      int64_t p = 0;
      if (w == 16)
        for (; p + 16 <= kc; p += 16) {
          __m512 r[16];
          for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(b + (js + 16 * v + j) * ldb + k0 + p);
          transpose16(r);
          for (int c = 0; c < 16; ++c) _mm512_store_ps(out + (p + c) * nr + 16 * v, r[c]);
        }
      for (; p < kc; ++p)
        for (int j = 0; j < 16; ++j) out[p * nr + 16 * v + j] = j < w ? b[(js + 16 * v + j) * ldb + k0 + p] : 0.0f;
    }
  }
}

// Packs rows 0 .. m and columns k0 .. k0+kc of op(A) = A^T (A stored k x m)
// into slivers of MR rows (MR <= 16): sliver r, k p, row i ->
// dst[(r kc + p) MR + i]; missing rows are zero. Read in place, the
// micro-kernel's broadcasts would walk down A one row (lda floats) per k, and
// with a power-of-two lda all those rows share one set of the L1 cache.
HPU_F32 void pack_a_transposed(const float *a, int64_t lda, int64_t m, int64_t k0, int64_t kc, int mr, float *dst) {
  const __mmask16 all = __mmask16((1u << mr) - 1);
  for (int64_t i0 = 0; i0 < m; i0 += mr) {
    float *out = dst + i0 * kc;
    const __mmask16 valid = __mmask16((1u << std::min<int64_t>(mr, m - i0)) - 1);
    for (int64_t p = 0; p < kc; ++p)
      _mm512_mask_storeu_ps(out + p * mr, all, _mm512_maskz_loadu_ps(valid, a + (k0 + p) * lda + i0));
  }
}

// op(A) stored transposed is packed when C is wider than one sliver of B, so
// that each packed row block serves several slivers; otherwise op(A) is read
// in place (untransposed, its MR rows stream in order: packing them measured
// no faster).
template <int MR, int NV>
HPU_F32 void run(const GemmShape &s, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  constexpr int nr = 16 * NV;
  const int64_t m = s.m, n = s.n, k = s.k;
  const bool packed_a = s.trans_a && n > nr;
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, k - k0);
    const Out o{c, ldc, alpha, k0 == 0 ? beta : 1.0f};
    // Element (i, p) of op(A) in this k block at ab[i rs + p cs].
    const float *ab = a + k0 * (s.trans_a ? lda : 1);
    int64_t rs = s.trans_a ? 1 : lda, cs = s.trans_a ? lda : 1;
    if (packed_a) {
      float *ap = t_packed_a.get<float>(static_cast<size_t>((m + MR - 1) / MR * MR * kc));
      pack_a_transposed(a, lda, m, k0, kc, MR, ap);
      ab = ap, rs = 1, cs = MR;
    }
    const int64_t nc = std::max<int64_t>(nr, kPanelBytes / (kc * 4 * nr) * nr);
    float *bp = t_packed_b.get<float>(static_cast<size_t>(kc * std::min(nc, (n + nr - 1) / nr * nr)));
    for (int64_t j0 = 0; j0 < n; j0 += nc) {
      const int64_t ncur = std::min(nc, n - j0);
      pack_b(b, ldb, s.trans_b, k0, kc, j0, ncur, nr, bp);
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        // A packed sliver starts at row i0 of its block: i0 kc floats in.
        const float *at = packed_a ? ab + i0 * kc : ab + i0 * rs;
        const int rows = static_cast<int>(std::min<int64_t>(MR, m - i0));
        for (int64_t jr = 0; jr < ncur; jr += nr)
          micro_kernel<MR, NV>(kc, at, rs, cs, rows, bp + (jr / nr) * kc * nr, o, i0, j0 + jr,
                               static_cast<int>(std::min<int64_t>(nr, ncur - jr)));
      }
    }
  }
  t_packed_a.trim();
  t_packed_b.trim();
}

}  // namespace

bool gemm_f32_native_supported() {
  static const bool ok = vector_isa(best_isa()) == Isa::avx512;
  return ok;
}

// Tile shapes as gemm_bf16_native's: 8 x 48 for wide C (24 accumulators);
// 12 rows when C is 32 or 16 wide.
void gemm_f32_native(const GemmShape &s, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc) {
  if (s.n <= 16) return run<12, 1>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s.n <= 32) return run<12, 2>(s, alpha, a, lda, b, ldb, beta, c, ldc);
  run<8, 3>(s, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace hpu::kernels
