// GEMM against a double-precision reference written here, per dtype, with
// transposes, leading dimensions, alpha/beta, f32 results from 16-bit inputs,
// batches, and the parallel row and column splits. bf16 runs on the native
// kernel where the CPU has one (AMX tiles, else vdpbf16ps, else the AVX-512
// f32 kernel, widened) and f32 and f16 on the native AVX-512 one; CTest runs
// this file again with HPU_KERNEL_ISA=avx512 (GemmAvx512.*: bf16 on
// vdpbf16ps where AMX would be used), with
// HPU_KERNEL_ISA=avx2 (GemmIsaAvx2.*: f32, bf16 and f16 on the AVX2 kernel)
// and HPU_KERNEL_ISA=scalar (GemmScalar.*: OpenBLAS's sgemm, 16-bit inputs
// widened by blocks).
//
// Tolerance: |got - want| <= u(C) |want| + 4 u32 (k + 2) (|alpha| sum|a b| +
// |beta c|), u(C) the unit roundoff of C's type (one final rounding) and u32
// = 6e-8 that of the f32 accumulator (one rounding per addition, k of them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <mutex>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "device/compute_budget.hpp"
#include "kernels/convert.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/gemm_f32.hpp"
#include "kernels/optim.hpp"

using namespace hpu::kernels;

namespace {

// A matrix stored as dtype, with its values as double for the reference.
struct Mat {
  hpuDataType_t dt;
  int64_t rows, cols, ld;
  std::vector<unsigned char> bytes;
  size_t es() const { return dt == HPU_FLOAT64 ? 8 : dt == HPU_FLOAT32 ? 4 : 2; }

  Mat(hpuDataType_t t, int64_t r, int64_t c, int64_t pad, std::mt19937 &rng)
      : dt(t), rows(r), cols(c), ld(c + pad), bytes(static_cast<size_t>(r * (c + pad)) * es()) {
    std::uniform_real_distribution<double> u(-1, 1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < ld; ++j) set(i, j, u(rng));
  }
  void set(int64_t i, int64_t j, double v) {
    void *p = bytes.data() + static_cast<size_t>(i * ld + j) * es();
    if (dt == HPU_FLOAT64) *static_cast<double *>(p) = v;
    else if (dt == HPU_FLOAT32) *static_cast<float *>(p) = static_cast<float>(v);
    else if (dt == HPU_BFLOAT16) *static_cast<uint16_t *>(p) = f32_to_bf16(static_cast<float>(v));
    else *static_cast<uint16_t *>(p) = f32_to_f16(static_cast<float>(v));
  }
  double at(int64_t i, int64_t j) const {
    const void *p = bytes.data() + static_cast<size_t>(i * ld + j) * es();
    if (dt == HPU_FLOAT64) return *static_cast<const double *>(p);
    if (dt == HPU_FLOAT32) return *static_cast<const float *>(p);
    if (dt == HPU_BFLOAT16) return bf16_to_f32(*static_cast<const uint16_t *>(p));
    return f16_to_f32(*static_cast<const uint16_t *>(p));
  }
  void *data() { return bytes.data(); }
};

// Relative precision of a result stored in dt.
double unit_roundoff(hpuDataType_t dt) {
  switch (dt) {
    case HPU_FLOAT64: return 1.2e-16;
    case HPU_FLOAT32: return 6e-8;
    case HPU_BFLOAT16: return 1.0 / 256;
    default: return 1.0 / 2048;
  }
}

// The reference's inner loop: sum x[l] y[l] and sum |x[l] y[l]| over l < k.
// Not instrumented under ASan (test data in vectors of the right size; the
// library's accesses are what the sanitizer run is for), where it was most of
// the time of the large products' tests.
__attribute__((no_sanitize("address", "undefined"))) void dot(const double *x, const double *y, int64_t k,
                                                              double *sum, double *mag) {
  double s = 0, m = 0;
  for (int64_t l = 0; l < k; ++l) {
    s += x[l] * y[l];
    m += std::fabs(x[l] * y[l]);
  }
  *sum = s;
  *mag = m;
}

struct Case {
  hpuDataType_t dt, c_dt;
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

void check(const Case &cs, int64_t batch = 1) {
  std::mt19937 rng(static_cast<unsigned>(cs.m * 131 + cs.n * 7 + cs.k + cs.ta * 3 + cs.tb * 5));
  const int64_t ar = cs.ta ? cs.k : cs.m, ac = cs.ta ? cs.m : cs.k;
  const int64_t br = cs.tb ? cs.n : cs.k, bc = cs.tb ? cs.k : cs.n;
  // Batches are stacked as rows of one matrix each.
  Mat a(cs.dt, ar * batch, ac, 3, rng), b(cs.dt, br * batch, bc, 1, rng), c(cs.c_dt, cs.m * batch, cs.n, 2, rng);
  Mat c0 = c;
  GemmShape s{cs.m, cs.n, cs.k, cs.ta, cs.tb};
  if (batch == 1)
    gemm(cs.dt, s, cs.alpha, a.data(), a.ld, b.data(), b.ld, cs.beta, c.data(), c.ld, cs.c_dt);
  else
    gemm_batched(cs.dt, s, batch, cs.alpha, a.data(), a.ld, ar * a.ld, b.data(), b.ld, br * b.ld, cs.beta, c.data(),
                 c.ld, cs.m * c.ld, cs.c_dt);
  const double acc = cs.dt == HPU_FLOAT64 ? 1.2e-16 : 6e-8;  // accumulation precision
  // op(A) and op(B) transposed as doubles, row by row, so that each element
  // of the reference is one contiguous dot product.
  std::vector<double> rows_a(static_cast<size_t>(cs.m * cs.k)), cols_b(static_cast<size_t>(cs.n * cs.k));
  for (int64_t p = 0; p < batch; ++p) {
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t l = 0; l < cs.k; ++l)
        rows_a[i * cs.k + l] = cs.ta ? a.at(p * ar + l, i) : a.at(p * ar + i, l);
    for (int64_t j = 0; j < cs.n; ++j)
      for (int64_t l = 0; l < cs.k; ++l)
        cols_b[j * cs.k + l] = cs.tb ? b.at(p * br + j, l) : b.at(p * br + l, j);
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        double sum, mag;
        dot(rows_a.data() + i * cs.k, cols_b.data() + j * cs.k, cs.k, &sum, &mag);
        double old = c0.at(p * cs.m + i, j);
        double want = cs.alpha * sum + cs.beta * old;
        double bound = unit_roundoff(cs.c_dt) * std::fabs(want) +
                       4 * acc * (cs.k + 2) * (std::fabs(cs.alpha) * mag + std::fabs(cs.beta * old)) + 1e-300;
        double got = c.at(p * cs.m + i, j);
        ASSERT_LE(std::fabs(got - want), bound)
            << "dtype " << cs.dt << " m " << cs.m << " n " << cs.n << " k " << cs.k << " ta " << cs.ta << " tb "
            << cs.tb << " at batch " << p << " (" << i << ", " << j << "): got " << got << " want " << want;
      }
  }
  // Padding after each row of C is untouched.
  for (int64_t i = 0; i < cs.m * batch; ++i)
    for (int64_t j = cs.n; j < c.ld; ++j) ASSERT_EQ(c.at(i, j), c0.at(i, j));
}

