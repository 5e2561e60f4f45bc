#include <hpu/trainer.hpp>

#include "test_util.hpp"

#include <cmath>
#include <cstdio>

using namespace trainer_test;

namespace {

hpu::TrainerOptions quiet(const TempDir &dir, std::vector<hpu::Ref<hpu::Callback>> callbacks, int devices = 1) {
  hpu::TrainerOptions o;
  o.devices = devices;
  o.seed = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.callbacks = std::move(callbacks);
  for (auto &c : o.callbacks)
    if (dynamic_cast<hpu::ModelCheckpoint *>(c.get())) o.enable_checkpointing = true;
  return o;
}

struct FakeOptimizer : hpu::Optimizer {
  FakeOptimizer(std::string n, double lr, std::optional<double> m) : Optimizer(lr), n_(std::move(n)), m_(m) {}
  std::string name() const override { return n_; }
  std::optional<double> momentum() const override { return m_; }
  std::string n_;
  std::optional<double> m_;
};

}  // namespace

// ---- EarlyStopping ------------------------------------------------------------

TEST(EarlyStopping, StopsAfterPatienceChecksWithoutImprovement) {
  TempDir dir;
  auto es = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "val_loss", .min_delta = 0.1, .patience = 2});
  hpu::Trainer t(quiet(dir, {es}));
  auto &m = t.state().callback_metrics;
  for (double v : {1.0, 0.8, 0.75, 0.71}) {  // 0.75 and 0.71 improve by less than min_delta
    m["val_loss"] = v;
    es->on_validation_end(t);
  }
  EXPECT_TRUE(t.state().should_stop);
  EXPECT_EQ(es->wait_count(), 2);
  EXPECT_DOUBLE_EQ(*es->best_score(), 0.8);
  EXPECT_NE(es->reason().find("did not improve"), std::string::npos);
}

TEST(EarlyStopping, ModeMaxResetsOnImprovement) {
  TempDir dir;
  auto es = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "val_acc", .patience = 2, .mode = "max"});
  hpu::Trainer t(quiet(dir, {es}));
  auto &m = t.state().callback_metrics;
  for (double v : {0.5, 0.4, 0.6, 0.55}) {
    m["val_acc"] = v;
    es->on_validation_end(t);
    EXPECT_FALSE(t.state().should_stop) << v;
  }
  EXPECT_EQ(es->wait_count(), 1);
  m["val_acc"] = 0.59;
  es->on_validation_end(t);
  EXPECT_TRUE(t.state().should_stop);
}

TEST(EarlyStopping, ThresholdsAndNonFiniteValuesStop) {
  TempDir dir;
  for (auto [opts, value, why] :
       std::vector<std::tuple<hpu::EarlyStoppingOptions, double, std::string>>{
           {{.monitor = "l", .stopping_threshold = 0.1}, 0.05, "stopping threshold"},
           {{.monitor = "l", .divergence_threshold = 5.0}, 6.0, "divergence threshold"},
           {{.monitor = "l"}, NAN, "not finite"},
           {{.monitor = "l"}, INFINITY, "not finite"}}) {
    auto es = std::make_shared<hpu::EarlyStopping>(opts);
    hpu::Trainer t(quiet(dir, {es}));
    t.state().callback_metrics["l"] = value;
    es->on_validation_end(t);
    EXPECT_TRUE(t.state().should_stop) << why;
    EXPECT_NE(es->reason().find(why), std::string::npos) << es->reason();
  }
}

TEST(EarlyStopping, AMissingMetricIsAnErrorListingTheLoggedOnes) {
  TempDir dir;
  auto es = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "val_los"});
  hpu::Trainer t(quiet(dir, {es}));
  t.state().callback_metrics["val_loss"] = 1;
  EXPECT_HPU_ERROR(es->on_validation_end(t), HPU_ERROR_INVALID_ARGUMENT, "available metrics: val_loss");
  auto lax = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "x", .strict = false});
  lax->on_validation_end(t);
  EXPECT_FALSE(t.state().should_stop);
  EXPECT_HPU_ERROR(hpu::EarlyStopping({.monitor = ""}), HPU_ERROR_INVALID_ARGUMENT, "monitor is empty");
  EXPECT_HPU_ERROR(hpu::EarlyStopping({.monitor = "a", .mode = "up"}), HPU_ERROR_INVALID_ARGUMENT, "mode is \"up\"");
  EXPECT_HPU_ERROR(hpu::EarlyStopping({.monitor = "a", .patience = -1}), HPU_ERROR_INVALID_ARGUMENT, "patience is -1");
}

