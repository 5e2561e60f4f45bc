// Casts, elementwise kernels, optimizer steps, reductions, random fills and
// parallel_for, against references computed here in double precision (the
// vector paths: bit for bit against the scalar rules).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "device/compute_budget.hpp"
#include "kernels/cast.hpp"
#include "kernels/convert.hpp"
#include "kernels/dtype.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/elementwise_vec.hpp"
#include "kernels/optim.hpp"
#include "kernels/optim_vec.hpp"
#include "kernels/cpu.hpp"
#include "kernels/parallel.hpp"
#include "kernels/random.hpp"
#include "kernels/reduce.hpp"

using namespace hpu::kernels;

namespace {

const hpuDataType_t kFloats[] = {HPU_FLOAT16, HPU_BFLOAT16, HPU_FLOAT32, HPU_FLOAT64};

// A dense buffer of n elements of a floating dtype, read and written as double.
struct Buf {
  hpuDataType_t dt;
  std::vector<double> storage;  // 8 bytes per element: enough for every type
  Buf(hpuDataType_t t, size_t n) : dt(t), storage(n) {}
  void *data() { return storage.data(); }
  size_t size() const { return storage.size(); }
  void set(size_t i, double v) {
    char *p = reinterpret_cast<char *>(storage.data());
    if (dt == HPU_FLOAT64) reinterpret_cast<double *>(p)[i] = v;
    else if (dt == HPU_FLOAT32) reinterpret_cast<float *>(p)[i] = static_cast<float>(v);
    else if (dt == HPU_BFLOAT16) reinterpret_cast<uint16_t *>(p)[i] = f32_to_bf16(static_cast<float>(v));
    else reinterpret_cast<uint16_t *>(p)[i] = f32_to_f16(static_cast<float>(v));
  }
  double at(size_t i) const {
    const char *p = reinterpret_cast<const char *>(storage.data());
    if (dt == HPU_FLOAT64) return reinterpret_cast<const double *>(p)[i];
    if (dt == HPU_FLOAT32) return reinterpret_cast<const float *>(p)[i];
    if (dt == HPU_BFLOAT16) return bf16_to_f32(reinterpret_cast<const uint16_t *>(p)[i]);
    return f16_to_f32(reinterpret_cast<const uint16_t *>(p)[i]);
  }
};

Buf random_buf(hpuDataType_t dt, size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Buf b(dt, n);
  for (size_t i = 0; i < n; ++i) b.set(i, u(rng));
  return b;
}

// Relative error allowed for one rounded result computed in f32 (or f64).
double tol(hpuDataType_t dt) {
  switch (dt) {
    case HPU_FLOAT64: return 1e-14;
    case HPU_FLOAT32: return 2e-6;
    case HPU_BFLOAT16: return 1.0 / 128;
    default: return 1.0 / 1024;
  }
}

void expect_close(double got, double want, double rel, const std::string &what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_LE(std::fabs(got - want), rel * std::fabs(want) + rel * 1e-3) << what << ": got " << got << " want " << want;
}

double ref_unary(Unary op, double x) {
  switch (op) {
    case Unary::neg: return -x;
    case Unary::abs: return std::fabs(x);
    case Unary::exp: return std::exp(x);
    case Unary::log: return std::log(x);
    case Unary::tan: return std::tan(x);
    case Unary::tanh: return std::tanh(x);
    case Unary::sigmoid: return 1 / (1 + std::exp(-x));
    case Unary::relu: return x > 0 ? x : 0;
    case Unary::gelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Unary::sqrt: return std::sqrt(x);
    case Unary::rsqrt: return 1 / std::sqrt(x);
    case Unary::reciprocal: return 1 / x;
    case Unary::square: return x * x;
  }
  return 0;
}

double ref_binary(Binary op, double a, double b) {
  switch (op) {
    case Binary::add: return a + b;
    case Binary::sub: return a - b;
    case Binary::mul: return a * b;
    case Binary::div: return a / b;
    case Binary::max: return std::max(a, b);
    case Binary::min: return std::min(a, b);
    case Binary::pow: return std::pow(a, b);
  }
  return 0;
}

const Unary kUnary[] = {Unary::neg,  Unary::abs,  Unary::exp,   Unary::log,        Unary::tan,
                        Unary::tanh, Unary::sigmoid, Unary::relu, Unary::gelu,   Unary::sqrt,
                        Unary::rsqrt, Unary::reciprocal, Unary::square};
const Binary kBinary[] = {Binary::add, Binary::sub, Binary::mul, Binary::div, Binary::max, Binary::min, Binary::pow};

// Inputs inside each function's domain (and away from tan's poles).
bool positive_domain(Unary op) {
  return op == Unary::log || op == Unary::sqrt || op == Unary::rsqrt || op == Unary::reciprocal;
}

}  // namespace

class Kernels : public testing::Test {
 protected:
  void SetUp() override { hpu::ComputeBudget::instance().configure(2); }
};

// ---- casts ------------------------------------------------------------------------------