const hpuDataType_t kTypes[] = {HPU_FLOAT32, HPU_FLOAT64, HPU_BFLOAT16, HPU_FLOAT16};

}  // namespace

TEST(Gemm, EveryTypeAndTranspose) {
  for (hpuDataType_t dt : kTypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check({dt, dt, 7, 5, 9, ta, tb, 1.0f, 0.0f});
        check({dt, dt, 33, 17, 65, ta, tb, 0.5f, 2.0f});
      }
}

TEST(Gemm, F32ResultFrom16BitInputs) {
  for (hpuDataType_t dt : {HPU_BFLOAT16, HPU_FLOAT16})
    for (bool ta : {false, true}) check({dt, HPU_FLOAT32, 19, 23, 40, ta, !ta, 1.5f, 1.0f});
}

TEST(Gemm, EdgeSizes) {
  for (hpuDataType_t dt : kTypes) {
    check({dt, dt, 1, 1, 1, false, false, 1.0f, 0.0f});
    check({dt, dt, 4, 3, 0, false, false, 1.0f, 0.5f});  // k == 0: C = beta C
    check({dt, dt, 0, 3, 4, false, false, 1.0f, 0.0f});
    check({dt, dt, 64, 10, 1, false, true, 1.0f, 0.0f});
  }
}

TEST(Gemm, ParallelRowAndColumnSplits) {
  hpu::ComputeBudget::instance().configure(2);
  for (hpuDataType_t dt : {HPU_FLOAT32, HPU_BFLOAT16}) {
    check({dt, dt, 300, 200, 100, false, false, 1.0f, 0.0f});  // rows
    check({dt, dt, 256, 96, 130, true, true, 1.0f, 1.0f});
    check({dt, dt, 5, 900, 300, false, false, 1.0f, 0.0f});   // columns of a short, wide C
    check({dt, dt, 6, 700, 200, true, true, 1.0f, 0.5f});
  }
  // The native bf16 kernel splits only larger products (see gemm.cpp).
  check({HPU_BFLOAT16, HPU_BFLOAT16, 700, 300, 100, false, true, 1.0f, 0.0f});   // rows
  check({HPU_BFLOAT16, HPU_FLOAT32, 9, 7000, 300, true, false, 1.0f, 0.5f});   // columns
}

