// The bf16 kernels' packing of B (gemm_bf16.cpp's pack_b), checked exactly:
// A selects one or two rows of B per row of C, B holds small integers (exact
// in bf16) and C is f32, so every element of C is exactly the sum of the B
// elements it selects, whatever the order of the products. A value of B in
// the wrong column, pair or sliver, or a column or pair that is not zero
// where B ends, shows as a wrong element. The shapes cross the packing's
// steps: slivers of 16-48 columns packed 8 at a time, panels of them, odd k,
// k over one block (1024), ragged last slivers. Runs on the native kernel the
// CPU has (AMX, else vdpbf16ps, else widen-and-sgemm); CTest runs it again
// with HPU_KERNEL_ISA=avx512 (GemmAvx512.*).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/convert.hpp"
#include "kernels/gemm.hpp"

using namespace hpu::kernels;

namespace {

// B[l][j], an integer in [-127, 127].
float b_value(int64_t l, int64_t j) { return static_cast<float>((l * 31 + j * 17) % 255 - 127); }

// Row i of C sums rows first(i) and, for odd i, second(i) of op(B).
int64_t first(int64_t i, int64_t k) { return (i * 7 + 3) % k; }
int64_t second(int64_t i, int64_t k) { return (i * 5 + 1) % k; }

void check_selects(int64_t m, int64_t n, int64_t k, bool trans_b) {
  SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k) +
               (trans_b ? " B transposed" : ""));
  const int64_t lda = k + 1, ldb = (trans_b ? k : n) + 3, ldc = n + 2;
  std::vector<uint16_t> a(static_cast<size_t>(m * lda), f32_to_bf16(0.0f));
  for (int64_t i = 0; i < m; ++i) {
    a[static_cast<size_t>(i * lda + first(i, k))] = f32_to_bf16(1.0f);
    if (i % 2) a[static_cast<size_t>(i * lda + second(i, k))] = f32_to_bf16(1.0f);
  }
  std::vector<uint16_t> b(static_cast<size_t>((trans_b ? n : k) * ldb), f32_to_bf16(99.0f));  // 99: padding
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j)
      b[static_cast<size_t>(trans_b ? j * ldb + l : l * ldb + j)] = f32_to_bf16(b_value(l, j));
  std::vector<float> c(static_cast<size_t>(m * ldc), -1.0f);
  gemm(HPU_BFLOAT16, GemmShape{m, n, k, false, trans_b}, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), ldc,
       HPU_FLOAT32);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      float want = -1.0f;  // the padding after each row of C is untouched
      if (j < n) {
        const bool two = i % 2 && second(i, k) != first(i, k);  // else A's row has a single 1
        want = b_value(first(i, k), j) + (two ? b_value(second(i, k), j) : 0.0f);
      }
      ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], want) << "C(" << i << ", " << j << ")";
    }
}

}  // namespace

TEST(GemmPackedB, EveryElementOfBLandsWhereTheProductReadsIt) {
  // n: one sliver or less, ragged slivers, more than 8 slivers (a pack group),
  // several panels; k: 1, odd, whole tiles of 32, over one block.
  const int64_t shapes[][3] = {{5, 10, 1},    {40, 300, 255}, {33, 777, 33},  {40, 1030, 256},
                               {3, 49, 1029}, {64, 520, 64},  {17, 16, 2},    {40, 33, 31}};
  for (auto &sh : shapes)
    for (bool trans_b : {false, true}) check_selects(sh[0], sh[1], sh[2], trans_b);
}
