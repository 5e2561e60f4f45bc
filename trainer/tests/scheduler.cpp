#include <hpu/trainer/scheduler.hpp>

#include "test_util.hpp"

TEST(StepLR, DecaysEveryStepSize) {
  hpu::StepLR s(0.1, 3, 0.5);
  EXPECT_EQ(s.interval(), hpu::Interval::epoch);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 0.05);
  EXPECT_DOUBLE_EQ(s.lr_at(8), 0.025);
  EXPECT_HPU_ERROR(hpu::StepLR(0.1, 0), HPU_ERROR_INVALID_ARGUMENT, "step_size is 0");
  EXPECT_HPU_ERROR(hpu::StepLR(0.1, 1, 0.0), HPU_ERROR_INVALID_ARGUMENT, "gamma is 0");
  EXPECT_HPU_ERROR(hpu::StepLR(-1, 1), HPU_ERROR_INVALID_ARGUMENT, "lr is -1");
}

TEST(CosineWarmupLR, WarmsUpLinearlyThenFollowsAHalfCosine) {
  hpu::CosineWarmupLR s(1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1.0);
  EXPECT_NEAR(s.lr_at(60), 0.55, 1e-12);  // half way: (base + min) / 2
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), 0.1);
  for (int64_t t = 10; t < 110; ++t) EXPECT_GE(s.lr_at(t), s.lr_at(t + 1));
  hpu::CosineWarmupLR nowarm(1.0, 0, 10);
  EXPECT_DOUBLE_EQ(nowarm.lr_at(0), 1.0);
  EXPECT_HPU_ERROR(hpu::CosineWarmupLR(1.0, 10, 10), HPU_ERROR_INVALID_ARGUMENT, "total_steps is 10");
  EXPECT_HPU_ERROR(hpu::CosineWarmupLR(1.0, -1, 10), HPU_ERROR_INVALID_ARGUMENT, "warmup_steps is -1");
  EXPECT_HPU_ERROR(hpu::CosineWarmupLR(1.0, 1, 10, 2.0), HPU_ERROR_INVALID_ARGUMENT, "min_lr is 2");
}
