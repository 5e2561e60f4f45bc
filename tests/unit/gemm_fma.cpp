// The f32 kernels (gemm_f32.hpp), 256-bit at the avx2 level and 512-bit at
// avx512, which run f32 and f16 products, and bf16 ones where the CPU has no
// bf16 dot product (each 16-bit input widened as it is packed): gemm takes
// them; results agree with a double-precision reference within f32 rounding
// (and the rounding of a 16-bit C) over transposes, sizes off their tiles
// (4 x 24, 6 x 16 and 12 x 8; 8 x 48, 12 x 32 and 12 x 16; C 12 wide or less
// as dot products), k over several blocks (384; 256 for the dot products),
// alpha, beta and row strides longer than the rows; 16-bit inputs with each
// epilogue (bias, relu, relu's backward, a sink); and the same bits on
// one thread as split over several. The process runs at HPU_KERNEL_ISA=avx2
// (set below before the library reads it) unless the environment names a
// level (gemm_fma.cmake runs it at avx512 too). On CPUs with AVX-512 BF16,
// gemm sends bf16 to the bf16 kernels, so bf16 is also run on the f32 kernel
// directly (gemm_f32_native).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device/compute_budget.hpp"
#include "kernels/convert.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gemm_f32.hpp"
#include "kernels/parallel.hpp"

using namespace hpu::kernels;

namespace {

// Before main: best_isa() reads HPU_KERNEL_ISA once, on its first call.
const bool kLevelSet = setenv("HPU_KERNEL_ISA", "avx2", 0) == 0;

// The level this process tests, and its kernel.
Isa wanted_level() { return std::string(std::getenv("HPU_KERNEL_ISA")) == "avx512" ? Isa::avx512 : Isa::avx2; }
GemmPath level_path() { return wanted_level() == Isa::avx512 ? GemmPath::avx512_f32 : GemmPath::avx2_f32; }

#define SKIP_WITHOUT_LEVEL()                                                                            \
  do {                                                                                                  \
    ASSERT_TRUE(kLevelSet);                                                                             \
    if (!isa_supported(wanted_level())) GTEST_SKIP() << "this CPU has no " << isa_name(wanted_level()); \
    ASSERT_EQ(best_isa(), wanted_level());                                                              \
  } while (0)

float round_to(hpuDataType_t dt, float x) {
  if (dt == HPU_BFLOAT16) return bf16_to_f32(f32_to_bf16(x));
  if (dt == HPU_FLOAT16) return f16_to_f32(f32_to_f16(x));
  return x;
}

// A matrix of rows x cols (row stride ld) of dt, and its values as floats.
struct Matrix {
  hpuDataType_t dt;
  int64_t rows, cols, ld;
  std::vector<float> v;
  std::vector<unsigned char> bytes;