TEST(Gemm, Batched) {
  hpu::ComputeBudget::instance().configure(2);
  for (hpuDataType_t dt : kTypes) {
    check({dt, dt, 6, 5, 4, false, true, 1.0f, 0.0f}, 7);
    check({dt, dt, 70, 60, 50, true, false, 1.0f, 0.0f}, 3);
  }
}

TEST(Gemm, SharedMatrixWithStrideZero) {
  // A weight shared by every batch entry (stride_b = 0).
  std::vector<float> a(2 * 3 * 4), b(4 * 5), c(2 * 3 * 5, -1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2;
  gemm_batched(HPU_FLOAT32, {3, 5, 4}, 2, 1.0f, a.data(), 4, 12, b.data(), 5, 0, 0.0f, c.data(), 5, 15, HPU_FLOAT32);
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        float want = 0;
        for (int l = 0; l < 4; ++l) want += a[p * 12 + i * 4 + l] * b[l * 5 + j];
        EXPECT_EQ(c[p * 15 + i * 5 + j], want);
      }
}

TEST(Gemm, UnsupportedTypes) {
  EXPECT_FALSE(gemm_supports(HPU_INT32));
  float x = 0;
  EXPECT_THROW(gemm(HPU_INT32, {1, 1, 1}, 1, &x, 1, &x, 1, 0, &x, 1, HPU_INT32), hpu::Error);
  EXPECT_THROW(gemm(HPU_FLOAT32, {1, 1, 1}, 1, &x, 1, &x, 1, 0, &x, 1, HPU_BFLOAT16), hpu::Error);
}

TEST(Gemm, Bf16OddShapes) {
  // Sizes around and off the kernel's tiles (8 x 48, 12 x 32, 12 x 16; k in pairs).
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 17, 255}, {17, 7, 3},  {255, 49, 17},
                               {33, 97, 1}, {13, 33, 8},  {9, 16, 31}, {25, 100, 2}};
  for (auto &sh : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check({HPU_BFLOAT16, HPU_BFLOAT16, sh[0], sh[1], sh[2], ta, tb, 1.0f, 0.0f});
        check({HPU_BFLOAT16, HPU_FLOAT32, sh[0], sh[1], sh[2], ta, tb, -0.75f, 0.5f});
      }
}

TEST(Gemm, F32OddShapesAndLongK) {
  // f32 runs on the native AVX-512 kernel where the CPU has it (the AVX2 one
  // under GemmIsaAvx2, OpenBLAS under GemmScalar): sizes off its tiles (8 x 48,
  // 12 x 32, 12 x 16; 4 x 24, 6 x 16, 12 x 8), transposed B in whole and partial
  // 16 x 16 (8 x 8) blocks, k over several blocks (384).
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 255}, {17, 7, 3}, {255, 49, 17}, {13, 33, 8},
                               {9, 16, 31}, {37, 101, 1000}, {20, 64, 385}};
  for (auto &sh : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check({HPU_FLOAT32, HPU_FLOAT32, sh[0], sh[1], sh[2], ta, tb, 1.0f, 0.0f});
        check({HPU_FLOAT32, HPU_FLOAT32, sh[0], sh[1], sh[2], ta, tb, -0.75f, 0.5f});
      }
}

TEST(Gemm, Bf16LongK) {
  // k beyond one block of the native kernel (1024): f32 partial sums, one rounding.
  for (bool ta : {false, true}) {
    check({HPU_BFLOAT16, HPU_BFLOAT16, 9, 50, 2051, ta, !ta, 1.0f, 0.0f});
    check({HPU_BFLOAT16, HPU_BFLOAT16, 5, 20, 1500, ta, ta, 0.5f, 1.5f});
    check({HPU_BFLOAT16, HPU_FLOAT32, 10, 70, 1027, ta, !ta, 1.0f, 1.0f});
  }
}

TEST(Gemm, Bf16RoundsOnceToNearestEven) {
  // Integer inputs whose sums are exact in f32: the bf16 result must be the
  // exact sum rounded once to nearest even (257 -> 256, 259 -> 260, 771 -> 772).
  const int64_t m = 3, n = 20, k = 37;
  std::vector<uint16_t> a(m * k), b(k * n), c(m * n);
  std::vector<double> want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l) a[i * k + l] = f32_to_bf16(static_cast<float>((i + 1) * (l % 3 == 0)));
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j) b[l * n + j] = f32_to_bf16(static_cast<float>(j + 7 * (l % 5)));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) want[i * n + j] += bf16_to_f32(a[i * k + l]) * double(bf16_to_f32(b[l * n + j]));
  gemm(HPU_BFLOAT16, {m, n, k}, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, HPU_BFLOAT16);
  int inexact = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_EQ(c[i], f32_to_bf16(static_cast<float>(want[i]))) << "at " << i << ": exact " << want[i];
    inexact += bf16_to_f32(c[i]) != want[i];
  }
  EXPECT_GT(inexact, 0);  // the case does exercise the rounding
}

