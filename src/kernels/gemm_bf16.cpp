// bf16 GEMM with vdpbf16ps; the method is described in gemm_bf16.hpp.
#include "kernels/gemm_bf16.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/aligned_buffer.hpp"
#include "kernels/convert_avx512.hpp"
#include "kernels/cpu.hpp"
#include "kernels/gemm_bf16_amx.hpp"
#include "kernels/gemm_store.hpp"
#include "kernels/simd.hpp"

// GCC 12 reports its own _mm512_undefined_* placeholders as (maybe-)uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define HPU_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace hpu::kernels {

namespace {

// k per block: a block's products are summed in registers. Larger k runs in
// blocks that add into an f32 C (or an f32 work copy of a bf16 C).
constexpr int64_t kBlockK = 1024;
// Bytes of packed B to keep per block (it stays in the 1-2 MiB L2 cache while
// every row of A passes over it).
constexpr int64_t kPanelBytes = 384 << 10;

// k per step of the AMX path's row blocks (see run).
constexpr int64_t kAmxStepK = 256;

thread_local AlignedBuffer t_packed_b, t_packed_a, t_work, t_tiles;

// Where a micro-tile's results go: c (row stride ldc, type dt) = alpha acc +
// beta c; beta == 0 never reads c. Then, for a bf16 c only: relu, max(0, c);
// mask (bf16, row stride ld_mask), c * (mask > 0 ? 1 : 0) (relu's backward).
struct Out {
  void *c;
  int64_t ldc;
  hpuDataType_t dt;
  float alpha, beta;
  bool relu = false;
  const uint16_t *mask = nullptr;
  int64_t ld_mask = 0;
  // The results go to the sink instead (Epilogue::sink), c's element
  // row * ldc + col as the sink's element at + row * ldc + col.
  const GemmSink *sink = nullptr;
  int64_t at = 0;
  // c's type, a value per column of c, added to alpha acc (Epilogue::bias).
  const void *bias = nullptr;
};

// The Out of s's epilogue over c; relu and its backward only when `last`
// (the k block that rounds a bf16 C).
Out out_of(const GemmShape &s, void *c, int64_t ldc, hpuDataType_t c_dt, float alpha, float beta, bool last) {
  const Epilogue &ep = s.ep;
  const bool mask = last && ep.backward == Activation::relu;
  return {c,    ldc,  c_dt, alpha, beta, last && ep.activation == Activation::relu,
          mask ? static_cast<const uint16_t *>(ep.backward_input) : nullptr, mask ? ep.ld_backward : 0, ep.sink,
          ep.at, ep.bias};
}

inline uint32_t load_pair(const uint16_t *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

HPU_BF16 inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(bf16_widen16(h));
}

// Writes row i, vector v of a tile: 16 columns at most, `cols` of them valid.
// Whole vectors use plain loads and stores (masked ones are slow on some CPUs).
// vcvtneps2bf16 rounds to nearest even and keeps NaN a NaN, as f32_to_bf16.
// The bias is added to alpha acc in f32, as beta = 1 adds a C that holds it.
HPU_BF16 inline void store(const Out &o, int64_t row, int64_t col, int cols, __m512 acc) {
  const bool whole = cols >= 16;
  const __mmask16 mask = whole ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  __m512 r = o.alpha == 1.0f ? acc : _mm512_mul_ps(acc, _mm512_set1_ps(o.alpha));
  if (o.bias) {
    if (o.dt == HPU_FLOAT32) {
      const float *q = static_cast<const float *>(o.bias) + col;
      r = _mm512_add_ps(r, whole ? _mm512_loadu_ps(q) : _mm512_maskz_loadu_ps(mask, q));
    } else {
      const uint16_t *q = static_cast<const uint16_t *>(o.bias) + col;
      r = _mm512_add_ps(r, widen_bf16(whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q))
                                            : _mm256_maskz_loadu_epi16(mask, q)));
    }
  }
  if (o.dt == HPU_FLOAT32) return store_f32_row(static_cast<float *>(o.c) + row * o.ldc + col, cols, 1.0f, o.beta, r);
  uint16_t *p = static_cast<uint16_t *>(o.c) + row * o.ldc + col;
  if (o.beta != 0.0f) {
    __m256i old = whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)) : _mm256_maskz_loadu_epi16(mask, p);
    r = _mm512_fmadd_ps(widen_bf16(old), _mm512_set1_ps(o.beta), r);
  }
  __m256i h = (__m256i)_mm512_cvtneps_pbh(r);
  if (o.relu)  // the rounded lanes below 0 become +0, as relu on the bf16 result
    h = _mm256_mask_mov_epi16(h, _mm512_cmp_ps_mask(_mm512_setzero_ps(), widen_bf16(h), _CMP_GT_OQ),
                              _mm256_setzero_si256());
  if (o.mask) {  // times 1 or 0, as relu's backward on the bf16 result
    const uint16_t *q = o.mask + row * o.ld_mask + col;
    __m256i x = whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q)) : _mm256_maskz_loadu_epi16(mask, q);
    __mmask16 pos = _mm512_cmp_ps_mask(widen_bf16(x), _mm512_setzero_ps(), _CMP_GT_OQ);
    __m512 factor = _mm512_mask_blend_ps(pos, _mm512_setzero_ps(), _mm512_set1_ps(1.0f));
    h = (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(widen_bf16(h), factor));
  }
  if (whole)
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), h);
  else
    _mm256_mask_storeu_epi16(p, mask, h);
}

