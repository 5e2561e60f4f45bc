// AMX tile products for the bf16 GEMM; see gemm_bf16_amx.hpp.
#include "kernels/gemm_bf16_amx.hpp"

#include <immintrin.h>

namespace hpu::kernels {

namespace {

// LDTILECFG's 64-byte operand, palette 1: tiles 0-7 of 16 rows x 64 bytes.
// A constant in memory: GCC 12 does not see that LDTILECFG reads its operand
// and dropped the stores that filled a local one.
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};
constexpr TileConfig kTiles = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

// Tiles: C block (i, j) in tmm(2 i + j), rows 16 i.. and columns 16 j..; A
// rows 0-15 and 16-31 in tmm4 and tmm5; B columns 0-15 and 16-31 in tmm6 and
// tmm7.
template <int NT>
void block(int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b, float *acc, int64_t ldacc, bool add) {
  constexpr int64_t ldb_bytes = 64 * NT;
  const int64_t lda_bytes = 2 * lda, ldc_bytes = 4 * ldacc;
  if (add) {
    _tile_loadd(0, acc, ldc_bytes);
    _tile_loadd(2, acc + 16 * ldacc, ldc_bytes);
    if constexpr (NT == 2) {
      _tile_loadd(1, acc + 16, ldc_bytes);
      _tile_loadd(3, acc + 16 * ldacc + 16, ldc_bytes);
    }
  } else {
    _tile_zero(0);
    _tile_zero(2);
    if constexpr (NT == 2) {
      _tile_zero(1);
      _tile_zero(3);
    }
  }
  for (int64_t k = 0; k < kp; k += 32) {
    const uint32_t *bk = b + k / 2 * 16 * NT;
    _tile_loadd(4, a + k, lda_bytes);
    _tile_loadd(6, bk, ldb_bytes);
    _tile_loadd(5, a + 16 * lda + k, lda_bytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (NT == 2) {
      _tile_loadd(7, bk + 16, ldb_bytes);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, acc, ldc_bytes);
  _tile_stored(2, acc + 16 * ldacc, ldc_bytes);
  if constexpr (NT == 2) {
    _tile_stored(1, acc + 16, ldc_bytes);
    _tile_stored(3, acc + 16 * ldacc + 16, ldc_bytes);
  }
}

}  // namespace

void amx_tiles_begin() { _tile_loadconfig(&kTiles); }

void amx_tiles_end() { _tile_release(); }

void amx_block(int nt, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b, float *acc, bool add,
               int64_t ldacc) {
  if (ldacc == 0) ldacc = 16 * nt;
  if (nt == 1)
    block<1>(kp, a, lda, b, acc, ldacc, add);
  else
    block<2>(kp, a, lda, b, acc, ldacc, add);
}

}  // namespace hpu::kernels