TEST(Gemm, Bf16InfinityAndNanPropagate) {
  const int64_t m = 2, n = 18, k = 5;
  std::vector<uint16_t> a(m * k, f32_to_bf16(1.0f)), b(k * n, f32_to_bf16(1.0f)), c(m * n);
  a[0 * k + 2] = f32_to_bf16(INFINITY);  // row 0: +inf in every column
  b[3 * n + 17] = f32_to_bf16(NAN);      // column 17: NaN in every row
  gemm(HPU_BFLOAT16, {m, n, k}, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, HPU_BFLOAT16);
  for (int64_t j = 0; j < 17; ++j) {
    EXPECT_EQ(bf16_to_f32(c[j]), INFINITY) << j;
    EXPECT_EQ(bf16_to_f32(c[n + j]), 5.0f) << j;
  }
  EXPECT_TRUE(std::isnan(bf16_to_f32(c[17])));
  EXPECT_TRUE(std::isnan(bf16_to_f32(c[n + 17])));
}

TEST(Gemm, Bf16PathFollowsTheCpuAndIsaKnob) {
  // Native exactly when AVX-512 is allowed (HPU_KERNEL_ISA) and the CPU has
  // BF16; on AMX tiles exactly when amx is.
  EXPECT_EQ(gemm_bf16_native_supported(),
            (best_isa() == Isa::avx512 || best_isa() == Isa::amx) && __builtin_cpu_supports("avx512bf16"));
  EXPECT_EQ(gemm_bf16_amx_supported(), best_isa() == Isa::amx);
  if (!std::getenv("HPU_KERNEL_ISA")) {
    for (Isa isa : {Isa::avx2, Isa::avx512, Isa::amx}) {
      if (isa_supported(isa)) {
        EXPECT_GE(static_cast<int>(best_isa()), static_cast<int>(isa)) << isa_name(isa);
      }
    }
  }
}

// hpuMm(3) and hpu(7) HPU_KERNEL_ISA: f32 products run on libhpu's kernels
// at levels amx, avx512 and avx2 (GemmAvx2 runs this at avx2), on OpenBLAS at
// scalar (GemmScalar).
TEST(Gemm, F32PathFollowsTheIsaKnob) {
  EXPECT_EQ(gemm_f32_native_supported(), best_isa() != Isa::scalar) << isa_name(best_isa());
}

TEST(Gemm, IsaKnobFallsBackToTheBestSupportedLevel) {
  EXPECT_EQ(choose_isa(nullptr, Isa::amx), Isa::amx);
  EXPECT_EQ(choose_isa("avx512", Isa::amx), Isa::avx512);
  EXPECT_EQ(choose_isa("scalar", Isa::avx512), Isa::scalar);
  // Above what the CPU (or the system) allows, or unknown: the best, with a warning.
  EXPECT_EQ(choose_isa("amx", Isa::avx512), Isa::avx512);
  EXPECT_EQ(choose_isa("amx", Isa::avx2), Isa::avx2);
  EXPECT_EQ(choose_isa("sse", Isa::amx), Isa::amx);
  EXPECT_STREQ(isa_name(Isa::amx), "amx");
  EXPECT_EQ(vector_isa(Isa::amx), Isa::avx512);
  EXPECT_EQ(vector_isa(Isa::avx2), Isa::avx2);
}

namespace {

// relu and the relu mask as the kernel stores C (bf16, s.n wide) against the
// same product stored plainly and then each pass over it.
void expect_epilogues_are_the_passes(const GemmShape &s, const std::vector<uint16_t> &a, int64_t lda,
                                     const std::vector<uint16_t> &b, int64_t ldb, const std::vector<uint16_t> &mask,
                                     const std::string &what) {
  const int64_t m = s.m, n = s.n;
  std::vector<uint16_t> plain(m * n), fused(m * n);
  gemm(HPU_BFLOAT16, s, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, plain.data(), n, HPU_BFLOAT16);
  GemmShape relu = s;
  relu.ep.activation = Activation::relu;
  gemm(HPU_BFLOAT16, relu, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, fused.data(), n, HPU_BFLOAT16);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_EQ(fused[i], 0.0f > bf16_to_f32(plain[i]) ? 0 : plain[i]) << what << " relu on " << plain[i] << " at " << i;
  GemmShape masked = s;
  masked.ep.backward = Activation::relu;
  masked.ep.backward_input = mask.data();
  masked.ep.ld_backward = n;
  gemm(HPU_BFLOAT16, masked, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, fused.data(), n, HPU_BFLOAT16);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_EQ(fused[i], f32_to_bf16(bf16_to_f32(plain[i]) * (bf16_to_f32(mask[i]) > 0 ? 1.0f : 0.0f)))
        << what << " relu mask " << mask[i] << " on " << plain[i] << " at " << i;
}

std::vector<uint16_t> random_bf16(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> v(n);
  for (auto &x : v) x = f32_to_bf16(u(rng));
  return v;
}

}  // namespace

