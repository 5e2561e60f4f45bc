// The options structs of the losses and LayerNorm: NULL options give
// PyTorch's defaults, a struct_size of an older (smaller) struct leaves the
// fields it does not cover at their defaults, and a bad struct_size or field
// fails with a message naming it.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class OpsOptions : public OpsTest {
 protected:
  hpuTensor_t x = nullptr, t = nullptr;
  void SetUp() override {
    OpsTest::SetUp();
    x = T(HPU_FLOAT32, {4, 3}, random_values(12, 40, -2, 2));
    t = T(HPU_INT64, {4}, {0, 2, -100, 1});  // one sample ignored by the default ignore_index
  }
  // The loss of one of the two functions with the given options.
  std::vector<double> loss(bool cross_entropy, const hpuLossOptions_t *o, hpuTensor_t weight = nullptr) {
    hpuTensor_t out = nullptr;
    EXPECT_HPU_OK(cross_entropy ? hpuCrossEntropyLoss(nullptr, x, t, weight, o, &out)
                                : hpuNllLoss(nullptr, x, t, weight, o, &out));
    return out ? read(keep(out)) : std::vector<double>{};
  }
  // y of hpuLayerNorm of [2, 2, 2] = 0..7 with no weight and bias.
  std::vector<double> layer_norm(const hpuLayerNormOptions_t *o) {
    hpuTensor_t y = nullptr;
    EXPECT_HPU_OK(hpuLayerNorm(nullptr, T(HPU_FLOAT64, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), nullptr, nullptr, o, &y,
                               nullptr, nullptr));
    return y ? read(keep(y)) : std::vector<double>{};
  }
};

TEST_F(OpsOptions, NullLossOptionsArePyTorchDefaults) {
  const hpuLossOptions_t defaults = HPU_LOSS_OPTIONS_INIT;
  EXPECT_EQ(defaults.reduction, HPU_REDUCTION_MEAN);
  EXPECT_EQ(defaults.ignore_index, -100);
  EXPECT_EQ(defaults.label_smoothing, 0.0);
  for (bool ce : {false, true}) {
    std::vector<double> by_null = loss(ce, nullptr), by_init = loss(ce, &defaults);
    ASSERT_EQ(by_null.size(), 1u);  // a mean: one value
    EXPECT_TRUE(near(by_null, by_init, 0)) << ce;
    // The ignored sample counts nothing: the mean of the three others.
    hpuLossOptions_t none = HPU_LOSS_OPTIONS_INIT;
    none.reduction = HPU_REDUCTION_NONE;
    std::vector<double> per = loss(ce, &none);
    ASSERT_EQ(per.size(), 4u);
    EXPECT_EQ(per[2], 0.0);
    EXPECT_NEAR(by_null[0], (per[0] + per[1] + per[3]) / 3, 1e-6) << ce;
  }
}

TEST_F(OpsOptions, ShorterLossOptionsKeepTheRestAtDefaults) {
  // A caller built when the struct ended after `reduction` sets SUM only:
  // ignore_index stays -100 and label_smoothing 0, whatever lies past the end.
  hpuLossOptions_t old = HPU_LOSS_OPTIONS_INIT;
  old.struct_size = offsetof(hpuLossOptions_t, ignore_index);
  old.reduction = HPU_REDUCTION_SUM;
  old.ignore_index = 0, old.label_smoothing = 0.5;  // past struct_size: not read
  hpuLossOptions_t sum = HPU_LOSS_OPTIONS_INIT;
  sum.reduction = HPU_REDUCTION_SUM;
  for (bool ce : {false, true}) EXPECT_TRUE(near(loss(ce, &old), loss(ce, &sum), 0)) << ce;
}