// ---- ModelCheckpoint ----------------------------------------------------------

TEST(ModelCheckpoint, KeepsTheTopKByTheMonitor) {
  TempDir dir;
  auto mc = std::make_shared<hpu::ModelCheckpoint>(
      hpu::ModelCheckpointOptions{.dirpath = dir / "ck", .filename = "{epoch}-{val_loss:.2f}", .monitor = "val_loss",
                                  .save_top_k = 2, .save_last = true});
  hpu::Trainer t(quiet(dir, {mc}));
  mc->setup(t, hpu::Stage::fit);
  const double losses[] = {0.9, 0.5, 0.7, 0.3, 0.8};
  for (int e = 0; e < 5; ++e) {
    t.state().current_epoch = e;
    t.state().global_step = 10 * (e + 1);
    t.state().callback_metrics["val_loss"] = losses[e];
    mc->on_train_epoch_end(t);
  }
  EXPECT_TRUE(file_exists(dir / "ck/epoch=3-val_loss=0.30.ckpt"));
  EXPECT_TRUE(file_exists(dir / "ck/epoch=1-val_loss=0.50.ckpt"));
  EXPECT_FALSE(file_exists(dir / "ck/epoch=0-val_loss=0.90.ckpt"));
  EXPECT_FALSE(file_exists(dir / "ck/epoch=2-val_loss=0.70.ckpt"));
  EXPECT_FALSE(file_exists(dir / "ck/epoch=4-val_loss=0.80.ckpt"));
  EXPECT_EQ(mc->best_k_models().size(), 2u);
  EXPECT_EQ(mc->best_model_path(), dir / "ck/epoch=3-val_loss=0.30.ckpt");
  EXPECT_DOUBLE_EQ(*mc->best_model_score(), 0.3);
  EXPECT_EQ(mc->last_model_path(), dir / "ck/last.ckpt");
  // Every kept file is a valid checkpoint of its moment.
  auto ck = hpu::load_checkpoint_file(dir / "ck/last.ckpt");
  EXPECT_NE(ck.meta.find("\"global_step\":50"), std::string::npos) << ck.meta;
}

TEST(ModelCheckpoint, WithoutAMonitorKeepsTheLatestInTheLogFolder) {
  TempDir dir;
  auto mc = std::make_shared<hpu::ModelCheckpoint>();
  hpu::Trainer t(quiet(dir, {mc}));
  mc->setup(t, hpu::Stage::fit);
  EXPECT_EQ(mc->dirpath(), dir / "lightning_logs/version_0/checkpoints");
  for (int e = 0; e < 3; ++e) {
    t.state().current_epoch = e;
    t.state().global_step = 7 * (e + 1);
    mc->on_train_epoch_end(t);
  }
  EXPECT_EQ(mc->best_model_path(), mc->dirpath() + "/epoch=2-step=21.ckpt");
  EXPECT_TRUE(file_exists(mc->best_model_path()));
  EXPECT_FALSE(file_exists(mc->dirpath() + "/epoch=1-step=14.ckpt"));
  EXPECT_FALSE(file_exists(mc->dirpath() + "/last.ckpt"));
}

TEST(ModelCheckpoint, EveryNStepsAndSaveTopKAll) {
  TempDir dir;
  auto mc = std::make_shared<hpu::ModelCheckpoint>(
      hpu::ModelCheckpointOptions{.dirpath = dir.path(), .save_top_k = -1, .every_n_train_steps = 5});
  hpu::Trainer t(quiet(dir, {mc}));
  for (int s = 1; s <= 12; ++s) {
    t.state().global_step = s;
    mc->on_train_batch_end(t, {}, s - 1);
  }
  mc->on_train_epoch_end(t);  // not an epoch-based checkpoint
  EXPECT_EQ(mc->best_k_models().size(), 2u);
  EXPECT_TRUE(file_exists(dir / "epoch=0-step=5.ckpt"));
  EXPECT_TRUE(file_exists(dir / "epoch=0-step=10.ckpt"));
}

TEST(ModelCheckpoint, NameCollisionsGetAVersionSuffix) {
  TempDir dir;
  spit(dir / "epoch=0-step=0.ckpt", "someone else's file");
  auto mc = std::make_shared<hpu::ModelCheckpoint>(hpu::ModelCheckpointOptions{.dirpath = dir.path()});
  hpu::Trainer t(quiet(dir, {mc}));
  mc->save(t);
  EXPECT_EQ(mc->best_model_path(), dir / "epoch=0-step=0-v1.ckpt");
  EXPECT_EQ(slurp(dir / "epoch=0-step=0.ckpt"), "someone else's file");
}

