// hpuMatmulEx: each epilogue against the separate ops it stands for, bit for
// bit (a linear layer's relu, the relu's backward on its input gradient, the
// AdamW step on its weight gradient), the accumulation into c, the result's
// type, batches, overlaps and bad input.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class MatmulEx : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {
 protected:
  // w^T, a view.
  hpuTensor_t transposed(hpuTensor_t w) {
    hpuTensor_t t = nullptr;
    EXPECT_HPU_OK(hpuTensorTranspose(&t, w, 0, 1));
    return keep(t);
  }
  hpuTensor_t ex(hpuTensor_t a, hpuTensor_t b, const hpuMatmulOptions_t &o) {
    hpuTensor_t out = nullptr;
    EXPECT_HPU_OK(hpuMatmulEx(nullptr, a, b, &o, &out));
    return out ? keep(out) : nullptr;
  }
};

// How many of got's values differ from want's in their bits, and how many are
// zero (a relu that did something leaves some).
struct BitCounts {
  int64_t differing = 0, zeros = 0;
};
BitCounts compare_bits(const std::vector<double> &got, const std::vector<double> &want) {
  BitCounts n;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    n.differing += std::memcmp(&got[i], &want[i], sizeof(double)) != 0;
    n.zeros += got[i] == 0;
  }
  return n;
}

}  // namespace

// A linear layer through hpuMatmulEx (x w^T with options->bias and a relu)
// gives the bits of hpuRelu over hpuLinear's result, and pre_activation
// hpuLinear's own: with and without a bias, under autocast, with k over one
// block of the bf16 kernel (1030), C narrow and wide (the kernel's tile
// shapes), and no k at all.
TEST_P(MatmulEx, LinearReluIsReluOfLinearBitForBit) {
  hpuDataType_t dt = GetParam();
  struct Case {
    int64_t rows, in, out;
  };
  for (const Case &c : {Case{6, 8, 5}, Case{37, 1030, 40}, Case{64, 100, 300}, Case{3, 0, 4}}) {
    for (int with_bias = 0; with_bias < 2; ++with_bias)
      for (int autocast = 0; autocast < 2; ++autocast) {
        hpuTensor_t x = T(dt, {c.rows, c.in}, round_all(dt, random_values(c.rows * c.in, 11)));
        hpuTensor_t w = T(dt, {c.out, c.in}, round_all(dt, random_values(c.out * c.in, 12)));
        hpuTensor_t b = with_bias ? T(dt, {c.out}, round_all(dt, random_values(c.out, 13))) : nullptr;
        if (autocast) {
          ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
        }
        hpuTensor_t y = nullptr, r = nullptr;
        ASSERT_HPU_OK(hpuLinear(nullptr, x, w, b, &y));
        ASSERT_HPU_OK(hpuRelu(nullptr, keep(y), &r));
        hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
        o.bias = b;
        o.activation = HPU_ACTIVATION_RELU;
        hpuTensor_t fused = ex(x, transposed(w), o);
        hpuTensor_t pre = T(dtype_of(y), {c.rows, c.out}, std::vector<double>(c.rows * c.out, 7));
        o.pre_activation = pre;
        hpuTensor_t fused2 = ex(x, transposed(w), o);
        if (autocast) {
          ASSERT_HPU_OK(hpuAutocastPop());
        }
        keep(r);
        EXPECT_EQ(dtype_of(fused), dtype_of(y));
        EXPECT_EQ(shape_of(fused), (Shape{c.rows, c.out}));
        const std::vector<double> want = read(r), got = read(fused);
        ASSERT_EQ(got.size(), want.size());
        const BitCounts n = compare_bits(got, want);
        const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" + std::to_string(c.out) +
                                 " bias " + std::to_string(with_bias) + " autocast " + std::to_string(autocast);
        EXPECT_EQ(n.differing, 0) << what;
        if (c.in > 0) {
          EXPECT_GT(n.zeros, 0);  // the relu did something
        }
        EXPECT_EQ(compare_bits(read(fused2), want).differing, 0) << what;
        EXPECT_EQ(compare_bits(read(pre), read(y)).differing, 0) << what;
      }
  }
}

