// Handle retain, in-place scale, in-place accumulate with src == dst, the
// squared norm over many tensors, argmax: against double references.
#include <cmath>
#include <cstring>
#include <thread>

#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class OpsExtra : public OpsTest {};

TEST_F(OpsExtra, RetainLetsEachOwnerRelease) {
  hpuTensor_t t = make(dev, HPU_FLOAT32, {3}, {1, 2, 3});
  ASSERT_HPU_OK(hpuTensorRetain(t));
  ASSERT_HPU_OK(hpuTensorRetain(t));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_TRUE(near(read(t), {1, 2, 3}, 0));  // one reference left: still live
  ASSERT_HPU_OK(hpuTensorRelease(t));
  int64_t n = 0;
  EXPECT_HPU_FAIL(hpuTensorGetNumel(t, &n), HPU_ERROR_INVALID_HANDLE, "tensor");
  EXPECT_HPU_FAIL(hpuTensorRelease(t), HPU_ERROR_INVALID_HANDLE, "tensor");
  EXPECT_HPU_FAIL(hpuTensorRetain(t), HPU_ERROR_INVALID_HANDLE, "tensor");
}

TEST_F(OpsExtra, RetainAndReleaseFromManyThreads) {
  hpuTensor_t t = make(dev, HPU_FLOAT32, {2}, {5, 6});
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([t] {
      for (int i = 0; i < 2000; ++i) {
        EXPECT_HPU_OK(hpuTensorRetain(t));
        EXPECT_HPU_OK(hpuTensorRelease(t));
      }
    });
  for (auto &th : threads) th.join();
  EXPECT_TRUE(near(read(t), {5, 6}, 0));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_FAIL(hpuTensorRelease(t), HPU_ERROR_INVALID_HANDLE, "tensor");
}

TEST_F(OpsExtra, RetainedViewKeepsBaseAlive) {
  hpuTensor_t base = make(dev, HPU_FLOAT32, {2, 2}, {1, 2, 3, 4}), v = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&v, base, 0, 1));
  ASSERT_HPU_OK(hpuTensorRetain(v));
  ASSERT_HPU_OK(hpuTensorRelease(base));
  ASSERT_HPU_OK(hpuTensorRelease(v));
  EXPECT_TRUE(near(read(v), {1, 3, 2, 4}, 0));
  ASSERT_HPU_OK(hpuTensorRelease(v));
}

TEST_F(OpsExtra, ScaleInplaceEachFloatingType) {
  for (hpuDataType_t dt : {HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64}) {
    std::vector<double> v = round_all(dt, random_values(3000, 1, -4, 4));
    hpuTensor_t t = T(dt, {3, 1000}, v);
    ASSERT_HPU_OK(hpuScaleInplace(nullptr, t, -0.3));
    std::vector<double> want(v.size());
    for (size_t i = 0; i < v.size(); ++i) want[i] = -0.3 * v[i];
    EXPECT_TRUE(near(read(t), want, tolerance(dt))) << dtype_of(t);
  }
  hpuTensor_t scalar = T(HPU_FLOAT32, {}, {2});
  ASSERT_HPU_OK(hpuScaleInplace(nullptr, scalar, 4));
  EXPECT_TRUE(near(read(scalar), {8}, 0));
  ASSERT_HPU_OK(hpuScaleInplace(nullptr, T(HPU_FLOAT32, {0, 3}, {}), 4));
}

