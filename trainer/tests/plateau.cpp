// ReduceLROnPlateau (scheduler.hpp): PyTorch's rules (mode, factor,
// patience, threshold, cooldown, min_lr), driven by a logged metric as
// Lightning's lr_scheduler_config {"monitor": ...}; from C++ and a job; its
// state in checkpoints.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

using namespace trainer_test;

namespace {

// The rate after each of `values`.
std::vector<double> rates(hpu::ReduceLROnPlateau &s, const std::vector<double> &values) {
  std::vector<double> out;
  for (double v : values) {
    s.step(v);
    out.push_back(s.lr_at(0));
  }
  return out;
}

}  // namespace

TEST(Plateau, ReducesAfterPatienceEpochsWithoutImprovement) {
  hpu::PlateauOptions o;
  o.factor = 0.5;
  o.patience = 2;
  o.threshold = 0;
  hpu::ReduceLROnPlateau s(1.0, o);
  EXPECT_EQ(s.interval(), hpu::Interval::epoch);
  EXPECT_EQ(s.monitor(), "val_loss");
  // 1.0 and 0.9 improve; three bad epochs exceed the patience of 2.
  EXPECT_EQ(rates(s, {1.0, 0.9, 0.95, 0.9, 0.92, 0.95, 0.95, 0.95}),
            (std::vector<double>{1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25}));
  EXPECT_EQ(s.best(), 0.9);
}

TEST(Plateau, ModeMaxThresholdsCooldownAndMinLr) {
  hpu::PlateauOptions o;
  o.mode = "max";
  o.factor = 0.1;
  o.patience = 0;
  o.threshold = 0.1;  // relative: better means more than best x 1.1
  o.cooldown = 1;
  o.min_lr = 0.05;
  hpu::ReduceLROnPlateau s(1.0, o);
  // 1.05 is not 10% above 1.0: bad, reduce at once (patience 0); the next
  // epoch is the cooldown's; then the floor holds.
  EXPECT_EQ(rates(s, {1.0, 1.05, 1.0, 1.0, 1.0}), (std::vector<double>{1, 0.1, 0.1, 0.05, 0.05}));
  o.threshold_mode = "abs";
  o.threshold = 0.01;
  o.cooldown = 0;
  hpu::ReduceLROnPlateau a(1.0, o);
  EXPECT_EQ(rates(a, {1.0, 1.02, 1.025}), (std::vector<double>{1, 1, 0.1}));  // +0.005 is within the threshold
  // A change smaller than eps is skipped.
  o.eps = 0.95;  // the cut from 1 to 0.1 is 0.9
  hpu::ReduceLROnPlateau e(1.0, o);
  EXPECT_EQ(rates(e, {1.0, 1.0}), (std::vector<double>{1, 1}));
}

TEST(Plateau, BadOptionsAreErrorsNamingThem) {
  auto with = [](auto set) {
    hpu::PlateauOptions o;
    set(o);
    return o;
  };
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.factor = 1.0; })), HPU_ERROR_INVALID_ARGUMENT,
                   "factor is 1; expected in (0, 1)");
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.mode = "up"; })), HPU_ERROR_INVALID_ARGUMENT,
                   "ReduceLROnPlateau mode is \"up\"");
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.threshold_mode = "x"; })),
                   HPU_ERROR_INVALID_ARGUMENT, "threshold_mode is \"x\"");
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.patience = -1; })), HPU_ERROR_INVALID_ARGUMENT,
                   "patience is -1");
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.monitor = ""; })), HPU_ERROR_INVALID_ARGUMENT,
                   "ReduceLROnPlateau monitor is empty");
  EXPECT_HPU_ERROR(hpu::ReduceLROnPlateau(1, with([](auto &o) { o.min_lr = -1; })), HPU_ERROR_INVALID_ARGUMENT,
                   "min_lr is -1");
}

namespace {

// A classifier whose validation also reports a metric that never improves
// ("val_flat", always 1), and that records the rate of every epoch.
struct Flat : hpu::Classifier {
  explicit Flat(hpu::SchedulerSpec s) : Classifier(mlp(), adamw(0.01), s) {}
  hpu::Metrics evaluation_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y) override {
    hpu::Metrics m = Classifier::evaluation_step(ctx, x, y);
    m["flat"] = double(x.shape()[0]);  // a sum over the batch: its mean is 1
    return m;
  }
};

struct Rates : hpu::Callback {
  std::string state_key() const override { return "Rates"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_train_epoch_start(hpu::Trainer &t) override { lrs.push_back(t.state().optimizers[0]->lr()); }
  std::vector<double> lrs;
};

hpu::SchedulerSpec plateau(const std::string &monitor) {
  hpu::SchedulerSpec s;
  s.name = "plateau";
  s.monitor = monitor;
  s.factor = 0.5;
  s.patience = 1;
  return s;
}

// Checkpoints on: the resume test saves the last one.
hpu::TrainerOptions quiet(const TempDir &dir, const std::string &root) {
  hpu::TrainerOptions o = silent_run(dir / root, 4);
  o.limit_train_batches = 2;
  o.limit_val_batches = 1;
  o.num_sanity_val_steps = 0;
  o.enable_checkpointing = true;
  return o;
}

}  // namespace