// relu on 32 rounded bf16 results in integer lanes, store()'s bits: the lanes
// below 0 (0x8001 to 0xFF80: not -0, not a NaN) become +0.
HPU_BF16 inline __m512i relu_bf16x32(__m512i h) {
  const __mmask32 neg = _mm512_cmpgt_epu16_mask(h, _mm512_set1_epi16(static_cast<short>(0x8000))) &
                        _mm512_cmple_epu16_mask(h, _mm512_set1_epi16(static_cast<short>(0xFF80)));
  return _mm512_maskz_mov_epi16(static_cast<__mmask32>(~neg), h);
}

// 32 rounded bf16 results times 1 or 0 (x > 0) in integer lanes, store()'s
// bits: h where x is 0x0001 to 0x7F80 (above 0, not a NaN); else h * 0: a zero
// of h's sign, the default NaN 0xFFC0 for an infinite h, h itself for a NaN
// (h is never subnormal: the rounding flushes those).
HPU_BF16 inline __m512i mask_bf16x32(__m512i h, __m512i x) {
  const __m512i inf = _mm512_set1_epi16(0x7F80);
  const __mmask32 pos =
      _mm512_cmple_epu16_mask(_mm512_sub_epi16(x, _mm512_set1_epi16(1)), _mm512_set1_epi16(0x7F7F));
  const __m512i mag = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
  __m512i z = _mm512_and_si512(h, _mm512_set1_epi16(static_cast<short>(0x8000)));
  z = _mm512_mask_mov_epi16(z, _mm512_cmpgt_epu16_mask(mag, inf), h);
  z = _mm512_mask_mov_epi16(z, _mm512_cmpeq_epi16_mask(mag, inf), _mm512_set1_epi16(static_cast<short>(0xFFC0)));
  return _mm512_mask_mov_epi16(z, pos, h);
}

// store() over rows x cols of C from row0, col0 for a bf16 C with alpha 1 and
// beta 0 (every product of a training step) and the epilogue fixed: 32
// columns at a time in integer lanes, one 64-byte store each, without
// store()'s tests per vector. at(i, j): the f32 results of row i, columns j
// to j + 15 (64-byte aligned).
template <bool kRelu, bool kMask, bool kBias, class At>
HPU_BF16 void store_rows_bf16(const Out &o, int64_t row0, int64_t col0, int rows, int64_t cols, const At &at) {
  const int64_t whole = cols / 32 * 32;
  const uint16_t *bias = kBias ? static_cast<const uint16_t *>(o.bias) + col0 : nullptr;
  for (int i = 0; i < rows; ++i) {
    uint16_t *p = static_cast<uint16_t *>(o.c) + (row0 + i) * o.ldc + col0;
    const uint16_t *q = kMask ? o.mask + (row0 + i) * o.ld_mask + col0 : nullptr;
    for (int64_t j = 0; j < whole; j += 32) {
      __m512 lo = _mm512_load_ps(at(i, j)), hi = _mm512_load_ps(at(i, j + 16));
      if (kBias) {  // as store() adds it
        const __m512i b = _mm512_loadu_si512(bias + j);
        lo = _mm512_add_ps(lo, widen_bf16(_mm512_castsi512_si256(b)));
        hi = _mm512_add_ps(hi, widen_bf16(_mm512_extracti64x4_epi64(b, 1)));
      }
      __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      if (kRelu) h = relu_bf16x32(h);
      if (kMask) h = mask_bf16x32(h, _mm512_loadu_si512(q + j));
      _mm512_storeu_si512(p + j, h);
    }
    for (int64_t j = whole; j < cols; j += 16)
      store(o, row0 + i, col0 + j, static_cast<int>(std::min<int64_t>(16, cols - j)), _mm512_load_ps(at(i, j)));
  }
}