TEST(Gemm, Bf16FusedEpiloguesAreTheSeparatePassesBitForBit) {
  // relu, relu mask and an AdamW sink as the kernel stores each tile against the same
  // product stored plainly and then the pass: odd sizes around the tiles
  // (AMX 32 x 32, AVX-512 8 x 48), every transpose, k over one block (1024:
  // AdamW from an f32 sum, bf16 rounded once), A read in place and copied
  // (AMX: whole tiles, rows 1 KiB apart or not), k <= 32 (AMX: panels of 256
  // columns and a ragged one, 16 wide C), on 1 and 2 threads.
  hpu::ComputeBudget::instance().configure(2);
  const int64_t shapes[][3] = {{1, 1, 1},      {33, 17, 31},   {70, 50, 33},  {31, 100, 64},  {257, 130, 300},
                               {40, 33, 1100}, {600, 70, 200}, {5, 1000, 80}, {64, 100, 1024}, {64, 100, 256},
                               {70, 600, 10},  {40, 16, 20},   {33, 300, 32}};
  const AdamwConstants k = adamw_constants({1e-3, 0.9, 0.999, 1e-8, 0.01}, 3);
  for (auto &sh : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t m = sh[0], n = sh[1], kk = sh[2];
        const unsigned seed = static_cast<unsigned>(m * 7 + n * 3 + kk + ta * 2 + tb);
        std::vector<uint16_t> a = random_bf16(m * kk, seed), b = random_bf16(kk * n, seed + 1),
                              mask = random_bf16(m * n, seed + 2);
        const int64_t lda = ta ? m : kk, ldb = tb ? kk : n;
        const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk) + " ta " +
                                 std::to_string(ta) + " tb " + std::to_string(tb);
        GemmShape s{m, n, kk, ta, tb};
        expect_epilogues_are_the_passes(s, a, lda, b, ldb, mask, what);
        if (HasFatalFailure()) return;
        // AdamW: weights and moments stepped by the product (alpha -1/3) as the
        // gradient, with a bf16 copy.
        std::vector<float> grad(m * n), w(m * n), mo(m * n), v(m * n);
        for (int64_t i = 0; i < m * n; ++i)
          w[i] = bf16_to_f32(mask[i]), mo[i] = 0.01f * bf16_to_f32(a[i % a.size()]), v[i] = 1e-4f * (i % 7);
        std::vector<float> w2 = w, mo2 = mo, v2 = v;
        std::vector<uint16_t> copy(m * n), copy2(m * n);
        gemm(HPU_BFLOAT16, s, -1.0f / 3, a.data(), lda, b.data(), ldb, 0.0f, grad.data(), n, HPU_FLOAT32);
        adamw_step(w.data(), HPU_FLOAT32, grad.data(), mo.data(), v.data(), m * n, k, HPU_BFLOAT16, copy.data(),
                   false);
        AdamwSink u;
        u.param = w2.data(), u.exp_avg = mo2.data(), u.exp_avg_sq = v2.data(), u.copy = copy2.data(), u.c = k;
        const GemmSink sink = u.sink();
        GemmShape stepped = s;
        stepped.ep.sink = &sink;
        gemm(HPU_BFLOAT16, stepped, -1.0f / 3, a.data(), lda, b.data(), ldb, 0.0f, w2.data(), n, HPU_FLOAT32);
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(std::memcmp(&w[i], &w2[i], 4), 0) << what << " AdamW weight at " << i;
          ASSERT_EQ(std::memcmp(&mo[i], &mo2[i], 4), 0) << what << " AdamW exp_avg at " << i;
          ASSERT_EQ(std::memcmp(&v[i], &v2[i], 4), 0) << what << " AdamW exp_avg_sq at " << i;
          ASSERT_EQ(copy[i], copy2[i]) << what << " AdamW copy at " << i;
        }
      }
}

namespace {

// A sink that writes what it gets into `got` at the index it is given and
// counts how often each index came.
struct Recorder {
  std::vector<float> got;
  std::vector<int> seen;
  std::mutex mu;
  GemmSink sink() {
    GemmSink s;
    s.state = this;
    s.row = [](const GemmSink &self, int64_t at, int64_t cols, const float *results) {
      auto &r = *static_cast<Recorder *>(const_cast<void *>(self.state));
      std::lock_guard<std::mutex> lock(r.mu);
      for (int64_t j = 0; j < cols; ++j) {
        r.got[static_cast<size_t>(at + j)] = results[j];
        ++r.seen[static_cast<size_t>(at + j)];
      }
    };
    s.arrays[0] = got.data(), s.elem_size[0] = 4;
    return s;
  }
};

}  // namespace

