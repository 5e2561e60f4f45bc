// Elementwise ops: broadcasting binary ops, unary ops, in-place accumulate.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

using BinaryFn = hpuStatus_t (*)(hpuStream_t, hpuTensor_t, hpuTensor_t, hpuTensor_t *);
using BinaryBackFn = hpuStatus_t (*)(hpuStream_t, hpuTensor_t, hpuTensor_t, hpuTensor_t, hpuTensor_t *,
                                     hpuTensor_t *);
using UnaryFn = hpuStatus_t (*)(hpuStream_t, hpuTensor_t, hpuTensor_t *);
using UnaryBackFn = hpuStatus_t (*)(hpuStream_t, hpuTensor_t, hpuTensor_t, hpuTensor_t *);

struct BinaryOp {
  const char *name;
  BinaryFn fn;
  BinaryBackFn back;
  double (*ref)(double, double);
};

const BinaryOp kBinary[] = {
    {"add", hpuAdd, hpuAddBackward, [](double a, double b) { return a + b; }},
    {"sub", hpuSub, hpuSubBackward, [](double a, double b) { return a - b; }},
    {"mul", hpuMul, hpuMulBackward, [](double a, double b) { return a * b; }},
    {"div", hpuDiv, hpuDivBackward, [](double a, double b) { return a / b; }},
};

struct UnaryOp {
  const char *name;
  UnaryFn fn;
  UnaryBackFn back;
  double (*ref)(double);
  double lo, hi;  // input range for the tests
};

const UnaryOp kUnary[] = {
    {"exp", hpuExp, hpuExpBackward, [](double x) { return std::exp(x); }, -2, 2},
    {"log", hpuLog, hpuLogBackward, [](double x) { return std::log(x); }, 0.2, 3},
    {"tan", hpuTan, hpuTanBackward, [](double x) { return std::tan(x); }, -1.2, 1.2},
    {"relu", hpuRelu, hpuReluBackward, [](double x) { return x > 0 ? x : 0; }, -2, 2},
    {"gelu", hpuGelu, hpuGeluBackward, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -3, 3},
    {"tanh", hpuTanh, hpuTanhBackward, [](double x) { return std::tanh(x); }, -3, 3},
    {"sigmoid", hpuSigmoid, hpuSigmoidBackward, [](double x) { return 1 / (1 + std::exp(-x)); }, -4, 4},
};

// Index of element i of `shape` inside a tensor of `in` broadcast to it.
int64_t broadcast_index(const Shape &shape, const Shape &in, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1, e = static_cast<int>(in.size()) - 1; d >= 0; --d, --e) {
    int64_t c = i % shape[d];
    i /= shape[d];
    if (e >= 0) {
      if (in[e] != 1) idx += c * stride;
      stride *= in[e];
    }
  }
  return idx;
}

class Elementwise : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {};

}  // namespace

TEST_P(Elementwise, BinaryOpsBroadcast) {
  hpuDataType_t dt = GetParam();
  struct Case {
    Shape a, b, out;
  };
  for (const BinaryOp &op : kBinary)
    for (const Case &c : {Case{{2, 3}, {2, 3}, {2, 3}}, Case{{2, 3}, {3}, {2, 3}}, Case{{2, 1, 4}, {3, 1}, {2, 3, 4}},
                          Case{{}, {2, 2}, {2, 2}}}) {
      auto av = round_all(dt, random_values(numel(c.a), 1, 0.5, 2)), bv = round_all(dt, random_values(numel(c.b), 2, 0.5, 2));
      hpuTensor_t out = nullptr;
      ASSERT_HPU_OK(op.fn(nullptr, T(dt, c.a, av), T(dt, c.b, bv), &out));
      keep(out);
      EXPECT_EQ(dtype_of(out), dt);
      EXPECT_EQ(shape_of(out), c.out);
      std::vector<double> want(numel(c.out));
      for (int64_t i = 0; i < numel(c.out); ++i)
        want[i] = op.ref(av[broadcast_index(c.out, c.a, i)], bv[broadcast_index(c.out, c.b, i)]);
      EXPECT_TRUE(near(read(out), want, tolerance(dt))) << op.name;
    }
}

