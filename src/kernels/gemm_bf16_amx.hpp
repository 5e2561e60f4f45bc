// The AMX tile unit's part of the bf16 GEMM (gemm_bf16.cpp drives it): one
// block of 32 x 16 or 32 x 32 products at a time, summed in f32 tiles.
// TDPBF16PS adds the two products of a pair of bf16 values to an f32 element
// of a tile, as vdpbf16ps does to a lane (subnormal inputs and results count
// as zero, sums round to nearest even); 16 x 16 elements over 16 pairs per
// instruction. Compiled on its own with -mamx-tile -mamx-bf16.
#pragma once

#include <cstdint>

namespace hpu::kernels {

// The calling thread's tiles: amx_tiles_begin configures eight of 16 rows x
// 64 bytes, amx_tiles_end releases them (back to the state of a thread that
// never used AMX). amx_block runs between the two, on the same thread.
// Requires best_isa() == Isa::amx.
void amx_tiles_begin();
void amx_tiles_end();

// acc (32 x 16 nt f32, row stride ldacc, 0 for 16 nt; nt 1 or 2) = A B, or
// acc + A B when `add` (summed in the tiles, as if in one call), over kp
// values of k, kp a positive multiple of 32. A: 32 rows of kp bf16 values,
// row stride lda elements. B: kp / 2 pairs, each 16 nt 32-bit words
// B[2p][j] | B[2p+1][j] << 16 (a sliver of gemm_bf16.cpp's packed B).
void amx_block(int nt, int64_t kp, const uint16_t *a, int64_t lda, const uint32_t *b, float *acc, bool add,
               int64_t ldacc = 0);

}  // namespace hpu::kernels