// store() over rows x cols of C from row0, col0 (at as for store_rows_bf16).
template <class At>
HPU_BF16 void store_block(const Out &o, int64_t row0, int64_t col0, int rows, int64_t cols, const At &at) {
  if (o.dt == HPU_BFLOAT16 && o.alpha == 1.0f && o.beta == 0.0f) {
    auto rows_of = [&](auto bias) HPU_BF16 {
      constexpr bool kBias = decltype(bias)::value;
      if (o.mask) return store_rows_bf16<false, true, kBias>(o, row0, col0, rows, cols, at);
      if (o.relu) return store_rows_bf16<true, false, kBias>(o, row0, col0, rows, cols, at);
      return store_rows_bf16<false, false, kBias>(o, row0, col0, rows, cols, at);
    };
    return o.bias ? rows_of(std::true_type{}) : rows_of(std::false_type{});
  }
  for (int i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; j += 16)
      store(o, row0 + i, col0 + j, static_cast<int>(std::min<int64_t>(16, cols - j)), _mm512_load_ps(at(i, j)));
}

// A tile of C kSinkAhead tiles after the current one: while this one is
// computed, a sink's arrays (GemmSink::arrays) are prefetched there. rows 0:
// none.
constexpr int64_t kSinkAhead = 2;
struct NextTile {
  int64_t row = 0, col = 0;
  int rows = 0;
};

