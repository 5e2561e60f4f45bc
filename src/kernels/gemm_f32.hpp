// f32 GEMM on AVX-512 FMA, the blocking of gemm_bf16.hpp with one f32 per
// lane instead of a bf16 pair:
//
//   C = alpha * op(A) * op(B) + beta * C    (row-major, as in gemm.hpp)
//
// B is packed a block of k x nc at a time into slivers of NR columns (one
// row of NR floats per k; op(B) stored transposed is transposed 16 x 16 in
// registers while packing). op(A) stored transposed is packed a k block at
// a time into slivers of MR rows (MR floats per k, so each broadcast reads the
// next float); untransposed it is read in place, its MR rows in order. The
// micro-kernel keeps an MR x NR tile of C in registers while it walks k,
// broadcasting one element of A per row against NR/16 vectors of packed B.
// Products are summed with FMA in f32, k in order within each k block, so
// results differ from OpenBLAS's sgemm only by f32 rounding. Runs on the
// calling thread; gemm() splits C over threads.
//
// Why not OpenBLAS: Debian's build picks its AVX2 (Haswell) kernels on CPUs
// it does not know, such as AMD's AVX-512 ones, and OPENBLAS_CORETYPE can only
// change that before the library loads (about 105 vs 175 GFLOP/s per core
// measured on the project's VM).
#pragma once

#include <cstdint>

#include "kernels/gemm.hpp"

namespace hpu::kernels {

// True when the CPU has AVX-512F and HPU_KERNEL_ISA does not ask for a lower
// path (HPU_KERNEL_ISA=avx2 or scalar selects OpenBLAS's sgemm).
bool gemm_f32_native_supported();

// C = alpha op(A) op(B) + beta C for f32 A, B and C, with m, n, k > 0.
// Requires gemm_f32_native_supported().
void gemm_f32_native(const GemmShape &s, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, float *c, int64_t ldc);

}  // namespace hpu::kernels