TEST_F(Kernels, CastRulesBetweenTypes) {
  const double values[] = {0.0, 1.0, -1.0, 2.5, -2.5, 127.9, 300.0, -300.0, 1e10, -1e10};
  double in[10], back[10];
  for (int i = 0; i < 10; ++i) in[i] = values[i];
  int8_t i8[10];
  cast(in, HPU_FLOAT64, i8, HPU_INT8, 10);
  const int8_t want_i8[] = {0, 1, -1, 2, -2, 127, 127, -128, 127, -128};  // truncation, saturation
  for (int i = 0; i < 10; ++i) EXPECT_EQ(i8[i], want_i8[i]) << values[i];
  uint8_t u8[10], b[10];
  cast(in, HPU_FLOAT64, u8, HPU_UINT8, 10);
  EXPECT_EQ(u8[2], 0);
  EXPECT_EQ(u8[6], 255);
  cast(in, HPU_FLOAT64, b, HPU_BOOL, 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b[i], values[i] != 0 ? 1 : 0);
  double nan = std::nan("");
  int32_t i32 = 7;
  cast(&nan, HPU_FLOAT64, &i32, HPU_INT32, 1);
  EXPECT_EQ(i32, 0);
  int64_t big = -5;
  uint32_t u32 = 9;
  cast(&big, HPU_INT64, &u32, HPU_UINT32, 1);
  EXPECT_EQ(u32, 0u);
  uint64_t huge = std::numeric_limits<uint64_t>::max();
  int64_t i64 = 0;
  cast(&huge, HPU_UINT64, &i64, HPU_INT64, 1);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::max());
  // Through every floating type and back.
  for (hpuDataType_t dt : kFloats) {
    Buf mid(dt, 10);
    cast(in, HPU_FLOAT64, mid.data(), dt, 10);
    cast(mid.data(), dt, back, HPU_FLOAT64, 10);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(back[i], values[i]) << dt;  // exactly representable
  }
}

TEST_F(Kernels, CastLargeBufferInParallelMatchesScalar) {
  const size_t n = (1 << 18) + 3;
  std::vector<float> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = std::sin(static_cast<float>(i)) * 1000.0f;
  std::vector<uint16_t> dst(n);
  cast(src.data(), HPU_FLOAT32, dst.data(), HPU_BFLOAT16, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], f32_to_bf16(src[i])) << i;
  std::vector<int32_t> ints(n);
  cast(src.data(), HPU_FLOAT32, ints.data(), HPU_INT32, n);
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(ints[i], static_cast<int32_t>(src[i]));
}

TEST_F(Kernels, CopyStridedTransposesAndBroadcasts) {
  // src 3 x 4 (row-major) -> dst as its transpose 4 x 3, converting f32 -> f64.
  float src[12];
  for (int i = 0; i < 12; ++i) src[i] = static_cast<float>(i);
  double dst[12] = {};
  const int64_t shape[2] = {4, 3}, sst[2] = {1, 4}, dstr[2] = {3, 1};
  copy_strided(src, HPU_FLOAT32, sst, dst, HPU_FLOAT64, dstr, 2, shape);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(dst[i * 3 + j], src[j * 4 + i]);
  // A scalar broadcast (stride 0) into a strided destination: every other element.
  int32_t one = 5, out[8] = {};
  const int64_t shape1[1] = {4}, zero[1] = {0}, two[1] = {2};
  copy_strided(&one, HPU_INT32, zero, out, HPU_INT32, two, 1, shape1);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i % 2 == 0 ? 5 : 0);
}

TEST_F(Kernels, FillEveryType) {
  for (int t = 0; t < HPU_NUM_DATA_TYPES; ++t) {
    auto dt = static_cast<hpuDataType_t>(t);
    double buf[5];
    fill(buf, dt, 5, 3.0);
    double back[5];
    cast(buf, dt, back, HPU_FLOAT64, 5);
    for (double v : back) EXPECT_EQ(v, dt == HPU_BOOL ? 1.0 : 3.0) << dtype_size(dt);
  }
}

// ---- elementwise -----------------------------------------------------------------------------

TEST_F(Kernels, UnaryAgainstReference) {
  const size_t n = 5000;  // several blocks and a tail
  for (hpuDataType_t dt : kFloats)
    for (Unary op : kUnary) {
      Buf x = positive_domain(op) ? random_buf(dt, n, 0.05, 4, 1) : random_buf(dt, n, -1.4, 1.4, 2);
      Buf y(dt, n);
      unary(op, dt, x.data(), y.data(), n);
      for (size_t i = 0; i < n; ++i)
        expect_close(y.at(i), ref_unary(op, x.at(i)), tol(dt) * 4, std::string(unary_name(op)) + " " + std::to_string(dt));
    }
}

