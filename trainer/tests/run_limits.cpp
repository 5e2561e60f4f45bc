// Lightning's run limits and start-of-fit steps: min_epochs, max_time,
// fast_dev_run, num_sanity_val_steps and the model summary
// (enable_model_summary), from C++, a job and hpu-train's flags.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

using namespace trainer_test;

namespace {

hpu::TrainerOptions quiet(const TempDir &dir) { return silent_run(dir.path(), 5); }

// Records what the loop does: batches trained, validation batches and when
// they ran, the metrics at the start of training.
struct Watch : hpu::Callback {
  std::string state_key() const override { return "Watch"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_sanity_check_start(hpu::Trainer &t) override {
    EXPECT_TRUE(t.state().sanity_checking);
    ++sanity_starts;
  }
  void on_sanity_check_end(hpu::Trainer &t) override {
    EXPECT_FALSE(t.state().sanity_checking);
    ++sanity_ends;
  }
  void on_validation_batch_end(hpu::Trainer &t, int64_t) override {
    (t.state().sanity_checking ? sanity_batches : val_batches) += 1;
  }
  void on_test_batch_end(hpu::Trainer &, int64_t) override { ++test_batches; }
  void on_train_start(hpu::Trainer &t) override {
    metrics_at_train_start = t.state().callback_metrics;
    validation_ran_at_train_start = t.state().validation_ran;
  }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &, int64_t) override {
    ++train_batches;
    if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  void on_train_epoch_end(hpu::Trainer &) override { ++epochs; }
  int sanity_starts = 0, sanity_ends = 0, sanity_batches = 0, val_batches = 0, test_batches = 0;
  int train_batches = 0, epochs = 0, sleep_ms = 0;
  hpu::Metrics metrics_at_train_start;
  bool validation_ran_at_train_start = true;
};

std::shared_ptr<Watch> fit(hpu::TrainerOptions o, std::vector<hpu::Ref<hpu::Callback>> more = {}) {
  auto w = std::make_shared<Watch>();
  o.callbacks = {w};
  for (auto &c : more) o.callbacks.push_back(c);
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();  // 16 training, 4 validation batches
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  return w;
}

const char *kJob = R"({"model": {"layers": [{"type": "relu"}]}, "trainer": {)";

}  // namespace

// ---- min_epochs -----------------------------------------------------------------

// EarlyStopping asks to stop at the first validation (a threshold any loss
// passes); with min_epochs 3 the fit goes on to the end of the third epoch.
TEST(RunLimits, MinEpochsTrainsOnWhenEarlyStoppingAsksToStop) {
  TempDir dir;
  auto early = [] {
    return hpu::EarlyStopping({.monitor = "val_loss", .stopping_threshold = 1e9});
  };
  hpu::TrainerOptions o = quiet(dir);
  o.max_epochs = 5;
  o.limit_train_batches = 2;
  EXPECT_EQ(fit(o, {early()})->epochs, 1);
  o.min_epochs = 3;
  auto w = fit(o, {early()});
  EXPECT_EQ(w->epochs, 3);
  EXPECT_EQ(w->train_batches, 6);
  // A stop inside an epoch (validation every batch) also waits.
  o.val_check_interval = 1;
  o.min_epochs = 2;
  w = fit(o, {early()});
  EXPECT_EQ(w->epochs, 2);
  EXPECT_EQ(w->train_batches, 4);
}

// ---- max_time -------------------------------------------------------------------

TEST(RunLimits, MaxTimeStopsAtTheNextBatchBoundaryAfterItPasses) {
  TempDir dir;
  hpu::TrainerOptions o = quiet(dir);
  o.max_epochs = 3;
  o.limit_val_batches = 0;
  o.max_time = "00:00:00:00";  // passed once the first batch ends
  EXPECT_EQ(fit(o)->train_batches, 1);
  // 40 ms per batch against 0.1 s: a few batches, not 48.
  o.max_time = std::chrono::milliseconds(100);
  auto slow = std::make_shared<Watch>();
  hpu::TrainerOptions s = o;
  s.callbacks = {slow};
  slow->sleep_ms = 40;
  hpu::Trainer t(s);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_GE(slow->train_batches, 2);
  EXPECT_LT(slow->train_batches, 48);
  EXPECT_EQ(t.global_step(), slow->train_batches);
  // min_epochs comes first, as in Lightning.
  o.max_time = "00:00:00:00";
  o.min_epochs = 2;
  o.limit_train_batches = 3;
  EXPECT_EQ(fit(o)->train_batches, 6);
}

TEST(RunLimits, MaxTimeIsLightningsTextOrSeconds) {
  EXPECT_EQ(hpu::max_time_seconds("01:02:03:04.5"), ((1 * 24 + 2) * 60 + 3) * 60 + 4.5);
  EXPECT_EQ(hpu::max_time_seconds(std::chrono::minutes(2)), 120.0);
  EXPECT_FALSE(hpu::max_time_seconds({}).has_value());
  for (const char *bad : {"1:2", "00:00:00", "00:00:01:00:00", "a:00:00:00", "00:1.5:00:00", "00:-1:00:00", "00:00:00:"})
    EXPECT_HPU_ERROR(hpu::max_time_seconds(bad), HPU_ERROR_INVALID_ARGUMENT,
                     std::string("max_time is \"") + bad + "\"; expected \"DD:HH:MM:SS\"");
  EXPECT_HPU_ERROR(hpu::max_time_seconds(std::chrono::seconds(-1)), HPU_ERROR_INVALID_ARGUMENT,
                   "max_time is -1 seconds");
  // A job: the text, a number of seconds or null; a flag likewise.
  hpu::Job j = hpu::parse_job(std::string(kJob) + R"("max_time": "00:12:00:00"}})", "job.json");
  EXPECT_EQ(hpu::max_time_seconds(j.trainer.max_time), 12 * 3600.0);
  j = hpu::parse_job(std::string(kJob) + R"("max_time": 1.5}})", "job.json");
  EXPECT_EQ(hpu::max_time_seconds(j.trainer.max_time), 1.5);
  EXPECT_NE(hpu::job_to_json(j).find("\"max_time\": 1.5"), std::string::npos);
  hpu::Cli cli = hpu::parse_cli(3, std::array<const char *, 3>{"hpu-train", "--max-time", "00:00:01:00"}.data());
  j = hpu::parse_job(std::string(kJob) + "}}", "job.json", cli.overrides);
  EXPECT_EQ(hpu::max_time_seconds(j.trainer.max_time), 60.0);
  EXPECT_NE(hpu::job_to_json(j).find("\"max_time\": \"00:00:01:00\""), std::string::npos);
  EXPECT_HPU_ERROR(hpu::parse_job(std::string(kJob) + "\n\"max_time\": \"1h\"}}", "job.json"), HPU_ERROR_CONFIG,
                   "job.json:2: trainer.max_time: max_time is \"1h\"");
  EXPECT_HPU_ERROR(hpu::parse_job(std::string(kJob) + R"("max_time": true}})", "job.json"), HPU_ERROR_CONFIG,
                   "trainer.max_time: expected \"DD:HH:MM:SS\", a number of seconds or null, found");
}

// ---- fast_dev_run ---------------------------------------------------------------

TEST(RunLimits, FastDevRunRunsNBatchesOfEachLoopAndWritesNothing) {
  TempDir dir;
  for (const hpu::FastDevRun &f : {hpu::FastDevRun(true), hpu::FastDevRun(3)}) {
    const int n = int(f.batches);
    SCOPED_TRACE(n);
    hpu::TrainerOptions o = quiet(dir);
    o.fast_dev_run = f;
    o.max_epochs = 4;
    o.logger = true;
    o.enable_checkpointing = true;
    auto w = std::make_shared<Watch>();
    o.callbacks = {w, hpu::ModelCheckpoint({.save_last = true}),
                   hpu::EarlyStopping({.monitor = "val_loss", .stopping_threshold = 1e9})};
    hpu::Trainer t(o);
    hpu::InMemoryData data = blob_data();
    hpu::Classifier model(mlp(), adamw());
    t.fit(model, data);
    t.test(model, data);
    EXPECT_EQ(w->train_batches, n);
    EXPECT_EQ(t.global_step(), n);
    EXPECT_EQ(w->epochs, 1);
    EXPECT_EQ(w->sanity_batches, 0);
    EXPECT_EQ(w->val_batches, n);
    EXPECT_EQ(w->test_batches, n);
    EXPECT_FALSE(t.state().should_stop);  // EarlyStopping did not check
    EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{}) << "no logs, no checkpoints";
  }
  // From a job and a flag: true, false or a number.
  hpu::Job j = hpu::parse_job(std::string(kJob) + R"("fast_dev_run": true}})", "job.json");
  EXPECT_EQ(j.trainer.fast_dev_run.batches, 1);
  EXPECT_NE(hpu::job_to_json(j).find("\"fast_dev_run\": true"), std::string::npos);
  hpu::Cli cli = hpu::parse_cli(2, std::array<const char *, 2>{"hpu-train", "--fast-dev-run=5"}.data());
  j = hpu::parse_job(std::string(kJob) + "}}", "job.json", cli.overrides);
  EXPECT_EQ(j.trainer.fast_dev_run.batches, 5);
  EXPECT_NE(hpu::job_to_json(j).find("\"fast_dev_run\": 5"), std::string::npos);
  EXPECT_HPU_ERROR(hpu::parse_job(std::string(kJob) + R"("fast_dev_run": -2}})", "job.json"), HPU_ERROR_CONFIG,
                   "trainer.fast_dev_run: fast_dev_run is -2; expected true, false or a number of batches >= 0");
  EXPECT_HPU_ERROR(hpu::parse_job(std::string(kJob) + R"("fast_dev_run": "yes"}})", "job.json"), HPU_ERROR_CONFIG,
                   "trainer.fast_dev_run: expected true, false or a number of batches, found a string");
}

