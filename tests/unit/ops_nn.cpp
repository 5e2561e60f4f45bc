// softmax, log_softmax, nll_loss, cross_entropy_loss (spatial, weighted, label
// smoothing, class-probability targets), layer_norm, dropout, embedding, sum, mean, cast: forward against
// double references, backward by finite differences, bad input.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

// Loss options as a call's argument: converts to a pointer to options that
// live until the end of the full expression.
struct LossOptions {
  hpuLossOptions_t o = HPU_LOSS_OPTIONS_INIT;
  LossOptions(hpuReduction_t reduction, int64_t ignore_index, double label_smoothing = 0) {
    o.reduction = reduction, o.ignore_index = ignore_index, o.label_smoothing = label_smoothing;
  }
  operator const hpuLossOptions_t *() const { return &o; }
};

// LayerNorm options as a call's argument, as LossOptions.
struct LayerNormOptions {
  hpuLayerNormOptions_t o = HPU_LAYER_NORM_OPTIONS_INIT;
  explicit LayerNormOptions(int normalized_ndim, double eps = 1e-5) {
    o.normalized_ndim = normalized_ndim, o.eps = eps;
  }
  operator const hpuLayerNormOptions_t *() const { return &o; }
};

// Softmax of [outer, n, inner] over n.
std::vector<double> ref_softmax(const std::vector<double> &x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) s += std::exp(x[(o * n + j) * inner + i] - mx);
      for (int64_t j = 0; j < n; ++j) {
        double v = x[(o * n + j) * inner + i] - mx;
        y[(o * n + j) * inner + i] = log ? v - std::log(s) : std::exp(v) / s;
      }
    }
  return y;
}

// nll of lp seen as [n, c, inner] (sample k = i * inner + s has the values
// lp[i, :, s]), with class weights w (empty: all 1) and label smoothing eps:
// (1 - eps) w[t] -lp[t] + eps / c sum_j w[j] -lp[j]. A mean divides by the
// counted samples' target weights.
double ref_nll(const std::vector<double> &lp, const std::vector<double> &t, int64_t c, hpuReduction_t red,
               int64_t ignore, std::vector<double> *per, const std::vector<double> &w = {}, int64_t inner = 1,
               double eps = 0) {
  double s = 0, count = 0;
  per->assign(t.size(), 0);
  for (size_t k = 0; k < t.size(); ++k) {
    const int64_t tk = static_cast<int64_t>(t[k]), i = static_cast<int64_t>(k) / inner,
                  sp = static_cast<int64_t>(k) % inner;
    if (tk == ignore) continue;
    auto weight = [&](int64_t j) { return w.empty() ? 1.0 : w[static_cast<size_t>(j)]; };
    auto value = [&](int64_t j) { return lp[static_cast<size_t>((i * c + j) * inner + sp)]; };
    double smooth = 0;
    for (int64_t j = 0; j < c; ++j) smooth += weight(j) * -value(j);
    (*per)[k] = (1 - eps) * -value(tk) * weight(tk) + eps / static_cast<double>(c) * smooth;
    s += (*per)[k];
    count += weight(tk);
  }
  return red == HPU_REDUCTION_MEAN ? s / count : s;
}

// Cross entropy of log-probabilities lp against class probabilities p, both
// [n, c, inner]: sample k's loss is sum_j w[j] ((1 - eps) p[j] + eps / c)
// -lp[j]; a mean divides by the number of samples (not by weights).
double ref_soft_ce(const std::vector<double> &lp, const std::vector<double> &p, int64_t c, int64_t inner,
                   hpuReduction_t red, std::vector<double> *per, const std::vector<double> &w, double eps) {
  const size_t samples = lp.size() / static_cast<size_t>(c);
  per->assign(samples, 0);
  double s = 0;
  for (size_t k = 0; k < samples; ++k) {
    const int64_t i = static_cast<int64_t>(k) / inner, sp = static_cast<int64_t>(k) % inner;
    for (int64_t j = 0; j < c; ++j) {
      size_t at = static_cast<size_t>((i * c + j) * inner + sp);
      double q = (1 - eps) * p[at] + eps / static_cast<double>(c);
      (*per)[k] += (w.empty() ? 1.0 : w[static_cast<size_t>(j)]) * q * -lp[at];
    }
    s += (*per)[k];
  }
  return red == HPU_REDUCTION_MEAN ? s / static_cast<double>(samples) : s;
}

// Layer norm of [rows, d] with eps 1e-5; the rows' mean and rstd.
std::vector<double> ref_layer_norm(const std::vector<double> &x, int64_t rows, int64_t d, const std::vector<double> &w,
                                   const std::vector<double> &b, std::vector<double> *mean, std::vector<double> *rstd) {
  std::vector<double> y(rows * d);
  mean->assign(rows, 0);
  rstd->assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mu += x[r * d + j] / d;
    for (int64_t j = 0; j < d; ++j) var += (x[r * d + j] - mu) * (x[r * d + j] - mu) / d;
    (*mean)[r] = mu;
    (*rstd)[r] = 1 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = (x[r * d + j] - mu) * (*rstd)[r] * w[j] + b[j];
  }
  return y;
}

class Nn : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {};

hpuTensor_t forward_softmax(bool log, hpuTensor_t x, int dim) {
  hpuTensor_t o = nullptr;
  EXPECT_HPU_OK(log ? hpuLogSoftmax(nullptr, x, dim, &o) : hpuSoftmax(nullptr, x, dim, &o));
  return o;
}

}  // namespace

TEST_P(Nn, SoftmaxAndLogSoftmax) {
  hpuDataType_t dt = GetParam();
  auto xv = round_all(dt, random_values(2 * 5 * 3, 1, -3, 3));
  for (bool log : {false, true})
    for (int dim : {-1, 1, 0}) {
      hpuTensor_t y = keep(forward_softmax(log, T(dt, {2, 5, 3}, xv), dim));
      EXPECT_EQ(dtype_of(y), dt);
      int d = dim < 0 ? dim + 3 : dim;
      int64_t outer = d == 0 ? 1 : d == 1 ? 2 : 10, n = d == 0 ? 2 : d == 1 ? 5 : 3, inner = 30 / (outer * n);
      EXPECT_TRUE(near(read(y), ref_softmax(xv, outer, n, inner, log), tolerance(dt) * 2)) << log << dim;
    }
}

