// Matrix multiply (OpenBLAS, or this library's AVX-512 kernels), row-major:
//   C = alpha * op(A) * op(B) + beta * C,   op(A) m x k, op(B) k x n, C m x n
// op(X) = X, or X transposed when trans_x (then X is stored k x m / n x k).
// lda/ldb/ldc are row strides in elements (>= the stored row length).
//
// dtypes: f32 runs on AVX-512 FMA where the CPU has it (gemm_f32.hpp), else
// cblas_sgemm; f64 calls cblas_dgemm. bf16 runs on the CPU's
// bf16 dot product where it has one (gemm_bf16.hpp: AVX-512 BF16), else, like
// f16, widens blocks of A and B to f32, runs cblas_sgemm. Either way products
// are summed in f32 and each result is rounded once (beta * C is added in f32
// before that rounding). C may be f32 with bf16/f16 inputs (c_dt), which then
// skips the rounding. HPU_KERNEL_ISA=avx2 forces OpenBLAS (and widening).
//
// Threads: OpenBLAS and the bf16 kernel run single-threaded and gemm splits C
// into row (or, for short wide C, column) blocks that run on the calling thread plus helper
// threads borrowed from the ComputeBudget with try_acquire. The library's
// stream workers and helpers are the only threads that compute, all counted
// by the one budget, and helpers spin at most 50 us between jobs: Debian's
// pthread OpenBLAS pool spinning beside our workers was seen to cut throughput
// to a third on two cores. Small products run on the calling thread alone.
#pragma once

#include <hpu/types.h>

#include <cstdint>

namespace hpu::kernels {

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
};

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