// Part q of the next tile's sink data into L2: row q / GemmSink::kArrays,
// then the row's piece of array q % kArrays (48 columns, the widest tile).
__attribute__((always_inline)) HPU_BF16 inline void prefetch_sink(const Out &o, const NextTile &next, int64_t q) {
  const GemmSink &u = *o.sink;
  const int i = static_cast<int>(q % GemmSink::kArrays);
  if (!u.arrays[i]) return;
  const int64_t at = o.at + (next.row + q / GemmSink::kArrays) * o.ldc + next.col;
  const char *p = static_cast<const char *>(u.arrays[i]) + at * u.elem_size[i];
  for (int b = 0; b < 48 * u.elem_size[i]; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

// cols f32 results of c's element `at` (row-major index) on, to the sink,
// alpha applied (g is 64-byte aligned).
__attribute__((always_inline)) HPU_BF16 inline void sink_row(const Out &o, int64_t at, int cols, const float *g) {
  if (o.alpha == 1.0f) return o.sink->row(*o.sink, o.at + at, cols, g);
  alignas(64) float scaled[48];
  for (int j = 0; j < cols; j += 16)
    _mm512_store_ps(scaled + j, _mm512_mul_ps(_mm512_load_ps(g + j), _mm512_set1_ps(o.alpha)));
  o.sink->row(*o.sink, o.at + at, cols, scaled);
}

// rows x cols results of c from row0, col0, in tile (row stride 16 NV), to
// the sink.
template <int NV>
__attribute__((noinline)) HPU_BF16 void sink_tile(const Out &o, int64_t row0, int64_t col0, int rows, int cols,
                                                  const float *tile) {
  for (int i = 0; i < rows; ++i) sink_row(o, (row0 + i) * o.ldc + col0, cols, tile + i * 16 * NV);
}

// One MR x (16 NV) tile of C over kc values of k. Row i of op(A) starts at
// a + i lda (pairs adjacent); rows >= `rows` reuse the last valid row and are
// not stored. b is a packed sliver: for each pair, 16 NV 32-bit words.
// Kept out of line: inlined into run(), GCC 12 spilled the accumulators.
template <int MR, int NV>
__attribute__((noinline)) HPU_BF16 void micro_kernel(int64_t kc, const uint16_t *a, int64_t lda, int rows, const uint32_t *b, const Out &o,
                           int64_t row0, int64_t col0, int cols, const NextTile &next) {
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  const uint16_t *ar[MR];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) ar[i] = a + std::min(i, rows - 1) * lda;
  const int64_t pairs = kc / 2;
  const int64_t fetch = o.sink ? GemmSink::kArrays * next.rows : 0;
  for (int64_t p = 0; p < pairs; ++p) {
    if (p < fetch) prefetch_sink(o, next, p);
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
  if (o.sink) {
    alignas(64) float tile[MR * 16 * NV];
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_store_ps(tile + (i * NV + v) * 16, acc[i][v]);
    return sink_tile<NV>(o, row0, col0, rows, cols, tile);
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      if (cols > 16 * v) store(o, row0 + i, col0 + 16 * v, cols - 16 * v, acc[i][v]);
  }
}

// Stores rows x cols of C from row0, col0 from the AMX path's tiles of a row
// block (tile t, columns 16 NV t.., at tiles + t MR 16 NV, row stride 16 NV),
// as micro_kernel stores its registers, a row of C at a time: a sink's
// arrays (an AdamW step's weights and moments) are then read in whole rows,
// which the hardware prefetchers follow.
template <int MR, int NV>
__attribute__((noinline)) HPU_BF16 void store_tiles(const Out &o, int64_t row0, int64_t col0, int rows, int64_t cols,
                                                    const float *tiles) {
  constexpr int nr = 16 * NV;
  if (o.sink) {
    for (int i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; j += nr)
        sink_row(o, (row0 + i) * o.ldc + col0 + j, static_cast<int>(std::min<int64_t>(nr, cols - j)),
                 tiles + j / nr * MR * nr + i * nr);
    return;
  }
  store_block(o, row0, col0, rows, cols,
              [&](int i, int64_t j) { return tiles + j / nr * MR * nr + i * nr + j % nr; });
}

// A row block's tiles on the AMX path, stored a few rows at a time while the
// tile unit sums the next row block: the vector unit's part (rounding, relu,
// the mask, AdamW's divide and square root) then runs beside the tile
// products instead of after them. A weight gradient's row block spends ~3x as
// long in its AdamW store as in its products, a forward one ~1/4.
// Forward and input-gradient products only. Not the AdamW store: its 26
// bytes per weight, streamed beside the products, push their operands out
// of L1 and make the weight gradient slower, so it follows its row block's
// products at once.
template <int MR, int NV>
struct PendingStore {
  Out o{};
  int64_t row0 = 0, col0 = 0, cols = 0;
  int rows = 0, done = 0;
  const float *tiles = nullptr;

  // Stores the rows up to `end` (of `rows`) not stored yet.
  void store_until(int end) {
    if (end <= done) return;
    store_tiles<MR, NV>(o, row0 + done, col0, end - done, cols, tiles + done * 16 * NV);
    done = end;
  }
  void finish() { store_until(rows); }
};

// r[i] lane c becomes r[c] lane i: a 16 x 16 transpose of 32-bit words.
__attribute__((always_inline)) HPU_BF16 inline void transpose_16x16_epi32(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved, per 128-bit lane
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + q]: rows g..g+3 of columns q, q+4, q+8, q+12
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int q = 0; q < 4; ++q) {  // gather lane L of the four row groups into column q + 4L
    const __m512i v0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x44), v1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x44),
                  w1 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xEE);
    r[q] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[q + 4] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    r[q + 8] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[q + 12] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

// Slivers of a k x n B that pack_b packs side by side, a pair of rows at a
// time: each row is read in runs of up to 8 cache lines.
constexpr int64_t kPackSlivers = 8;
// How many pairs of rows ahead pack_b starts fetching those runs (their first
// and last lines; the hardware prefetchers follow with the rest): B's rows are
// often 1-2 KiB apart, so each pair of rows is on a new 4 KiB page, where the
// prefetchers, which stay within a page, have not got ahead.
constexpr int64_t kPackAhead = 4;

