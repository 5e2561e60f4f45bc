// Matrix products: forward against a double reference in f32, bf16 and f64,
// backward against finite differences, bad input.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

// c[b][m,n] = a[b][m,k] * b[b][k,n] (batch strides 0 reuse a matrix).
std::vector<double> ref_mm(const std::vector<double> &a, const std::vector<double> &b, int64_t batch, int64_t m,
                           int64_t k, int64_t n, bool a_shared = false, bool b_shared = false) {
  std::vector<double> c(batch * m * n, 0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l)
          s += a[(a_shared ? 0 : p * m * k) + i * k + l] * b[(b_shared ? 0 : p * k * n) + l * n + j];
        c[p * m * n + i * n + j] = s;
      }
  return c;
}

// torch.matmul's result for a (shape sa) and b (shape sb), batch dims
// broadcast; vectors count as [1, k] and [k, 1].
std::vector<double> ref_matmul(const std::vector<double> &a, Shape sa, const std::vector<double> &b, Shape sb) {
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), bo(std::max(ba.size(), bb.size()), 1);
  ba.insert(ba.begin(), bo.size() - ba.size(), 1);
  bb.insert(bb.begin(), bo.size() - bb.size(), 1);
  for (size_t i = 0; i < bo.size(); ++i) bo[i] = std::max(ba[i], bb[i]);
  std::vector<double> c;
  for (int64_t flat = 0; flat < numel(bo); ++flat) {
    int64_t ia = 0, ib = 0, rest = flat, step = numel(bo);
    for (size_t d = 0; d < bo.size(); ++d) {
      step /= bo[d];
      int64_t idx = rest / step;
      rest %= step;
      ia = ia * ba[d] + (ba[d] == 1 ? 0 : idx);
      ib = ib * bb[d] + (bb[d] == 1 ? 0 : idx);
    }
    std::vector<double> one = ref_mm(std::vector<double>(a.begin() + ia * m * k, a.begin() + (ia + 1) * m * k),
                                     std::vector<double>(b.begin() + ib * k * n, b.begin() + (ib + 1) * k * n), 1, m,
                                     k, n);
    c.insert(c.end(), one.begin(), one.end());
  }
  return c;
}

class Matmul : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {};

}  // namespace

TEST_P(Matmul, MmMatchesReference) {
  hpuDataType_t dt = GetParam();
  auto av = round_all(dt, random_values(5 * 7, 1)), bv = round_all(dt, random_values(7 * 3, 2));
  hpuTensor_t out = nullptr;
  ASSERT_HPU_OK(hpuMm(nullptr, T(dt, {5, 7}, av), T(dt, {7, 3}, bv), &out));
  keep(out);
  EXPECT_EQ(dtype_of(out), dt);
  EXPECT_EQ(shape_of(out), (Shape{5, 3}));
  EXPECT_TRUE(near(read(out), ref_mm(av, bv, 1, 5, 7, 3), tolerance(dt)));
}

TEST_P(Matmul, BmmMatchesReference) {
  hpuDataType_t dt = GetParam();
  auto av = round_all(dt, random_values(2 * 4 * 6, 3)), bv = round_all(dt, random_values(2 * 6 * 5, 4));
  hpuTensor_t out = nullptr;
  ASSERT_HPU_OK(hpuBmm(nullptr, T(dt, {2, 4, 6}, av), T(dt, {2, 6, 5}, bv), &out));
  keep(out);
  EXPECT_EQ(shape_of(out), (Shape{2, 4, 5}));
  EXPECT_TRUE(near(read(out), ref_mm(av, bv, 2, 4, 6, 5), tolerance(dt)));
}

TEST_P(Matmul, AddmmMatchesReference) {
  hpuDataType_t dt = GetParam();
  auto av = round_all(dt, random_values(3 * 4, 5)), bv = round_all(dt, random_values(4 * 2, 6));
  auto cv = round_all(dt, random_values(2, 7));
  hpuTensor_t out = nullptr;
  ASSERT_HPU_OK(hpuAddmm(nullptr, T(dt, {2}, cv), T(dt, {3, 4}, av), T(dt, {4, 2}, bv), 0.5, 2.0, &out));
  keep(out);
  std::vector<double> want = ref_mm(av, bv, 1, 3, 4, 2);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) want[i * 2 + j] = 0.5 * cv[j] + 2.0 * want[i * 2 + j];
  EXPECT_TRUE(near(read(out), want, tolerance(dt)));
}