TEST_F(OpsExtra, AddInplaceSrcMayBeDstOrOverlapIt) {
  std::vector<double> v = random_values(10000, 2);
  hpuTensor_t t = T(HPU_FLOAT32, {10000}, v);
  ASSERT_HPU_OK(hpuAddInplace(nullptr, t, t, 0.5));
  std::vector<double> want(v.size());
  for (size_t i = 0; i < v.size(); ++i) want[i] = 1.5 * static_cast<float>(v[i]);
  EXPECT_TRUE(near(read(t), want, 1e-6));

  // Two windows of one buffer, 1500 elements apart: dst reads src as it was.
  hpuTensor_t base = T(HPU_FLOAT32, {10000}, v), src = nullptr, dst = nullptr;
  int64_t n = 8000;
  ASSERT_HPU_OK(hpuTensorWindow(&src, base, 0, 1, &n));
  keep(src);
  ASSERT_HPU_OK(hpuTensorWindow(&dst, base, 1500, 1, &n));
  keep(dst);
  ASSERT_HPU_OK(hpuAddInplace(nullptr, dst, src, 2.0));
  want.assign(v.begin(), v.end());
  for (auto &x : want) x = static_cast<float>(x);
  for (int64_t i = 0; i < n; ++i) want[1500 + i] = static_cast<float>(v[1500 + i]) + 2.0 * static_cast<float>(v[i]);
  EXPECT_TRUE(near(read(base), want, 1e-6));
}

double squares(const std::vector<double> &v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}

TEST_F(OpsExtra, SquaredNormOverManyTensors) {
  std::vector<double> a = random_values(200000, 3), b = round_all(HPU_BFLOAT16, random_values(300, 4, -3, 3)),
                      c = random_values(12, 5), d = {-7};
  hpuTensor_t tc = T(HPU_FLOAT64, {3, 4}, c), tct = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&tct, tc, 0, 1));  // strided
  keep(tct);
  hpuTensor_t ts[] = {T(HPU_FLOAT32, {400, 500}, a), T(HPU_BFLOAT16, {300}, b), tct, T(HPU_FLOAT32, {}, d),
                      T(HPU_FLOAT32, {0}, {})};
  hpuTensor_t out = nullptr, again = nullptr;
  ASSERT_HPU_OK(hpuSquaredNorm(nullptr, ts, 5, &out));
  keep(out);
  EXPECT_EQ(dtype_of(out), HPU_FLOAT32);
  EXPECT_TRUE(shape_of(out).empty());
  double want = squares(round_all(HPU_FLOAT32, a)) + squares(b) + squares(c) + 49;
  EXPECT_TRUE(near(read(out), {want}, 1e-6));
  ASSERT_HPU_OK(hpuSquaredNorm(nullptr, ts, 5, &again));
  keep(again);
  float x = 0, y = 1;
  ASSERT_HPU_OK(hpuTensorCopyToHost(nullptr, out, &x, 4));
  ASSERT_HPU_OK(hpuTensorCopyToHost(nullptr, again, &y, 4));
  EXPECT_EQ(std::memcmp(&x, &y, 4), 0);
}

// The reference: first largest along dim, NaN largest.
std::vector<double> argmax_ref(const std::vector<double> &v, const Shape &shape, int dim) {
  int64_t outer = 1, n = shape[dim], inner = 1;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) (i < dim ? outer : i > dim ? inner : n) *= i == dim ? 1 : shape[i];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        double cur = v[(o * n + best) * inner + i], w = v[(o * n + j) * inner + i];
        if (!std::isnan(cur) && (std::isnan(w) || w > cur)) best = j;
      }
      out.push_back(static_cast<double>(best));
    }
  return out;
}

TEST_F(OpsExtra, ArgmaxAlongEachDim) {
  Shape shape = {4, 5, 6};
  for (hpuDataType_t dt : {HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64, HPU_INT32}) {
    std::vector<double> v = random_values(120, 6, -50, 50);
    for (auto &x : v) x = dt == HPU_INT32 ? std::round(x / 10) : round_to(dt, x);  // ints: many ties
    hpuTensor_t x = T(dt, shape, v);
    for (int dim = -1; dim < 3; ++dim) {
      int d = dim < 0 ? 2 : dim;
      for (int keepdim = 0; keepdim < 2; ++keepdim) {
        hpuTensor_t idx = nullptr;
        ASSERT_HPU_OK(hpuArgmax(nullptr, x, dim, keepdim, &idx));
        keep(idx);
        Shape want_shape = shape;
        if (keepdim)
          want_shape[d] = 1;
        else
          want_shape.erase(want_shape.begin() + d);
        EXPECT_EQ(dtype_of(idx), HPU_INT64);
        EXPECT_EQ(shape_of(idx), want_shape);
        EXPECT_TRUE(near(read(idx), argmax_ref(v, shape, d), 0)) << "dt " << dt << " dim " << dim;
      }
    }
  }
}

