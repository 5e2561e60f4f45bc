// Test support for the ops: host tensors of doubles, conversion to and from
// device tensors of any floating type, tolerances per type, and a
// finite-difference check of a backward against its forward (in f64).
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "expect.hpp"

namespace ops_test {

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Independent of libhpu's own conversions: round to nearest even.
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A double as the nearest value of dt (what a tensor of dt holds).
inline double round_to(hpuDataType_t dt, double v) {
  switch (dt) {
    case HPU_BFLOAT16: return from_bf16(to_bf16(static_cast<float>(v)));
    case HPU_FLOAT32: return static_cast<float>(v);
    default: return v;
  }
}

inline std::vector<double> round_all(hpuDataType_t dt, std::vector<double> v) {
  for (double &x : v) x = round_to(dt, x);
  return v;
}

inline std::vector<unsigned char> encode(hpuDataType_t dt, const std::vector<double> &v) {
  std::vector<unsigned char> out;
  for (double x : v) {
    unsigned char b[8];
    size_t n = 0;
    switch (dt) {
      case HPU_BFLOAT16: { uint16_t h = to_bf16(static_cast<float>(x)); std::memcpy(b, &h, n = 2); break; }
      case HPU_FLOAT32: { float f = static_cast<float>(x); std::memcpy(b, &f, n = 4); break; }
      case HPU_FLOAT64: std::memcpy(b, &x, n = 8); break;
      case HPU_INT32: { int32_t i = static_cast<int32_t>(x); std::memcpy(b, &i, n = 4); break; }
      case HPU_INT64: { int64_t i = static_cast<int64_t>(x); std::memcpy(b, &i, n = 8); break; }
      case HPU_UINT8: { b[0] = static_cast<unsigned char>(x); n = 1; break; }
      default: ADD_FAILURE() << "encode: dtype " << dt; break;
    }
    out.insert(out.end(), b, b + n);
  }
  return out;
}

inline size_t elem_size(hpuDataType_t dt) {
  switch (dt) {
    case HPU_BFLOAT16: case HPU_FLOAT16: return 2;
    case HPU_FLOAT32: case HPU_INT32: case HPU_UINT32: return 4;
    case HPU_FLOAT64: case HPU_INT64: case HPU_UINT64: return 8;
    default: return 1;
  }
}

// A device tensor of dt holding v (rounded to dt).
inline hpuTensor_t make(hpuDevice_t dev, hpuDataType_t dt, const Shape &shape, const std::vector<double> &v) {
  EXPECT_EQ(static_cast<int64_t>(v.size()), numel(shape));
  hpuTensor_t t = nullptr;
  std::vector<unsigned char> bytes = encode(dt, v);
  EXPECT_HPU_OK(hpuTensorCreateFromHost(&t, dev, dt, static_cast<int>(shape.size()), shape.data(), bytes.data()));
  return t;
}

inline hpuDataType_t dtype_of(hpuTensor_t t) {
  hpuDataType_t dt = static_cast<hpuDataType_t>(-1);
  EXPECT_HPU_OK(hpuTensorGetDtype(t, &dt));
  return dt;
}

inline Shape shape_of(hpuTensor_t t) {
  int nd = 0;
  int64_t s[HPU_TENSOR_MAX_DIMS];
  EXPECT_HPU_OK(hpuTensorGetShape(t, &nd, s));
  return Shape(s, s + nd);
}

// The tensor's values as doubles (waits for queued work on its stream).
inline std::vector<double> read(hpuTensor_t t) {
  hpuDataType_t dt = dtype_of(t);
  int64_t n = numel(shape_of(t));
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * elem_size(dt));
  EXPECT_HPU_OK(hpuTensorCopyToHost(nullptr, t, bytes.data(), bytes.size()));
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char *p = bytes.data() + i * elem_size(dt);
    switch (dt) {
      case HPU_BFLOAT16: { uint16_t h; std::memcpy(&h, p, 2); v[i] = from_bf16(h); break; }
      case HPU_FLOAT32: { float f; std::memcpy(&f, p, 4); v[i] = f; break; }
      case HPU_FLOAT64: std::memcpy(&v[i], p, 8); break;
      case HPU_INT32: { int32_t x; std::memcpy(&x, p, 4); v[i] = x; break; }
      case HPU_INT64: { int64_t x; std::memcpy(&x, p, 8); v[i] = static_cast<double>(x); break; }
      case HPU_UINT8: case HPU_BOOL: v[i] = *p; break;
      default: ADD_FAILURE() << "read: dtype " << dt;
    }
  }
  return v;
}