TEST_P(Matmul, LinearMatchesReference) {
  hpuDataType_t dt = GetParam();
  auto xv = round_all(dt, random_values(2 * 3 * 8, 8)), wv = round_all(dt, random_values(5 * 8, 9));
  auto bv = round_all(dt, random_values(5, 10));
  hpuTensor_t y = nullptr, y0 = nullptr;
  ASSERT_HPU_OK(hpuLinear(nullptr, T(dt, {2, 3, 8}, xv), T(dt, {5, 8}, wv), T(dt, {5}, bv), &y));
  keep(y);
  ASSERT_HPU_OK(hpuLinear(nullptr, T(dt, {2, 3, 8}, xv), T(dt, {5, 8}, wv), nullptr, &y0));
  keep(y0);
  EXPECT_EQ(shape_of(y), (Shape{2, 3, 5}));
  std::vector<double> want(6 * 5), want0(6 * 5);
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 5; ++o) {
      double s = 0;
      for (int i = 0; i < 8; ++i) s += xv[r * 8 + i] * wv[o * 8 + i];
      want0[r * 5 + o] = s;
      want[r * 5 + o] = s + bv[o];
    }
  EXPECT_TRUE(near(read(y), want, tolerance(dt)));
  EXPECT_TRUE(near(read(y0), want0, tolerance(dt)));
}