// The general parts of the epilogue (kernels/epilogue.hpp): a sink gets every
// element of C once, with the bits of the stored product, at its index in the
// whole C, whatever the path, the split over threads and the batch.
TEST(Gemm, SinkGetsEveryElementOnceWithTheProductsBits) {
  // bf16 and f32 inputs (the native kernels, AMX's and AVX-512's, and the
  // paths through a scratch buffer), k = 0, k <= 32, k over one block (1100),
  // alpha 1 and 0.5, transposes, one product and a batch of three; on 2
  // threads.
  hpu::ComputeBudget::instance().configure(2);
  const int64_t shapes[][3] = {{1, 1, 1}, {33, 17, 31}, {70, 600, 10}, {40, 33, 1100}, {257, 130, 300}, {5, 7, 0}};
  for (hpuDataType_t dt : {HPU_BFLOAT16, HPU_FLOAT32})
    for (auto &sh : shapes)
      for (int64_t batch : {1, 3})
        for (bool ta : {false, true})
          for (float alpha : {1.0f, 0.5f}) {
            const int64_t m = sh[0], n = sh[1], k = sh[2];
            std::vector<uint16_t> a16 = random_bf16(batch * m * k, unsigned(m + n + k)),
                                  b16 = random_bf16(batch * k * n, unsigned(m * n + k));
            std::vector<float> a32(a16.size()), b32(b16.size());
            for (size_t i = 0; i < a16.size(); ++i) a32[i] = bf16_to_f32(a16[i]);
            for (size_t i = 0; i < b16.size(); ++i) b32[i] = bf16_to_f32(b16[i]);
            const void *a = dt == HPU_BFLOAT16 ? static_cast<const void *>(a16.data()) : a32.data();
            const void *b = dt == HPU_BFLOAT16 ? static_cast<const void *>(b16.data()) : b32.data();
            const int64_t lda = ta ? m : k;
            GemmShape s{m, n, k, ta, false};
            std::vector<float> stored(batch * m * n, 1.0f);
            gemm_batched(dt, s, batch, alpha, a, lda, m * k, b, n, k * n, 0.0f, stored.data(), n, m * n, HPU_FLOAT32);
            Recorder r;
            r.got.assign(stored.size(), -7.0f);
            r.seen.assign(stored.size(), 0);
            const GemmSink sink = r.sink();
            s.ep.sink = &sink;
            std::vector<float> untouched(stored.size(), 3.0f);
            gemm_batched(dt, s, batch, alpha, a, lda, m * k, b, n, k * n, 0.0f, untouched.data(), n, m * n,
                         HPU_FLOAT32);
            const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                     " batch " + std::to_string(batch) + " ta " + std::to_string(ta) + " dt " +
                                     std::to_string(dt) + " alpha " + std::to_string(alpha);
            for (size_t i = 0; i < stored.size(); ++i) {
              ASSERT_EQ(r.seen[i], 1) << what << " at " << i;
              ASSERT_EQ(std::memcmp(&r.got[i], &stored[i], 4), 0) << what << " at " << i;
              ASSERT_EQ(untouched[i], 3.0f) << what << ": C is not stored";
            }
          }
}

// gemm_batched applies the backward input matrix by matrix.
TEST(Gemm, BatchedReluBackwardTakesEachMatrixsInput) {
  // The relu's backward over a batch of three bf16 products against one
  // product at a time with its own matrix of the backward input.
  hpu::ComputeBudget::instance().configure(2);
  const int64_t batch = 3, m = 37, n = 70, k = 45;
  std::vector<uint16_t> a = random_bf16(batch * m * k, 1), b = random_bf16(batch * k * n, 2),
                        x = random_bf16(batch * m * n, 3);
  GemmShape s{m, n, k};
  s.ep.backward = Activation::relu;
  s.ep.backward_input = x.data();
  s.ep.ld_backward = n;
  std::vector<uint16_t> batched(batch * m * n), one(batch * m * n);
  gemm_batched(HPU_BFLOAT16, s, batch, 1.0f, a.data(), k, m * k, b.data(), n, k * n, 0.0f, batched.data(), n, m * n,
               HPU_BFLOAT16);
  for (int64_t i = 0; i < batch; ++i) {
    GemmShape si = s;
    si.ep.backward_input = x.data() + i * m * n;
    gemm(HPU_BFLOAT16, si, 1.0f, a.data() + i * m * k, k, b.data() + i * k * n, n, 0.0f, one.data() + i * m * n, n,
         HPU_BFLOAT16);
  }
  EXPECT_EQ(batched, one);
}

