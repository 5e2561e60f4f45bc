// What metrics.csv holds under which step, as Lightning logs it: a fit's
// validation under the step of the batch it follows (Lightning's
// _batches_that_stepped, before that batch's optimizer step counts), test
// after a fit under the steps taken; LearningRateMonitor's rate of each param
// group ("lr-AdamW/pg1").
#include <hpu/trainer.hpp>

#include "csv_util.hpp"
#include "fit_util.hpp"
#include "test_util.hpp"

#include <set>

using namespace trainer_test;

namespace {

hpu::TrainerOptions csv_run(const TempDir &dir, int64_t batches, int64_t val_every, int64_t accumulate = 1) {
  hpu::TrainerOptions o = silent_run(dir.path(), 5);
  o.max_epochs = 2;
  o.limit_train_batches = hpu::BatchCount{batches};
  o.limit_val_batches = hpu::BatchCount{2};
  o.val_check_interval = hpu::BatchCount{val_every};
  o.accumulate_grad_batches = accumulate;
  o.num_sanity_val_steps = 0;
  o.log_every_n_steps = 1;
  o.logger = hpu::CSVLogger(dir.path());
  return o;
}

// The steps of the rows that hold a metric starting with `prefix`.
std::set<int64_t> steps_with(const std::map<int64_t, std::map<std::string, double>> &rows, const std::string &prefix) {
  std::set<int64_t> out;
  for (const auto &[step, row] : rows)
    for (const auto &kv : row)
      if (kv.first.rfind(prefix, 0) == 0) out.insert(step);
  return out;
}

struct StepRecorder : hpu::Callback {
  std::string state_key() const override { return "StepRecorder"; }
  void on_validation_end(hpu::Trainer &t) override {
    if (!t.state().sanity_checking) global_steps.push_back(t.global_step());
  }
  std::vector<int64_t> global_steps;
};

hpu::Parameter param(const hpu::Device &dev, const std::string &name) {
  hpu::Parameter p;
  p.name = name;
  p.value = hpu::Tensor::full(dev.get(), HPU_FLOAT32, {2}, 1.0f);
  p.grad = hpu::Tensor::full(dev.get(), HPU_FLOAT32, {2}, 0.0f);
  return p;
}

}  // namespace

// 4 batches an epoch, validation every 2: after the batches that start at
// steps 1, 3, 5 and 7 (global_step is then 2, 4, 6, 8). Each validation's
// metrics join the row of its batch's training metrics.
TEST(LogSteps, ValidationLogsUnderTheStepOfTheBatchItFollows) {
  TempDir dir;
  auto rec = std::make_shared<StepRecorder>();
  hpu::TrainerOptions o = csv_run(dir, 4, 2);
  o.callbacks = {rec};
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  t.test(model, data);
  EXPECT_EQ(rec->global_steps, (std::vector<int64_t>{2, 4, 6, 8}));
  const auto rows = csv_rows(slurp(t.log_dir() + "/metrics.csv"));
  EXPECT_EQ(steps_with(rows, "val_"), (std::set<int64_t>{1, 3, 5, 7}));
  for (int64_t step : {1, 3, 5, 7}) EXPECT_EQ(rows.at(step).count("train_loss"), 1u) << step;
  // Test after the fit: under the 8 steps taken (Lightning's
  // _batches_that_stepped once the fit ended).
  EXPECT_EQ(steps_with(rows, "test_"), (std::set<int64_t>{8}));
}

// Accumulating 2 batches a step, validation every 2 batches follows the
// batches that step: the first starts at step 0, the second at step 1.
TEST(LogSteps, WithAccumulationValidationLogsUnderTheStepItsBatchStartedAt) {
  TempDir dir;
  hpu::TrainerOptions o = csv_run(dir, 4, 2, 2);
  o.max_epochs = 1;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_EQ(t.global_step(), 2);
  const auto rows = csv_rows(slurp(t.log_dir() + "/metrics.csv"));
  EXPECT_EQ(steps_with(rows, "val_"), (std::set<int64_t>{0, 1}));
}

// With no_weight_decay the classifier's AdamW has two param groups: each
// logs its rate, as Lightning's "lr-AdamW/pg1" and "lr-AdamW/pg2".
TEST(LrMonitorGroups, EachParamGroupLogsItsRate) {
  TempDir dir;
  hpu::TrainerOptions o = csv_run(dir, 3, 3);
  o.max_epochs = 1;
  o.callbacks = {hpu::LearningRateMonitor("step")};
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::OptimizerSpec opt = adamw(0.02);
  opt.weight_decay = 0.1;
  opt.no_weight_decay = {"bias", "norm"};
  hpu::Classifier model(mlp(), opt);
  t.fit(model, data);
  ASSERT_EQ(t.state().optimizers.at(0)->param_groups().size(), 2u);
  const auto rows = csv_rows(slurp(t.log_dir() + "/metrics.csv"));
  EXPECT_EQ(steps_with(rows, "lr-AdamW/pg1"), (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(steps_with(rows, "lr-AdamW/pg2"), (std::set<int64_t>{0, 1, 2}));
  for (const auto &[step, row] : rows) EXPECT_EQ(row.count("lr-AdamW"), 0u) << step;
  EXPECT_EQ(rows.at(0).at("lr-AdamW/pg1"), 0.02);
  EXPECT_EQ(rows.at(0).at("lr-AdamW/pg2"), 0.02);
}

// A group with a rate of its own logs that rate, scaled as the optimizer's.
TEST(LrMonitorGroups, AGroupsOwnRateAndMomentum) {
  TempDir dir;
  hpu::Device dev(0);
  hpu::Parameter a = param(dev, "a"), b = param(dev, "b"), c = param(dev, "c");
  hpu::SGD sgd(std::vector<hpu::ParamGroup>{{{&a}, std::nullopt, std::nullopt}, {{&b}, 0.5, std::nullopt},
                                            {{&c}, std::nullopt, 0.0}},
               0.25, 0.5);
  hpu::SGD single(std::vector<hpu::Parameter *>{&a}, 0.375);
  hpu::Trainer t(silent_run(dir.path()));
  t.state().optimizers = {&sgd, &single};
  sgd.set_lr(0.125);  // half its initial rate
  const hpu::Metrics m = hpu::LearningRateMonitor::learning_rates(t, true);
  EXPECT_EQ(m, (hpu::Metrics{{"lr-SGD/pg1", 0.125},
                             {"lr-SGD/pg1-momentum", 0.5},
                             {"lr-SGD/pg2", 0.25},
                             {"lr-SGD/pg2-momentum", 0.5},
                             {"lr-SGD/pg3", 0.125},
                             {"lr-SGD/pg3-momentum", 0.5},
                             {"lr-SGD-1", 0.375},
                             {"lr-SGD-1-momentum", 0.0}}));
  EXPECT_EQ(sgd.group_lr(1), 0.25);
  EXPECT_HPU_ERROR(sgd.group_lr(3), HPU_ERROR_INVALID_ARGUMENT, "param group 3: the optimizer has 3");
}