TEST_F(Kernels, UnaryBackwardAgainstFiniteDifferences) {
  const size_t n = 300;
  for (Unary op : kUnary) {
    if (op == Unary::relu || op == Unary::abs) continue;  // kinks: checked below
    Buf x = positive_domain(op) ? random_buf(HPU_FLOAT64, n, 0.1, 3, 3) : random_buf(HPU_FLOAT64, n, -1.3, 1.3, 4);
    Buf g = random_buf(HPU_FLOAT64, n, -2, 2, 5), gi(HPU_FLOAT64, n);
    unary_backward(op, HPU_FLOAT64, x.data(), g.data(), gi.data(), n);
    for (size_t i = 0; i < n; ++i) {
      double h = 1e-6, xv = x.at(i);
      double fd = (ref_unary(op, xv + h) - ref_unary(op, xv - h)) / (2 * h);
      expect_close(gi.at(i), g.at(i) * fd, 1e-5, unary_name(op));
    }
    // The same in bf16, against the f64 result.
    Buf xb(HPU_BFLOAT16, n), gb(HPU_BFLOAT16, n), gib(HPU_BFLOAT16, n), gi64(HPU_FLOAT64, n);
    cast(x.data(), HPU_FLOAT64, xb.data(), HPU_BFLOAT16, n);
    cast(g.data(), HPU_FLOAT64, gb.data(), HPU_BFLOAT16, n);
    unary_backward(op, HPU_BFLOAT16, xb.data(), gb.data(), gib.data(), n);
    Buf xr(HPU_FLOAT64, n), gr(HPU_FLOAT64, n);
    cast(xb.data(), HPU_BFLOAT16, xr.data(), HPU_FLOAT64, n);
    cast(gb.data(), HPU_BFLOAT16, gr.data(), HPU_FLOAT64, n);
    unary_backward(op, HPU_FLOAT64, xr.data(), gr.data(), gi64.data(), n);
    for (size_t i = 0; i < n; ++i) expect_close(gib.at(i), gi64.at(i), 1.0 / 64, unary_name(op));
  }
  double x[4] = {-2, -0.5, 0.5, 2}, g[4] = {1, 1, 1, 1}, out[4];
  unary_backward(Unary::relu, HPU_FLOAT64, x, g, out, 4);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[3], 1);
  unary_backward(Unary::abs, HPU_FLOAT64, x, g, out, 4);
  EXPECT_EQ(out[1], -1);
  EXPECT_EQ(out[2], 1);
}

TEST_F(Kernels, BinaryAgainstReferenceAndInPlace) {
  const size_t n = (1 << 16) + 17;  // parallel chunks and a tail
  for (hpuDataType_t dt : kFloats)
    for (Binary op : kBinary) {
      Buf a = random_buf(dt, n, 0.5, 2, 6), b = random_buf(dt, n, -1.5, 1.5, 7), o(dt, n);
      binary(op, dt, a.data(), b.data(), o.data(), n);
      for (size_t i = 0; i < n; i += 7)
        expect_close(o.at(i), ref_binary(op, a.at(i), b.at(i)), tol(dt) * 2, binary_name(op));
      binary_scalar(op, dt, a.data(), 0.75, o.data(), n);
      for (size_t i = 0; i < n; i += 13) expect_close(o.at(i), ref_binary(op, a.at(i), 0.75), tol(dt) * 2, binary_name(op));
    }
  Buf a = random_buf(HPU_FLOAT32, 100, -1, 1, 8), b = random_buf(HPU_FLOAT32, 100, -1, 1, 9);
  Buf a0 = a;
  binary(Binary::add, HPU_FLOAT32, a.data(), b.data(), a.data(), 100);  // out aliases a
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(a.at(i), static_cast<float>(a0.at(i) + b.at(i)));
}

TEST_F(Kernels, IntegerArithmetic) {
  int32_t a[4] = {7, -7, 100, std::numeric_limits<int32_t>::min()}, b[4] = {2, 2, -3, -1}, o[4];
  binary(Binary::div, HPU_INT32, a, b, o, 4);
  EXPECT_EQ(o[0], 3);
  EXPECT_EQ(o[1], -3);
  EXPECT_EQ(o[2], -33);
  EXPECT_EQ(o[3], std::numeric_limits<int32_t>::min());  // wraps, no trap
  binary(Binary::max, HPU_INT32, a, b, o, 4);
  EXPECT_EQ(o[1], 2);
  int32_t zero[4] = {1, 0, 1, 1};
  EXPECT_THROW(binary(Binary::div, HPU_INT32, a, zero, o, 4), hpu::Error);
  EXPECT_THROW(binary(Binary::pow, HPU_INT32, a, b, o, 4), hpu::Error);
  EXPECT_FALSE(binary_supports(Binary::pow, HPU_INT64));
  EXPECT_FALSE(binary_supports(Binary::add, HPU_BOOL));
  EXPECT_TRUE(unary_supports(Unary::relu, HPU_INT32));
  EXPECT_FALSE(unary_supports(Unary::exp, HPU_INT32));
  EXPECT_THROW(unary(Unary::exp, HPU_INT32, a, o, 4), hpu::Error);
  unary(Unary::relu, HPU_INT32, a, o, 4);
  EXPECT_EQ(o[0], 7);
  EXPECT_EQ(o[1], 0);
}

