// Matrix multiply (OpenBLAS, or this library's AVX-512 kernels), row-major:
//   C = alpha * op(A) * op(B) + beta * C,   op(A) m x k, op(B) k x n, C m x n
// op(X) = X, or X transposed when trans_x (then X is stored k x m / n x k).
// lda/ldb/ldc are row strides in elements (>= the stored row length).
//
// dtypes: f32 runs on AVX-512 FMA where the CPU has it (gemm_f32.hpp), else
// cblas_sgemm; f64 calls cblas_dgemm. bf16 runs on the CPU's
// bf16 dot product where it has one (gemm_bf16.hpp: AMX tiles, else AVX-512
// BF16), else, like
// f16, widens blocks of A and B to f32, runs cblas_sgemm. Either way products
// are summed in f32 and each result is rounded once (beta * C is added in f32
// before that rounding). C may be f32 with bf16/f16 inputs (c_dt), which then
// skips the rounding. HPU_KERNEL_ISA=avx512 keeps bf16 off AMX;
// HPU_KERNEL_ISA=avx2 forces OpenBLAS (and widening).
//
// Threads: OpenBLAS and the bf16 kernel run single-threaded and gemm splits C
// into row (or, for short wide C, column) blocks that run on the calling thread plus helper
// threads borrowed from the ComputeBudget with try_acquire. The split never
// changes the bits (hpu(7): the same bits within one level whatever the
// thread count and the load on other devices). The native f32 and bf16
// kernels sum each element of C over k in an order fixed by k alone, whatever
// block of C holds it, so their blocks follow the idle threads. OpenBLAS's
// bits depend on the shape of each call (its kernels and blocking follow m
// and n), so a product through it (f32 below avx512, f64, and the widened
// 16-bit inputs) is cut into blocks that depend on the shape alone: one per
// chunk of the grain, at most 8, whatever the threads that share them. The library's
// stream workers and helpers are the only threads that compute, all counted
// by the one budget, and helpers spin at most 50 us between jobs: Debian's
// pthread OpenBLAS pool spinning beside our workers was seen to cut throughput
// to a third on two cores. Small products run on the calling thread alone.
#pragma once

#include <hpu/types.h>

#include <cstdint>

#include "kernels/optim_vec.hpp"

namespace hpu::kernels {

// An AdamW step in place of C's store: C (f32) holds weights
// and the product alpha op(A) op(B) is their gradient, never stored. Each
// element of C and of the moments (C's layout) is updated as adamw_step
// updates it from that gradient, with its bits; copy (copy_dt bf16 or f16,
// C's layout; null for none) gets the new C converted, as adamw_step writes
// it. beta must be 0.
struct GemmAdamw {
  float *exp_avg = nullptr, *exp_avg_sq = nullptr;
  void *copy = nullptr;
  hpuDataType_t copy_dt = HPU_BFLOAT16;
  AdamwConstants c{};
  // The same for the part of C that starts `elements` after C.
  GemmAdamw at(int64_t elements) const {
    GemmAdamw u = *this;
    u.exp_avg += elements, u.exp_avg_sq += elements;
    if (copy) u.copy = static_cast<char *>(copy) + elements * 2;
    return u;
  }
};

struct GemmShape {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  // Then C = max(0, C) (relu: NaN and -0 stay), on the rounded result: the
  // bits of a separate relu over C. The native bf16 kernel applies it as it
  // stores a bf16 C; the other paths in a pass over C after the product.
  bool relu = false;
  // Then C = C * (mask > 0 ? 1 : 0) (relu's backward, mask the relu's
  // output or input): mask has C's type and m x n shape, row stride ld_mask;
  // the bits of a separate hpuReluBackward over C. One product only (not
  // gemm_batched with batch > 1).
  const void *relu_mask = nullptr;
  int64_t ld_mask = 0;
  // Then no C is stored: an AdamW step of C instead (see GemmAdamw). The
  // native bf16 kernel applies it as it stores each tile (k <= 1024); the
  // other paths from the product in a scratch buffer. One product only.
  const GemmAdamw *adamw = nullptr;
  // C = alpha op(A) op(B) + bias before the rounding and the epilogues above:
  // n values of C's type (c_dt), one per column; beta must be 0, no AdamW
  // store. The bits of C filled with the bias row by row and beta 1: the
  // native bf16 kernel adds it as it stores C, the other paths fill C first.
  const void *bias = nullptr;
};

// The AdamW step of rows x cols of C (row stride ldc) from their gradient
// grad (row stride ld_grad), on the calling thread: the epilogue of
// GemmShape::adamw where it is not applied in the kernel.
void gemm_adamw_store(const GemmAdamw &u, float *c, int64_t ldc, const float *grad, int64_t ld_grad, int64_t rows,
                      int64_t cols);

void gemm(hpuDataType_t dt, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
          int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt);

// `batch` independent products; matrix i starts stride_x elements after
// matrix i - 1 (stride 0 reuses one matrix, e.g. a shared weight).
void gemm_batched(hpuDataType_t dt, const GemmShape &s, int64_t batch, float alpha, const void *a, int64_t lda,
                  int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, float beta, void *c, int64_t ldc,
                  int64_t stride_c, hpuDataType_t c_dt);

// True when gemm does dt (f32, f64, bf16, f16).
bool gemm_supports(hpuDataType_t dt);

}  // namespace hpu::kernels