TEST_P(Matmul, MatmulCases) {
  hpuDataType_t dt = GetParam();
  struct Case {
    Shape a, b, out;
  };
  for (const Case &c :
       {Case{{3, 4}, {4, 2}, {3, 2}}, Case{{4}, {4, 2}, {2}}, Case{{3, 4}, {4}, {3}}, Case{{4}, {4}, {}},
        Case{{2, 3, 4}, {4, 5}, {2, 3, 5}}, Case{{3, 4}, {2, 4, 5}, {2, 3, 5}}, Case{{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
        Case{{4}, {2, 4, 5}, {2, 5}}, Case{{2, 3, 4}, {4}, {2, 3}},
        // batch dims that broadcast
        Case{{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}}, Case{{1, 3, 4}, {2, 4, 5}, {2, 3, 5}},
        Case{{2, 3, 4}, {1, 4, 5}, {2, 3, 5}}, Case{{3, 1, 2, 4}, {1, 2, 4, 3}, {3, 2, 2, 3}},
        Case{{2, 2, 3, 4}, {2, 4, 5}, {2, 2, 3, 5}}}) {
    auto av = round_all(dt, random_values(numel(c.a), 11)), bv = round_all(dt, random_values(numel(c.b), 12));
    hpuTensor_t out = nullptr;
    ASSERT_HPU_OK(hpuMatmul(nullptr, T(dt, c.a, av), T(dt, c.b, bv), &out));
    keep(out);
    EXPECT_EQ(shape_of(out), c.out);
    EXPECT_TRUE(near(read(out), ref_matmul(av, c.a, bv, c.b), tolerance(dt)))
        << "a " << ::testing::PrintToString(c.a) << " b " << ::testing::PrintToString(c.b);
  }
}

TEST_P(Matmul, MmReadsTransposedAndSlicedViews) {
  // Views go to the GEMM as they are stored (a transposed or strided operand),
  // never through a copy, and give the same result as dense operands.
  hpuDataType_t dt = GetParam();
  const int64_t m = 5, k = 7, n = 6;
  auto at = round_all(dt, random_values(k * m, 21)), bw = round_all(dt, random_values(k * (n + 3), 22));
  hpuTensor_t a = nullptr, b = nullptr, out = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&a, T(dt, {k, m}, at), 0, 1));  // a = (k x m)^T
  keep(a);
  ASSERT_HPU_OK(hpuTensorSlice(&b, T(dt, {k, n + 3}, bw), 1, 2, 2 + n, 1));  // columns 2..2+n of b
  keep(b);
  std::vector<double> av(m * k), bv(k * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l) av[i * k + l] = at[l * m + i];
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j) bv[l * n + j] = bw[l * (n + 3) + 2 + j];
  hpuMemStats_t before = HPU_MEM_STATS_INIT, after = HPU_MEM_STATS_INIT;
  ASSERT_HPU_OK(hpuMemStats(dev, &before));
  ASSERT_HPU_OK(hpuMm(nullptr, a, b, &out));
  keep(out);
  ASSERT_HPU_OK(hpuMemStats(dev, &after));
  EXPECT_EQ(after.num_allocs - before.num_allocs, 1u);  // the result only: no copies of a or b
  EXPECT_TRUE(near(read(out), ref_mm(av, bv, 1, m, k, n), tolerance(dt)));
  // Backward: ga = g b^T reads b's slice transposed, gb = a^T g reads a's transpose as stored.
  auto gv = round_all(dt, random_values(m * n, 23));
  hpuTensor_t ga = nullptr, gb = nullptr, bt = nullptr;
  ASSERT_HPU_OK(hpuMmBackward(nullptr, T(dt, {m, n}, gv), a, b, &ga, &gb));
  keep(ga), keep(gb);
  std::vector<double> bvt(n * k), avt(k * m);
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j) bvt[j * k + l] = bv[l * n + j];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l) avt[l * m + i] = av[i * k + l];
  EXPECT_TRUE(near(read(ga), ref_mm(gv, bvt, 1, m, n, k), tolerance(dt)));
  EXPECT_TRUE(near(read(gb), ref_mm(avt, gv, 1, k, m, n), tolerance(dt)));
  // A linear layer whose weight is a transposed view: y = x (w^T)^T = x wt.
  ASSERT_HPU_OK(hpuTensorTranspose(&bt, b, 0, 1));  // [n, k] view over b's slice
  keep(bt);
  hpuTensor_t y = nullptr;
  ASSERT_HPU_OK(hpuLinear(nullptr, T(dt, {m, k}, av), bt, nullptr, &y));
  keep(y);
  EXPECT_TRUE(near(read(y), ref_mm(av, bv, 1, m, k, n), tolerance(dt)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Matmul, ::testing::Values(HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64));

class MatmulGrad : public OpsTest {};

TEST_F(MatmulGrad, MmBmmByFiniteDifferences) {
  check_gradients(
      dev, {{{3, 4}, random_values(12, 1)}, {{4, 2}, random_values(8, 2)}},
      [](auto &t) {
        hpuTensor_t o = nullptr;
        EXPECT_HPU_OK(hpuMm(nullptr, t[0], t[1], &o));
        return o;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t ga = nullptr, gb = nullptr;
        EXPECT_HPU_OK(hpuMmBackward(nullptr, g, t[0], t[1], &ga, &gb));
        return std::vector<hpuTensor_t>{ga, gb};
      });
  check_gradients(
      dev, {{{2, 3, 4}, random_values(24, 3)}, {{2, 4, 2}, random_values(16, 4)}},
      [](auto &t) {
        hpuTensor_t o = nullptr;
        EXPECT_HPU_OK(hpuBmm(nullptr, t[0], t[1], &o));
        return o;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t ga = nullptr, gb = nullptr;
        EXPECT_HPU_OK(hpuBmmBackward(nullptr, g, t[0], t[1], &ga, &gb));
        return std::vector<hpuTensor_t>{ga, gb};
      });
}

TEST_F(MatmulGrad, AddmmByFiniteDifferences) {
  for (Shape bias : {Shape{2}, Shape{3, 2}, Shape{3, 1}}) {
    check_gradients(
        dev, {{bias, random_values(numel(bias), 5)}, {{3, 4}, random_values(12, 6)}, {{4, 2}, random_values(8, 7)}},
        [](auto &t) {
          hpuTensor_t o = nullptr;
          EXPECT_HPU_OK(hpuAddmm(nullptr, t[0], t[1], t[2], 0.7, 1.3, &o));
          return o;
        },
        [](hpuTensor_t g, auto &t, hpuTensor_t) {
          hpuTensor_t gc = nullptr, ga = nullptr, gb = nullptr;
          EXPECT_HPU_OK(hpuAddmmBackward(nullptr, g, t[0], t[1], t[2], 0.7, 1.3, &gc, &ga, &gb));
          return std::vector<hpuTensor_t>{gc, ga, gb};
        });
  }
}

TEST_F(MatmulGrad, MatmulByFiniteDifferences) {
  for (auto [a, b] : {std::pair<Shape, Shape>{{2, 3, 4}, {4, 2}}, {{3, 4}, {2, 4, 2}}, {{2, 3, 4}, {2, 4, 2}},
                      {{4}, {4, 2}}, {{3, 4}, {4}}, {{4}, {4}}, {{4}, {2, 4, 3}}, {{2, 1, 3, 4}, {3, 4, 2}},
                      {{1, 3, 4}, {2, 4, 2}}, {{2, 3, 4}, {1, 4, 2}}, {{2, 2, 3, 4}, {2, 4, 2}}}) {
    check_gradients(
        dev, {{a, random_values(numel(a), 8)}, {b, random_values(numel(b), 9)}},
        [](auto &t) {
          hpuTensor_t o = nullptr;
          EXPECT_HPU_OK(hpuMatmul(nullptr, t[0], t[1], &o));
          return o;
        },
        [](hpuTensor_t g, auto &t, hpuTensor_t) {
          hpuTensor_t ga = nullptr, gb = nullptr;
          EXPECT_HPU_OK(hpuMatmulBackward(nullptr, g, t[0], t[1], &ga, &gb));
          return std::vector<hpuTensor_t>{ga, gb};
        });
  }
}

TEST_F(MatmulGrad, LinearByFiniteDifferences) {
  check_gradients(
      dev, {{{2, 3, 4}, random_values(24, 10)}, {{5, 4}, random_values(20, 11)}, {{5}, random_values(5, 12)}},
      [](auto &t) {
        hpuTensor_t o = nullptr;
        EXPECT_HPU_OK(hpuLinear(nullptr, t[0], t[1], t[2], &o));
        return o;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t gx = nullptr, gw = nullptr, gb = nullptr;
        EXPECT_HPU_OK(hpuLinearBackward(nullptr, g, t[0], t[1], &gx, &gw, &gb));
        return std::vector<hpuTensor_t>{gx, gw, gb};
      });
}

TEST_F(MatmulGrad, Bf16BackwardAgreesWithF64) {
  // The backward runs in bf16 (the gradient's type) and writes f32 gradients
  // for f32 inputs without an extra rounding.
  auto xv = round_all(HPU_BFLOAT16, random_values(16 * 8, 13)), wv = round_all(HPU_BFLOAT16, random_values(4 * 8, 14));
  auto gv = round_all(HPU_BFLOAT16, random_values(16 * 4, 15));
  hpuTensor_t gx = nullptr, gw = nullptr, gb = nullptr;
  ASSERT_HPU_OK(hpuLinearBackward(nullptr, T(HPU_BFLOAT16, {16, 4}, gv), T(HPU_FLOAT32, {16, 8}, xv),
                                  T(HPU_BFLOAT16, {4, 8}, wv), &gx, &gw, &gb));
  keep(gx), keep(gw), keep(gb);
  EXPECT_EQ(dtype_of(gx), HPU_FLOAT32);  // x's type
  EXPECT_EQ(dtype_of(gw), HPU_BFLOAT16);
  EXPECT_EQ(dtype_of(gb), HPU_BFLOAT16);
  std::vector<double> wx(16 * 8, 0), ww(4 * 8, 0), wb(4, 0);
  for (int r = 0; r < 16; ++r)
    for (int o = 0; o < 4; ++o) {
      wb[o] += gv[r * 4 + o];
      for (int i = 0; i < 8; ++i) {
        wx[r * 8 + i] += gv[r * 4 + o] * wv[o * 8 + i];
        ww[o * 8 + i] += gv[r * 4 + o] * xv[r * 8 + i];
      }
    }
  EXPECT_TRUE(near(read(gx), wx, 1e-5));  // bf16 inputs, f32 result: no bf16 rounding
  EXPECT_TRUE(near(read(gw), ww, tolerance(HPU_BFLOAT16)));
  EXPECT_TRUE(near(read(gb), wb, tolerance(HPU_BFLOAT16)));
}

TEST_F(MatmulGrad, BadInput) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 3}, random_values(6, 1)), b = T(HPU_FLOAT32, {4, 5}, random_values(20, 2));
  hpuTensor_t c = T(HPU_BFLOAT16, {3, 5}, random_values(15, 3)), v = T(HPU_FLOAT32, {3}, random_values(3, 4));
  hpuTensor_t i = T(HPU_INT32, {2, 3}, {0, 1, 2, 3, 4, 5});
  hpuTensor_t out = reinterpret_cast<hpuTensor_t>(0x1);
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, b, &out), HPU_ERROR_INVALID_ARGUMENT, "a is f32[2, 3]", "b is f32[4, 5]");
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, c, &out), HPU_ERROR_INVALID_ARGUMENT, "types differ", "bf16[3, 5]");
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, v, &out), HPU_ERROR_INVALID_ARGUMENT, "b is f32[3]", "expected 2 dims");
  EXPECT_HPU_FAIL(hpuMm(nullptr, i, b, &out), HPU_ERROR_UNSUPPORTED, "a is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuMm(nullptr, nullptr, b, &out), HPU_ERROR_INVALID_HANDLE, "a");
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, reinterpret_cast<hpuTensor_t>(0x1234), &out), HPU_ERROR_INVALID_HANDLE, "b");
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, b, nullptr), HPU_ERROR_INVALID_ARGUMENT, "out is NULL");
  EXPECT_HPU_FAIL(hpuBmm(nullptr, a, b, &out), HPU_ERROR_INVALID_ARGUMENT, "expected 3 dims");
  EXPECT_HPU_FAIL(hpuAddmm(nullptr, T(HPU_FLOAT32, {4}, random_values(4, 5)), a,
                           T(HPU_FLOAT32, {3, 2}, random_values(6, 6)), 1, 1, &out),
                  HPU_ERROR_INVALID_ARGUMENT, "bias is f32[4]", "does not broadcast");
  EXPECT_HPU_FAIL(hpuMatmul(nullptr, T(HPU_FLOAT32, {2, 2, 3}, random_values(12, 7)),
                            T(HPU_FLOAT32, {3, 3, 2}, random_values(18, 8)), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "batch dims [2] and [3] do not broadcast");
  EXPECT_HPU_FAIL(hpuLinear(nullptr, a, b, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "x is f32[2, 3]",
                  "w is f32[4, 5]");
  EXPECT_HPU_FAIL(hpuLinear(nullptr, a, T(HPU_FLOAT32, {2, 3}, random_values(6, 9)), v, &out),
                  HPU_ERROR_INVALID_ARGUMENT, "bias is f32[3]", "expected shape [2]");
  hpuTensor_t ga = nullptr;
  EXPECT_HPU_FAIL(hpuLinearBackward(nullptr, T(HPU_FLOAT32, {2, 5}, random_values(10, 12)), a,
                                    T(HPU_FLOAT32, {4, 3}, random_values(12, 13)), &ga, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "grad_y is f32[2, 5]", "expected shape [2, 4]");
  EXPECT_HPU_FAIL(hpuMmBackward(nullptr, T(HPU_FLOAT32, {2, 4}, random_values(8, 10)), a,
                                T(HPU_FLOAT32, {3, 5}, random_values(15, 11)), &ga, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "grad_out is f32[2, 4]", "expected shape [2, 5]");
  EXPECT_HPU_FAIL(hpuLinearBackward(nullptr, nullptr, a, b, &ga, nullptr, nullptr), HPU_ERROR_INVALID_HANDLE,
                  "grad_y");
  EXPECT_EQ(out, reinterpret_cast<hpuTensor_t>(0x1));  // untouched on failure
  EXPECT_EQ(ga, nullptr);
}