TEST_P(Nn, LossesMatchReference) {
  hpuDataType_t dt = GetParam();
  const int64_t n = 6, c = 4;
  auto xv = round_all(dt, random_values(n * c, 2, -2, 2));
  std::vector<double> tv = {0, 3, 1, -100, 2, 3};
  auto lp = ref_softmax(xv, n, c, 1, true);
  for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM})
    for (hpuDataType_t tdt : {HPU_INT64, HPU_INT32}) {
      hpuTensor_t ce = nullptr, nll = nullptr;
      ASSERT_HPU_OK(
          hpuCrossEntropyLoss(nullptr, T(dt, {n, c}, xv), T(tdt, {n}, tv), nullptr, LossOptions(red, -100), &ce));
      keep(ce);
      ASSERT_HPU_OK(hpuNllLoss(nullptr, T(dt, {n, c}, xv), T(tdt, {n}, tv), nullptr, LossOptions(red, -100), &nll));
      keep(nll);
      std::vector<double> per, per_nll;
      double total = ref_nll(lp, tv, c, red, -100, &per);
      double total_nll = ref_nll(xv, tv, c, red, -100, &per_nll);
      if (red == HPU_REDUCTION_NONE) {
        EXPECT_EQ(shape_of(ce), (Shape{n}));
        EXPECT_TRUE(near(read(ce), per, tolerance(dt) * 2));
        EXPECT_TRUE(near(read(nll), per_nll, tolerance(dt)));
      } else {
        EXPECT_EQ(shape_of(ce), Shape{});
        EXPECT_TRUE(near(read(ce), {total}, tolerance(dt) * 2));
        EXPECT_TRUE(near(read(nll), {total_nll}, tolerance(dt)));
      }
    }
}

TEST_P(Nn, LossesWithClassWeightsMatchReference) {
  hpuDataType_t dt = GetParam();
  const int64_t n = 6, c = 4;
  auto xv = round_all(dt, random_values(n * c, 15, -2, 2));
  std::vector<double> tv = {0, 3, 1, -100, 2, 3}, wv = {0.5, 2, 1, 3};
  auto lp = ref_softmax(xv, n, c, 1, true);
  for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM}) {
    hpuTensor_t x = T(dt, {n, c}, xv), t = T(HPU_INT64, {n}, tv), w = T(HPU_FLOAT32, {c}, wv);
    hpuTensor_t ce = nullptr, nll = nullptr, ce1 = nullptr, plain = nullptr;
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, -100), &ce));
    ASSERT_HPU_OK(hpuNllLoss(nullptr, x, t, w, LossOptions(red, -100), &nll));
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, T(HPU_FLOAT32, {c}, {1, 1, 1, 1}), LossOptions(red, -100), &ce1));
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, nullptr, LossOptions(red, -100), &plain));
    keep(ce), keep(nll), keep(ce1), keep(plain);
    std::vector<double> per, per_nll;
    double total = ref_nll(lp, tv, c, red, -100, &per, wv);
    double total_nll = ref_nll(xv, tv, c, red, -100, &per_nll, wv);
    if (red == HPU_REDUCTION_NONE) {
      EXPECT_TRUE(near(read(ce), per, tolerance(dt) * 4));
      EXPECT_TRUE(near(read(nll), per_nll, tolerance(dt) * 4));
    } else {
      EXPECT_TRUE(near(read(ce), {total}, tolerance(dt) * 4)) << red;
      EXPECT_TRUE(near(read(nll), {total_nll}, tolerance(dt) * 4)) << red;
    }
    EXPECT_TRUE(near(read(ce1), read(plain), 0));  // NULL weight: all weights 1
  }
}

TEST_P(Nn, SpatialAndSmoothedLossesMatchReference) {
  hpuDataType_t dt = GetParam();
  const int64_t n = 2, c = 3, d1 = 2, d2 = 3, inner = d1 * d2;
  auto xv = round_all(dt, random_values(n * c * inner, 18, -2, 2));
  std::vector<double> tv = {0, 2, 1, -100, 2, 1, 1, 0, 0, 2, -100, 1}, wv = {0.5, 2, 1.5};
  auto lp = ref_softmax(xv, n, c, inner, true);
  for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM})
    for (double eps : {0.0, 0.25})
      for (bool weighted : {false, true}) {
        hpuTensor_t x = T(dt, {n, c, d1, d2}, xv), t = T(HPU_INT64, {n, d1, d2}, tv);
        hpuTensor_t w = weighted ? T(HPU_FLOAT32, {c}, wv) : nullptr;
        hpuTensor_t ce = nullptr, nll = nullptr;
        ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, -100, eps), &ce));
        ASSERT_HPU_OK(hpuNllLoss(nullptr, x, t, w, LossOptions(red, -100), &nll));
        keep(ce), keep(nll);
        std::vector<double> per, per_nll, no_weights;
        const std::vector<double> &ws = weighted ? wv : no_weights;
        double total = ref_nll(lp, tv, c, red, -100, &per, ws, inner, eps);
        double total_nll = ref_nll(xv, tv, c, red, -100, &per_nll, ws, inner);
        std::string what = std::to_string(red) + " eps " + std::to_string(eps) + " weighted " + std::to_string(weighted);
        if (red == HPU_REDUCTION_NONE) {
          EXPECT_EQ(shape_of(ce), (Shape{n, d1, d2}));
          EXPECT_EQ(shape_of(nll), (Shape{n, d1, d2}));
          EXPECT_TRUE(near(read(ce), per, tolerance(dt) * 4)) << what;
          EXPECT_TRUE(near(read(nll), per_nll, tolerance(dt) * 4)) << what;
        } else {
          EXPECT_TRUE(near(read(ce), {total}, tolerance(dt) * 4)) << what;
          EXPECT_TRUE(near(read(nll), {total_nll}, tolerance(dt) * 4)) << what;
        }
        if (eps == 0.0) {  // no smoothing: the weighted loss, bit for bit
          hpuTensor_t plain = nullptr;
          ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, -100), &plain));
          keep(plain);
          EXPECT_TRUE(near(read(ce), read(plain), 0)) << what;
        }
      }
  // One sample [C] with a 0-dim target: a 0-dim loss, also for NONE.
  hpuTensor_t one = nullptr;
  ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, T(dt, {c}, {xv[0], xv[6], xv[12]}), T(HPU_INT32, {}, {2}), nullptr,
                                    LossOptions(HPU_REDUCTION_NONE, -100, 0.25), &one));
  keep(one);
  EXPECT_EQ(shape_of(one), Shape{});
  std::vector<double> per1;
  ref_nll(lp, {2}, c, HPU_REDUCTION_SUM, -100, &per1, {}, inner, 0.25);  // sample (0, 0) of the spatial input
  EXPECT_TRUE(near(read(one), per1, tolerance(dt) * 4));
  // No samples (a spatial dim of 0, or C = 0 with every target ignored): the sum is 0, the mean NaN.
  for (hpuReduction_t red : {HPU_REDUCTION_SUM, HPU_REDUCTION_MEAN})
    for (Shape shape : {Shape{2, c, 0}, Shape{2, 0, 1}}) {
      hpuTensor_t e = nullptr;
      bool no_classes = shape[1] == 0;
      ASSERT_HPU_OK(hpuCrossEntropyLoss(
          nullptr, T(dt, shape, {}),
          T(HPU_INT64, {2, shape[2]}, no_classes ? std::vector<double>{-100, -100} : std::vector<double>{}), nullptr,
          LossOptions(red, -100, 0.1), &e));
      keep(e);
      double v = read(e).at(0);
      EXPECT_TRUE(red == HPU_REDUCTION_SUM ? v == 0 : std::isnan(v)) << v;
    }
}