// Packs rows k0 .. k0+kc and columns j0 .. j0+nc of op(B) into slivers of
// nr = 16 NV columns: sliver s, pair p, column j -> dst[(s pairs_out + p) nr + j]
// = B[k0+2p][j] | B[k0+2p+1][j] << 16. Missing columns, the odd k and the
// pairs from (kc + 1) / 2 to pairs_out are zero.
HPU_BF16 void pack_b(const uint16_t *b, int64_t ldb, bool trans, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                     int nr, int64_t pairs_out, uint32_t *dst) {
  const int64_t pairs = (kc + 1) / 2, slivers = (nc + nr - 1) / nr;
  for (int64_t s = 0; s < slivers; ++s)
    std::memset(dst + (s * pairs_out + pairs) * nr, 0, static_cast<size_t>((pairs_out - pairs) * nr) * sizeof *dst);
  if (!trans) {
    // B stored k x n: rows 2p and 2p+1 interleaved, 32 columns at a time (16
    // in a sliver's last odd 16), across kPackSlivers slivers before the next
    // pair of rows.
    // vpermt2w's indices: the words of columns 0-15 and 16-31, the low half
    // (row 2p) from the first operand, the high half from the second.
    alignas(64) static constexpr auto kInterleave = [] {
      struct {
        uint16_t lo[32], hi[32];
      } t{};
      for (int i = 0; i < 32; ++i) {
        t.lo[i] = static_cast<uint16_t>(i / 2 + (i % 2) * 32);
        t.hi[i] = static_cast<uint16_t>(16 + i / 2 + (i % 2) * 32);
      }
      return t;
    }();
    const __m512i idx_lo = _mm512_load_si512(kInterleave.lo), idx_hi = _mm512_load_si512(kInterleave.hi);
    for (int64_t g = 0; g < slivers; g += kPackSlivers) {
      const int64_t g_end = std::min(slivers, g + kPackSlivers), g_cols = std::min(nc, g_end * nr) - g * nr;
      for (int64_t p = 0; p < pairs; ++p) {
        const uint16_t *r0 = b + (k0 + 2 * p) * ldb + j0;
        const bool second = 2 * p + 1 < kc;
        for (int64_t r = 2 * (p + kPackAhead); r < 2 * (p + kPackAhead + 1) && r < kc; ++r) {
          const uint16_t *run = b + (k0 + r) * ldb + j0 + g * nr;
          _mm_prefetch(reinterpret_cast<const char *>(run), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char *>(run + g_cols - 1), _MM_HINT_T0);
        }
        for (int64_t s = g; s < g_end; ++s) {
          uint32_t *out = dst + (s * pairs_out + p) * nr;
          const uint16_t *q = r0 + s * nr;
          const int64_t width = nc - s * nr;  // columns of B from the sliver's first on
          int v = 0;
          for (; v + 32 <= nr; v += 32) {
            const int64_t w = width - v;
            const __mmask32 mask = w >= 32 ? ~__mmask32(0) : w <= 0 ? __mmask32(0) : (__mmask32(1) << w) - 1;
            auto load = [&](const uint16_t *x) HPU_BF16 {
              return w >= 32 ? _mm512_loadu_si512(x) : _mm512_maskz_loadu_epi16(mask, x);
            };
            const __m512i lo = load(q + v), hi = second ? load(q + ldb + v) : _mm512_setzero_si512();
            _mm512_store_si512(out + v, _mm512_permutex2var_epi16(lo, idx_lo, hi));
            _mm512_store_si512(out + v + 16, _mm512_permutex2var_epi16(lo, idx_hi, hi));
          }
          if (v < nr) {
            const int64_t w = width - v;
            const __mmask16 mask = w >= 16 ? __mmask16(0xFFFF) : w <= 0 ? __mmask16(0) : __mmask16((1u << w) - 1);
            auto load = [&](const uint16_t *x) HPU_BF16 {
              return _mm512_cvtepu16_epi32(w >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x))
                                                   : _mm256_maskz_loadu_epi16(mask, x));
            };
            const __m512i lo = load(q + v), hi = second ? load(q + ldb + v) : _mm512_setzero_si512();
            _mm512_store_si512(out + v, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
          }
        }
      }
    }
    return;
  }
  // B stored n x k: a pair is one 32-bit word of row j. 16 rows by 16 pairs
  // at a time, transposed in registers.
  for (int64_t s = 0; s < slivers; ++s) {
    uint32_t *out = dst + s * pairs_out * nr;
    const int64_t js = j0 + s * nr;
    const int width = static_cast<int>(std::min<int64_t>(nr, nc - s * nr));
    for (int v = 0; v * 16 < nr; ++v) {
      const int w = width - 16 * v;  // rows of this group that exist
      for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
        const int64_t left = kc - 2 * p0;  // bf16 values of a row from p0 on
        const __mmask32 mask = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          const uint16_t *q = b + (js + 16 * v + i) * ldb + k0 + 2 * p0;
          r[i] = i >= w ? _mm512_setzero_si512() : left >= 32 ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi16(mask, q);
        }
        transpose_16x16_epi32(r);
        const int64_t count = std::min<int64_t>(16, pairs - p0);
        for (int64_t c = 0; c < count; ++c) _mm512_store_si512(out + (p0 + c) * nr + 16 * v, r[c]);
      }
    }
  }
}

