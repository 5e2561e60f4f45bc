// bf16 GEMM on the CPU's own bf16 dot product (AVX-512 BF16: vdpbf16ps adds
// the two products of a pair of bf16 values to an f32 lane, twice the
// multiply-adds per instruction of an f32 FMA; or AMX, whose TDPBF16PS does
// the same for 16 x 16 f32 elements over 16 pairs, ~10x the rate on one core),
// with no widening of operands.
//
//   C = alpha * op(A) * op(B) + beta * C    (row-major, as in gemm.hpp)
//
// Accumulation is in f32 and the result is rounded once (to nearest even,
// NaN kept a NaN) when C is bf16; C may also be f32. As the instructions
// define it, subnormal values count as zero: bf16 inputs, partial sums and
// bf16 results below 1.2e-38 in magnitude; everything else matches the
// widen-and-sgemm path within f32 rounding.
//
// How it works: B is packed, a block of k x nc at a time, into slivers of
// NR columns holding (B[2p][j], B[2p+1][j]) pairs as 32-bit words; op(A) is
// read in place when it is stored row by row (its pairs are adjacent), or
// first transposed into a row-major copy when it is stored transposed. A
// register-blocked micro-kernel keeps an MR x NR tile of C in f32 registers
// while it walks k, broadcasting one pair of A per row against NR/16 vectors
// of packed B. On AMX (best_isa() == Isa::amx) the same packed slivers, 32
// columns and a multiple of 16 pairs each, are B tiles as they stand (16 pairs
// x 16 columns, a column's pair one 32-bit word); A tiles are 16 rows x 32 k of
// op(A) in place, or of a copy padded with zeros to whole tiles; 2 x 2 tiles of
// C (32 x 32) sum in the tile unit over a k block, go to a scratch tile and
// from there through the same stores (and fused relu, relu mask or sink) as
// the registers of the AVX-512 micro-kernel (with k <= 32, one tile product
// per block, a row block goes 256 columns at a time through a scratch of rows
// in L1 instead). The products of an element are
// summed in another order than there, so results may differ in the last bits
// of the f32 sum from the AVX-512 path's.
// Runs on the calling thread; gemm() splits C over threads.
#pragma once

#include <hpu/types.h>

#include <cstdint>

#include "kernels/gemm.hpp"

namespace hpu::kernels {

// True when the CPU has AVX-512 BF16 and HPU_KERNEL_ISA does not ask for a
// lower path (HPU_KERNEL_ISA=avx2 selects the widening AVX2 kernel, scalar
// widen-and-sgemm).
bool gemm_bf16_native_supported();
// True when gemm_bf16_native runs on AMX: best_isa() is amx (the CPU has it,
// the system allows it, HPU_KERNEL_ISA does not ask for avx512 or lower).
bool gemm_bf16_amx_supported();

// C (c_dt: bf16 or f32) = alpha op(A) op(B) + beta C for bf16 A and B, with
// m, n, k > 0, and s.ep: the bias (of c_dt) with beta 0; a relu and its
// backward on a bf16 C only (gemm() does the others); the sink fed as each
// tile is stored when k <= 1024.
// Requires gemm_bf16_native_supported().
void gemm_bf16_native(const GemmShape &s, float alpha, const uint16_t *a, int64_t lda, const uint16_t *b,
                      int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt);

}  // namespace hpu::kernels