// A floating target of the input's shape holds class probabilities (PyTorch's
// soft targets): any floating type, with class weights and label smoothing,
// ignore_index playing no part, and a mean over the samples.
TEST_P(Nn, ProbabilityTargetsMatchReference) {
  hpuDataType_t dt = GetParam();
  const int64_t c = 3;
  const std::vector<double> wv = {0.5, 2, 1.5}, no_weights;
  struct Case {
    Shape shape, loss_shape;
    int64_t n, inner;
  };
  for (const Case &cs : {Case{{4, c}, {4}, 4, 1}, Case{{2, c, 2, 3}, {2, 2, 3}, 2, 6}, Case{{c}, {}, 1, 1}}) {
    const int64_t numel = cs.n * c * cs.inner;
    auto xv = round_all(dt, random_values(numel, 22, -2, 2));
    auto pv = round_all(dt, random_values(numel, 23, 0, 1));  // need not sum to 1, as in PyTorch
    auto lp = ref_softmax(xv, cs.n, c, cs.inner, true);
    for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM})
      for (double eps : {0.0, 0.25})
        for (bool weighted : {false, true}) {
          hpuTensor_t x = T(dt, cs.shape, xv), t = T(dt, cs.shape, pv);
          hpuTensor_t w = weighted ? T(HPU_FLOAT32, {c}, wv) : nullptr;
          hpuTensor_t ce = nullptr, ignoring0 = nullptr;
          ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, -100, eps), &ce));
          ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, 0, eps), &ignoring0));
          keep(ce), keep(ignoring0);
          std::vector<double> per;
          double total = ref_soft_ce(lp, pv, c, cs.inner, red, &per, weighted ? wv : no_weights, eps);
          std::string what = "ndim " + std::to_string(cs.shape.size()) + " " + std::to_string(red) + " eps " +
                             std::to_string(eps) + " weighted " + std::to_string(weighted);
          EXPECT_EQ(shape_of(ce), red == HPU_REDUCTION_NONE ? cs.loss_shape : Shape{}) << what;
          EXPECT_TRUE(near(read(ce), red == HPU_REDUCTION_NONE ? per : std::vector<double>{total}, tolerance(dt) * 4))
              << what;
          EXPECT_TRUE(near(read(ignoring0), read(ce), 0)) << what;
          if (eps == 0.0) {  // the functions without smoothing take probabilities too
            hpuTensor_t plain = nullptr;
            ASSERT_HPU_OK(weighted ? hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(red, -100), &plain)
                                   : hpuCrossEntropyLoss(nullptr, x, t, nullptr, LossOptions(red, -100), &plain));
            keep(plain);
            EXPECT_TRUE(near(read(plain), read(ce), 0)) << what;
          }
        }
  }
  // One-hot probabilities give the class-index loss per sample and summed (a
  // mean divides by N instead of the target weights); an f64 target serves any input.
  const int64_t n = 4;
  const std::vector<double> classes = {2, 0, 1, 2};
  std::vector<double> onehot(n * c, 0);
  for (int64_t i = 0; i < n; ++i) onehot[static_cast<size_t>(i * c + static_cast<int64_t>(classes[i]))] = 1;
  hpuTensor_t x = T(dt, {n, c}, round_all(dt, random_values(n * c, 24, -2, 2))), w = T(HPU_FLOAT32, {c}, wv);
  for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_SUM}) {
    hpuTensor_t soft = nullptr, hard = nullptr;
    ASSERT_HPU_OK(
        hpuCrossEntropyLoss(nullptr, x, T(HPU_FLOAT64, {n, c}, onehot), w, LossOptions(red, -100, 0.2), &soft));
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, T(HPU_INT64, {n}, classes), w, LossOptions(red, -100, 0.2), &hard));
    keep(soft), keep(hard);
    EXPECT_TRUE(near(read(soft), read(hard), tolerance(dt))) << red;
  }
  // No samples: the sum is 0, the mean NaN (as PyTorch).
  for (hpuReduction_t red : {HPU_REDUCTION_SUM, HPU_REDUCTION_MEAN}) {
    hpuTensor_t e = nullptr;
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, T(dt, {2, c, 0}, {}), T(dt, {2, c, 0}, {}), nullptr,
                                      LossOptions(red, -100, 0.1), &e));
    keep(e);
    double v = read(e).at(0);
    EXPECT_TRUE(red == HPU_REDUCTION_SUM ? v == 0 : std::isnan(v)) << v;
  }
}

TEST_P(Nn, LayerNormMatchesReference) {
  hpuDataType_t dt = GetParam();
  const int64_t rows = 6, d = 10;
  auto xv = round_all(dt, random_values(rows * d, 3, -2, 3));
  auto wv = round_all(dt, random_values(d, 4)), bv = round_all(dt, random_values(d, 5));
  hpuTensor_t y = nullptr, mean = nullptr, rstd = nullptr;
  ASSERT_HPU_OK(hpuLayerNorm(nullptr, T(dt, {2, 3, d}, xv), T(dt, {d}, wv), T(dt, {d}, bv), nullptr, &y, &mean, &rstd));
  keep(y), keep(mean), keep(rstd);
  EXPECT_EQ(shape_of(mean), (Shape{2, 3}));
  EXPECT_EQ(dtype_of(mean), HPU_FLOAT32);
  std::vector<double> wm, wr, want = ref_layer_norm(xv, rows, d, wv, bv, &wm, &wr);
  EXPECT_TRUE(near(read(y), want, tolerance(dt) * 2));
  EXPECT_TRUE(near(read(mean), wm, 1e-5));
  EXPECT_TRUE(near(read(rstd), wr, 1e-5));
}