// The input gradient of a linear layer whose input x is a relu's output
// (grad_y w with options->activation_backward, x the activation input) gives
// the bits of hpuReluBackward over hpuLinearBackward's grad_x: the same cases,
// with x of the gradient's type (the mask in the product) and, for a bf16
// gradient, f32 x (options->dtype f32: the mask on the unrounded result).
TEST_P(MatmulEx, ReluBackwardIsReluBackwardOfLinearsBitForBit) {
  hpuDataType_t dt = GetParam();
  struct Case {
    int64_t rows, in, out;
  };
  for (const Case &c : {Case{6, 8, 5}, Case{37, 40, 1030}, Case{64, 300, 100}, Case{3, 4, 0}}) {
    for (hpuDataType_t xdt : {dt, HPU_FLOAT32}) {
      std::vector<double> xv = round_all(xdt, random_values(c.rows * c.in, 21));
      for (size_t i = 0; i < xv.size(); i += 7) xv[i] = 0;  // x == 0 masks too
      hpuTensor_t x = T(xdt, {c.rows, c.in}, xv);
      hpuTensor_t w = T(dt, {c.out, c.in}, round_all(dt, random_values(c.out * c.in, 22)));
      hpuTensor_t g = T(dt, {c.rows, c.out}, round_all(dt, random_values(c.rows * c.out, 23)));
      hpuTensor_t gx = nullptr, want = nullptr;
      ASSERT_HPU_OK(hpuLinearBackward(nullptr, g, x, w, &gx, nullptr, nullptr));
      ASSERT_HPU_OK(hpuReluBackward(nullptr, keep(gx), x, &want));
      keep(want);
      hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
      o.activation_backward = HPU_ACTIVATION_RELU;
      o.activation_input = x;
      o.dtype = xdt;
      hpuTensor_t gz = ex(g, w, o);
      EXPECT_EQ(dtype_of(gz), xdt);
      EXPECT_EQ(shape_of(gz), (Shape{c.rows, c.in}));
      const std::vector<double> a = read(gz), b = read(want);
      ASSERT_EQ(a.size(), b.size());
      const BitCounts n = compare_bits(a, b);
      EXPECT_EQ(n.differing, 0) << c.rows << "x" << c.in << "x" << c.out << " x " << xdt;
      EXPECT_GT(n.zeros, 0);
    }
  }
}

// The weight gradient of a linear layer (grad_y^T x) with options->adamw
// leaves w (f32, options->c), its moments and its bf16 copy with the bits of
// hpuLinearBackward's grad_w followed by hpuAdamwStep (with and without
// param_copy), over three steps: tiles with tails, the training shapes'
// 256-row batch, a k longer than one block of the kernel, and no rows at all
// (a zero gradient).
TEST_P(MatmulEx, AdamwStepIsLinearBackwardThenAdamwBitForBit) {
  hpuDataType_t dt = GetParam();
  struct Case {
    int64_t rows, in, out;
  };
  hpuAdamwOptions_t o = HPU_ADAMW_OPTIONS_INIT;
  o.lr = 1e-2, o.weight_decay = 0.1;
  for (const Case &c : {Case{6, 8, 5}, Case{256, 100, 130}, Case{1100, 20, 40}, Case{0, 7, 3}}) {
    for (bool with_copy : {true, false}) {
      const std::vector<double> w0 = round_all(HPU_FLOAT32, random_values(c.out * c.in, 31)), zero(c.out * c.in, 0);
      hpuTensor_t w1 = T(HPU_FLOAT32, {c.out, c.in}, w0), m1 = T(HPU_FLOAT32, {c.out, c.in}, zero),
                  v1 = T(HPU_FLOAT32, {c.out, c.in}, zero);
      hpuTensor_t w2 = T(HPU_FLOAT32, {c.out, c.in}, w0), m2 = T(HPU_FLOAT32, {c.out, c.in}, zero),
                  v2 = T(HPU_FLOAT32, {c.out, c.in}, zero);
      hpuTensor_t copy1 = T(HPU_BFLOAT16, {c.out, c.in}, zero), copy2 = T(HPU_BFLOAT16, {c.out, c.in}, zero);
      for (int step = 1; step <= 3; ++step) {
        hpuTensor_t x = T(dt, {c.rows, c.in}, round_all(dt, random_values(c.rows * c.in, 40 + step)));
        hpuTensor_t g = T(dt, {c.rows, c.out}, round_all(dt, random_values(c.rows * c.out, 50 + step)));
        hpuAdamwOptions_t o1 = o, o2 = o;
        o1.param_copy = with_copy ? copy1 : nullptr;
        o2.param_copy = with_copy ? copy2 : nullptr;
        hpuMatmulOptions_t mo = HPU_MATMUL_OPTIONS_INIT;
        mo.c = w2;
        mo.adamw = &o2;
        mo.adamw_exp_avg = m2, mo.adamw_exp_avg_sq = v2, mo.adamw_step = step;
        hpuTensor_t out = nullptr;
        if (dt == HPU_FLOAT64) {  // an f64 product has no f32 weight gradient
          EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, transposed(g), x, &mo, &out), HPU_ERROR_UNSUPPORTED,
                          "options->c is f32", "a product in f64 writes f64");
          break;
        }
        hpuTensor_t gw = nullptr;
        ASSERT_HPU_OK(hpuLinearBackward(nullptr, g, x, w1, nullptr, &gw, nullptr));
        ASSERT_HPU_OK(hpuAdamwStep(nullptr, w1, keep(gw), m1, v1, step, &o1));
        ASSERT_HPU_OK(hpuMatmulEx(nullptr, transposed(g), x, &mo, step == 1 ? &out : nullptr));
        if (out) {
          EXPECT_EQ(keep(out) == w2, false);  // a new handle
          EXPECT_EQ(read(out), read(w2));     // of c
        }
        const std::string where = std::to_string(c.rows) + "x" + std::to_string(c.in) + "x" +
                                  std::to_string(c.out) + " step " + std::to_string(step);
        EXPECT_EQ(read(w2), read(w1)) << where;
        EXPECT_EQ(read(m2), read(m1)) << where;
        EXPECT_EQ(read(v2), read(v1)) << where;
        EXPECT_EQ(read(copy2), read(copy1)) << where;
      }
      if (dt != HPU_FLOAT64 && c.rows > 0) {
        EXPECT_NE(read(w2), w0);
      }
    }
  }
}