// Integer sums, differences and products that overflow wrap around as two's
// complement (the unsigned arithmetic's bits, as MPI and NCCL give), without
// the undefined behaviour of signed overflow (run under UBSan); so do the
// negation, absolute value and square of the minimum.
template <class I>
void expect_integer_arithmetic_wraps(hpuDataType_t dt) {
  using U = std::make_unsigned_t<I>;
  const I lo = std::numeric_limits<I>::min(), hi = std::numeric_limits<I>::max();
  I a[4] = {hi, lo, hi, lo}, b[4] = {hi, lo, lo, I(-1)}, o[4];
  const auto wrap = [](U v) { return static_cast<I>(v); };
  binary(Binary::add, dt, a, b, o, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o[i], wrap(U(U(a[i]) + U(b[i])))) << dtype_name(dt) << " add " << i;
  binary(Binary::sub, dt, a, b, o, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o[i], wrap(U(U(a[i]) - U(b[i])))) << dtype_name(dt) << " sub " << i;
  binary(Binary::mul, dt, a, b, o, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o[i], wrap(U(U(a[i]) * U(b[i])))) << dtype_name(dt) << " mul " << i;
  unary(Unary::neg, dt, a, o, 4);
  EXPECT_EQ(o[1], lo);
  unary(Unary::abs, dt, a, o, 4);
  EXPECT_EQ(o[1], lo);
  unary(Unary::square, dt, a, o, 4);
  EXPECT_EQ(o[0], I(1));
}

TEST_F(Kernels, IntegerOverflowWraps) {
  expect_integer_arithmetic_wraps<int32_t>(HPU_INT32);
  expect_integer_arithmetic_wraps<int64_t>(HPU_INT64);
  expect_integer_arithmetic_wraps<int8_t>(HPU_INT8);
  // Sums of i64 and u64 (into i64) past the range: rows, columns and a long row
  // (summed in chunks).
  for (size_t n : {size_t(7), size_t(200000)}) {
    std::vector<int64_t> v(n);
    std::mt19937_64 rng(n);
    uint64_t want = 0;
    for (auto &x : v) want += static_cast<uint64_t>(x = static_cast<int64_t>(rng()));
    for (hpuDataType_t dt : {HPU_INT64, HPU_UINT64}) {
      int64_t s = 0;
      reduce(Reduce::sum, dt, v.data(), 1, static_cast<int64_t>(n), 1, &s, HPU_INT64);
      EXPECT_EQ(static_cast<uint64_t>(s), want) << dtype_name(dt) << " n " << n;
    }
  }
  const int64_t max = std::numeric_limits<int64_t>::max();
  int64_t cols[6] = {max, 1, max, max, 2, max}, sums[2];  // 3 rows of 2 columns
  reduce(Reduce::sum, HPU_INT64, cols, 1, 3, 2, sums, HPU_INT64);
  EXPECT_EQ(static_cast<uint64_t>(sums[0]), uint64_t(max) * 2 + 2);
  EXPECT_EQ(static_cast<uint64_t>(sums[1]), uint64_t(max) * 2 + 1);
}

TEST_F(Kernels, NanPropagates) {
  float x[3] = {std::nanf(""), 1.0f, -1.0f}, y[3] = {1.0f, std::nanf(""), 0.0f}, o[3];
  unary(Unary::relu, HPU_FLOAT32, x, o, 3);
  EXPECT_TRUE(std::isnan(o[0]));
  binary(Binary::max, HPU_FLOAT32, x, y, o, 3);
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_TRUE(std::isnan(o[1]));
  float m;
  reduce(Reduce::max, HPU_FLOAT32, x, 1, 3, 1, &m, HPU_FLOAT32);
  EXPECT_TRUE(std::isnan(m));
}

TEST_F(Kernels, BinaryStridedBroadcasts) {
  // [2, 3, 4] + bias [4] (strides 0, 0, 1), and * a column [2, 1, 1].
  for (hpuDataType_t dt : {HPU_FLOAT32, HPU_BFLOAT16}) {
    Buf a = random_buf(dt, 24, -1, 1, 10), bias = random_buf(dt, 4, -1, 1, 11), col = random_buf(dt, 2, -1, 1, 12);
    Buf o(dt, 24), o2(dt, 24);
    const int64_t shape[3] = {2, 3, 4}, as[3] = {12, 4, 1}, bs[3] = {0, 0, 1}, cs[3] = {1, 0, 0};
    binary_strided(Binary::add, dt, 3, shape, a.data(), as, bias.data(), bs, o.data());
    binary_strided(Binary::mul, dt, 3, shape, a.data(), as, col.data(), cs, o2.data());
    for (int i = 0; i < 24; ++i) {
      expect_close(o.at(i), a.at(i) + bias.at(i % 4), tol(dt), "add bias");
      expect_close(o2.at(i), a.at(i) * col.at(i / 12), tol(dt), "mul column");
    }
  }
}