TEST_P(Elementwise, UnaryOps) {
  hpuDataType_t dt = GetParam();
  for (const UnaryOp &op : kUnary) {
    auto xv = round_all(dt, random_values(50, 3, op.lo, op.hi));
    hpuTensor_t out = nullptr;
    ASSERT_HPU_OK(op.fn(nullptr, T(dt, {5, 10}, xv), &out));
    keep(out);
    EXPECT_EQ(dtype_of(out), dt);
    std::vector<double> want(50);
    for (int i = 0; i < 50; ++i) want[i] = op.ref(xv[i]);
    EXPECT_TRUE(near(read(out), want, tolerance(dt) * 4)) << op.name;  // a few ulps of libm
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Elementwise, ::testing::Values(HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64));

class ElementwiseGrad : public OpsTest {};

TEST_F(ElementwiseGrad, BinaryByFiniteDifferences) {
  for (const BinaryOp &op : kBinary)
    for (auto [a, b] : {std::pair<Shape, Shape>{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 3}, {4, 1}}, {{}, {2}}}) {
      SCOPED_TRACE(op.name);
      BinaryFn fn = op.fn;
      BinaryBackFn back = op.back;
      check_gradients(
          dev, {{a, random_values(numel(a), 4, 0.5, 2)}, {b, random_values(numel(b), 5, 0.5, 2)}},
          [fn](auto &t) {
            hpuTensor_t o = nullptr;
            EXPECT_HPU_OK(fn(nullptr, t[0], t[1], &o));
            return o;
          },
          [back](hpuTensor_t g, auto &t, hpuTensor_t) {
            hpuTensor_t ga = nullptr, gb = nullptr;
            EXPECT_HPU_OK(back(nullptr, g, t[0], t[1], &ga, &gb));
            return std::vector<hpuTensor_t>{ga, gb};
          });
    }
}

TEST_F(ElementwiseGrad, UnaryByFiniteDifferences) {
  for (const UnaryOp &op : kUnary) {
    SCOPED_TRACE(op.name);
    UnaryFn fn = op.fn;
    UnaryBackFn back = op.back;
    auto xv = random_values(12, 6, op.lo, op.hi);
    for (double &x : xv)
      if (std::fabs(x) < 1e-3) x = 0.5;  // keep relu away from its kink
    check_gradients(
        dev, {{{3, 4}, xv}},
        [fn](auto &t) {
          hpuTensor_t o = nullptr;
          EXPECT_HPU_OK(fn(nullptr, t[0], &o));
          return o;
        },
        [back](hpuTensor_t g, auto &t, hpuTensor_t) {
          hpuTensor_t gx = nullptr;
          EXPECT_HPU_OK(back(nullptr, g, t[0], &gx));
          return std::vector<hpuTensor_t>{gx};
        });
  }
}

TEST_F(ElementwiseGrad, MixedTypesPromoteAndGradientsKeepEachInputsType) {
  auto av = round_all(HPU_BFLOAT16, random_values(6, 7)), bv = random_values(6, 8);
  hpuTensor_t a = T(HPU_BFLOAT16, {2, 3}, av), b = T(HPU_FLOAT32, {2, 3}, bv), out = nullptr;
  ASSERT_HPU_OK(hpuAdd(nullptr, a, b, &out));
  keep(out);
  EXPECT_EQ(dtype_of(out), HPU_FLOAT32);
  hpuTensor_t ga = nullptr, gb = nullptr;
  ASSERT_HPU_OK(hpuMulBackward(nullptr, T(HPU_FLOAT32, {2, 3}, random_values(6, 9)), a, b, &ga, &gb));
  keep(ga), keep(gb);
  EXPECT_EQ(dtype_of(ga), HPU_BFLOAT16);
  EXPECT_EQ(dtype_of(gb), HPU_FLOAT32);
}

TEST_F(ElementwiseGrad, AddInplaceAccumulatesBf16IntoF32) {
  std::vector<double> acc = random_values(300, 10), g1 = round_all(HPU_BFLOAT16, random_values(300, 11));
  auto g2 = round_all(HPU_BFLOAT16, random_values(300, 12));
  hpuTensor_t dst = T(HPU_FLOAT32, {3, 100}, acc);
  ASSERT_HPU_OK(hpuAddInplace(nullptr, dst, T(HPU_BFLOAT16, {3, 100}, g1), 1.0));
  ASSERT_HPU_OK(hpuAddInplace(nullptr, dst, T(HPU_BFLOAT16, {3, 100}, g2), -0.5));
  std::vector<double> want(300);
  for (int i = 0; i < 300; ++i) want[i] = static_cast<float>(acc[i]) + g1[i] - 0.5 * g2[i];
  EXPECT_TRUE(near(read(dst), want, 1e-6));
}