TEST(ModelCheckpoint, BadOptionsAndMissingMonitorAreErrors) {
  TempDir dir;
  EXPECT_HPU_ERROR(hpu::ModelCheckpoint({.mode = "best"}), HPU_ERROR_INVALID_ARGUMENT, "mode is \"best\"");
  EXPECT_HPU_ERROR(hpu::ModelCheckpoint({.save_top_k = 3}), HPU_ERROR_INVALID_ARGUMENT, "save_top_k is 3 without a monitor");
  EXPECT_HPU_ERROR(hpu::ModelCheckpoint({.save_top_k = -2}), HPU_ERROR_INVALID_ARGUMENT, "save_top_k is -2");
  EXPECT_HPU_ERROR(hpu::ModelCheckpoint({.filename = "a/b"}), HPU_ERROR_INVALID_ARGUMENT, "contains '/'");
  auto mc = std::make_shared<hpu::ModelCheckpoint>(hpu::ModelCheckpointOptions{.dirpath = dir.path(), .monitor = "val_acc"});
  hpu::Trainer t(quiet(dir, {mc}));
  t.state().callback_metrics["train_loss"] = 1;
  mc->save(t);  // before any validation the monitor may be missing: no save (as Lightning)
  EXPECT_TRUE(mc->best_k_models().empty());
  t.state().validation_ran = true;
  EXPECT_HPU_ERROR(mc->save(t), HPU_ERROR_INVALID_ARGUMENT, "logged metrics: train_loss");
}

TEST(ModelCheckpoint, StateRoundTripsThroughTheTrainersCheckpoint) {
  TempDir dir;
  auto mc = std::make_shared<hpu::ModelCheckpoint>(hpu::ModelCheckpointOptions{.dirpath = dir.path(), .monitor = "m", .mode = "max"});
  hpu::Trainer t(quiet(dir, {mc}));
  t.state().callback_metrics["m"] = 0.75;
  mc->save(t);
  auto mc2 = std::make_shared<hpu::ModelCheckpoint>(hpu::ModelCheckpointOptions{.dirpath = dir.path(), .monitor = "m", .mode = "max"});
  hpu::Trainer u(quiet(dir, {mc2}));
  u.restore_checkpoint(hpu::load_checkpoint_file(mc->best_model_path()));
  EXPECT_EQ(mc2->best_model_path(), mc->best_model_path());
  EXPECT_DOUBLE_EQ(*mc2->best_model_score(), 0.75);
}

// ---- LearningRateMonitor ------------------------------------------------------

TEST(LearningRateMonitor, NamesFollowLightning) {
  TempDir dir;
  auto lrm = std::make_shared<hpu::LearningRateMonitor>("step", true);
  hpu::TrainerOptions o = quiet(dir, {lrm});
  o.log_every_n_steps = 2;
  hpu::Trainer t(o);
  FakeOptimizer a("AdamW", 0.001, 0.9), b("AdamW", 0.01, std::nullopt), c("SGD", 0.1, 0.5);
  t.state().optimizers = {&a, &b, &c};
  hpu::Metrics m = hpu::LearningRateMonitor::learning_rates(t, true);
  EXPECT_DOUBLE_EQ(m.at("lr-AdamW"), 0.001);
  EXPECT_DOUBLE_EQ(m.at("lr-AdamW-1"), 0.01);
  EXPECT_DOUBLE_EQ(m.at("lr-SGD"), 0.1);
  EXPECT_DOUBLE_EQ(m.at("lr-AdamW-momentum"), 0.9);
  EXPECT_DOUBLE_EQ(m.at("lr-SGD-momentum"), 0.5);
  t.state().global_step = 0;  // (0 + 1) % 2 != 0: not a logging step
  lrm->on_train_batch_start(t, 0);
  EXPECT_EQ(t.state().callback_metrics.count("lr-SGD"), 0u);
  t.state().global_step = 1;
  lrm->on_train_batch_start(t, 1);
  EXPECT_DOUBLE_EQ(t.state().callback_metrics.at("lr-SGD"), 0.1);
  EXPECT_HPU_ERROR(hpu::LearningRateMonitor("batch"), HPU_ERROR_INVALID_ARGUMENT, "logging_interval is \"batch\"");
}

// ---- DeviceStatsMonitor -------------------------------------------------------