// ATen's normalized_shape of several dims: x [2, 3, 4] over its last 2 dims
// against a double reference, and over all 3.
TEST_P(Nn, LayerNormOverSeveralDimsMatchesReference) {
  hpuDataType_t dt = GetParam();
  auto xv = round_all(dt, random_values(24, 6, -2, 3));
  auto wv = round_all(dt, random_values(24, 7)), bv = round_all(dt, random_values(24, 8));
  for (int k : {2, 3}) {
    const int64_t d = k == 2 ? 12 : 24, rows = 24 / d;
    Shape pshape = k == 2 ? Shape{3, 4} : Shape{2, 3, 4};
    std::vector<double> w(wv.begin(), wv.begin() + d), b(bv.begin(), bv.begin() + d);
    hpuTensor_t y = nullptr, mean = nullptr, rstd = nullptr;
    ASSERT_HPU_OK(hpuLayerNorm(nullptr, T(dt, {2, 3, 4}, xv), T(dt, pshape, w), T(dt, pshape, b), LayerNormOptions(k),
                               &y, &mean, &rstd));
    keep(y), keep(mean), keep(rstd);
    EXPECT_EQ(shape_of(y), (Shape{2, 3, 4}));
    EXPECT_EQ(shape_of(mean), k == 2 ? Shape{2} : Shape{});
    EXPECT_EQ(shape_of(rstd), shape_of(mean));
    std::vector<double> wm, wr, want = ref_layer_norm(xv, rows, d, w, b, &wm, &wr);
    EXPECT_TRUE(near(read(y), want, tolerance(dt) * 2)) << k;
    EXPECT_TRUE(near(read(mean), wm, 1e-5)) << k;
    EXPECT_TRUE(near(read(rstd), wr, 1e-5)) << k;
  }
  // normalized_ndim 1 is the default.
  hpuTensor_t a = nullptr, b = nullptr;
  hpuTensor_t x = T(dt, {2, 3, 4}, xv);
  ASSERT_HPU_OK(hpuLayerNorm(nullptr, x, nullptr, nullptr, LayerNormOptions(1), &a, nullptr, nullptr));
  ASSERT_HPU_OK(hpuLayerNorm(nullptr, x, nullptr, nullptr, nullptr, &b, nullptr, nullptr));
  keep(a), keep(b);
  EXPECT_TRUE(near(read(a), read(b), 0));
}

TEST_P(Nn, EmbeddingSumMeanCast) {
  hpuDataType_t dt = GetParam();
  auto wv = round_all(dt, random_values(5 * 3, 6));
  std::vector<double> idx = {4, 0, 4, 2};
  hpuTensor_t e = nullptr;
  ASSERT_HPU_OK(hpuEmbedding(nullptr, T(dt, {5, 3}, wv), T(HPU_INT64, {2, 2}, idx), -1, &e));
  keep(e);
  EXPECT_EQ(shape_of(e), (Shape{2, 2, 3}));
  std::vector<double> want;
  for (double i : idx)
    for (int j = 0; j < 3; ++j) want.push_back(wv[static_cast<int>(i) * 3 + j]);
  EXPECT_TRUE(near(read(e), want, 0));

  auto xv = round_all(dt, random_values(2 * 3 * 4, 7));
  hpuTensor_t x = T(dt, {2, 3, 4}, xv);
  struct Case {
    std::vector<int> dims;
    int keepdim;
    Shape out;
  };
  for (const Case &c : {Case{{}, 0, {}}, Case{{1}, 0, {2, 4}}, Case{{0, 2}, 1, {1, 3, 1}}, Case{{-1, 0}, 0, {3}},
                        Case{{0, 1, 2}, 1, {1, 1, 1}}}) {
    hpuTensor_t s = nullptr, m = nullptr;
    ASSERT_HPU_OK(hpuSum(nullptr, x, c.dims.data(), static_cast<int>(c.dims.size()), c.keepdim, &s));
    ASSERT_HPU_OK(hpuMean(nullptr, x, c.dims.data(), static_cast<int>(c.dims.size()), c.keepdim, &m));
    keep(s), keep(m);
    EXPECT_EQ(shape_of(s), c.out);
    bool red[3] = {c.dims.empty(), c.dims.empty(), c.dims.empty()};
    for (int d : c.dims) red[(d + 3) % 3] = true;
    int64_t sizes[3] = {2, 3, 4}, count = 1;
    for (int d = 0; d < 3; ++d) count *= red[d] ? sizes[d] : 1;
    std::vector<double> ws(numel(c.out), 0);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          int64_t o = ((red[0] ? 0 : i) * (red[1] ? 1 : 3) + (red[1] ? 0 : j)) * (red[2] ? 1 : 4) + (red[2] ? 0 : k);
          ws[o] += xv[(i * 3 + j) * 4 + k];
        }
    std::vector<double> wmean = ws;
    for (double &v : wmean) v /= count;
    EXPECT_TRUE(near(read(s), ws, tolerance(dt) * 2));
    EXPECT_TRUE(near(read(m), wmean, tolerance(dt) * 2));
  }

  hpuTensor_t f = nullptr;
  ASSERT_HPU_OK(hpuCast(nullptr, x, HPU_FLOAT64, &f));
  keep(f);
  EXPECT_EQ(dtype_of(f), HPU_FLOAT64);
  EXPECT_TRUE(near(read(f), xv, 0));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Nn, ::testing::Values(HPU_FLOAT32, HPU_BFLOAT16, HPU_FLOAT64));

class NnGrad : public OpsTest {};

TEST_F(NnGrad, SoftmaxByFiniteDifferences) {
  for (bool log : {false, true})
    for (int dim : {-1, 0}) {
      check_gradients(
          dev, {{{3, 4}, random_values(12, 1, -2, 2)}},
          [=](auto &t) { return forward_softmax(log, t[0], dim); },
          [=](hpuTensor_t g, auto &, hpuTensor_t out) {
            hpuTensor_t gx = nullptr;
            EXPECT_HPU_OK(log ? hpuLogSoftmaxBackward(nullptr, g, out, dim, HPU_FLOAT64, &gx)
                              : hpuSoftmaxBackward(nullptr, g, out, dim, HPU_FLOAT64, &gx));
            return std::vector<hpuTensor_t>{gx};
          });
    }
}

TEST_F(NnGrad, LossesByFiniteDifferences) {
  for (bool fused : {false, true})
    for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM}) {
      Input target{{5}, {2, 0, 7, 1, 2}, HPU_INT64, false};  // 7 is ignored
      check_gradients(
          dev, {{{5, 3}, random_values(15, 2, -2, 2)}, target},
          [=](auto &t) {
            hpuTensor_t o = nullptr;
            EXPECT_HPU_OK(fused ? hpuCrossEntropyLoss(nullptr, t[0], t[1], nullptr, LossOptions(red, 7), &o)
                                : hpuNllLoss(nullptr, t[0], t[1], nullptr, LossOptions(red, 7), &o));
            return o;
          },
          [=](hpuTensor_t g, auto &t, hpuTensor_t) {
            hpuTensor_t gi = nullptr;
            EXPECT_HPU_OK(fused ? hpuCrossEntropyLossBackward(nullptr, g, t[0], t[1], nullptr, LossOptions(red, 7), &gi)
                                : hpuNllLossBackward(nullptr, g, t[0], t[1], nullptr, LossOptions(red, 7), &gi));
            return std::vector<hpuTensor_t>{gi, nullptr};
          });
    }
}