  Matrix(hpuDataType_t t, int64_t r, int64_t c, int64_t l, std::mt19937 &rng)
      : dt(t), rows(r), cols(c), ld(l), v(static_cast<size_t>(r * l)),
        bytes(static_cast<size_t>(r * l) * dtype_size(t)) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < r * l; ++i) set(i, u(rng));
  }
  void set(int64_t i, float x) {
    x = round_to(dt, x);
    v[static_cast<size_t>(i)] = x;
    if (dt == HPU_FLOAT32) {
      std::memcpy(bytes.data() + 4 * i, &x, 4);
      return;
    }
    const uint16_t h = dt == HPU_BFLOAT16 ? f32_to_bf16(x) : f32_to_f16(x);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  float get(int64_t i) const {
    if (dt == HPU_FLOAT32) {
      float x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      return x;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dt == HPU_BFLOAT16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
  float at(int64_t r, int64_t c) const { return v[static_cast<size_t>(r * ld + c)]; }
};

// One product C = alpha op(A) op(B) + beta C0 on random data.
struct Case {
  hpuDataType_t dt, c_dt;
  GemmShape s;
  float alpha, beta;
  Matrix a, b, c;

  Case(hpuDataType_t t, hpuDataType_t ct, const GemmShape &shape, float al, float be, int64_t pad, std::mt19937 &rng)
      : dt(t), c_dt(ct), s(shape), alpha(al), beta(be),
        a(t, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, (s.trans_a ? s.m : s.k) + pad, rng),
        b(t, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, (s.trans_b ? s.k : s.n) + 2 * pad, rng),
        c(ct, s.m, s.n, s.n + 3 * pad, rng) {}

  float a_at(int64_t i, int64_t l) const { return s.trans_a ? a.at(l, i) : a.at(i, l); }
  float b_at(int64_t l, int64_t j) const { return s.trans_b ? b.at(j, l) : b.at(l, j); }

  // C after gemm, or with `direct` after the level's f32 kernel itself on
  // one thread (a copy: the case can run again).
  Matrix run(bool direct = false) const {
    Matrix out = c;
    if (direct)
      gemm_f32_native(s, dt, alpha, a.bytes.data(), a.ld, b.bytes.data(), b.ld, beta, out.bytes.data(), out.ld, c_dt);
    else
      gemm(dt, s, alpha, a.bytes.data(), a.ld, b.bytes.data(), b.ld, beta, out.bytes.data(), out.ld, c_dt);
    return out;
  }
  // The exact alpha op(A) op(B) (+ bias) + beta C0 at (i, j), and the sum of
  // the magnitudes of its terms.
  double exact(int64_t i, int64_t j, double *mag, const Matrix *bias = nullptr) const {
    double sum = 0, m = 0;
    for (int64_t l = 0; l < s.k; ++l) {
      const double x = static_cast<double>(a_at(i, l)) * b_at(l, j) * alpha;
      sum += x;
      m += std::fabs(x);
    }
    const double rest = (bias ? bias->at(0, j) : 0.0) + static_cast<double>(beta) * c.at(i, j);
    *mag = m + std::fabs(rest);
    return sum + rest;
  }
  // Within f32 rounding of the sums (a bound on k + 2 roundings of terms
  // at most mag), and then the rounding to C's type (f16's subnormal step
  // 2^-24 below 2^-14).
  static bool close(double got, double want, double mag, int64_t k, hpuDataType_t c_dt) {
    const double type_ulp = c_dt == HPU_BFLOAT16 ? 1.0 / 256 : c_dt == HPU_FLOAT16 ? 1.0 / 2048 : 0.0;
    const double floor = c_dt == HPU_FLOAT16 ? 6e-8 : 1e-30;
    return std::fabs(got - want) <= 4 * 6e-8 * static_cast<double>(k + 2) * mag + type_ulp * std::fabs(want) + floor;
  }
  std::string describe() const {
    return std::string(dtype_name(dt)) + " -> " + dtype_name(c_dt) + " " + std::to_string(s.m) + " x " +
           std::to_string(s.n) + " x " + std::to_string(s.k) + (s.trans_a ? " ta" : "") + (s.trans_b ? " tb" : "") +
           " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta);
  }
  // Every element of `got` right, and the padding after each row of C untouched.
  void expect_right(const Matrix &got) const {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double mag = 0;
        const double want = exact(i, j, &mag);
        ASSERT_TRUE(close(got.get(i * got.ld + j), want, mag, s.k, c_dt))
            << describe() << " at (" << i << ", " << j << "): " << got.get(i * got.ld + j) << " vs " << want;
      }
      const size_t es = dtype_size(c_dt), row = static_cast<size_t>(i * got.ld + s.n) * es;
      ASSERT_EQ(std::memcmp(got.bytes.data() + row, c.bytes.data() + row, static_cast<size_t>(got.ld - s.n) * es), 0)
          << describe() << ": row " << i << "'s padding written";
    }
  }
};

const hpuDataType_t kInputs[] = {HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT16};