TEST(DeviceStatsMonitor, LogsTheTenHabanaFiguresUnderLightningsNames) {
  TempDir dir;
  auto dsm = std::make_shared<hpu::DeviceStatsMonitor>();
  hpu::TrainerOptions o = quiet(dir, {dsm}, 2);
  o.log_every_n_steps = 1;
  hpu::Trainer t(o);
  hpu::DeviceBuffer held(t.devices()[0], 3 << 20);
  dsm->on_train_batch_start(t, 0);
  const auto &m = t.state().callback_metrics;
  const char *keys[] = {"Limit", "InUse", "MaxInUse", "NumAllocs", "NumFrees", "ActiveAllocs", "MaxAllocSize",
                        "TotalSystemAllocs", "TotalSystemFrees", "TotalActiveAllocs"};
  for (const char *k : keys) {
    EXPECT_EQ(m.count(std::string("DeviceStatsMonitor.on_train_batch_start/") + k), 1u) << k;
    EXPECT_EQ(m.count(std::string("DeviceStatsMonitor.on_train_batch_start/hpu1/") + k), 1u) << k;
  }
  const hpuMemStats_t s0 = t.devices()[0].mem_stats();
  EXPECT_EQ(m.at("DeviceStatsMonitor.on_train_batch_start/Limit"), double(s0.limit));
  EXPECT_EQ(m.at("DeviceStatsMonitor.on_train_batch_start/InUse"), double(s0.in_use));
  EXPECT_GE(m.at("DeviceStatsMonitor.on_train_batch_start/InUse"), double(3 << 20));
  EXPECT_LT(m.at("DeviceStatsMonitor.on_train_batch_start/hpu1/InUse"), double(3 << 20));
  // And into the logger's CSV.
  const std::string csv = slurp(t.log_dir() + "/metrics.csv");
  EXPECT_NE(csv.find("DeviceStatsMonitor.on_train_batch_start/MaxInUse"), std::string::npos);
}

TEST(DeviceStatsMonitor, LogsOnlyOnLoggingSteps) {
  TempDir dir;
  auto dsm = std::make_shared<hpu::DeviceStatsMonitor>();
  hpu::TrainerOptions o = quiet(dir, {dsm});
  o.log_every_n_steps = 50;
  hpu::Trainer t(o);
  t.state().global_step = 10;
  dsm->on_train_batch_start(t, 10);
  dsm->on_train_batch_end(t, {}, 10);
  EXPECT_TRUE(t.state().callback_metrics.empty());
  t.state().global_step = 49;
  dsm->on_train_batch_start(t, 49);
  t.state().global_step = 50;  // the batch's optimizer step: its end still logs
  dsm->on_train_batch_end(t, {}, 49);
  EXPECT_EQ(t.state().callback_metrics.count("DeviceStatsMonitor.on_train_batch_start/InUse"), 1u);
  EXPECT_EQ(t.state().callback_metrics.count("DeviceStatsMonitor.on_train_batch_end/InUse"), 1u);
}

// ---- ProgressBar ---------------------------------------------------------------

namespace {

std::string run_bar(bool live) {
  TempDir dir;
  FILE *f = std::tmpfile();
  auto bar = std::make_shared<hpu::ProgressBar>(0, f, live);
  hpu::TrainerOptions o = quiet(dir, {});
  o.enable_progress_bar = true;
  o.callbacks = {bar};
  hpu::Trainer t(o);
  t.state().num_training_batches = 20;
  bar->on_train_epoch_start(t);
  for (int i = 0; i < 20; ++i) bar->on_train_batch_end(t, {{"loss", 1.0 / (i + 1)}}, i);
  t.state().callback_metrics["val_acc"] = 0.875;
  bar->on_train_epoch_end(t);
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace

TEST(ProgressBar, PlainLinesWhenNotATerminal) {
  std::string out = run_bar(false);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 10u);  // every tenth of the epoch: 2, 4, ..., 18, then the epoch's end
  EXPECT_NE(out.find("Epoch 0: 2/20"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch 0: 20/20"), std::string::npos) << out;
  EXPECT_NE(out.find("val_acc=0.875"), std::string::npos) << out;
  EXPECT_NE(out.find("loss=0.05"), std::string::npos) << out;
}

TEST(ProgressBar, ALiveBarRewritesOneLine) {
  std::string out = run_bar(true);
  size_t cr = 0, nl = 0;
  for (char c : out) cr += c == '\r', nl += c == '\n';
  EXPECT_EQ(cr, 20u);
  EXPECT_EQ(nl, 1u);
  EXPECT_NE(out.find("[########################]"), std::string::npos);
  EXPECT_HPU_ERROR(hpu::ProgressBar(-1), HPU_ERROR_INVALID_ARGUMENT, "refresh_rate is -1");
}