TEST_F(Kernels, AxpbyAccumulatesAcrossTypes) {
  const size_t n = 3000;
  Buf g = random_buf(HPU_BFLOAT16, n, -1, 1, 13), acc = random_buf(HPU_FLOAT32, n, -1, 1, 14);
  Buf acc0 = acc;
  axpby(0.5f, g.data(), HPU_BFLOAT16, 1.0f, acc.data(), HPU_FLOAT32, n);
  for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(acc.at(i), static_cast<float>(acc0.at(i) + 0.5 * g.at(i)));
  Buf y = random_buf(HPU_FLOAT64, n, -1, 1, 15);
  axpby(2.0f, acc.data(), HPU_FLOAT32, 0.0f, y.data(), HPU_FLOAT64, n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(y.at(i), 2.0 * acc.at(i));
}

// ---- vector paths of the f32 loops ----------------------------------------------------------

namespace {

// Inputs with every special case (NaN of both signs, infinities, signed
// zeros, subnormals, the largest finite values) among random values.
std::vector<float> special_floats(size_t n, unsigned seed) {
  const float specials[] = {std::nanf(""), -std::nanf(""), INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f,
                            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f, -1.0f,
                            std::numeric_limits<float>::min(), 3.0f, -0.5f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rng() % 3 == 0 ? specials[rng() % std::size(specials)] : u(rng);
  return v;
}

uint32_t bits_of(float f) { return f32_bits(f); }

// The scalar rules every path must follow, computed independently.
float want_binary(Binary op, float a, float b) {
  switch (op) {
    case Binary::add: return static_cast<float>(double(a) + double(b));
    case Binary::sub: return static_cast<float>(double(a) - double(b));
    case Binary::mul: return static_cast<float>(double(a) * double(b));
    case Binary::div: return static_cast<float>(double(a) / double(b));
    case Binary::max: return std::isnan(a) ? a : a > b ? a : b;
    case Binary::min: return std::isnan(a) ? a : a < b ? a : b;
    default: return 0;
  }
}

float want_unary(Unary op, float x) {
  switch (op) {
    case Unary::neg: return -x;
    case Unary::abs: return std::fabs(x);
    case Unary::relu: return x < 0 ? 0.0f : x;
    case Unary::square: return static_cast<float>(double(x) * double(x));
    case Unary::sqrt: return static_cast<float>(std::sqrt(double(x)));
    case Unary::rsqrt: return 1.0f / std::sqrt(x);
    case Unary::reciprocal: return static_cast<float>(1.0 / double(x));
    default: return 0;
  }
}

// Same bits, or both NaN (the payload of a NaN from an operation may differ).
void expect_same(float got, float want, const std::string &what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_EQ(bits_of(got), bits_of(want)) << what << ": got " << got << " want " << want;
}

std::vector<Isa> all_paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

}  // namespace

TEST(ElementwisePaths, EveryPathFollowsTheScalarRulesBitForBit) {
  const size_t n = 1000;
  std::vector<float> a = special_floats(n, 21), b = special_floats(n, 22), out(n);
  for (Isa isa : all_paths()) {
    const ElementwisePaths &p = elementwise_paths(isa);
    // Every length up to 40 exercises the tails of each vector width.
    for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(15), size_t(16), size_t(17), size_t(33), size_t(40),
                       n}) {
      for (Binary op : kBinary) {
        int k = static_cast<int>(op);
        if (!p.binary[k]) continue;
        std::string what = std::string(isa_name(isa)) + " " + binary_name(op) + " n=" + std::to_string(len);
        p.binary[k](a.data(), b.data(), out.data(), len);
        for (size_t i = 0; i < len; ++i) expect_same(out[i], want_binary(op, a[i], b[i]), what);
        p.binary_scalar[k](a.data(), b[3], out.data(), len);
        for (size_t i = 0; i < len; ++i) expect_same(out[i], want_binary(op, a[i], b[3]), what + " scalar b");
      }
      for (Unary op : kUnary) {
        int k = static_cast<int>(op);
        if (!p.unary[k]) continue;
        p.unary[k](a.data(), out.data(), len);
        std::string what = std::string(isa_name(isa)) + " " + unary_name(op) + " n=" + std::to_string(len);
        for (size_t i = 0; i < len; ++i) expect_same(out[i], want_unary(op, a[i]), what);
      }
      p.relu_backward(a.data(), b.data(), out.data(), len);
      for (size_t i = 0; i < len; ++i)
        expect_same(out[i], b[i] * (a[i] > 0 ? 1.0f : 0.0f), std::string(isa_name(isa)) + " relu backward");
      std::vector<float> y(b.begin(), b.end());
      p.axpby(0.5f, a.data(), 2.0f, y.data(), len);
      for (size_t i = 0; i < len; ++i) expect_same(y[i], 2.0f * b[i] + 0.5f * a[i], std::string(isa_name(isa)) + " axpby");
      y.assign(len, std::nanf(""));
      p.axpby(0.5f, a.data(), 0.0f, y.data(), len);  // beta 0: y is not read
      for (size_t i = 0; i < len; ++i) expect_same(y[i], 0.5f * a[i], std::string(isa_name(isa)) + " axpby beta 0");
    }
  }
  // The signed zeros relu and max keep, and the sign abs drops.
  float z[2] = {-0.0f, 0.0f}, o[2];
  for (Isa isa : all_paths()) {
    const ElementwisePaths &p = elementwise_paths(isa);
    p.unary[static_cast<int>(Unary::relu)](z, o, 2);
    EXPECT_TRUE(std::signbit(o[0])) << isa_name(isa);
    p.unary[static_cast<int>(Unary::abs)](z, o, 2);
    EXPECT_FALSE(std::signbit(o[0])) << isa_name(isa);
  }
}