// Copies op(A) rows 0..m, k values k0..k0+kc, from A stored k x m into a
// row-major m x ld copy (ld = kc rounded up to even; an odd kc's pad is 0):
// rows 2p and 2p+1 of A interleave into 32-bit words, 16 pairs by 16 columns
// at a time, which a transpose turns into 16 words of 16 rows of the copy.
HPU_BF16 void pack_a_transposed(const uint16_t *a, int64_t lda, int64_t m, int64_t k0, int64_t kc, uint16_t *dst,
                                int64_t ld) {
  const int64_t pairs = ld / 2;
  uint32_t *out = reinterpret_cast<uint32_t *>(dst);
  for (int64_t i0 = 0; i0 < m; i0 += 16) {
    const int64_t cols = std::min<int64_t>(16, m - i0);
    const __mmask16 load_mask = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const int64_t count = std::min<int64_t>(16, pairs - p0);
      __m512i r[16];
      for (int c = 0; c < 16; ++c) {
        const int64_t l = 2 * (p0 + c);
        auto row = [&](int64_t k) HPU_BF16 {
          return k < kc ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load_mask, a + (k0 + k) * lda + i0))
                        : _mm512_setzero_si512();
        };
        r[c] = _mm512_or_si512(row(l), _mm512_slli_epi32(row(l + 1), 16));
      }
      transpose_16x16_epi32(r);
      const __mmask16 store_mask = __mmask16((1u << count) - 1);
      for (int64_t i = 0; i < cols; ++i) _mm512_mask_storeu_epi32(out + (i0 + i) * pairs + p0, store_mask, r[i]);
    }
  }
}

// Copies op(A) rows 0..m, k values k0..k0+kc, from A stored m x k into a
// row-major rows x ld copy whose k values from kc on and rows from m on are 0.
HPU_BF16 void pack_a_padded(const uint16_t *a, int64_t lda, int64_t m, int64_t k0, int64_t kc, int64_t rows,
                            uint16_t *dst, int64_t ld) {
  for (int64_t i = 0; i < m; ++i) {
    std::memcpy(dst + i * ld, a + i * lda + k0, static_cast<size_t>(kc) * 2);
    std::memset(dst + i * ld + kc, 0, static_cast<size_t>(ld - kc) * 2);
  }
  std::memset(dst + m * ld, 0, static_cast<size_t>((rows - m) * ld) * 2);
}

