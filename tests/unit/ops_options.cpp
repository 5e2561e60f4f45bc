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

}  // namespace