// Results of a sink: element `at` of the whole C set once.
struct Collected {
  std::vector<float> values;
  std::vector<int> times;
};
void collect(const GemmSink &sink, int64_t at, int64_t cols, const float *results) {
  auto *c = static_cast<Collected *>(const_cast<void *>(sink.state));
  for (int64_t j = 0; j < cols; ++j) {
    c->values[static_cast<size_t>(at + j)] = results[j];
    ++c->times[static_cast<size_t>(at + j)];
  }
}

}  // namespace

// bf16 on the f32 kernel exactly where the CPU has no bf16 dot product.
TEST(GemmFma, ProductsTakeTheLevelsKernel) {
  SKIP_WITHOUT_LEVEL();
  const bool bf16_dot = wanted_level() == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
  for (const GemmShape &s : {GemmShape{1, 1, 1}, GemmShape{256, 1024, 10}, GemmShape{128, 10, 1024, false, true}}) {
    for (hpuDataType_t dt : kInputs) {
      const GemmPath want = dt == HPU_BFLOAT16 && bf16_dot ? GemmPath::avx512_bf16 : level_path();
      EXPECT_EQ(gemm_plan(dt, s).path, want) << dtype_name(dt);
    }
    EXPECT_EQ(gemm_f32_native_path(HPU_BFLOAT16), level_path());
    EXPECT_EQ(gemm_plan(HPU_FLOAT64, s).path, GemmPath::blas);
  }
  EXPECT_STREQ(gemm_path_name(level_path()), wanted_level() == Isa::avx512 ? "avx512 f32" : "avx2 f32");
}

TEST(GemmFma, RightOverShapesTransposesAlphaBetaAndStrides) {
  SKIP_WITHOUT_LEVEL();
  std::mt19937 rng(26);
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 17, 33}, {17, 7, 100}, {33, 100, 7}, {100, 33, 17},
                               {6, 16, 1},  {12, 8, 9},  {13, 9, 400}, {5, 40, 800}, {1, 100, 33},
                               {8, 48, 5},  {12, 32, 3}, {25, 31, 20}, {9, 97, 390}, {4, 24, 4},
                               {13, 49, 387}};
  for (hpuDataType_t dt : kInputs)
    for (hpuDataType_t c_dt : {HPU_FLOAT32, dt})
      for (auto &sh : shapes)
        for (int t = 0; t < 4; ++t) {
          const GemmShape s{sh[0], sh[1], sh[2], (t & 1) != 0, (t & 2) != 0};
          for (float beta : {0.0f, 0.5f}) {
            const Case cs(dt, c_dt, s, t == 3 ? 1.0f : -0.75f, beta, (t + sh[0]) % 3, rng);
            cs.expect_right(cs.run());
            if (gemm_plan(dt, s).path != level_path()) cs.expect_right(cs.run(true));
            if (HasFatalFailure()) return;
          }
        }
}

// Narrow C (12 wide or less) with op(A) untransposed and k >= 64 runs as dot
// products along k: every width, rows in and across passes (48 rows, several
// rows per tile), k in and across blocks (256) with a partial last vector.
TEST(GemmFma, NarrowProductsRightOverWidthsRowsAndBlocks) {
  SKIP_WITHOUT_LEVEL();
  std::mt19937 rng(12);
  const int64_t rows_k[][2] = {{1, 64}, {3, 65}, {50, 257}, {97, 700}};
  for (hpuDataType_t dt : kInputs)
    for (hpuDataType_t c_dt : {HPU_FLOAT32, dt})
      for (int64_t n = 1; n <= 12; ++n)
        for (const auto &mk : rows_k)
          for (bool tb : {false, true}) {
            const GemmShape s{mk[0], n, mk[1], false, tb};
            const Case cs(dt, c_dt, s, tb ? 1.0f : 0.5f, n % 2 ? 0.0f : -0.5f, n % 3, rng);
            cs.expect_right(cs.run());
            if (gemm_plan(dt, s).path != level_path()) cs.expect_right(cs.run(true));
            if (HasFatalFailure()) return;
          }
}