TEST_F(OpsExtra, ArgmaxTiesAndNaN) {
  double nan = std::nan("");
  std::vector<double> v = {1, 3, 3, 2, nan, 5, nan, 0, -1, -1, -1, -1};
  hpuTensor_t idx = nullptr;
  ASSERT_HPU_OK(hpuArgmax(nullptr, T(HPU_FLOAT32, {3, 4}, v), 1, 0, &idx));
  keep(idx);
  EXPECT_TRUE(near(read(idx), {1, 0, 0}, 0));
  hpuTensor_t s = nullptr;
  ASSERT_HPU_OK(hpuArgmax(nullptr, T(HPU_FLOAT32, {}, {4}), 0, 0, &s));
  keep(s);
  EXPECT_TRUE(near(read(s), {0}, 0));
}

TEST_F(OpsExtra, BadInput) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 3}, random_values(6, 1)), i = T(HPU_INT32, {2, 3}, {1, 2, 3, 4, 5, 6});
  hpuTensor_t out = reinterpret_cast<hpuTensor_t>(0x1);
  hpuTensor_t tr = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&tr, a, 0, 1));
  keep(tr);
  EXPECT_HPU_FAIL(hpuTensorRetain(nullptr), HPU_ERROR_INVALID_HANDLE, "tensor is NULL");
  EXPECT_HPU_FAIL(hpuTensorRetain(reinterpret_cast<hpuTensor_t>(0x77)), HPU_ERROR_INVALID_HANDLE, "tensor 0x77");
  EXPECT_HPU_FAIL(hpuScaleInplace(nullptr, i, 2), HPU_ERROR_UNSUPPORTED, "x is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuScaleInplace(nullptr, tr, 2), HPU_ERROR_INVALID_ARGUMENT, "x is f32[3, 2]", "contiguous");
  EXPECT_HPU_FAIL(hpuScaleInplace(nullptr, nullptr, 2), HPU_ERROR_INVALID_HANDLE, "x is NULL");
  hpuTensor_t list[] = {a, i};
  EXPECT_HPU_FAIL(hpuSquaredNorm(nullptr, list, 2, &out), HPU_ERROR_UNSUPPORTED, "tensors[1] is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuSquaredNorm(nullptr, list, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "count is 0");
  EXPECT_HPU_FAIL(hpuSquaredNorm(nullptr, nullptr, 2, &out), HPU_ERROR_INVALID_ARGUMENT, "tensors is NULL");
  EXPECT_HPU_FAIL(hpuSquaredNorm(nullptr, list, 2, nullptr), HPU_ERROR_INVALID_ARGUMENT, "out is NULL");
  hpuTensor_t holes[] = {a, nullptr};
  EXPECT_HPU_FAIL(hpuSquaredNorm(nullptr, holes, 2, &out), HPU_ERROR_INVALID_HANDLE, "tensors[1] is NULL");
  EXPECT_HPU_FAIL(hpuArgmax(nullptr, a, 2, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "dim 2 is out of range");
  EXPECT_HPU_FAIL(hpuArgmax(nullptr, a, -3, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "dim -3");
  EXPECT_HPU_FAIL(hpuArgmax(nullptr, T(HPU_FLOAT32, {3, 0}, {}), 1, 0, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "x is f32[3, 0]", "empty");
  hpuTensor_t flags = nullptr;
  int64_t two = 2;
  ASSERT_HPU_OK(hpuTensorCreate(&flags, dev, HPU_BOOL, 1, &two));
  keep(flags);
  EXPECT_HPU_FAIL(hpuArgmax(nullptr, flags, 0, 0, &out), HPU_ERROR_UNSUPPORTED, "x is bool[2]");
  EXPECT_HPU_FAIL(hpuArgmax(nullptr, a, 0, 0, nullptr), HPU_ERROR_INVALID_ARGUMENT, "indices is NULL");
  EXPECT_EQ(out, reinterpret_cast<hpuTensor_t>(0x1));
}

}  // namespace
