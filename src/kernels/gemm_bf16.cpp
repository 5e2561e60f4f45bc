// bf16 GEMM with vdpbf16ps; the method is described in gemm_bf16.hpp.
#include "kernels/gemm_bf16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/aligned_buffer.hpp"
#include "kernels/cpu.hpp"
#include "kernels/gemm_store.hpp"

// GCC 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define HPU_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace hpu::kernels {

namespace {

// k per block: a block's products are summed in registers. Larger k runs in
// blocks that add into an f32 C (or an f32 work copy of a bf16 C).
constexpr int64_t kBlockK = 1024;
// Bytes of packed B to keep per block (it stays in the 1-2 MiB L2 cache while
// every row of A passes over it).
constexpr int64_t kPanelBytes = 384 << 10;

thread_local AlignedBuffer t_packed_b, t_packed_a, t_work;

// Where a micro-tile's results go: c (row stride ldc, type dt) = alpha acc +
// beta c; beta == 0 never reads c.
struct Out {
  void *c;
  int64_t ldc;
  hpuDataType_t dt;
  float alpha, beta;
};

inline uint32_t load_pair(const uint16_t *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

HPU_BF16 inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Writes row i, vector v of a tile: 16 columns at most, `cols` of them valid.
// Whole vectors use plain loads and stores (masked ones are slow on some CPUs).
// vcvtneps2bf16 rounds to nearest even and keeps NaN a NaN, as f32_to_bf16.
HPU_BF16 inline void store(const Out &o, int64_t row, int64_t col, int cols, __m512 acc) {
  if (o.dt == HPU_FLOAT32)
    return store_f32_row(static_cast<float *>(o.c) + row * o.ldc + col, cols, o.alpha, o.beta, acc);
  const bool whole = cols >= 16;
  const __mmask16 mask = whole ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  __m512 r = o.alpha == 1.0f ? acc : _mm512_mul_ps(acc, _mm512_set1_ps(o.alpha));
  uint16_t *p = static_cast<uint16_t *>(o.c) + row * o.ldc + col;
  if (o.beta != 0.0f) {
    __m256i old = whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)) : _mm256_maskz_loadu_epi16(mask, p);
    r = _mm512_fmadd_ps(widen_bf16(old), _mm512_set1_ps(o.beta), r);
  }
  __m256i h = (__m256i)_mm512_cvtneps_pbh(r);
  if (whole)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), h);
  else
    _mm256_mask_storeu_epi16(p, mask, h);
}

// One MR x (16 NV) tile of C over kc values of k. Row i of op(A) starts at
// a + i lda (pairs adjacent); rows >= `rows` reuse the last valid row and are
// not stored. b is a packed sliver: for each pair, 16 NV 32-bit words.
// Kept out of line: inlined into run(), GCC 12 spilled the accumulators.
template <int MR, int NV>
__attribute__((noinline)) HPU_BF16 void micro_kernel(int64_t kc, const uint16_t *a, int64_t lda, int rows, const uint32_t *b, const Out &o,
                           int64_t row0, int64_t col0, int cols) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const uint16_t *ar[MR];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) ar[i] = a + std::min(i, rows - 1) * lda;
  const int64_t pairs = kc / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + (p * NV + v) * 16);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_pair(ar[i] + 2 * p)));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  if (kc & 1) {  // the last k alone, paired with a zero
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + (pairs * NV + v) * 16);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(ar[i][2 * pairs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if (cols > 16 * v) store(o, row0 + i, col0 + 16 * v, cols - 16 * v, acc[i][v]);
  }
}

// Packs rows k0 .. k0+kc and columns j0 .. j0+nc of op(B) into slivers of
// nr = 16 NV columns: sliver s, pair p, column j -> dst[(s pairs_padded + p) nr + j]
// = B[k0+2p][j] | B[k0+2p+1][j] << 16. Missing columns and the odd k are zero.
HPU_BF16 void pack_b(const uint16_t *b, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                     int nr, uint32_t *dst) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t s = 0; s * nr < nc; ++s) {
    uint32_t *out = dst + s * pairs * nr;
    const int64_t js = j0 + s * nr;
    const int width = static_cast<int>(std::min<int64_t>(nr, nc - s * nr));
    if (!trans) {
      // B stored k x n: interleave rows 2p and 2p+1, 16 columns at a time.
      for (int64_t p = 0; p < pairs; ++p) {
        const uint16_t *r0 = b + (k0 + 2 * p) * ldb + js;
        const bool second = 2 * p + 1 < kc;
        for (int v = 0; v * 16 < nr; ++v) {
          const int w = width - 16 * v;
          const __mmask16 mask = w >= 16 ? __mmask16(0xFFFF) : w <= 0 ? __mmask16(0) : __mmask16((1u << w) - 1);
          auto load = [&](const uint16_t *q) HPU_BF16 {
            return _mm512_cvtepu16_epi32(w >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q))
                                                 : _mm256_maskz_loadu_epi16(mask, q));
          };
          __m512i lo = load(r0 + 16 * v), hi = second ? load(r0 + ldb + 16 * v) : _mm512_setzero_si512();
          _mm512_store_si512(out + p * nr + 16 * v, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
      }
    } else {
      // B stored n x k: a pair is one 32-bit word of row j.
      const int64_t full = kc / 2;
      for (int j = 0; j < nr; ++j) {
        if (j >= width) {
          for (int64_t p = 0; p < pairs; ++p) out[p * nr + j] = 0;
          continue;
        }
        const uint16_t *row = b + (js + j) * ldb + k0;
        for (int64_t p = 0; p < full; ++p) out[p * nr + j] = load_pair(row + 2 * p);
        if (kc & 1) out[full * nr + j] = row[kc - 1];
      }
    }
  }
}