TEST_F(ElementwiseGrad, BadInput) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 3}, random_values(6, 1)), b = T(HPU_FLOAT32, {4}, random_values(4, 2));
  hpuTensor_t i = T(HPU_INT32, {2, 3}, {1, 2, 3, 4, 5, 6}), l = T(HPU_INT64, {2, 3}, {1, 2, 3, 4, 5, 6});
  hpuTensor_t out = reinterpret_cast<hpuTensor_t>(0x1), g = nullptr;
  EXPECT_HPU_FAIL(hpuAdd(nullptr, a, b, &out), HPU_ERROR_INVALID_ARGUMENT, "a is f32[2, 3]", "b is f32[4]",
                  "do not broadcast");
  EXPECT_HPU_FAIL(hpuMul(nullptr, i, l, &out), HPU_ERROR_UNSUPPORTED, "mixed integer types");
  EXPECT_HPU_FAIL(hpuSub(nullptr, nullptr, a, &out), HPU_ERROR_INVALID_HANDLE, "a");
  EXPECT_HPU_FAIL(hpuDiv(nullptr, a, a, nullptr), HPU_ERROR_INVALID_ARGUMENT, "out is NULL");
  EXPECT_HPU_FAIL(hpuExp(nullptr, i, &out), HPU_ERROR_UNSUPPORTED, "x is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuRelu(nullptr, reinterpret_cast<hpuTensor_t>(0x77), &out), HPU_ERROR_INVALID_HANDLE, "x");
  EXPECT_HPU_FAIL(hpuTanhBackward(nullptr, b, a, &g), HPU_ERROR_INVALID_ARGUMENT, "grad_out is f32[4]",
                  "expected shape [2, 3]");
  EXPECT_HPU_FAIL(hpuAddBackward(nullptr, T(HPU_FLOAT32, {3}, random_values(3, 3)), a, a, &g, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "grad_out is f32[3]");
  EXPECT_HPU_FAIL(hpuAddInplace(nullptr, a, b, 1.0), HPU_ERROR_INVALID_ARGUMENT, "src is f32[4]",
                  "expected shape [2, 3]");
  EXPECT_HPU_FAIL(hpuAddInplace(nullptr, a, i, 1.0), HPU_ERROR_UNSUPPORTED, "src is i32[2, 3]");
  hpuTensor_t tr = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&tr, a, 0, 1));
  keep(tr);
  EXPECT_HPU_FAIL(hpuAddInplace(nullptr, tr, T(HPU_FLOAT32, {3, 2}, random_values(6, 4)), 1.0),
                  HPU_ERROR_INVALID_ARGUMENT, "dst is f32[3, 2]", "contiguous");
  EXPECT_EQ(out, reinterpret_cast<hpuTensor_t>(0x1));
  EXPECT_EQ(g, nullptr);
}

// Integer ops past the range wrap around as two's complement (the unsigned
// arithmetic's bits), with no undefined behaviour (run under UBSan).
TEST_F(ElementwiseGrad, IntegerOverflowWraps) {
  const auto tensor = [&](hpuDataType_t dt, const void *v, int64_t n) {
    hpuTensor_t t = nullptr;
    EXPECT_HPU_OK(hpuTensorCreateFromHost(&t, dev, dt, 1, &n, v));
    return keep(t);
  };
  const auto host = [](hpuTensor_t t, void *dst, size_t bytes) {
    ASSERT_HPU_OK(hpuTensorCopyToHost(nullptr, t, dst, bytes));
  };
  const int32_t imax = INT32_MAX, imin = INT32_MIN;
  const int32_t a[3] = {imax, imin, imax}, b[3] = {2, -1, 1};
  hpuTensor_t x = tensor(HPU_INT32, a, 3), y = tensor(HPU_INT32, b, 3), prod = nullptr, sum = nullptr;
  ASSERT_HPU_OK(hpuMul(nullptr, x, y, &prod));
  ASSERT_HPU_OK(hpuAdd(nullptr, keep(prod), y, &sum));
  keep(sum);
  int32_t p[3], s[3];
  host(prod, p, sizeof p);
  host(sum, s, sizeof s);
  for (int i = 0; i < 3; ++i) {
    const uint32_t w = static_cast<uint32_t>(a[i]) * static_cast<uint32_t>(b[i]);
    EXPECT_EQ(p[i], static_cast<int32_t>(w)) << i;
    EXPECT_EQ(s[i], static_cast<int32_t>(w + static_cast<uint32_t>(b[i]))) << i;
  }
  const int64_t lmax = INT64_MAX, l[3] = {lmax, lmax, 3};
  hpuTensor_t total = nullptr;
  ASSERT_HPU_OK(hpuSum(nullptr, tensor(HPU_INT64, l, 3), nullptr, 0, 0, &total));
  keep(total);
  int64_t t = 0;
  host(total, &t, sizeof t);
  EXPECT_EQ(static_cast<uint64_t>(t), static_cast<uint64_t>(lmax) * 2 + 3);
}
