// f32 GEMM on FMA vectors: 512-bit (AVX-512) or 256-bit (AVX2), the blocking
// of gemm_bf16.hpp with one f32 per lane instead of a bf16 pair:
//
//   C = alpha * op(A) * op(B) + beta * C    (row-major, as in gemm.hpp)
//
// B is packed a block of k x nc at a time into slivers of NR columns (one
// row of NR floats per k; op(B) stored transposed is transposed 16 x 16, or
// 8 x 8, in registers while packing). op(A) stored transposed is packed a k
// block at a time into slivers of MR rows (MR floats per k, so each broadcast
// reads the next float); untransposed it is read in place, its MR rows in
// order. The micro-kernel keeps an MR x NR tile of C in registers while it
// walks k, broadcasting one element of A per row against NR/16 (NR/8) vectors
// of packed B. Products are summed with FMA in f32, k in order within each k
// block, so results differ from OpenBLAS's sgemm only by f32 rounding, and
// each element's sum depends on k alone (not on the tile or the part of C a
// thread computes). Runs on the calling thread; gemm() splits C over threads.
//
// Both widths also take bf16 and f16 A and B: they are widened to f32
// (exactly) as they are packed, op(A) untransposed into a row-major f32 copy
// of its k block; C is f32 or the inputs' type, rounded once (a 16-bit C
// summed over several k blocks is summed in an f32 copy first). gemm() sends
// bf16 to them only where the CPU has no bf16 dot product (gemm_bf16.hpp):
// at avx2, and on AVX-512 CPUs without AVX-512 BF16.
//
// The blocking is written once (gemm_f32.inc) over each vector width's
// primitives (gemm_f32.cpp).
//
// Why not OpenBLAS: Debian's build picks its AVX2 (Haswell) kernels on CPUs
// it does not know, such as AMD's AVX-512 ones, and OPENBLAS_CORETYPE can only
// change that before the library loads (about 105 vs 175 GFLOP/s per core
// measured on the project's VM); and at avx2 its sgemm ran the training
// step's products at a fifth to a quarter of the 256-bit FMA peak.
#pragma once

#include <hpu/types.h>

#include <cstdint>

#include "kernels/gemm.hpp"

namespace hpu::kernels {

// The path gemm_f32_native runs dt's products (f32, bf16, f16) on at this
// process's level: avx512_f32 where vector_isa(best_isa()) is avx512,
// avx2_f32 where it is avx2; else blas (no native kernel:
// HPU_KERNEL_ISA=scalar, f64).
GemmPath gemm_f32_native_path(hpuDataType_t dt);
// gemm_f32_native_path(HPU_FLOAT32) != GemmPath::blas.
bool gemm_f32_native_supported();

// C (c_dt: f32, or dt) = alpha op(A) op(B) + beta C for A and B of dt, with
// m, n, k > 0. s.ep is not applied (gemm() does it). Requires
// gemm_f32_native_path(dt) != GemmPath::blas.
void gemm_f32_native(const GemmShape &s, hpuDataType_t dt, float alpha, const void *a, int64_t lda, const void *b,
                     int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt);

// The f32 product.
inline void gemm_f32_native(const GemmShape &s, float alpha, const float *a, int64_t lda, const float *b,
                            int64_t ldb, float beta, float *c, int64_t ldc) {
  gemm_f32_native(s, HPU_FLOAT32, alpha, a, lda, b, ldb, beta, c, ldc, HPU_FLOAT32);
}

}  // namespace hpu::kernels