TEST_F(NnGrad, WeightedLossesByFiniteDifferences) {
  for (bool fused : {false, true})
    for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM}) {
      Input target{{5}, {2, 0, 7, 1, 2}, HPU_INT64, false};  // 7 is ignored
      Input weight{{3}, {0.5, 2, 1.5}, HPU_FLOAT64, false};
      check_gradients(
          dev, {{{5, 3}, random_values(15, 16, -2, 2)}, target, weight},
          [=](auto &t) {
            hpuTensor_t o = nullptr;
            EXPECT_HPU_OK(fused ? hpuCrossEntropyLoss(nullptr, t[0], t[1], t[2], LossOptions(red, 7), &o)
                                : hpuNllLoss(nullptr, t[0], t[1], t[2], LossOptions(red, 7), &o));
            return o;
          },
          [=](hpuTensor_t g, auto &t, hpuTensor_t) {
            hpuTensor_t gi = nullptr;
            EXPECT_HPU_OK(fused ? hpuCrossEntropyLossBackward(nullptr, g, t[0], t[1], t[2], LossOptions(red, 7), &gi)
                                : hpuNllLossBackward(nullptr, g, t[0], t[1], t[2], LossOptions(red, 7), &gi));
            return std::vector<hpuTensor_t>{gi, nullptr, nullptr};
          });
    }
}

TEST_F(NnGrad, SpatialAndSmoothedLossesByFiniteDifferences) {
  enum Variant { nll_spatial, smoothed_spatial, smoothed_unweighted };
  for (Variant v : {nll_spatial, smoothed_spatial, smoothed_unweighted})
    for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM}) {
      // [2, 3, 2, 2] with targets [2, 2, 2] (7 is ignored), or [5, 3] with [5].
      const bool spatial = v != smoothed_unweighted;
      Input x{spatial ? Shape{2, 3, 2, 2} : Shape{5, 3}, random_values(spatial ? 24 : 15, 19, -2, 2)};
      Input target{spatial ? Shape{2, 2, 2} : Shape{5},
                   spatial ? std::vector<double>{2, 0, 7, 1, 1, 2, 0, 7} : std::vector<double>{2, 0, 7, 1, 2},
                   HPU_INT64, false};
      Input weight{{3}, {0.5, 2, 1.5}, HPU_FLOAT64, false};
      auto w = [=](auto &t) { return v == smoothed_unweighted ? nullptr : t[2]; };
      check_gradients(
          dev, {x, target, weight},
          [=](auto &t) {
            hpuTensor_t o = nullptr;
            EXPECT_HPU_OK(v == nll_spatial
                              ? hpuNllLoss(nullptr, t[0], t[1], w(t), LossOptions(red, 7), &o)
                              : hpuCrossEntropyLoss(nullptr, t[0], t[1], w(t), LossOptions(red, 7, 0.3), &o));
            return o;
          },
          [=](hpuTensor_t g, auto &t, hpuTensor_t) {
            hpuTensor_t gi = nullptr;
            EXPECT_HPU_OK(v == nll_spatial ? hpuNllLossBackward(nullptr, g, t[0], t[1], w(t), LossOptions(red, 7), &gi)
                                           : hpuCrossEntropyLossBackward(nullptr, g, t[0], t[1], w(t),
                                                                         LossOptions(red, 7, 0.3), &gi));
            return std::vector<hpuTensor_t>{gi, nullptr, nullptr};
          });
    }
}

TEST_F(NnGrad, ProbabilityTargetsByFiniteDifferences) {
  for (Shape shape : {Shape{3}, Shape{5, 3}, Shape{2, 3, 2, 2}})
    for (hpuReduction_t red : {HPU_REDUCTION_NONE, HPU_REDUCTION_MEAN, HPU_REDUCTION_SUM})
      for (double eps : {0.0, 0.3}) {
        const int64_t count = numel(shape);
        Input x{shape, random_values(count, 25, -2, 2)};
        Input target{shape, random_values(count, 26, 0, 1), HPU_FLOAT64, false};
        Input weight{{3}, {0.5, 2, 1.5}, HPU_FLOAT64, false};
        check_gradients(
            dev, {x, target, weight},
            [=](auto &t) {
              hpuTensor_t o = nullptr;
              EXPECT_HPU_OK(hpuCrossEntropyLoss(nullptr, t[0], t[1], t[2], LossOptions(red, -100, eps), &o));
              return o;
            },
            [=](hpuTensor_t g, auto &t, hpuTensor_t) {
              hpuTensor_t gi = nullptr;
              EXPECT_HPU_OK(
                  hpuCrossEntropyLossBackward(nullptr, g, t[0], t[1], t[2], LossOptions(red, -100, eps), &gi));
              return std::vector<hpuTensor_t>{gi, nullptr, nullptr};
            });
      }
}

TEST_F(NnGrad, ProbabilityTargetsBadInput) {
  hpuTensor_t x = T(HPU_FLOAT32, {2, 3, 4}, random_values(24, 27)), out = nullptr;
  hpuTensor_t p = T(HPU_FLOAT32, {2, 3, 4}, random_values(24, 28, 0, 1));
  hpuTensor_t transposed = T(HPU_BFLOAT16, {2, 4, 3}, random_values(24, 29, 0, 1));
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLoss(nullptr, x, transposed, nullptr, LossOptions(HPU_REDUCTION_MEAN, -100, 0.1), &out),
      HPU_ERROR_INVALID_ARGUMENT, "target is bf16[2, 4, 3]", "expected shape [2, 3, 4]");
  hpuTensor_t one = T(HPU_FLOAT32, {}, {1}), per_sample = T(HPU_FLOAT32, {2, 4}, random_values(8, 30));
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLossBackward(nullptr, one, x, per_sample, nullptr, LossOptions(HPU_REDUCTION_SUM, -100), &out),
      HPU_ERROR_INVALID_ARGUMENT, "target is f32[2, 4]", "expected shape [2, 3, 4]");
  EXPECT_HPU_FAIL(hpuNllLoss(nullptr, x, p, nullptr, LossOptions(HPU_REDUCTION_MEAN, -100), &out),
                  HPU_ERROR_UNSUPPORTED, "target is f32[2, 3, 4]", "indices must be i32 or i64");
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLoss(nullptr, x, p, T(HPU_FLOAT32, {4}, {1, 1, 1, 1}), LossOptions(HPU_REDUCTION_SUM, -100), &out),
      HPU_ERROR_INVALID_ARGUMENT, "weight is f32[4]", "expected shape [3]");
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLossBackward(nullptr, x, x, p, nullptr, LossOptions(HPU_REDUCTION_NONE, -100, 0.1), &out),
      HPU_ERROR_INVALID_ARGUMENT, "grad_loss is f32[2, 3, 4]", "expected shape [2, 4]");
  EXPECT_EQ(out, nullptr);
}

