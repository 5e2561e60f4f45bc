// What the per-batch callbacks log, and under which step, in a real fit:
// DeviceStatsMonitor's start and end of one batch share that batch's row, and
// LearningRateMonitor logs the rate each optimizer step used.
#include <hpu/trainer.hpp>

#include "csv_util.hpp"
#include "fit_util.hpp"
#include "test_util.hpp"

#include <map>

using namespace trainer_test;

namespace {

hpu::TrainerOptions csv_run(const TempDir &dir, std::vector<hpu::Ref<hpu::Callback>> callbacks, int64_t batches) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 3;
  o.max_epochs = 1;
  o.limit_train_batches = hpu::BatchCount{batches};
  o.limit_val_batches = hpu::BatchCount{0};
  o.log_every_n_steps = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.callbacks = std::move(callbacks);
  return o;
}

const char *const kStart = "DeviceStatsMonitor.on_train_batch_start/";
const char *const kEnd = "DeviceStatsMonitor.on_train_batch_end/";
const char *const kFigures[] = {"Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs",
                                "MaxAllocSize", "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs"};

// Runs after DeviceStatsMonitor: what it has just logged for each batch, with
// the step the batch started at.
struct StatsRecorder : hpu::Callback {
  std::string state_key() const override { return "StatsRecorder"; }
  void on_train_batch_start(hpu::Trainer &t, int64_t) override {
    batches.push_back({t.global_step(), figures(t, kStart), {}});
  }
  void on_train_batch_end(hpu::Trainer &t, const hpu::Metrics &, int64_t) override {
    batches.back().end = figures(t, kEnd);
  }
  static std::map<std::string, double> figures(hpu::Trainer &t, const char *prefix) {
    std::map<std::string, double> m;
    for (const char *k : kFigures) m[k] = t.state().callback_metrics.at(prefix + std::string(k));
    return m;
  }
  struct Batch {
    int64_t step;
    std::map<std::string, double> start, end;
  };
  std::vector<Batch> batches;
};

// Records, after each batch, the learning rate its optimizer step used.
struct LrRecorder : hpu::Callback {
  std::string state_key() const override { return "LrRecorder"; }
  void on_train_batch_start(hpu::Trainer &t, int64_t) override { step = t.global_step(); }
  void on_train_batch_end(hpu::Trainer &t, const hpu::Metrics &, int64_t) override {
    used[step] = t.state().optimizers.at(0)->lr();
  }
  int64_t step = 0;
  std::map<int64_t, double> used;
};

}  // namespace

TEST(DeviceStatsMonitorFit, StartAndEndOfABatchShareItsStepAndCanDiffer) {
  TempDir dir;
  auto recorder = std::make_shared<StatsRecorder>();
  hpu::Trainer t(csv_run(dir, {hpu::DeviceStatsMonitor{}, recorder}, 5));
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  ASSERT_EQ(recorder->batches.size(), 5u);
  const auto rows = csv_rows(slurp(t.log_dir() + "/metrics.csv"));
  for (const auto &b : recorder->batches) {
    SCOPED_TRACE("batch starting at step " + std::to_string(b.step));
    ASSERT_EQ(rows.count(b.step), 1u);
    const auto &row = rows.at(b.step);
    for (const char *k : kFigures) {
      ASSERT_EQ(row.count(kStart + std::string(k)), 1u) << k;
      ASSERT_EQ(row.count(kEnd + std::string(k)), 1u) << k;
      EXPECT_EQ(row.at(kStart + std::string(k)), b.start.at(k)) << k;
      EXPECT_EQ(row.at(kEnd + std::string(k)), b.end.at(k)) << k;
    }
    // The batch's loss is in the same row.
    EXPECT_EQ(row.count("train_loss"), 1u);
  }
  // The first batch allocates its activations, gradients and AdamW's moments:
  // its end holds more than its start.
  const auto &first = recorder->batches.front();
  EXPECT_EQ(first.step, 0);
  EXPECT_GT(first.end.at("MaxInUse"), first.start.at("MaxInUse"));
  EXPECT_GT(first.end.at("NumAllocs"), first.start.at("NumAllocs"));
}

TEST(LearningRateMonitorFit, LogsTheRateEachStepUsedUnderThatStep) {
  TempDir dir;
  auto used = std::make_shared<LrRecorder>();
  hpu::Trainer t(csv_run(dir, {hpu::LearningRateMonitor("step"), used}, 8));
  hpu::InMemoryData data = blob_data();
  hpu::SchedulerSpec warmup = fixed_cosine();  // 5 warm-up steps of 64
  const double base = 0.05;
  hpu::Classifier model(mlp(), adamw(base), warmup);
  t.fit(model, data);
  const hpu::CosineWarmupLR schedule(base, warmup.warmup_steps, warmup.total_steps);
  const auto rows = csv_rows(slurp(t.log_dir() + "/metrics.csv"));
  ASSERT_EQ(used->used.size(), 8u);
  for (const auto &[step, lr] : used->used) {
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_EQ(rows.count(step), 1u);
    ASSERT_EQ(rows.at(step).count("lr-AdamW"), 1u);
    EXPECT_EQ(rows.at(step).at("lr-AdamW"), lr);
    EXPECT_DOUBLE_EQ(lr, schedule.lr_at(step));
  }
  // Warm-up: step 0 ran at a fifth of the base rate, and logged it.
  EXPECT_DOUBLE_EQ(rows.at(0).at("lr-AdamW"), base / 5);
}