// The product in MR x 16 NV tiles of C, on the AVX-512 micro-kernel, or with
// kAmx on the AMX tile unit (MR = 32; the packed operands padded to whole
// tiles with zeros: k to a multiple of 32, rows of A to a multiple of 32).
template <int MR, int NV, bool kAmx = false>
HPU_BF16 void run(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                  float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  static_assert(!kAmx || MR == 32, "AMX blocks are 32 rows");
  constexpr int nr = 16 * NV;
  const int64_t m = s.m, n = s.n, k = s.k;
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, k - k0);
    // Pairs per sliver of packed B: AMX loads them 16 at a time.
    const int64_t pairs = kAmx ? (kc + 31) / 32 * 16 : (kc + 1) / 2;
    const bool last = c_dt == HPU_BFLOAT16 && k0 + kc >= k;  // the epilogue's block
    Out o = out_of(s, c, ldc, c_dt, alpha, k0 == 0 ? beta : 1.0f, last);
    if (k0 > 0) o.bias = nullptr;
    // op(A) rows for this k block, pairs adjacent.
    const uint16_t *ab = a + k0;
    int64_t ld = lda;
    // AMX reads op(A) in place when it is whole tiles (m and kc multiples of
    // 32) and its rows spread over L1's sets: rows 1 KiB apart share a few
    // sets, so a block's 32 rows (its k step, kAmxStepK values each) would
    // not stay in L1 while B passes (13-15% slower at k = 1024), unless C is
    // one sliver wide and reads A once. A copy's rows are 64 bytes longer,
    // for the same reason.
    const bool copy_a = s.trans_a || (kAmx && (m % MR != 0 || 2 * pairs != kc || (lda % 512 == 0 && n > nr)));
    if (copy_a) {
      ld = kAmx ? 2 * pairs + 32 : 2 * pairs;
      const int64_t rows = kAmx ? (m + MR - 1) / MR * MR : m;
      uint16_t *packed = t_packed_a.get<uint16_t>(static_cast<size_t>(rows * ld));
      if (!s.trans_a) {
        pack_a_padded(a, lda, m, k0, kc, rows, packed, ld);
      } else {
        pack_a_transposed(a, lda, m, k0, kc, packed, ld);
        std::memset(packed + m * ld, 0, static_cast<size_t>((rows - m) * ld) * 2);
      }
      ab = packed;
    }
    const int64_t nc = std::max<int64_t>(nr, kPanelBytes / (pairs * 4 * nr) * nr);
    const int64_t nc_max = std::min(nc, (n + nr - 1) / nr * nr);
    uint32_t *bp = t_packed_b.get<uint32_t>(static_cast<size_t>(pairs * nc_max));
    // AMX: two row blocks' tiles, the one summed and the one being stored.
    float *tile_buffers = kAmx ? t_tiles.get<float>(static_cast<size_t>(2 * nc_max * MR)) : nullptr;
    PendingStore<MR, NV> pending;
    int64_t block = 0;
    for (int64_t j0 = 0; j0 < n; j0 += nc) {
      const int64_t ncur = std::min(nc, n - j0);
      pack_b(b, ldb, s.trans_b, k0, kc, j0, ncur, nr, pairs, bp);
      for (int64_t i0 = 0; i0 < m; i0 += MR, ++block) {
        const int rows = static_cast<int>(std::min<int64_t>(MR, m - i0));
        if constexpr (kAmx) {
          // The row block's tiles of this panel summed kAmxStepK values of k
          // at a time, so that its A stays in L1 while B passes; the previous
          // row block stored in even parts after each tile product.
          float *tiles = tile_buffers + (block & 1) * nc_max * MR;
          const int64_t slivers = (ncur + nr - 1) / nr, calls = (2 * pairs + kAmxStepK - 1) / kAmxStepK * slivers;
          int64_t call = 0;
          for (int64_t ks = 0; ks < 2 * pairs; ks += kAmxStepK)
            for (int64_t jr = 0; jr < ncur; jr += nr) {
              amx_block(NV, std::min(kAmxStepK, 2 * pairs - ks), ab + i0 * ld + ks, ld,
                        bp + (jr / nr) * pairs * nr + ks / 2 * nr, tiles + jr / nr * MR * nr, ks > 0);
              pending.store_until(static_cast<int>(pending.rows * ++call / calls));
            }
          pending.finish();
          pending = {o, i0, j0, ncur, rows, 0, tiles};
          if (o.sink) pending.finish();  // see PendingStore
        } else {
          for (int64_t jr = 0; jr < ncur; jr += nr) {
            NextTile next;
            if (o.sink) {  // kSinkAhead tiles on, along the rows of tiles of this panel
              const int64_t per_row = (ncur + nr - 1) / nr, t = (i0 / MR) * per_row + jr / nr + kSinkAhead;
              next.row = t / per_row * MR;
              next.col = j0 + t % per_row * nr;
              next.rows = static_cast<int>(std::clamp<int64_t>(m - next.row, 0, MR));
            }
            micro_kernel<MR, NV>(kc, ab + i0 * ld, ld, rows, bp + (jr / nr) * pairs * nr, o, i0, j0 + jr,
                                 static_cast<int>(std::min<int64_t>(nr, ncur - jr)), next);
          }
        }
      }
    }
    pending.finish();  // before the next k block adds to C
  }
  t_packed_a.trim();
  t_packed_b.trim();
  t_tiles.trim();
}

// c (bf16) = work (f32, m x n dense) + s's bias + beta c, rounded once, then
// s's relu and its backward.
HPU_BF16 void round_into(const float *work, const GemmShape &s, float beta, uint16_t *c, int64_t ldc) {
  const int64_t m = s.m, n = s.n;
  for (int64_t i = 0; i < m; ++i) {
    Out o = out_of(s, c + i * ldc, 0, HPU_BFLOAT16, 1.0f, beta, true);
    if (o.mask) o.mask += i * s.ep.ld_backward;
    for (int64_t j = 0; j < n; j += 16) {
      int cols = static_cast<int>(std::min<int64_t>(16, n - j));
      __mmask16 mask = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
      store(o, 0, j, cols, _mm512_maskz_loadu_ps(mask, work + i * n + j));
    }
  }
}

// The AMX path for k <= 32 (one tile product per 32 x 16 NV block of C): a
// row block's tiles summed kShortPanel columns at a time into a scratch of
// rows (34 KiB, in L1), then stored row by row. run()'s row blocks are as
// wide as C, so with a short k their tiles (128 KiB at 1024 columns) went
// through L2 and back; and storing each block as it comes writes C in
// 64-byte pieces 2 KiB apart, which the prefetchers do not follow (the k = 10
// input gradient of the training step, 256 x 1024 of C, is such a product).
constexpr int64_t kShortPanel = 256;
// The scratch's row stride: 64 bytes more than a panel's row, so that its rows
// spread over L1's sets (1 KiB apart they share a few).
constexpr int64_t kShortLd = kShortPanel + 16;