// options->c: the result goes into c in place, c's old values weighted by
// beta; with bf16 inputs c may be f32 (no rounding), as options->dtype f32
// gives a new f32 result. Against a double reference.
TEST_P(MatmulEx, AccumulatesIntoCAndChoosesTheResultType) {
  hpuDataType_t dt = GetParam();
  const int64_t m = 5, k = 7, n = 3;
  const std::vector<double> av = round_all(dt, random_values(m * k, 1)), bv = round_all(dt, random_values(k * n, 2)),
                            cv = round_all(HPU_FLOAT32, random_values(m * n, 3));
  hpuTensor_t a = T(dt, {m, k}, av), b = T(dt, {k, n}, bv);
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += av[i * k + l] * bv[l * n + j];
      want[i * n + j] = 0.5 * s + 2 * cv[i * n + j];
    }
  const hpuDataType_t cdt = dt == HPU_BFLOAT16 ? HPU_FLOAT32 : dt;
  hpuTensor_t c = T(cdt, {m, n}, cv);
  hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
  o.alpha = 0.5, o.c = c, o.beta = 2;
  hpuTensor_t out = ex(a, b, o);
  EXPECT_EQ(dtype_of(out), cdt);
  EXPECT_TRUE(near(read(c), want, dt == HPU_BFLOAT16 ? 1e-6 : tolerance(dt)));
  EXPECT_EQ(read(out), read(c));
  // A new f32 result: of bf16 inputs, the unrounded sums.
  hpuMatmulOptions_t f = HPU_MATMUL_OPTIONS_INIT;
  f.dtype = HPU_FLOAT32;
  hpuTensor_t y = ex(a, b, f);
  EXPECT_EQ(dtype_of(y), HPU_FLOAT32);
  for (double &v : want) v = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) want[i * n + j] += av[i * k + l] * bv[l * n + j];
  EXPECT_TRUE(near(read(y), want, 1e-6));
}

// Batched products (b with batch dims) take the epilogue matrix by matrix:
// the relu and its backward with the bits of the separate ops, the bias
// added to every row of every matrix.
TEST_P(MatmulEx, BatchedEpilogues) {
  hpuDataType_t dt = GetParam();
  const int64_t B = 3, m = 4, k = 40, n = 33;
  hpuTensor_t a = T(dt, {B, m, k}, round_all(dt, random_values(B * m * k, 1)));
  hpuTensor_t b = T(dt, {B, k, n}, round_all(dt, random_values(B * k * n, 2)));
  std::vector<double> xv = round_all(dt, random_values(B * m * n, 3));
  hpuTensor_t x = T(dt, {B, m, n}, xv), bias = T(dt, {n}, round_all(dt, random_values(n, 4)));
  hpuTensor_t p = nullptr, r = nullptr, masked = nullptr;
  ASSERT_HPU_OK(hpuMatmul(nullptr, a, b, &p));
  ASSERT_HPU_OK(hpuRelu(nullptr, keep(p), &r));
  ASSERT_HPU_OK(hpuReluBackward(nullptr, p, x, &masked));
  keep(r), keep(masked);
  hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
  o.activation = HPU_ACTIVATION_RELU;
  EXPECT_EQ(compare_bits(read(ex(a, b, o)), read(r)).differing, 0);
  o = HPU_MATMUL_OPTIONS_INIT;
  o.activation_backward = HPU_ACTIVATION_RELU;
  o.activation_input = x;
  EXPECT_EQ(compare_bits(read(ex(a, b, o)), read(masked)).differing, 0);
  o = HPU_MATMUL_OPTIONS_INIT;
  o.bias = bias;
  o.dtype = dt == HPU_FLOAT64 ? dt : HPU_FLOAT32;
  std::vector<double> want = read(p);
  const std::vector<double> bv = read(bias);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % n];
  EXPECT_TRUE(near(read(ex(a, b, o)), want, tolerance(dt)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulEx, ::testing::Values(HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64));

class MatmulExBad : public OpsTest {};

// An operand that overlaps c is read as it was before the call (hpuMatmulEx(3)).
TEST_F(MatmulExBad, OperandsThatOverlapCAreReadBeforeTheCall) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 2}, {1, 2, 3, 4});
  hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
  o.c = a, o.beta = 1;
  ASSERT_HPU_OK(hpuMatmulEx(nullptr, a, a, &o, nullptr));
  // a a + a with a's old values.
  EXPECT_EQ(read(a), (std::vector<double>{8, 12, 18, 26}));
}