// A part of a product whose columns gemm() split over threads adds in the
// order of the whole (GemmShape::n_total): the parts of a C 20 wide, each
// narrow enough alone for the dot products, give the bits of the whole.
TEST(GemmFma, ColumnsOfASplitProductAddAsTheWhole) {
  SKIP_WITHOUT_LEVEL();
  std::mt19937 rng(20);
  for (hpuDataType_t dt : kInputs)
    for (const GemmShape &whole : {GemmShape{5, 20, 300, false, true}, GemmShape{5, 20, 300, false, false},
                                   GemmShape{5, 12, 300, false, true}}) {
      const Case cs(dt, HPU_FLOAT32, whole, 1.0f, 0.0f, 0, rng);
      SCOPED_TRACE(cs.describe());
      const Matrix all = cs.run(true);
      Matrix parts = cs.c;
      const int64_t es = static_cast<int64_t>(dtype_size(dt)), half = whole.n / 2;
      for (int64_t lo : {int64_t{0}, half}) {
        GemmShape part = whole;
        part.n = lo == 0 ? half : whole.n - half;
        part.n_total = whole.n;
        const unsigned char *b = cs.b.bytes.data() + (whole.trans_b ? lo * cs.b.ld : lo) * es;
        gemm_f32_native(part, dt, 1.0f, cs.a.bytes.data(), cs.a.ld, b, cs.b.ld, 0.0f, parts.bytes.data() + lo * 4,
                        parts.ld, HPU_FLOAT32);
      }
      EXPECT_EQ(std::memcmp(all.bytes.data(), parts.bytes.data(), all.bytes.size()), 0);
      cs.expect_right(parts);
    }
}

// A 16-bit C rounded once from the f32 sum: the bits of the same product into
// an f32 C, rounded (k within one block: the sums are the same).
TEST(GemmFma, SixteenBitCIsTheF32ResultRoundedOnce) {
  SKIP_WITHOUT_LEVEL();
  std::mt19937 rng(3);
  for (hpuDataType_t dt : {HPU_BFLOAT16, HPU_FLOAT16})
    for (float beta : {0.0f, -1.5f}) {
      const Case narrow(dt, dt, GemmShape{19, 45, 300, true, false}, 0.5f, beta, 1, rng);
      Case wide = narrow;
      wide.c_dt = HPU_FLOAT32;
      wide.c = Matrix(HPU_FLOAT32, narrow.s.m, narrow.s.n, narrow.c.ld, rng);
      for (int64_t i = 0; i < narrow.c.rows * narrow.c.ld; ++i) wide.c.set(i, narrow.c.get(i));
      const Matrix got = narrow.run(true), f32 = wide.run(true);
      for (int64_t i = 0; i < narrow.s.m; ++i)
        for (int64_t j = 0; j < narrow.s.n; ++j)
          ASSERT_EQ(got.get(i * got.ld + j), round_to(dt, f32.get(i * f32.ld + j)))
              << narrow.describe() << " at (" << i << ", " << j << ")";
    }
}