TEST_F(Kernels, Bf16OpsRunTheVectorLoopsOnWidenedBlocks) {
  // bf16 results are the f32 results rounded once, whatever the path.
  const size_t n = 3000;
  std::vector<float> a = special_floats(n, 23), b = special_floats(n, 24);
  std::vector<uint16_t> ah(n), bh(n), oh(n);
  for (size_t i = 0; i < n; ++i) ah[i] = f32_to_bf16(a[i]), bh[i] = f32_to_bf16(b[i]);
  binary(Binary::add, HPU_BFLOAT16, ah.data(), bh.data(), oh.data(), n);
  for (size_t i = 0; i < n; ++i) {
    float want = want_binary(Binary::add, bf16_to_f32(ah[i]), bf16_to_f32(bh[i]));
    expect_same(bf16_to_f32(oh[i]), bf16_to_f32(f32_to_bf16(want)), "bf16 add");
  }
  unary(Unary::relu, HPU_BFLOAT16, ah.data(), oh.data(), n);
  for (size_t i = 0; i < n; ++i)
    expect_same(bf16_to_f32(oh[i]), want_unary(Unary::relu, bf16_to_f32(ah[i])), "bf16 relu");
}

// The optimizer updates as optim.cpp computed them before it had vector paths:
// f32 operations in this order, each rounded once.
void want_adamw(float &w, float g, float &m, float &v, const AdamwConstants &c) {
  w *= c.decay;
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  w -= c.step_size * m / (std::sqrt(v) * c.inv_sqrt_bc2 + c.eps);
}

void want_sgd(float &w, float g, float &buf, const SgdConstants &c) {
  float d = g + c.weight_decay * w;
  if (c.momentum != 0.0f) {
    buf = c.first ? d : c.momentum * buf + c.damp * d;
    d = c.nesterov ? d + c.momentum * buf : buf;
  }
  w -= c.lr * d;
}

TEST(OptimPaths, EveryPathGivesTheScalarUpdateBitForBit) {
  const size_t n = 1000;
  const std::vector<float> w0 = special_floats(n, 31), g = special_floats(n, 32), m0 = special_floats(n, 33);
  std::vector<float> v0 = special_floats(n, 34);
  for (float &x : v0) x = std::fabs(x);  // a second moment
  const AdamwConstants ac{1.0f - 1e-3f * 1e-2f, 0.9f, 0.999f, 1.0f - 0.9f, 1.0f - 0.999f, 1e-3f / 0.19f, 1.7f, 1e-8f};
  const SgdConstants sgd_cases[] = {{0.05f, 0.0f, 1.0f, 0.0f, false, false},
                                    {0.05f, 0.9f, 1.0f, 1e-2f, false, true},
                                    {0.05f, 0.9f, 0.9f, 0.0f, false, false},
                                    {0.05f, 0.8f, 1.0f, 1e-3f, true, false}};
  for (Isa isa : all_paths()) {
    const OptimPaths &p = optim_paths(isa);
    for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(15), size_t(16), size_t(17), size_t(33), size_t(40),
                       n}) {
      const std::string what = std::string(isa_name(isa)) + " n=" + std::to_string(len);
      std::vector<float> w = w0, m = m0, v = v0, ww = w0, wm = m0, wv = v0;
      p.adamw(w.data(), g.data(), m.data(), v.data(), len, ac);
      for (size_t i = 0; i < len; ++i) want_adamw(ww[i], g[i], wm[i], wv[i], ac);
      for (size_t i = 0; i < n; ++i) {  // past len: untouched
        expect_same(w[i], ww[i], what + " adamw param");
        expect_same(m[i], wm[i], what + " adamw exp_avg");
        expect_same(v[i], wv[i], what + " adamw exp_avg_sq");
      }
      for (const SgdConstants &c : sgd_cases) {
        std::vector<float> sw = w0, sb = m0, ws = w0, wb = m0;
        p.sgd(sw.data(), g.data(), c.momentum != 0.0f ? sb.data() : nullptr, len, c);
        for (size_t i = 0; i < len; ++i) want_sgd(ws[i], g[i], wb[i], c);
        for (size_t i = 0; i < n; ++i) {
          expect_same(sw[i], ws[i], what + " sgd param, momentum " + std::to_string(c.momentum));
          expect_same(sb[i], wb[i], what + " sgd buffer, momentum " + std::to_string(c.momentum));
        }
      }
    }
  }
}