TEST(Gemm, Bf16FusedEpiloguesKeepSpecialValues) {
  // relu and the relu mask on infinities, NaNs, signed zeros and a sum that
  // overflows only when rounded to bf16, against the mask values at the edges
  // of > 0 (zeros, the smallest subnormals, infinities, NaNs of either sign):
  // the bits of the separate passes, for k <= 32 and k > 32, C 69 wide (whole
  // groups of 32 and 16 columns and a ragged end). C = B's row 0 + row 1.
  hpu::ComputeBudget::instance().configure(2);
  const float big = bf16_to_f32(0x7F7F), nan = bf16_to_f32(0x7FC0);
  const float values[][2] = {{1.5f, 0},   {-1.5f, 0},     {0, 0},          {-0.0f, -0.0f}, {INFINITY, 0},
                             {-INFINITY, 0}, {nan, 0},    {-nan, 0},       {big, 1e36f},   {-big, -1e36f},
                             {3.0f, -3.0f}, {-2.0f, 0.5f}};
  const uint16_t masks[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x7F80, 0xFF80, 0x7FC0,
                            0xFFC0, 0x7F81, 0x3F80, 0xBF80, 0x7F7F, 0x0080};
  const int64_t m = 3, n = 69;
  for (int64_t k : {2, 40}) {
    std::vector<uint16_t> a(m * k, 0), b(k * n, 0), mask(m * n);
    for (int64_t i = 0; i < m; ++i) a[i * k] = a[i * k + 1] = f32_to_bf16(1.0f);
    for (int64_t j = 0; j < n; ++j) {
      const auto &v = values[(j + j / 13) % std::size(values)];
      b[j] = f32_to_bf16(v[0]);
      b[n + j] = f32_to_bf16(v[1]);
    }
    for (int64_t i = 0; i < m * n; ++i) mask[i] = masks[(i * 5 + i / 7) % std::size(masks)];
    expect_epilogues_are_the_passes({m, n, k}, a, k, b, n, mask, "k " + std::to_string(k));
  }
}

TEST(Gemm, Bf16TrainingShapes) {
  // The MLP 784-1024-1024-10 at batch 256 (hpu-bench train): forward (B
  // transposed), input gradient, weight gradient (A transposed), in bf16 and
  // into f32.
  hpu::ComputeBudget::instance().configure(2);
  const int64_t shapes[][5] = {{256, 1024, 784, 0, 1}, {256, 10, 1024, 0, 1}, {256, 784, 1024, 0, 0},
                               {1024, 784, 256, 1, 0}, {10, 1024, 256, 1, 0},  {256, 1024, 10, 0, 0}};
  for (auto &sh : shapes) {
    check({HPU_BFLOAT16, HPU_BFLOAT16, sh[0], sh[1], sh[2], sh[3] != 0, sh[4] != 0, 1.0f, 0.0f});
    check({HPU_BFLOAT16, HPU_FLOAT32, sh[0], sh[1], sh[2], sh[3] != 0, sh[4] != 0, 1.0f, 0.0f});
  }
}