// Relative tolerance of results of dt (output rounding plus f32 accumulation).
inline double tolerance(hpuDataType_t dt) {
  switch (dt) {
    case HPU_BFLOAT16: return 1.6e-2;
    case HPU_FLOAT16: return 2e-3;
    case HPU_FLOAT32: return 2e-5;
    default: return 1e-11;
  }
}

// |got - want| <= tol * (1 + |want|) for each element.
inline ::testing::AssertionResult near(const std::vector<double> &got, const std::vector<double> &want, double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && !(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i]
                                           << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<double> random_values(int64_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (double &x : v) x = u(rng);
  return v;
}

// An input of a finite-difference check: f64 values, and whether the
// function is differentiated with respect to it.
struct Input {
  Shape shape;
  std::vector<double> values;
  hpuDataType_t dtype = HPU_FLOAT64;  // integers (targets, indices) are not differentiated
  bool differentiable = true;
};

using Forward = std::function<hpuTensor_t(const std::vector<hpuTensor_t> &)>;
// Returns one gradient per input (nullptr where not differentiable).
using Backward =
    std::function<std::vector<hpuTensor_t>(hpuTensor_t grad_out, const std::vector<hpuTensor_t> &, hpuTensor_t out)>;

// Checks backward against central differences of L = sum(forward(x) * R) for
// random R, in f64.
inline void check_gradients(hpuDevice_t dev, const std::vector<Input> &inputs, const Forward &forward,
                            const Backward &backward, double h = 1e-6, double tol = 1e-6) {
  auto build = [&](const std::vector<Input> &in) {
    std::vector<hpuTensor_t> t;
    for (const Input &i : in) t.push_back(make(dev, i.dtype, i.shape, i.values));
    return t;
  };
  auto release = [](std::vector<hpuTensor_t> &t) {
    for (hpuTensor_t x : t) hpuTensorRelease(x);
  };
  std::vector<hpuTensor_t> t = build(inputs);
  hpuTensor_t out = forward(t);
  ASSERT_NE(out, nullptr) << hpuGetLastErrorMessage();
  Shape out_shape = shape_of(out);
  std::vector<double> r = random_values(numel(out_shape), 77);
  hpuTensor_t g = make(dev, HPU_FLOAT64, out_shape, r);
  std::vector<hpuTensor_t> grads = backward(g, t, out);
  ASSERT_EQ(grads.size(), inputs.size());
  auto loss = [&](const std::vector<Input> &in) {
    std::vector<hpuTensor_t> x = build(in);
    hpuTensor_t y = forward(x);
    std::vector<double> v = read(y);
    hpuTensorRelease(y);
    release(x);
    double l = 0;
    for (size_t i = 0; i < v.size(); ++i) l += v[i] * r[i];
    return l;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].differentiable) {
      EXPECT_EQ(grads[k], nullptr);
      continue;
    }
    ASSERT_NE(grads[k], nullptr) << "input " << k;
    EXPECT_EQ(shape_of(grads[k]), inputs[k].shape) << "input " << k;
    std::vector<double> got = read(grads[k]), want(inputs[k].values.size());
    for (size_t i = 0; i < want.size(); ++i) {
      std::vector<Input> plus = inputs, minus = inputs;
      plus[k].values[i] += h;
      minus[k].values[i] -= h;
      want[i] = (loss(plus) - loss(minus)) / (2 * h);
    }
    EXPECT_TRUE(near(got, want, tol)) << "gradient of input " << k;
    hpuTensorRelease(grads[k]);
  }
  hpuTensorRelease(g);
  hpuTensorRelease(out);
  release(t);
}

// Opens device 0 for a test and closes it after.
class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0)); }
  void TearDown() override {
    for (hpuTensor_t t : owned) hpuTensorRelease(t);
    EXPECT_HPU_OK(hpuDeviceSynchronize(dev));
    EXPECT_HPU_OK(hpuDeviceClose(dev));
  }
  // A tensor released at the end of the test.
  hpuTensor_t T(hpuDataType_t dt, const Shape &shape, const std::vector<double> &v) {
    hpuTensor_t t = make(dev, dt, shape, v);
    owned.push_back(t);
    return t;
  }
  hpuTensor_t keep(hpuTensor_t t) {
    owned.push_back(t);
    return t;
  }
  hpuDevice_t dev = nullptr;
  std::vector<hpuTensor_t> owned;
};

}  // namespace ops_test