TEST_F(Kernels, AdamwStepWidensBf16GradientsAndCoversEveryBlock) {
  // More than one parallel_for chunk and one widening block, with a ragged end.
  const size_t n = 3 * 16384 + 1000 + 5;
  std::vector<float> w(n), m(n), v(n), g(n);
  std::mt19937 rng(35);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t i = 0; i < n; ++i) w[i] = u(rng), m[i] = u(rng) * 0.1f, v[i] = std::fabs(u(rng)) * 0.01f, g[i] = u(rng);
  std::vector<uint16_t> gh(n);
  for (size_t i = 0; i < n; ++i) gh[i] = f32_to_bf16(g[i]);
  const AdamwParams ap{1e-3, 0.9, 0.999, 1e-8, 1e-2};
  const int64_t step = 3;
  const AdamwConstants c{static_cast<float>(1.0 - 1e-3 * 1e-2), 0.9f, 0.999f, 1.0f - 0.9f, 1.0f - 0.999f,
                         static_cast<float>(1e-3 / (1.0 - std::pow(0.9, 3.0))),
                         static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999, 3.0))), 1e-8f};
  std::vector<float> ww = w, wm = m, wv = v;
  for (size_t i = 0; i < n; ++i) want_adamw(ww[i], bf16_to_f32(gh[i]), wm[i], wv[i], c);
  adamw_step(w.data(), HPU_BFLOAT16, gh.data(), m.data(), v.data(), int64_t(n), step, ap);
  for (size_t i = 0; i < n; ++i) {
    expect_same(w[i], ww[i], "param " + std::to_string(i));
    expect_same(m[i], wm[i], "exp_avg " + std::to_string(i));
    expect_same(v[i], wv[i], "exp_avg_sq " + std::to_string(i));
  }
}

// ---- reductions ---------------------------------------------------------------------------------

TEST_F(Kernels, ReduceAgainstReference) {
  struct Shape3 { int64_t outer, n, inner; };
  const Shape3 shapes[] = {{1, 1, 1}, {1, 1000, 1}, {7, 333, 1}, {1, 300, 5}, {3, 40, 1500}, {1, 200000, 1}, {2, 70000, 1}};
  for (hpuDataType_t dt : kFloats)
    for (const Shape3 &s : shapes)
      for (Reduce op : {Reduce::sum, Reduce::mean, Reduce::max, Reduce::min}) {
        size_t total = static_cast<size_t>(s.outer * s.n * s.inner);
        Buf in = random_buf(dt, total, -1, 1, 16);
        Buf out(HPU_FLOAT64, static_cast<size_t>(s.outer * s.inner));
        reduce(op, dt, in.data(), s.outer, s.n, s.inner, out.data(), HPU_FLOAT64);
        for (int64_t o = 0; o < s.outer; ++o)
          for (int64_t j = 0; j < s.inner; ++j) {
            double sum = 0, abs = 0, mx = -INFINITY, mn = INFINITY;
            for (int64_t i = 0; i < s.n; ++i) {
              double v = in.at(static_cast<size_t>((o * s.n + i) * s.inner + j));
              sum += v;
              abs += std::fabs(v);
              mx = std::max(mx, v);
              mn = std::min(mn, v);
            }
            double want = op == Reduce::sum ? sum : op == Reduce::mean ? sum / s.n : op == Reduce::max ? mx : mn;
            double scale = op == Reduce::mean ? abs / s.n : abs;
            double got = out.at(static_cast<size_t>(o * s.inner + j));
            // f32 accumulation, pairwise: error well under n * eps.
            double bound = (dt == HPU_FLOAT64 ? 1e-13 : 1e-5) * scale + 1e-300;
            EXPECT_LE(std::fabs(got - want), bound) << reduce_name(op) << " dtype " << dt << " shape " << s.outer
                                                    << "x" << s.n << "x" << s.inner;
          }
      }
}

// Column sums (bias gradients) add row after row in f32 on the vector path:
// every column is the sequential f32 sum, bit for bit.
TEST_F(Kernels, ReduceColumnSumsAreSequentialF32Sums) {
  // More than one widening block and a ragged end (1500: spans of 1024 and
  // 476, on AVX-512 strips of 256 and 128 columns, then 6 vectors, the last
  // of 12 lanes), 10 columns, one row.
  struct Shape3 { int64_t outer, n, inner; };
  for (const Shape3 &sh : {Shape3{2, 37, 1500}, Shape3{1, 256, 10}, Shape3{3, 1, 300}}) {
    const int64_t outer = sh.outer, n = sh.n, inner = sh.inner;
    for (hpuDataType_t dt : {HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT16}) {
      Buf in = random_buf(dt, static_cast<size_t>(outer * n * inner), -1, 1, 18);
      std::vector<float> out(static_cast<size_t>(outer * inner));
      reduce(Reduce::sum, dt, in.data(), outer, n, inner, out.data(), HPU_FLOAT32);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          float want = 0;
          for (int64_t i = 0; i < n; ++i)
            want += static_cast<float>(in.at(static_cast<size_t>((o * n + i) * inner + j)));
          ASSERT_EQ(out[static_cast<size_t>(o * inner + j)], want)
              << "dtype " << dt << " shape " << outer << "x" << n << "x" << inner << " column " << o << "," << j;
        }
    }
  }
}