TEST(Gemm, FusedBiasIsTheBiasFilledCBitForBit) {
  // Epilogue::bias against C filled with the bias row by row and beta 1, bit
  // for bit: every type, bf16 and f16 into f32, odd sizes around the tiles,
  // k = 0 and 1, k <= 32 (AMX's short path), k over one block (1100 for
  // 16-bit inputs, 400 for f32's blocks of 384), every transpose, alpha 0.75
  // and 1 (the bf16 stores' fast path), with relu and the relu mask, on 1 and
  // 2 threads (row and column splits).
  hpu::ComputeBudget::instance().configure(2);
  const int64_t shapes[][3] = {{1, 1, 1},      {7, 1, 5},       {33, 17, 31},   {3, 4, 0},
                               {64, 10, 1},    {70, 300, 20},   {257, 130, 300}, {40, 33, 1100},
                               {5, 1000, 80},  {600, 70, 200},  {300, 1024, 400}};
  struct Types {
    hpuDataType_t dt, c_dt;
  };
  const Types types[] = {{HPU_BFLOAT16, HPU_BFLOAT16}, {HPU_BFLOAT16, HPU_FLOAT32}, {HPU_FLOAT32, HPU_FLOAT32},
                         {HPU_FLOAT64, HPU_FLOAT64},   {HPU_FLOAT16, HPU_FLOAT16},   {HPU_FLOAT16, HPU_FLOAT32}};
  for (const Types &t : types)
    for (auto &sh : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (int epilogue = 0; epilogue < 3; ++epilogue) {  // none, relu, relu mask
            const int64_t m = sh[0], n = sh[1], kk = sh[2];
            if (epilogue && t.dt != HPU_BFLOAT16) continue;
            std::mt19937 rng(static_cast<unsigned>(m * 7 + n * 3 + kk + ta * 2 + tb + epilogue * 11));
            Mat a(t.dt, ta ? kk : m, ta ? m : kk, 2, rng), b(t.dt, tb ? n : kk, tb ? kk : n, 1, rng);
            Mat bias(t.c_dt, 1, n, 0, rng), mask(t.c_dt, m, n, 0, rng), filled(t.c_dt, m, n, 3, rng);
            Mat fused = filled;
            for (int64_t i = 0; i < m; ++i)
              std::memcpy(filled.bytes.data() + i * filled.ld * filled.es(), bias.data(), n * filled.es());
            GemmShape s{m, n, kk, ta, tb};
            if (epilogue == 1) s.ep.activation = Activation::relu;
            if (epilogue == 2) s.ep.backward = Activation::relu, s.ep.backward_input = mask.data(), s.ep.ld_backward = n;
            const int64_t lda = a.ld, ldb = b.ld;
            const float alpha = (m + n) % 2 ? 0.75f : 1.0f;
            gemm(t.dt, s, alpha, a.data(), lda, b.data(), ldb, 1.0f, filled.data(), filled.ld, t.c_dt);
            s.ep.bias = bias.data();
            gemm(t.dt, s, alpha, a.data(), lda, b.data(), ldb, 0.0f, fused.data(), fused.ld, t.c_dt);
            ASSERT_EQ(fused.bytes, filled.bytes) << "dtype " << t.dt << " into " << t.c_dt << " " << m << "x" << n
                                                 << "x" << kk << " ta " << ta << " tb " << tb << " epilogue "
                                                 << epilogue;
          }
}

namespace {

// C of one product of cs's shape (a fixed C first, for beta), as bytes.
std::vector<unsigned char> product_bits(const Case &cs) {
  std::mt19937 rng(static_cast<unsigned>(cs.m + cs.n * 3 + cs.k * 5));
  Mat a(cs.dt, cs.ta ? cs.k : cs.m, cs.ta ? cs.m : cs.k, 0, rng);
  Mat b(cs.dt, cs.tb ? cs.n : cs.k, cs.tb ? cs.k : cs.n, 0, rng);
  Mat c(cs.c_dt, cs.m, cs.n, 0, rng);
  gemm(cs.dt, GemmShape{cs.m, cs.n, cs.k, cs.ta, cs.tb}, cs.alpha, a.data(), a.ld, b.data(), b.ld, cs.beta, c.data(),
       c.ld, cs.c_dt);
  return c.bytes;
}

}  // namespace

// hpu(7): products are reproducible within one level. Their bits do not
// depend on the thread count nor on a busy device holding some of the
// threads (the split of a product used to follow the idle threads, and
// OpenBLAS's bits follow the shape of each call: 2,810 elements of this
// 255 x 257 x 129 product differed at HPU_KERNEL_ISA=avx2). Every type,
// transposes, alpha and beta, the training step's layers (split by columns
// and by rows); run at each level (Gemm*.).
TEST(Gemm, SameBitsWhateverTheThreadsAndTheLoad) {
  const Case cases[] = {
      {HPU_FLOAT32, HPU_FLOAT32, 255, 257, 129, false, false, 1.0f, 0.0f},
      {HPU_FLOAT32, HPU_FLOAT32, 255, 257, 129, true, true, 0.5f, 0.25f},
      {HPU_FLOAT32, HPU_FLOAT32, 256, 1024, 784, false, true, 1.0f, 0.0f},
      {HPU_FLOAT32, HPU_FLOAT32, 1024, 784, 256, true, false, 1.0f, 1.0f},
      {HPU_FLOAT64, HPU_FLOAT64, 255, 257, 129, false, true, 1.0f, 0.5f},
      {HPU_BFLOAT16, HPU_BFLOAT16, 255, 257, 129, true, false, 1.0f, 0.0f},
      {HPU_BFLOAT16, HPU_FLOAT32, 256, 1024, 784, false, true, 1.0f, 1.0f},
      {HPU_FLOAT16, HPU_FLOAT16, 255, 257, 129, false, false, 0.5f, 0.25f},
      {HPU_FLOAT16, HPU_FLOAT32, 1024, 784, 256, true, false, 1.0f, 0.0f},
  };
  hpu::ComputeBudget &budget = hpu::ComputeBudget::instance();
  for (const Case &cs : cases) {
    SCOPED_TRACE(testing::Message() << dtype_name(cs.dt) << " into " << dtype_name(cs.c_dt) << " " << cs.m << " x "
                                    << cs.n << " x " << cs.k << " ta " << cs.ta << " tb " << cs.tb << " alpha "
                                    << cs.alpha << " beta " << cs.beta);
    budget.configure(1);
    const std::vector<unsigned char> one = product_bits(cs);
    for (int threads : {2, 4}) {
      budget.configure(threads);
      EXPECT_TRUE(product_bits(cs) == one) << threads << " threads";
    }
    // Another device's workers hold 2 of the 4 threads.
    budget.acquire();
    budget.acquire();
    EXPECT_TRUE(product_bits(cs) == one) << "2 of 4 threads busy";
    budget.release(2);
  }
}