template <int NV>
HPU_BF16 void run_amx_short(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                            int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  constexpr int MR = 32, nr = 16 * NV;
  constexpr int64_t kp = 32, pairs = kp / 2;
  const int64_t m = s.m, n = s.n, k = s.k;
  const int64_t rows = (m + MR - 1) / MR * MR, slivers = (n + nr - 1) / nr;
  uint16_t *ap = t_packed_a.get<uint16_t>(static_cast<size_t>(rows * kp));
  if (!s.trans_a) {
    pack_a_padded(a, lda, m, 0, k, rows, ap, kp);
  } else {
    pack_a_transposed(a, lda, m, 0, k, ap, kp);
    std::memset(ap + m * kp, 0, static_cast<size_t>((rows - m) * kp) * 2);
  }
  uint32_t *bp = t_packed_b.get<uint32_t>(static_cast<size_t>(slivers * pairs * nr));
  pack_b(b, ldb, s.trans_b, 0, k, 0, n, nr, pairs, bp);
  float *tiles = t_tiles.get<float>(static_cast<size_t>(MR * kShortLd));
  const Out o = out_of(s, c, ldc, c_dt, alpha, beta, c_dt == HPU_BFLOAT16);
  for (int64_t i0 = 0; i0 < m; i0 += MR)
    for (int64_t j0 = 0; j0 < n; j0 += kShortPanel) {
      const int64_t cols = std::min(kShortPanel, n - j0);
      for (int64_t jr = 0; jr < cols; jr += nr)
        amx_block(NV, kp, ap + i0 * kp, kp, bp + (j0 + jr) / nr * pairs * nr, tiles + jr, false, kShortLd);
      store_block(o, i0, j0, static_cast<int>(std::min<int64_t>(MR, m - i0)), cols,
                  [&](int i, int64_t j) { return tiles + i * kShortLd + j; });
    }
  t_packed_a.trim();
  t_packed_b.trim();
  t_tiles.trim();
}

template <int MR, int NV, bool kAmx = false>
void run_blocks(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
                float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  if (s.ep.sink && s.k > kBlockK) {  // the results summed over the k blocks first
    GemmShape plain = s;
    plain.ep = {};
    float *work = t_work.get<float>(static_cast<size_t>(s.m * s.n));
    run<MR, NV, kAmx>(plain, alpha, a, lda, b, ldb, 0.0f, work, s.n, HPU_FLOAT32);
    gemm_sink_rows(s.ep, work, s.n, s.m, s.n, ldc);
    t_work.trim();
    return;
  }
  if (c_dt == HPU_FLOAT32 || s.k <= kBlockK) return run<MR, NV, kAmx>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  // A bf16 C summed over several k blocks: sum in f32, round once (adding
  // the bias then).
  GemmShape plain = s;
  plain.ep = {};
  float *work = t_work.get<float>(static_cast<size_t>(s.m * s.n));
  run<MR, NV, kAmx>(plain, alpha, a, lda, b, ldb, 0.0f, work, s.n, HPU_FLOAT32);
  round_into(work, s, beta, static_cast<uint16_t *>(c), ldc);
  t_work.trim();
}

}  // namespace

bool gemm_bf16_native_supported() {
  static const bool ok = vector_isa(best_isa()) == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
  return ok;
}

bool gemm_bf16_amx_supported() { return best_isa() == Isa::amx; }

// Tile shapes: on AMX 32 x 32 (32 x 16 when C is 16 wide; k <= 32 in
// run_amx_short); else 8 x 48 for wide C (24 accumulators, 3 vectors of B per
// pair), 12 rows when C is 32 or 16 wide.
void gemm_bf16_native(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                      int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  if (gemm_bf16_amx_supported()) {
    struct Tiles {  // released however the product ends
      Tiles() { amx_tiles_begin(); }
      ~Tiles() { amx_tiles_end(); }
    } tiles;
    if (s.k <= 32 && !s.ep.sink) {
      if (s.n <= 16) return run_amx_short<1>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
      return run_amx_short<2>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
    }
    if (s.n <= 16) return run_blocks<32, 1, true>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
    return run_blocks<32, 2, true>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  }
  if (s.n <= 16) return run_blocks<12, 1>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  if (s.n <= 32) return run_blocks<12, 2>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
  run_blocks<8, 3>(s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt);
}

}  // namespace hpu::kernels
