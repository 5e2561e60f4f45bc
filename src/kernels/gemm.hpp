// Matrix multiply (this library's AVX-512 and AVX2 kernels, or OpenBLAS), row-major:
//   C = alpha * op(A) * op(B) + beta * C,   op(A) m x k, op(B) k x n, C m x n
// op(X) = X, or X transposed when trans_x (then X is stored k x m / n x k).
// lda/ldb/ldc are row strides in elements (>= the stored row length).
//
// dtypes: f32 runs on FMA vectors (gemm_f32.hpp): 512-bit where the CPU has
// AVX-512, 256-bit at the avx2 level; f64 calls cblas_dgemm. bf16 runs on
// the CPU's bf16 dot product where it has one (gemm_bf16.hpp: AMX tiles, else
// AVX-512 BF16); otherwise bf16, and f16 always, run on the level's f32
// kernel (512- or 256-bit), widened to f32 as it packs them; at
// HPU_KERNEL_ISA=scalar they widen blocks of A and B to f32 and run
// cblas_sgemm. Either way products are summed in f32 and each
// result is rounded once (beta * C is added in f32 before that rounding). C
// may be f32 with bf16/f16 inputs (c_dt), which then skips the rounding.
// HPU_KERNEL_ISA=avx512 keeps bf16 off AMX; HPU_KERNEL_ISA=avx2 selects the
// 256-bit kernel for f32, bf16 and f16; HPU_KERNEL_ISA=scalar OpenBLAS (f32
// directly, 16-bit inputs widened).
//
// Threads: OpenBLAS and the native kernels run single-threaded and gemm splits C
// into row (or, for short wide C, column) blocks that run on the calling thread plus helper
// threads borrowed from the ComputeBudget with try_acquire. How many threads
// at most follows a cost rule (gemm_plan): the product's time on one thread
// is estimated from its work on the path that runs it, and each thread must
// get at least kMinThreadSeconds of it, as waking a helper and joining it
// (and the caller's synchronize sleeping rather than spinning while two
// threads compute) costs tens of microseconds. So a small product runs on the
// calling thread alone, where helpers would cost more than they save. The
// split never changes the bits (hpu(7): the same bits within one level whatever the
// thread count and the load on other devices). The native f32 and bf16
// kernels sum each element of C over k in an order fixed by k alone, whatever
// block of C holds it, so their blocks follow the idle threads. OpenBLAS's
// bits depend on the shape of each call (its kernels and blocking follow m
// and n), so a product through it (f64, and at scalar f32 and the widened
// 16-bit inputs) is cut into blocks that depend on the shape alone: the
// plan's thread count (at most 8), whatever the threads that share them. The library's
// stream workers and helpers are the only threads that compute, all counted
// by the one budget, and helpers spin at most 50 us between jobs: Debian's
// pthread OpenBLAS pool spinning beside our workers was seen to cut throughput
// to a third on two cores.
#pragma once

#include <hpu/types.h>

#include <cstdint>

#include "kernels/epilogue.hpp"

namespace hpu::kernels {

struct GemmShape {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  // C's width before gemm() split its columns over threads (0: n). Kernels
  // whose sums depend on C's width choose by it, so that every part of a
  // split product adds in the same order as the whole.
  int64_t n_total = 0;
  // What the product does as it stores C (epilogue.hpp). The native bf16
  // kernel adds the bias as it stores C, applies a relu and its backward as
  // it stores a bf16 C and feeds a sink as it stores each tile (k <= 1024);
  // the other paths (the f32 kernels, also with 16-bit inputs, and OpenBLAS) add
  // the bias by filling C first, apply the activations in a pass over C after
  // the product and feed a sink from the product in a scratch buffer.
  Epilogue ep{};
};

// The kernel that runs a product: AMX tiles (bf16 at amx), the AVX-512 bf16
// dot product, the AVX-512 f32 kernel (f32, f16, and bf16 without a bf16 dot
// product), the AVX2 f32 kernel (f32, bf16 and f16 at avx2), or OpenBLAS
// (f64, and f32, bf16 and f16 at scalar, the 16-bit inputs widened to f32).
enum class GemmPath { amx, avx512_bf16, avx512_f32, avx2_f32, blas };

// The cost rule's per-path figures, per thread: the rate it assumes (FLOP/s,
// at the high end of what the path reaches, so that a product is split only
// when it surely gains) and the steps the kernel pads the product to (AMX
// tiles: 32 rows x 16 columns x 32 k; AVX-512: 16-column vectors; AVX2:
// 8-column vectors). Reading
// A and B and writing C is costed at kGemmBytesPerSecond.
struct GemmPathCost {
  double flops_per_second;
  int64_t m_step, n_step, k_step;
};
GemmPathCost gemm_path_cost(GemmPath path);
constexpr double kGemmBytesPerSecond = 1e10;
// The least time a thread must get of a product for it to be split.
constexpr double kMinThreadSeconds = 100e-6;

// How gemm runs a product: on which path, which side of C it splits, its
// estimated time on one thread (the padded FLOP at the path's rate plus the
// elements of A, B and C, in dt's size, at kGemmBytesPerSecond: a short k's
// product spends most of its time storing C) and the most threads it is
// split over: seconds / kMinThreadSeconds, at most one per line of the split
// side, and for OpenBLAS at most 8 (its blocks); 1 runs it on the calling
// thread. Fewer threads run it when the budget has fewer idle.
struct GemmPlan {
  GemmPath path;
  bool split_cols;
  double seconds;
  int64_t threads;
};
GemmPlan gemm_plan(hpuDataType_t dt, const GemmShape &s);
const char *gemm_path_name(GemmPath path);

// Feeds rows x cols results (row stride ld) to ep's sink, as the part of C
// (row stride ldc) that starts at ep.at: on the calling thread.
void gemm_sink_rows(const Epilogue &ep, const float *results, int64_t ld, int64_t rows, int64_t cols, int64_t ldc);

void gemm(hpuDataType_t dt, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
          int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt);

// `batch` independent products; matrix i starts stride_x elements after
// matrix i - 1 (stride 0 reuses one matrix, e.g. a shared weight). The
// epilogue's backward input and sink are laid out as C (stride_c); its bias
// is shared.
void gemm_batched(hpuDataType_t dt, const GemmShape &s, int64_t batch, float alpha, const void *a, int64_t lda,
                  int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, float beta, void *c, int64_t ldc,
                  int64_t stride_c, hpuDataType_t c_dt);

// True when gemm does dt (f32, f64, bf16, f16).
bool gemm_supports(hpuDataType_t dt);

}  // namespace hpu::kernels