TEST(GemmFma, SixteenBitEpiloguesBiasReluReluBackwardAndSink) {
  SKIP_WITHOUT_LEVEL();
  std::mt19937 rng(11);
  const std::pair<hpuDataType_t, int64_t> cases[] = {
      {HPU_BFLOAT16, 10}, {HPU_BFLOAT16, 500}, {HPU_FLOAT16, 10}, {HPU_FLOAT16, 500}};
  for (const auto &[dt, k] : cases) {
    const GemmShape shape{37, 29, k, false, true};
    const Case cs(dt, dt, shape, 1.0f, 0.0f, 0, rng);
    const Matrix bias(dt, 1, shape.n, shape.n, rng);
    const Matrix x(dt, shape.m, shape.n, shape.n, rng);  // relu's backward input
    for (int mode = 0; mode < 3; ++mode) {  // bias; bias + relu; relu backward
      GemmShape s = shape;
      if (mode < 2) s.ep.bias = bias.bytes.data();
      if (mode == 1) s.ep.activation = Activation::relu;
      if (mode == 2) s.ep.backward = Activation::relu, s.ep.backward_input = x.bytes.data(), s.ep.ld_backward = x.ld;
      Case with = cs;
      with.s = s;
      const Matrix got = with.run();
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double mag = 0;
          double want = cs.exact(i, j, &mag, mode < 2 ? &bias : nullptr);
          const float v = got.get(i * got.ld + j);
          if (mode == 1) want = std::max(want, 0.0);
          if (mode == 2 && !(x.at(i, j) > 0)) want = 0;
          if (mode == 1) {
            ASSERT_FALSE(v < 0) << "relu at (" << i << ", " << j << ")";
          }
          ASSERT_TRUE(Case::close(v, want, mag, k, dt))
              << dtype_name(dt) << " k " << k << " mode " << mode << " at (" << i << ", " << j << "): " << v
              << " vs " << want;
        }
    }
    // The sink gets every element once, f32 results with alpha applied.
    Collected got{std::vector<float>(static_cast<size_t>(shape.m * shape.n)),
                  std::vector<int>(static_cast<size_t>(shape.m * shape.n))};
    GemmSink sink;
    sink.row = collect;
    sink.state = &got;
    Case sunk = cs;
    sunk.alpha = 2.0f;
    sunk.s.ep.sink = &sink;
    sunk.run();
    for (int64_t i = 0; i < shape.m; ++i)
      for (int64_t j = 0; j < shape.n; ++j) {
        double mag = 0;
        const double want = sunk.exact(i, j, &mag);
        const size_t at = static_cast<size_t>(i * shape.n + j);
        ASSERT_EQ(got.times[at], 1) << "k " << k << " at (" << i << ", " << j << ")";
        ASSERT_TRUE(Case::close(got.values[at], want, mag, k, HPU_FLOAT32)) << "k " << k;
      }
  }
}

// Rows split, columns split (short, wide C), a 16-bit C over several k
// blocks: the same bits on one thread and on the threads the plan gives.
TEST(GemmFma, SameBitsOnOneThreadAndSplit) {
  SKIP_WITHOUT_LEVEL();
  hpu::ComputeBudget &budget = hpu::ComputeBudget::instance();
  std::mt19937 rng(5);
  struct Split {
    hpuDataType_t dt, c_dt;
    GemmShape s;
  };
  const Split splits[] = {{HPU_FLOAT32, HPU_FLOAT32, {203, 131, 1000, true, false}},
                          {HPU_FLOAT32, HPU_FLOAT32, {7, 6001, 128, false, true}},
                          {HPU_BFLOAT16, HPU_BFLOAT16, {200, 90, 1600, false, true}},
                          {HPU_BFLOAT16, HPU_FLOAT32, {9, 8000, 100, true, false}},
                          {HPU_FLOAT16, HPU_FLOAT16, {240, 100, 1000, true, true}},
                          // narrow C, as dot products: rows split, and columns
                          // split into parts narrow enough for that path alone
                          {HPU_FLOAT32, HPU_FLOAT32, {2000, 10, 1024, false, true}},
                          {HPU_FLOAT32, HPU_FLOAT32, {2, 20, 60000, false, true}}};
  for (const Split &sp : splits) {
    const Case cs(sp.dt, sp.c_dt, sp.s, 1.0f, 0.25f, 1, rng);
    SCOPED_TRACE(cs.describe());
    ASSERT_GE(gemm_plan(sp.dt, sp.s).threads, 2);
    budget.configure(1);
    const Matrix one = cs.run();
    EXPECT_EQ(parallel_last_threads(), 1);
    budget.configure(4);
    const Matrix split = cs.run();
    EXPECT_GE(parallel_last_threads(), 2);
    EXPECT_EQ(std::memcmp(one.bytes.data(), split.bytes.data(), one.bytes.size()), 0);
    cs.expect_right(split);
  }
  budget.configure(1);
}