TEST_F(NnGrad, SmoothedAndSpatialLossesBadInput) {
  hpuTensor_t x = T(HPU_FLOAT32, {2, 3, 4}, random_values(24, 20)), t = T(HPU_INT64, {2, 4}, {0, 1, 2, 0, 1, 2, 0, 1});
  hpuTensor_t out = nullptr;
  EXPECT_HPU_FAIL(hpuCrossEntropyLoss(nullptr, x, T(HPU_INT64, {2, 3}, {0, 1, 2, 0, 1, 2}), nullptr,
                                      LossOptions(HPU_REDUCTION_MEAN, -100, 0.1), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "target is i64[2, 3]", "expected shape [2, 4]");
  EXPECT_HPU_FAIL(hpuCrossEntropyLoss(nullptr, x, t, nullptr, LossOptions(HPU_REDUCTION_MEAN, -100, 1.5), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "options->label_smoothing 1.5 is not in 0..1");
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLossBackward(nullptr, x, x, t, nullptr, LossOptions(HPU_REDUCTION_SUM, -100, NAN), &out),
      HPU_ERROR_INVALID_ARGUMENT, "options->label_smoothing nan");
  EXPECT_HPU_FAIL(hpuNllLoss(nullptr, T(HPU_FLOAT32, {}, {1}), T(HPU_INT64, {}, {0}), nullptr,
                             LossOptions(HPU_REDUCTION_SUM, -100), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "expected [C], [N, C] or [N, C, d1, ...]");
  EXPECT_HPU_FAIL(hpuCrossEntropyLossBackward(nullptr, T(HPU_FLOAT32, {2, 3}, random_values(6, 21)), x, t, nullptr,
                                              LossOptions(HPU_REDUCTION_NONE, -100, 0.1), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "grad_loss is f32[2, 3]", "expected shape [2, 4]");
  EXPECT_EQ(out, nullptr);
}

TEST_F(NnGrad, WeightedLossesBadInput) {
  hpuTensor_t x = T(HPU_FLOAT32, {2, 3}, random_values(6, 17)), t = T(HPU_INT64, {2}, {0, 1}), out = nullptr;
  EXPECT_HPU_FAIL(
      hpuCrossEntropyLoss(nullptr, x, t, T(HPU_FLOAT32, {2}, {1, 1}), LossOptions(HPU_REDUCTION_MEAN, -100), &out),
      HPU_ERROR_INVALID_ARGUMENT, "weight is f32[2]", "expected shape [3]");
  EXPECT_HPU_FAIL(hpuNllLoss(nullptr, x, t, T(HPU_INT64, {3}, {1, 1, 1}), LossOptions(HPU_REDUCTION_SUM, -100), &out),
                  HPU_ERROR_UNSUPPORTED, "weight is i64[3]");
}

TEST_F(NnGrad, LayerNormByFiniteDifferences) {
  check_gradients(
      dev, {{{3, 5}, random_values(15, 3, -2, 2)}, {{5}, random_values(5, 4)}, {{5}, random_values(5, 5)}},
      [](auto &t) {
        hpuTensor_t y = nullptr;
        EXPECT_HPU_OK(hpuLayerNorm(nullptr, t[0], t[1], t[2], nullptr, &y, nullptr, nullptr));
        return y;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t y = nullptr, mean = nullptr, rstd = nullptr, gx = nullptr, gw = nullptr, gb = nullptr;
        EXPECT_HPU_OK(hpuLayerNorm(nullptr, t[0], t[1], t[2], nullptr, &y, &mean, &rstd));
        EXPECT_HPU_OK(hpuLayerNormBackward(nullptr, g, t[0], mean, rstd, t[1], &gx, &gw, &gb));
        hpuTensorRelease(y), hpuTensorRelease(mean), hpuTensorRelease(rstd);
        return std::vector<hpuTensor_t>{gx, gw, gb};
      });
}

TEST_F(NnGrad, EmbeddingSumMeanCastByFiniteDifferences) {
  Input idx{{2, 3}, {1, 3, 1, 0, 2, 3}, HPU_INT32, false};
  check_gradients(
      dev, {{{4, 2}, random_values(8, 6)}, idx},
      [](auto &t) {
        hpuTensor_t o = nullptr;
        EXPECT_HPU_OK(hpuEmbedding(nullptr, t[0], t[1], 3, &o));
        return o;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t gw = nullptr;
        EXPECT_HPU_OK(hpuEmbeddingBackward(nullptr, g, t[1], t[0], -1, &gw));
        return std::vector<hpuTensor_t>{gw, nullptr};
      });
  for (bool mean : {false, true})
    for (std::vector<int> dims : {std::vector<int>{}, std::vector<int>{1}, std::vector<int>{0, 2}})
      for (int keepdim : {0, 1})
        check_gradients(
            dev, {{{2, 3, 2}, random_values(12, 7)}},
            [=](auto &t) {
              hpuTensor_t o = nullptr;
              EXPECT_HPU_OK((mean ? hpuMean : hpuSum)(nullptr, t[0], dims.data(), static_cast<int>(dims.size()),
                                                      keepdim, &o));
              return o;
            },
            [=](hpuTensor_t g, auto &t, hpuTensor_t) {
              hpuTensor_t gx = nullptr;
              EXPECT_HPU_OK((mean ? hpuMeanBackward : hpuSumBackward)(
                  nullptr, g, t[0], dims.data(), static_cast<int>(dims.size()), keepdim, &gx));
              return std::vector<hpuTensor_t>{gx};
            });
  check_gradients(
      dev, {{{5}, random_values(5, 8)}},
      [](auto &t) {
        hpuTensor_t o = nullptr, back = nullptr;
        EXPECT_HPU_OK(hpuCast(nullptr, t[0], HPU_FLOAT32, &o));
        EXPECT_HPU_OK(hpuCast(nullptr, o, HPU_FLOAT64, &back));
        hpuTensorRelease(o);
        return back;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t gx = nullptr;
        EXPECT_HPU_OK(hpuCastBackward(nullptr, g, t[0], &gx));
        return std::vector<hpuTensor_t>{gx};
      },
      1e-3, 1e-4);  // through f32: a coarser step
}

TEST_F(NnGrad, EmbeddingPaddingRowGetsNoGradient) {
  hpuTensor_t w = T(HPU_FLOAT32, {3, 2}, random_values(6, 9)), idx = T(HPU_INT64, {3}, {0, 2, 2});
  hpuTensor_t gw = nullptr;
  ASSERT_HPU_OK(hpuEmbeddingBackward(nullptr, T(HPU_FLOAT32, {3, 2}, {1, 2, 3, 4, 5, 6}), idx, w, 0, &gw));
  keep(gw);
  EXPECT_EQ(read(gw), (std::vector<double>{0, 0, 0, 0, 8, 10}));
}

TEST_F(NnGrad, DropoutIsReproducibleScaledAndMasked) {
  const int64_t n = 20000;
  std::vector<double> ones(n, 1.0);
  hpuTensor_t x = T(HPU_FLOAT32, {n}, ones);
  ASSERT_HPU_OK(hpuRandomSeed(dev, 1234));
  hpuTensor_t y1 = nullptr, m1 = nullptr, y2 = nullptr, y3 = nullptr;
  ASSERT_HPU_OK(hpuDropout(nullptr, x, 0.25, 1, &y1, &m1));
  ASSERT_HPU_OK(hpuDropout(nullptr, x, 0.25, 1, &y2, nullptr));
  keep(y1), keep(m1), keep(y2);
  ASSERT_HPU_OK(hpuRandomSeed(dev, 1234));
  ASSERT_HPU_OK(hpuDropout(nullptr, x, 0.25, 1, &y3, nullptr));
  keep(y3);
  std::vector<double> v1 = read(y1), mask = read(m1), v2 = read(y2), v3 = read(y3);
  EXPECT_EQ(v1, v3);  // same seed, same draws
  EXPECT_NE(v1, v2);  // the generator moved on
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(mask[i] == 0 || mask[i] == 1);
    EXPECT_NEAR(v1[i], mask[i] / 0.75, 1e-6);
    kept += mask[i] != 0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.02);  // ~15 sigma at this n

  std::vector<double> gv = random_values(n, 10);
  hpuTensor_t gx = nullptr;
  ASSERT_HPU_OK(hpuDropoutBackward(nullptr, T(HPU_BFLOAT16, {n}, gv), m1, 0.25, HPU_FLOAT32, &gx));
  keep(gx);
  EXPECT_EQ(dtype_of(gx), HPU_FLOAT32);
  std::vector<double> got = read(gx), want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = mask[i] * round_to(HPU_BFLOAT16, gv[i]) / 0.75;
  EXPECT_TRUE(near(got, want, 1e-6));

  hpuTensor_t ye = nullptr, me = nullptr;
  ASSERT_HPU_OK(hpuDropout(nullptr, x, 0.5, 0, &ye, &me));  // evaluation: identity
  keep(ye), keep(me);
  EXPECT_EQ(read(ye), ones);
  EXPECT_EQ(read(me), ones);
}

TEST_F(NnGrad, BadTargetOrIndexFailsTheStream) {
  // On a stream of its own, whose sticky error goes away with it.
  hpuStream_t s = nullptr;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  hpuTensor_t loss = nullptr, e = nullptr;
  ASSERT_HPU_OK(hpuCrossEntropyLoss(s, T(HPU_FLOAT32, {2, 3}, random_values(6, 11)), T(HPU_INT64, {2}, {1, 3}), nullptr,
                                    LossOptions(HPU_REDUCTION_MEAN, -100), &loss));
  keep(loss);
  EXPECT_HPU_FAIL(hpuStreamSynchronize(s), HPU_ERROR_INVALID_ARGUMENT, "target[1] is 3", "0..2");
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuEmbedding(s, T(HPU_FLOAT32, {3, 2}, random_values(6, 12)), T(HPU_INT32, {2}, {0, -1}), -1, &e));
  keep(e);
  EXPECT_HPU_FAIL(hpuStreamSynchronize(s), HPU_ERROR_INVALID_ARGUMENT, "indices[1] is -1");
  EXPECT_HPU_OK(hpuStreamDestroy(s));
}

TEST_F(NnGrad, LayerNormOverSeveralDimsByFiniteDifferences) {
  check_gradients(
      dev, {{{2, 3, 4}, random_values(24, 9, -2, 2)}, {{3, 4}, random_values(12, 10)}, {{3, 4}, random_values(12, 11)}},
      [](auto &t) {
        hpuTensor_t y = nullptr;
        EXPECT_HPU_OK(hpuLayerNorm(nullptr, t[0], t[1], t[2], LayerNormOptions(2), &y, nullptr, nullptr));
        return y;
      },
      [](hpuTensor_t g, auto &t, hpuTensor_t) {
        hpuTensor_t y = nullptr, mean = nullptr, rstd = nullptr, gx = nullptr, gw = nullptr, gb = nullptr;
        EXPECT_HPU_OK(hpuLayerNorm(nullptr, t[0], t[1], t[2], LayerNormOptions(2), &y, &mean, &rstd));
        EXPECT_HPU_OK(hpuLayerNormBackward(nullptr, g, t[0], mean, rstd, t[1], &gx, &gw, &gb));
        hpuTensorRelease(y), hpuTensorRelease(mean), hpuTensorRelease(rstd);
        return std::vector<hpuTensor_t>{gx, gw, gb};
      });
}

TEST_F(NnGrad, LayerNormOverSeveralDimsBadInput) {
  hpuTensor_t x = T(HPU_FLOAT32, {2, 3, 4}, random_values(24, 12)), out = nullptr, g = nullptr;
  for (int k : {0, 4, -1})
    EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, nullptr, nullptr, LayerNormOptions(k), &out, nullptr, nullptr),
                    HPU_ERROR_INVALID_ARGUMENT, ("options->normalized_ndim " + std::to_string(k)).c_str(), "1..3");
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, T(HPU_FLOAT32, {12}, random_values(12, 13)), nullptr, LayerNormOptions(2),
                               &out, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "weight is f32[12]", "expected shape [3, 4]");
  hpuTensor_t same = T(HPU_FLOAT32, {2, 3, 4}, random_values(24, 14));
  EXPECT_HPU_FAIL(hpuLayerNormBackward(nullptr, x, x, same, same, nullptr, &g, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "mean is f32[2, 3, 4]", "without the normalized dims");
  hpuTensor_t mean = T(HPU_FLOAT32, {2}, {0, 0}), rstd = T(HPU_FLOAT32, {3}, {1, 1, 1});
  EXPECT_HPU_FAIL(hpuLayerNormBackward(nullptr, x, x, mean, rstd, nullptr, &g, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "rstd is f32[3]", "expected shape [2]");
}

TEST_F(NnGrad, BadInput) {
  hpuTensor_t x = T(HPU_FLOAT32, {2, 3}, random_values(6, 1)), t = T(HPU_INT64, {2}, {0, 1});
  hpuTensor_t tf = T(HPU_FLOAT32, {2}, {0, 1}), i = T(HPU_INT32, {2, 3}, {0, 1, 2, 0, 1, 2});
  hpuTensor_t out = reinterpret_cast<hpuTensor_t>(0x1), g = nullptr;
  EXPECT_HPU_FAIL(hpuSoftmax(nullptr, x, 2, &out), HPU_ERROR_INVALID_ARGUMENT, "dim 2 is out of range");
  EXPECT_HPU_FAIL(hpuLogSoftmax(nullptr, i, 0, &out), HPU_ERROR_UNSUPPORTED, "x is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuSoftmaxBackward(nullptr, x, x, 0, static_cast<hpuDataType_t>(77), &g),
                  HPU_ERROR_INVALID_ARGUMENT, "input_dtype");
  EXPECT_HPU_FAIL(hpuCrossEntropyLoss(nullptr, x, tf, nullptr, LossOptions(HPU_REDUCTION_MEAN, -100), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "target is f32[2]", "expected shape [2, 3] (class probabilities");
  EXPECT_HPU_FAIL(
      hpuNllLoss(nullptr, x, T(HPU_INT64, {3}, {0, 1, 2}), nullptr, LossOptions(HPU_REDUCTION_SUM, -100), &out),
      HPU_ERROR_INVALID_ARGUMENT, "target is i64[3]", "expected shape [2]");
  EXPECT_HPU_FAIL(hpuNllLoss(nullptr, x, t, nullptr, LossOptions(static_cast<hpuReduction_t>(9), -100), &out),
                  HPU_ERROR_INVALID_ARGUMENT, "options->reduction 9");
  EXPECT_HPU_FAIL(hpuCrossEntropyLossBackward(nullptr, x, x, t, nullptr, LossOptions(HPU_REDUCTION_MEAN, -100), &g),
                  HPU_ERROR_INVALID_ARGUMENT, "grad_loss is f32[2, 3]");
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, T(HPU_FLOAT32, {2}, {1, 1}), nullptr, nullptr, &out, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "weight is f32[2]", "expected shape [3]");
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, nullptr, nullptr, LayerNormOptions(1, -1), &out, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "options->eps -1");
  EXPECT_HPU_FAIL(hpuLayerNormBackward(nullptr, x, x, t, t, nullptr, &g, nullptr, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "mean is i64[2]", "expected f32");
  EXPECT_HPU_FAIL(hpuDropout(nullptr, x, 1.5, 1, &out, nullptr), HPU_ERROR_INVALID_ARGUMENT, "p 1.5");
  EXPECT_HPU_FAIL(hpuDropoutBackward(nullptr, x, x, 0.5, HPU_FLOAT32, &g), HPU_ERROR_INVALID_ARGUMENT,
                  "mask is f32[2, 3]");
  EXPECT_HPU_FAIL(hpuEmbedding(nullptr, x, tf, -1, &out), HPU_ERROR_UNSUPPORTED, "indices is f32[2]");
  EXPECT_HPU_FAIL(hpuEmbedding(nullptr, T(HPU_FLOAT32, {4}, {1, 2, 3, 4}), t, -1, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "weight is f32[4]", "expected 2 dims");
  EXPECT_HPU_FAIL(hpuEmbedding(nullptr, x, t, 5, &out), HPU_ERROR_INVALID_ARGUMENT, "padding_idx 5");
  int dims[2] = {0, 0}, bad[1] = {3};
  EXPECT_HPU_FAIL(hpuSum(nullptr, x, dims, 2, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "dims[1] 0");
  EXPECT_HPU_FAIL(hpuSum(nullptr, x, bad, 1, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "dims[0] 3 is out of range");
  EXPECT_HPU_FAIL(hpuSum(nullptr, x, nullptr, 1, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "dims is NULL");
  EXPECT_HPU_FAIL(hpuMean(nullptr, i, nullptr, 0, 0, &out), HPU_ERROR_UNSUPPORTED, "x is i32[2, 3]");
  EXPECT_HPU_FAIL(hpuMeanBackward(nullptr, x, x, nullptr, 0, 0, &g), HPU_ERROR_INVALID_ARGUMENT,
                  "grad_out is f32[2, 3]", "expected shape []");
  EXPECT_HPU_FAIL(hpuCast(nullptr, x, static_cast<hpuDataType_t>(11), &out), HPU_ERROR_INVALID_ARGUMENT, "dtype");
  EXPECT_HPU_FAIL(hpuCast(nullptr, nullptr, HPU_FLOAT32, &out), HPU_ERROR_INVALID_HANDLE, "x");
  EXPECT_EQ(out, reinterpret_cast<hpuTensor_t>(0x1));
  EXPECT_EQ(g, nullptr);

  hpuTensor_t s = nullptr;  // integer sums give i64
  ASSERT_HPU_OK(hpuSum(nullptr, i, nullptr, 0, 0, &s));
  keep(s);
  EXPECT_EQ(dtype_of(s), HPU_INT64);
  EXPECT_EQ(read(s), std::vector<double>{6});
}


// No classes (C = 0): every class index is ignored, and a sample's loss over
// class probabilities is a sum over no classes; each sample's loss is 0 and
// the gradients are empty, with no kernel reading or writing an empty buffer
// (they passed NULL to memcpy: run under UBSan).
TEST_F(NnGrad, ZeroClassesGiveZeroLosses) {
  for (hpuDataType_t dt : {HPU_FLOAT32, HPU_FLOAT64, HPU_BFLOAT16}) {
    SCOPED_TRACE(dt);
    hpuTensor_t x = T(dt, {2, 0}, {}), t = T(HPU_INT64, {2}, {-100, -100}), probs = T(dt, {2, 0}, {});
    hpuTensor_t w = T(dt, {0}, {}), per = nullptr, soft = nullptr, g = nullptr;
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, t, w, LossOptions(HPU_REDUCTION_NONE, -100), &per));
    ASSERT_HPU_OK(hpuCrossEntropyLoss(nullptr, x, probs, w, LossOptions(HPU_REDUCTION_NONE, -100, 0.1), &soft));
    EXPECT_EQ(read(keep(per)), (std::vector<double>{0, 0}));
    EXPECT_EQ(read(keep(soft)), (std::vector<double>{0, 0}));
    ASSERT_HPU_OK(hpuCrossEntropyLossBackward(nullptr, T(dt, {2}, {1, 1}), x, probs, w,
                                              LossOptions(HPU_REDUCTION_NONE, -100, 0.1), &g));
    EXPECT_EQ(shape_of(keep(g)), (Shape{2, 0}));
  }
}