// From a job's scheduler section, the rate halves every second epoch once
// val_flat stops improving (patience 1); a resumed run follows the same
// rates and ends with the same weights, bit for bit.
TEST(Plateau, AFitReducesTheRateWhenTheMonitorStopsImprovingAndResumesExactly) {
  TempDir dir;
  hpu::Job job = hpu::parse_job(R"({"model": {"layers": [{"type": "relu"}]},
      "scheduler": {"name": "plateau", "monitor": "val_flat", "factor": 0.5, "patience": 1}})",
                                "job.json");
  ASSERT_EQ(job.scheduler.name, "plateau");
  hpu::InMemoryData data = blob_data();
  auto fit = [&](int64_t epochs, const std::string &root, const std::string &resume) {
    hpu::TrainerOptions o = quiet(dir, root);
    o.max_epochs = epochs;
    o.callbacks = {hpu::ModelCheckpoint({.save_top_k = 0, .save_last = true})};
    auto rates = std::make_shared<Rates>();
    o.callbacks.push_back(rates);
    hpu::Trainer t(o);
    Flat model(job.scheduler);
    t.fit(model, data, resume);
    return std::make_tuple(rates->lrs, weights(model), t.callback<hpu::ModelCheckpoint>()->last_model_path());
  };
  const auto [lrs, whole, last] = fit(6, "whole", "");
  // Steps at the ends of epochs 0..5: best, bad 1, bad 2 > 1: halve, ...
  EXPECT_EQ(lrs, (std::vector<double>{0.01, 0.01, 0.01, 0.005, 0.005, 0.0025}));
  const auto [lrs3, part, path] = fit(3, "part", "");
  hpu::Checkpoint ck = hpu::load_checkpoint_file(path);
  hpu::ReduceLROnPlateau saved(1.0);
  saved.load_state_dict(ck.get_meta("lr_scheduler"));  // the state after epoch 2's step
  EXPECT_EQ(saved.lr_at(0), 0.005);
  EXPECT_EQ(saved.best(), 1.0);
  EXPECT_EQ(saved.num_bad_epochs(), 0);
  const auto [resumed_lrs, resumed, unused] = fit(6, "resumed", path);
  EXPECT_EQ(resumed_lrs, (std::vector<double>{0.005, 0.005, 0.0025}));
  expect_bit_identical(whole, resumed);
}

TEST(Plateau, AMonitorNeverLoggedIsAnErrorListingTheLoggedOnes) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o = quiet(dir, "x");
  o.max_epochs = 2;
  o.enable_checkpointing = false;
  hpu::Trainer t(o);
  Flat model(plateau("val_nope"));
  EXPECT_HPU_ERROR(t.fit(model, data), HPU_ERROR_INVALID_ARGUMENT,
                   "ReduceLROnPlateau conditioned on metric \"val_nope\", which is not available; available metrics: ");
}

TEST(Plateau, TheJobKeysAreReadWrittenAndChecked) {
  const std::string head = R"({"model": {"layers": [{"type": "relu"}]}, "scheduler": {"name": "plateau", )";
  hpu::Job j = hpu::parse_job(head + R"("mode": "max", "monitor": "val_acc", "cooldown": 2, "min_lr": 1e-5}})",
                              "job.json");
  EXPECT_EQ(j.scheduler.mode, "max");
  EXPECT_EQ(j.scheduler.cooldown, 2);
  const std::string text = hpu::job_to_json(j);
  for (const char *key : {"\"monitor\": \"val_acc\"", "\"mode\": \"max\"", "\"factor\": 0.1", "\"patience\": 10",
                          "\"threshold_mode\": \"rel\"", "\"cooldown\": 2", "\"min_lr\": 1.0e-05"})
    EXPECT_NE(text.find(key), std::string::npos) << key << " not in " << text;
  EXPECT_EQ(hpu::parse_job(text, "again.json").scheduler.monitor, "val_acc");
  hpu::Classifier c(mlp(), adamw(), j.scheduler);
  EXPECT_EQ(c.configure_scheduler(0.1, 10)->name(), "ReduceLROnPlateau");
  EXPECT_HPU_ERROR(hpu::parse_job(head + R"("factor": 1.5}})", "job.json"), HPU_ERROR_CONFIG, "scheduler.factor");
  EXPECT_HPU_ERROR(hpu::parse_job(head + R"("interval": "step"}})", "job.json"), HPU_ERROR_CONFIG,
                   "scheduler.interval: \"step\"; plateau steps once per epoch");
  EXPECT_HPU_ERROR(hpu::parse_job(head + R"("threshold_mode": "pct"}})", "job.json"), HPU_ERROR_CONFIG,
                   "scheduler.threshold_mode");
}