// ---- num_sanity_val_steps -------------------------------------------------------

TEST(RunLimits, TheSanityCheckRunsValidationBatchesBeforeTrainingUnlogged) {
  TempDir dir;
  hpu::TrainerOptions o = quiet(dir);
  o.limit_train_batches = 2;
  o.logger = true;
  auto w = fit(o);  // the default: 2 batches
  EXPECT_EQ(w->sanity_starts, 1);
  EXPECT_EQ(w->sanity_ends, 1);
  EXPECT_EQ(w->sanity_batches, 2);
  EXPECT_EQ(w->val_batches, 4);  // the epoch's validation
  EXPECT_EQ(w->metrics_at_train_start.count("val_loss"), 0u);
  EXPECT_FALSE(w->validation_ran_at_train_start);
  // The log has a header and one row: the epoch's validation (2 steps log
  // no training row).
  const std::string csv = slurp(dir / "lightning_logs/version_0/metrics.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2) << csv;

  o.logger = false;
  o.num_sanity_val_steps = -1;  // every batch the limit lets run
  o.limit_val_batches = 3;
  EXPECT_EQ(fit(o)->sanity_batches, 3);
  o.num_sanity_val_steps = 0;
  w = fit(o);
  EXPECT_EQ(w->sanity_starts, 0);
  EXPECT_EQ(w->sanity_batches, 0);
  // EarlyStopping does not count the sanity check's metrics.
  o.num_sanity_val_steps = 2;
  o.limit_val_batches = 0;  // no validation during training: EarlyStopping never checks
  hpu::Trainer t([&] {
    hpu::TrainerOptions e = o;
    e.callbacks = {hpu::EarlyStopping({.monitor = "val_loss", .stopping_threshold = 1e9})};
    return e;
  }());
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_FALSE(t.state().should_stop);
  EXPECT_HPU_ERROR(hpu::parse_job(std::string(kJob) + R"("num_sanity_val_steps": -2}})", "job.json"),
                   HPU_ERROR_CONFIG, "num_sanity_val_steps is -2; expected >= -1");
}

// ---- the model summary ----------------------------------------------------------

TEST(RunLimits, TheModelSummaryListsEachLayerAndTheTotals) {
  hpu::Device dev(0);
  hpu::Classifier model(mlp(), adamw());  // Linear(16, 32) GELU LayerNorm(32) Linear(32, 4)
  hpu::Rng rng(1);
  model.setup_device(dev.get(), rng);
  const std::vector<hpu::Parameter *> ps = model.parameters();
  const std::string s = hpu::model_summary(model);
  // The parameters keep the model's names (checkpoints use them).
  std::vector<std::string> names;
  for (hpu::Parameter *p : ps) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{"net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias",
                                             "net.3.weight", "net.3.bias"}));
  for (const char *row : {"0 | net   | Sequential |    740", "1 | net.0 | Linear     |    544",
                          "2 | net.1 | GELU       |      0", "3 | net.2 | LayerNorm  |     64",
                          "4 | net.3 | Linear     |    132", "740        Trainable params",
                          "0          Non-trainable params", "740        Total params",
                          "0.003      Total estimated model params size (MB)"})
    EXPECT_NE(s.find(row), std::string::npos) << row << " not in\n" << s;
  // Depth 1: the named modules only; large counts as Lightning writes them.
  hpu::Sequential big;
  big.add(hpu::Linear(1000, 1000));
  hpu::Classifier wide(big);
  wide.setup_device(dev.get(), rng);
  const std::string w = hpu::model_summary(wide, 1);
  EXPECT_NE(w.find("0 | net  | Sequential |  1.0 M"), std::string::npos) << w;
  EXPECT_EQ(w.find("net.0"), std::string::npos) << w;

  // fit prints it on rank 0 unless enable_model_summary is false.
  TempDir dir;
  hpu::TrainerOptions o = quiet(dir);
  o.limit_train_batches = 1;
  o.limit_val_batches = 0;
  for (bool on : {true, false}) {
    o.enable_model_summary = on;
    testing::internal::CaptureStderr();
    fit(o);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("1 | net.0 | Linear     |    544") != std::string::npos, on) << err;
  }
}