TEST_F(OpsOptions, BadLossOptionsNameTheField) {
  hpuTensor_t out = nullptr;
  hpuLossOptions_t o = HPU_LOSS_OPTIONS_INIT;
  o.struct_size = 0;
  EXPECT_HPU_FAIL(hpuCrossEntropyLoss(nullptr, x, t, nullptr, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuCrossEntropyLoss: options->struct_size is 0; set it with the matching _INIT macro");
  o = HPU_LOSS_OPTIONS_INIT;
  o.reduction = static_cast<hpuReduction_t>(7);
  EXPECT_HPU_FAIL(hpuNllLossBackward(nullptr, x, x, t, nullptr, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuNllLossBackward: options->reduction 7 is not an hpuReduction_t");
  o = HPU_LOSS_OPTIONS_INIT;
  o.label_smoothing = 0.1;  // nll_loss has no label smoothing (PyTorch's nll_loss takes none)
  EXPECT_HPU_FAIL(hpuNllLoss(nullptr, x, t, nullptr, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuNllLoss: options->label_smoothing is 0.1: nll_loss has none");
  o.label_smoothing = -0.5;
  EXPECT_HPU_FAIL(hpuCrossEntropyLoss(nullptr, x, t, nullptr, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuCrossEntropyLoss: options->label_smoothing -0.5 is not in 0..1");
  EXPECT_EQ(out, nullptr);
}

TEST_F(OpsOptions, LossOptionsCombine) {
  // Weights, another ignore_index and label smoothing together: the sum and
  // the mean are the per-sample losses' sum, and that sum over the counted
  // samples' weights.
  t = T(HPU_INT64, {4}, {0, 2, 1, 1});
  hpuTensor_t w = T(HPU_FLOAT32, {3}, {0.5, 2, 1});
  hpuLossOptions_t o = HPU_LOSS_OPTIONS_INIT;
  o.ignore_index = 2, o.label_smoothing = 0.2, o.reduction = HPU_REDUCTION_NONE;
  std::vector<double> per = loss(true, &o, w);
  ASSERT_EQ(per.size(), 4u);
  EXPECT_EQ(per[1], 0.0);  // target 2: ignored
  o.reduction = HPU_REDUCTION_SUM;
  std::vector<double> sum = loss(true, &o, w);
  o.reduction = HPU_REDUCTION_MEAN;
  std::vector<double> mean = loss(true, &o, w);
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_NEAR(sum[0], per[0] + per[2] + per[3], 1e-5);
  EXPECT_NEAR(mean[0], sum[0] / (0.5 + 2 + 2), 1e-5);
}

TEST_F(OpsOptions, LayerNormOptions) {
  const hpuLayerNormOptions_t defaults = HPU_LAYER_NORM_OPTIONS_INIT;
  EXPECT_EQ(defaults.normalized_ndim, 1);
  EXPECT_EQ(defaults.eps, 1e-5);
  // NULL: over the last dim with eps 1e-5: pairs (a, a + 1) give -+1/sqrt(0.25 + 1e-5).
  const double one = 0.5 / std::sqrt(0.25 + 1e-5);
  std::vector<double> y = layer_norm(nullptr);
  EXPECT_TRUE(near(y, {-one, one, -one, one, -one, one, -one, one}, 1e-12));
  EXPECT_TRUE(near(layer_norm(&defaults), y, 0));
  // Over the last two dims with eps 1: rows 0..3 and 4..7, variance 1.25.
  hpuLayerNormOptions_t o = HPU_LAYER_NORM_OPTIONS_INIT;
  o.normalized_ndim = 2, o.eps = 1;
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) want.push_back((i % 4 - 1.5) / std::sqrt(1.25 + 1));
  EXPECT_TRUE(near(layer_norm(&o), want, 1e-12));
  // A struct that ends after normalized_ndim: eps stays 1e-5.
  o.struct_size = offsetof(hpuLayerNormOptions_t, eps);
  o.normalized_ndim = 1;
  EXPECT_TRUE(near(layer_norm(&o), y, 0));
  // Bad fields name themselves.
  hpuTensor_t out = nullptr;
  o = HPU_LAYER_NORM_OPTIONS_INIT;
  o.struct_size = 1 << 20;
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, nullptr, nullptr, &o, &out, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuLayerNorm: options->struct_size is 1048576");
  o = HPU_LAYER_NORM_OPTIONS_INIT;
  o.normalized_ndim = 0;
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, nullptr, nullptr, &o, &out, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuLayerNorm: options->normalized_ndim 0 is out of range for x f32[4, 3] (1..2)");
  o.normalized_ndim = 1, o.eps = NAN;
  EXPECT_HPU_FAIL(hpuLayerNorm(nullptr, x, nullptr, nullptr, &o, &out, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "hpuLayerNorm: options->eps nan is not a finite number >= 0");
  EXPECT_EQ(out, nullptr);
}

}  // namespace