TEST_F(MatmulExBad, BadInput) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 3}, random_values(6, 1)), b = T(HPU_FLOAT32, {3, 4}, random_values(12, 2));
  hpuTensor_t y24 = T(HPU_FLOAT32, {2, 4}, random_values(8, 3)), y33 = T(HPU_FLOAT32, {3, 3}, random_values(9, 4));
  hpuTensor_t h24 = T(HPU_BFLOAT16, {2, 4}, random_values(8, 5)), v4 = T(HPU_FLOAT32, {4}, random_values(4, 6));
  hpuTensor_t v3 = T(HPU_FLOAT32, {3}, random_values(3, 7)), t42 = T(HPU_FLOAT32, {4, 2}, random_values(8, 8));
  hpuTensor_t y24t = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&y24t, t42, 0, 1));
  keep(y24t);
  const std::vector<double> before = read(y24);
  hpuTensor_t out = reinterpret_cast<hpuTensor_t>(0x1);
  hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "options is NULL");
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, nullptr), HPU_ERROR_INVALID_ARGUMENT, "out is NULL");
  o.struct_size = 0;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->struct_size is 0");
  o = HPU_MATMUL_OPTIONS_INIT;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, a, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "a is f32[2, 3]",
                  "b is f32[2, 3]");
  o.activation = static_cast<hpuActivation_t>(7);
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->activation is 7");
  o = HPU_MATMUL_OPTIONS_INIT;
  o.activation_backward = HPU_ACTIVATION_RELU;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->activation_input is NULL");
  o.activation_input = h24;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->activation_input is bf16[2, 4]", "expected the result's type f32");
  o.activation_input = y33;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->activation_input is f32[3, 3]", "expected shape [2, 4]");
  o = HPU_MATMUL_OPTIONS_INIT;
  o.dtype = HPU_INT32;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_UNSUPPORTED, "options->dtype is i32");
  o.dtype = static_cast<hpuDataType_t>(99);
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->dtype is 99");
  o = HPU_MATMUL_OPTIONS_INIT;
  o.beta = 1;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->beta is 1",
                  "options->c is NULL");
  o.c = y33;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->c is f32[3, 3]",
                  "expected shape [2, 4]");
  o.c = y24t;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->c is f32[2, 4]",
                  "not contiguous");
  o.c = h24;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_UNSUPPORTED, "options->c is bf16[2, 4]",
                  "a product in f32 writes f32");
  o.c = y24, o.dtype = HPU_FLOAT64;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->c is f32[2, 4]",
                  "options->dtype is f64");
  o = HPU_MATMUL_OPTIONS_INIT;
  o.bias = v3;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->bias is f32[3]",
                  "expected shape [4]");
  o.bias = v4, o.c = y24, o.beta = 0.5;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->beta is 0.5",
                  "options->bias needs beta 0");
  o = HPU_MATMUL_OPTIONS_INIT;
  o.pre_activation = y33;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->pre_activation is f32[3, 3]");
  o.pre_activation = y24t;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->pre_activation is f32[2, 4]", "not contiguous");
  hpuAdamwOptions_t adamw = HPU_ADAMW_OPTIONS_INIT;
  o = HPU_MATMUL_OPTIONS_INIT;
  o.adamw = &adamw;
  o.adamw_exp_avg = o.adamw_exp_avg_sq = y33, o.adamw_step = 1;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->c is NULL",
                  "options->adamw");
  o.c = y24;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "options->adamw_exp_avg is f32[3, 3]", "expected shape [2, 4]");
  o.bias = v4;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->adamw",
                  "bias, pre_activation, the activations and beta must not be set");
  o.bias = nullptr, o.adamw_exp_avg = o.adamw_exp_avg_sq = y24, o.adamw_step = 0;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "step 0");
  o.adamw_step = 1, o.c = h24;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_UNSUPPORTED, "options->c is bf16[2, 4]");
  adamw.lr = -1;
  o.c = y24;
  EXPECT_HPU_FAIL(hpuMatmulEx(nullptr, a, b, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->adamw->lr -1");
  EXPECT_EQ(out, reinterpret_cast<hpuTensor_t>(0x1));  // untouched on failure
  EXPECT_EQ(read(y24), before);                        // nothing ran
}