// Copies op(A) rows 0..m, k values k0..k0+kc, from A stored k x m into a
// row-major m x ld copy (ld = kc rounded up to even).
void pack_a_transposed(const uint16_t *a, int64_t lda, int64_t m, int64_t k0, int64_t kc, uint16_t *dst,
                       int64_t ld) {
  constexpr int64_t kTile = 64;  // tiles keep both sides in cache
  for (int64_t i0 = 0; i0 < m; i0 += kTile)
    for (int64_t l0 = 0; l0 < kc; l0 += kTile) {
      const int64_t i1 = std::min(m, i0 + kTile), l1 = std::min(kc, l0 + kTile);
      for (int64_t l = l0; l < l1; ++l) {
        const uint16_t *src = a + (k0 + l) * lda;
        for (int64_t i = i0; i < i1; ++i) dst[i * ld + l] = src[i];
      }
    }
}

template <int MR, int NV>
HPU_BF16 void run(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                  float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  constexpr int nr = 16 * NV;
  const int64_t m = s.m, n = s.n, k = s.k;
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, k - k0);
    const int64_t pairs = (kc + 1) / 2;
    Out o{c, ldc, c_dt, alpha, k0 == 0 ? beta : 1.0f};
    // op(A) rows for this k block, pairs adjacent.
    const uint16_t *ab = a + k0;
    int64_t ld = lda;
    if (s.trans_a) {
      ld = 2 * pairs;
      uint16_t *packed = t_packed_a.get<uint16_t>(static_cast<size_t>(m * ld));
      pack_a_transposed(a, lda, m, k0, kc, packed, ld);
      ab = packed;
    }
    const int64_t nc = std::max<int64_t>(nr, kPanelBytes / (pairs * 4 * nr) * nr);
    uint32_t *bp = t_packed_b.get<uint32_t>(static_cast<size_t>(pairs * std::min(nc, (n + nr - 1) / nr * nr)));
    for (int64_t j0 = 0; j0 < n; j0 += nc) {
      const int64_t ncur = std::min(nc, n - j0);
      pack_b(b, ldb, s.trans_b, k0, kc, j0, ncur, nr, bp);
      for (int64_t i0 = 0; i0 < m; i0 += MR) {
        const int rows = static_cast<int>(std::min<int64_t>(MR, m - i0));
        for (int64_t jr = 0; jr < ncur; jr += nr)
          micro_kernel<MR, NV>(kc, ab + i0 * ld, ld, rows, bp + (jr / nr) * pairs * nr, o, i0, j0 + jr,
                               static_cast<int>(std::min<int64_t>(nr, ncur - jr)));
      }
    }
  }
  t_packed_a.trim();
  t_packed_b.trim();
}

// c (bf16) = work (f32, m x n dense) + beta c, rounded once.
HPU_BF16 void round_into(const float *work, int64_t m, int64_t n, float beta, uint16_t *c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    Out o{c + i * ldc, 0, HPU_BFLOAT16, 1.0f, beta};
    for (int64_t j = 0; j < n; j += 16) {
      int cols = static_cast<int>(std::min<int64_t>(16, n - j));
      __mmask16 mask = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
      store(o, 0, j, cols, _mm512_maskz_loadu_ps(mask, work + i * n + j));
    }
  }
}

template <int MR, int NV>
void run_blocks(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  if (c_dt == HPU_FLOAT32 || s.k <= kBlockK) return run<MR, NV>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  // A bf16 C summed over several k blocks: sum in f32, round once.
  float *work = t_work.get<float>(static_cast<size_t>(s.m * s.n));
  run<MR, NV>(s, alpha, a, lda, b, ldb, 0.0f, work, s.n, HPU_FLOAT32);
  round_into(work, s.m, s.n, beta, static_cast<uint16_t *>(c), ldc);
  t_work.trim();
}

}  // namespace

bool gemm_bf16_native_supported() {
  static const bool ok = best_isa() == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
  return ok;
}

// Tile shapes: 8 x 48 for wide C (24 accumulators, 3 vectors of B per pair);
// 12 rows when C is 32 or 16 wide.
void gemm_bf16_native(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                      int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  if (s.n <= 16) return run_blocks<12, 1>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  if (s.n <= 32) return run_blocks<12, 2>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  run_blocks<8, 3>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
}

}  // namespace hpu::kernels