TEST_F(Kernels, ReduceIntegersEmptyAndOutputType) {
  int32_t v[5] = {1, -2, 30, 4, 5};
  int64_t s = 0;
  reduce(Reduce::sum, HPU_INT32, v, 1, 5, 1, &s, HPU_INT64);
  EXPECT_EQ(s, 38);
  int32_t m = 0;
  reduce(Reduce::min, HPU_INT32, v, 1, 5, 1, &m, HPU_INT32);
  EXPECT_EQ(m, -2);
  EXPECT_FALSE(reduce_supports(Reduce::mean, HPU_INT32));
  EXPECT_THROW(reduce(Reduce::mean, HPU_INT32, v, 1, 5, 1, &m, HPU_INT32), hpu::Error);
  float e[4];
  reduce(Reduce::sum, HPU_FLOAT32, v, 2, 0, 1, e, HPU_FLOAT32);
  EXPECT_EQ(e[0], 0.0f);
  reduce(Reduce::mean, HPU_FLOAT32, v, 1, 0, 1, e, HPU_FLOAT32);
  EXPECT_TRUE(std::isnan(e[0]));
  reduce(Reduce::max, HPU_FLOAT32, v, 1, 0, 1, e, HPU_FLOAT32);
  EXPECT_EQ(e[0], -INFINITY);
  // bf16 in, bf16 out: one rounding of the f32 sum.
  std::vector<uint16_t> ones(1000, f32_to_bf16(1.0f));
  uint16_t total;
  reduce(Reduce::sum, HPU_BFLOAT16, ones.data(), 1, 1000, 1, &total, HPU_BFLOAT16);
  EXPECT_EQ(total, f32_to_bf16(1000.0f));
}

TEST_F(Kernels, ReduceDoesNotDependOnThreadCount) {
  Buf in = random_buf(HPU_FLOAT32, 300000, -1, 1, 17);
  float one, two;
  hpu::ComputeBudget::instance().configure(1);
  reduce(Reduce::sum, HPU_FLOAT32, in.data(), 1, 300000, 1, &one, HPU_FLOAT32);
  hpu::ComputeBudget::instance().configure(2);
  reduce(Reduce::sum, HPU_FLOAT32, in.data(), 1, 300000, 1, &two, HPU_FLOAT32);
  EXPECT_EQ(one, two);
}

// ---- random ----------------------------------------------------------------------------------------

TEST_F(Kernels, PhiloxKnownAnswer) {
  // Random123's known-answer test for philox4x32_10: counter 0, key 0.
  Philox4 r = philox(0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST_F(Kernels, RandomFillsAreReproducibleAndDistributed) {
  const size_t n = 200000;
  for (hpuDataType_t dt : kFloats) {
    Buf u(dt, n), u2(dt, n), nrm(dt, n);
    fill_uniform(u.data(), dt, n, 42, 1000, -2, 3);
    fill_uniform(u2.data(), dt, n, 42, 1000, -2, 3);
    EXPECT_EQ(std::memcmp(u.data(), u2.data(), n * dtype_size(dt)), 0);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_GE(u.at(i), -2.0);
      ASSERT_LE(u.at(i), 3.0);
      sum += u.at(i);
    }
    EXPECT_NEAR(sum / n, 0.5, 0.02);
    fill_normal(nrm.data(), dt, n, 42, 0, 1.0, 2.0);
    double s1 = 0, s2 = 0;
    for (size_t i = 0; i < n; ++i) {
      s1 += nrm.at(i);
      s2 += nrm.at(i) * nrm.at(i);
    }
    double mean = s1 / n, var = s2 / n - mean * mean;
    EXPECT_NEAR(mean, 1.0, 0.03);
    EXPECT_NEAR(std::sqrt(var), 2.0, 0.03);
  }
  // Element i depends only on (seed, offset + i): a later offset is a shifted draw.
  std::vector<float> a(100), b(90);
  fill_uniform(a.data(), HPU_FLOAT32, 100, 7, 0, 0, 1);
  fill_uniform(b.data(), HPU_FLOAT32, 90, 7, 10, 0, 1);
  for (int i = 0; i < 90; ++i) EXPECT_EQ(a[i + 10], b[i]);
  fill_uniform(b.data(), HPU_FLOAT32, 90, 8, 10, 0, 1);
  EXPECT_NE(a[10], b[0]);
  int32_t ints[2];
  EXPECT_THROW(fill_uniform(ints, HPU_INT32, 2, 0, 0, 0, 1), hpu::Error);
}

// ---- parallel_for -------------------------------------------------------------------------------------

TEST_F(Kernels, ParallelForCoversEachIndexOnceAndRethrows) {
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(100000)}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto &h : hits) ASSERT_EQ(h.load(), 1);
  }
  EXPECT_THROW(parallel_for(1000, 1,
                            [](int64_t b, int64_t) {
                              if (b > 0) throw std::runtime_error("helper failed");
                            }),
               std::runtime_error);
  // Every token came back.
  EXPECT_EQ(hpu::ComputeBudget::instance().try_acquire(2), 2);
  hpu::ComputeBudget::instance().release(2);
}
