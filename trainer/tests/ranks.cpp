// Across ranks, as Lightning users expect: global rank 0 picks the log version
// and alone creates log folders, writes logs and says where the best
// checkpoint is; WORLD_SIZE counts ranks and must be num_nodes x devices; a
// failed start leaves no version folder; a device count beyond the visible
// ones names its key; callbacks see every step's logged values, and
// LightningModule::log(..., {.sync_dist = true}) averages over the ranks.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "launch_util.hpp"
#include "test_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace trainer_test;

namespace {

// Sets launcher variables for one test and removes them at its end.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string> &vars) {
    for (const auto &[k, v] : vars) {
      ::setenv(k.c_str(), v.c_str(), 1);
      names_.push_back(k);
    }
  }
  ~ScopedEnv() {
    for (const auto &k : names_) ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::string> names_;
};

// A few steps of a small MLP on Fashion-MNIST, logging and checkpointing into
// `root` by Lightning's defaults (a CSVLogger, a ModelCheckpoint in the log
// folder).
std::string small_job(const TempDir &dir, const std::string &name, const std::string &root) {
  std::string j = R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 32},
                       {"type": "relu"}, {"type": "linear", "in_features": 32, "out_features": 10}]},
  "data": {"name": "fashion_mnist", "batch_size": 32, "val_size": 1000},
  "optimizer": {"name": "adamw", "lr": 0.002},
  "trainer": {"max_epochs": 1, "limit_train_batches": 4, "limit_val_batches": 2, "limit_test_batches": 2,
              "log_every_n_steps": 1, "seed": 5, "enable_progress_bar": false, "default_root_dir": "ROOT"},
  "test": true
})";
  j.replace(j.find("ROOT"), 4, root);
  spit(dir / (name + ".json"), j);
  return dir / (name + ".json");
}

// `args` in `n` processes of one launch (torchrun's variables on loopback and
// `env`); each one's output in dir/<name><rank>.out. Returns their exit codes.
std::vector<int> launch(const TempDir &dir, const std::string &name, int n, const std::vector<std::string> &args,
                        std::map<std::string, std::string> env = {}) {
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::map<std::string, std::string> e = env;
    if (!e.count("NODE_RANK")) e["RANK"] = std::to_string(r);
    else e["NODE_RANK"] = std::to_string(r);
    pids.push_back(spawn(args, e, dir / (name + std::to_string(r) + ".out")));
  }
  std::vector<int> codes;
  for (pid_t p : pids) codes.push_back(wait_for(p, std::chrono::seconds(300)));
  return codes;
}

// The line of `text` that starts with `prefix`, without it; "" if none.
std::string line_after(const std::string &text, const std::string &prefix) {
  const size_t i = text.find(prefix);
  if (i == std::string::npos) return "";
  const size_t from = i + prefix.size();
  return text.substr(from, text.find('\n', from) - from);
}

}  // namespace

// ---- item 2: global rank 0 decides the version; only it writes -------------------

TEST(Ranks, TwoProcessesSharingARootLogIntoOneVersionEachRun) {
  TempDir dir;
  const std::string root = dir / "root", job = small_job(dir, "shared", root);
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string name = "run" + std::to_string(run) + "_";
    const auto codes = launch(dir, name, 2, {job, "--devices", "1", "--num-nodes", "2"}, {{"WORLD_SIZE", "2"}});
    const std::string out0 = slurp(dir / (name + "0.out")), out1 = slurp(dir / (name + "1.out"));
    ASSERT_EQ(codes, std::vector<int>({0, 0})) << out0 << "\n----\n" << out1;
    // Rank 0 names its best checkpoint, which exists in this run's version.
    const std::string best = line_after(out0, "hpu-train: best checkpoint ");
    const std::string version = root + "/lightning_logs/version_" + std::to_string(run);
    EXPECT_EQ(best.rfind(version + "/checkpoints/", 0), 0u) << out0;
    EXPECT_TRUE(file_exists(best)) << best;
    EXPECT_EQ(out1.find("best checkpoint"), std::string::npos) << out1;
    EXPECT_EQ(out1.find("ModelCheckpoint saved"), std::string::npos) << out1;
  }
  // Exactly one folder per run, each with the logs and checkpoints.
  std::vector<std::string> versions = list_dir(root + "/lightning_logs");
  std::sort(versions.begin(), versions.end());
  EXPECT_EQ(versions, std::vector<std::string>({"version_0", "version_1"}));
  for (const std::string &v : versions) {
    EXPECT_TRUE(file_exists(root + "/lightning_logs/" + v + "/metrics.csv")) << v;
    EXPECT_FALSE(list_dir(root + "/lightning_logs/" + v + "/checkpoints").empty()) << v;
  }
}

// In one process the ranks are threads of one Trainer: the same holds.
TEST(Ranks, TheVersionIsTheSameOnEveryRankAndOnlyRankZeroCreatesIt) {
  TempDir dir;
  hpu::TrainerOptions o;
  o.devices = 2;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  hpu::Trainer first(o);
  EXPECT_EQ(first.log_dir(), dir / "lightning_logs/version_0");
  EXPECT_FALSE(file_exists(first.log_dir()));  // nothing written yet
  first.log_metrics({{"loss", 1.0}}, 0);
  first.loggers()[0]->finalize();
  EXPECT_TRUE(file_exists(first.log_dir() + "/metrics.csv"));
  hpu::Trainer second(o);
  EXPECT_EQ(second.log_dir(), dir / "lightning_logs/version_1");
}

// ---- item 7: a failed start leaves no version folder -----------------------------

TEST(Ranks, AFailedStartLeavesNoVersionFolder) {
  TempDir dir;
  const std::string job = small_job(dir, "bad", dir / "root");
  const std::string out = dir / "bad.out";
  const int st = wait_for(spawn({job, "--ckpt-path", dir / "missing.ckpt"}, {}, out), std::chrono::seconds(120));
  EXPECT_NE(st, 0) << slurp(out);
  EXPECT_NE(slurp(out).find("missing.ckpt"), std::string::npos) << slurp(out);
  const std::vector<std::string> left = list_dir(dir / "root/lightning_logs");
  EXPECT_TRUE(left.empty()) << "left behind: " << left[0];
}

TEST(Ranks, ALoggerCreatesItsFolderWhenItFirstWrites) {
  TempDir dir;
  hpu::CSVLogger csv(dir.path());
  hpu::JsonLinesLogger jl(dir.path(), "jl");
  EXPECT_EQ(csv.log_dir(), dir / "lightning_logs/version_0");
  EXPECT_FALSE(file_exists(csv.log_dir()));
  EXPECT_FALSE(file_exists(jl.log_dir()));
  csv.log_metrics({{"loss", 1.0}}, 0);
  csv.finalize();
  jl.log_metrics({{"loss", 1.0}}, 0);
  EXPECT_TRUE(file_exists(csv.metrics_path()));
  EXPECT_TRUE(file_exists(jl.metrics_path()));
}

// ---- item 5: WORLD_SIZE counts ranks and must be num_nodes x devices --------------

TEST(Ranks, ALaunchersCountMustBeNumNodesTimesDevices) {
  hpu::TrainerOptions o;
  o.devices = 2;
  o.num_nodes = 2;
  {
    ScopedEnv env(std::map<std::string, std::string>{{"WORLD_SIZE", "4"}});
    EXPECT_EQ(hpu::resolve_options(o, 8).world_size, 4);
    o.num_nodes = 1;
    EXPECT_HPU_ERROR(hpu::resolve_options(o, 8), HPU_ERROR_INVALID_ARGUMENT,
                     "WORLD_SIZE is 4, but num_nodes x devices is 1 x 2 = 2");
    o.num_nodes = 2;
  }
  {
    // Open MPI and Slurm count processes, each of `devices` ranks.
    ScopedEnv env(std::map<std::string, std::string>{{"OMPI_COMM_WORLD_SIZE", "2"}});
    EXPECT_EQ(hpu::resolve_options(o, 8).world_size, 4);
    o.num_nodes = 3;
    EXPECT_HPU_ERROR(hpu::resolve_options(o, 8), HPU_ERROR_INVALID_ARGUMENT,
                     "OMPI_COMM_WORLD_SIZE is 2 processes of 2 devices, 4 ranks, but num_nodes x devices is 3 x 2 = 6");
  }
  {
    ScopedEnv env(std::map<std::string, std::string>{{"SLURM_NTASKS", "x"}});
    EXPECT_HPU_ERROR(hpu::resolve_options(o, 8), HPU_ERROR_INVALID_ARGUMENT, "SLURM_NTASKS is \"x\"");
  }
}

TEST(Ranks, NumNodesWithoutALauncherFailsAtOnce) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.num_nodes = 2;
  o.logger = false;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT,
                   "num_nodes x devices is 2 x 1 = 2, but the launch environment makes 1 rank(s)");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));  // no wait for peers
}

// Lightning's variables for 2 nodes of 2 devices (NODE_RANK, WORLD_SIZE=4):
// one process per node, 4 ranks.
TEST(Ranks, TwoNodesOfTwoDevicesUnderLightningsVariables) {
  TempDir dir;
  const std::string job = small_job(dir, "nodes", dir / "root");
  const auto codes = launch(dir, "nodes", 2, {job, "--devices", "2", "--num-nodes", "2"},
                            {{"WORLD_SIZE", "4"}, {"NODE_RANK", "0"}, {"HPU_LOG_LEVEL", "info"}});
  const std::string out0 = slurp(dir / "nodes0.out"), out1 = slurp(dir / "nodes1.out");
  ASSERT_EQ(codes, std::vector<int>({0, 0})) << out0 << "\n----\n" << out1;
  EXPECT_NE(out0.find("world size 4"), std::string::npos) << out0;
  EXPECT_NE(out0.find("ranks 0..1 of 4"), std::string::npos) << out0;
  EXPECT_NE(out1.find("ranks 2..3 of 4"), std::string::npos) << out1;
  EXPECT_NE(out0.find("test_acc"), std::string::npos) << out0;
}

TEST(Ranks, AWorldSizeThatIsNotNumNodesTimesDevicesFailsAtOnce) {
  TempDir dir;
  const std::string job = small_job(dir, "wrong", dir / "root");
  const auto t0 = std::chrono::steady_clock::now();
  const int st = wait_for(spawn({job, "--devices", "1", "--num-nodes", "2"},
                                {{"WORLD_SIZE", "4"}, {"RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", std::to_string(free_port())}},
                                dir / "wrong.out"),
                          std::chrono::seconds(60));
  const std::string out = slurp(dir / "wrong.out");
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("WORLD_SIZE is 4, but num_nodes x devices is 2 x 1 = 2"), std::string::npos) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));  // not the rendezvous timeout
}

// ---- item 7: --devices beyond the visible ones names the key ---------------------

TEST(Ranks, TooManyDevicesNameTheKey) {
  TempDir dir;
  const std::string out = dir / "devices.out";
  EXPECT_EQ(wait_for(spawn({"--devices", "99", "--check"}, {{"HPU_NUM_DEVICES", "4"}}, out), std::chrono::seconds(60)),
            2);
  EXPECT_NE(slurp(out).find("command line --devices: trainer.devices: devices is 99, but only 4 HPUs are visible"),
            std::string::npos)
      << slurp(out);
}

// ---- item 6: callbacks see every step's values; sync_dist averages over ranks -----

namespace {

// Logs a value that differs per replica (rank r logs r + 1), synced and not.
class RankLogging : public hpu::Classifier {
 public:
  explicit RankLogging(int replica = 0) : Classifier(mlp(), adamw()), replica_(replica) {}
  hpu::Tensor training_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y,
                            hpu::Metrics &out) override {
    log("rank_mean", replica_ + 1.0, {.sync_dist = true});
    log("rank_own", replica_ + 1.0);
    out["via_map"] = 10.0 * (replica_ + 1);
    return Classifier::training_step(ctx, x, y, out);
  }
  std::unique_ptr<hpu::LightningModule> clone() const override { return std::make_unique<RankLogging>(replica_ + 1); }

 private:
  int replica_;
};

// The callback metrics and the step's outputs at every on_train_batch_end.
struct MetricsSeen : hpu::Callback {
  std::string state_key() const override { return "MetricsSeen"; }
  void on_train_batch_end(hpu::Trainer &t, const hpu::Metrics &outputs, int64_t) override {
    metrics.push_back(t.state().callback_metrics);
    losses.push_back(outputs.at("loss"));
  }
  std::vector<hpu::Metrics> metrics;
  std::vector<double> losses;
};

}  // namespace

TEST(Ranks, CallbacksSeeEveryStepsValuesAndSyncDistAveragesOverRanks) {
  for (int devices : {1, 2}) {
    SCOPED_TRACE(std::to_string(devices) + " device(s)");
    TempDir dir;
    hpu::TrainerOptions o;
    o.devices = devices;
    o.max_epochs = 1;
    o.log_every_n_steps = 5;
    o.seed = 3;
    o.default_root_dir = dir.path();
    o.enable_progress_bar = false;
    o.enable_checkpointing = false;
    auto seen = std::make_shared<MetricsSeen>();
    o.callbacks = {seen};
    hpu::Trainer t(o);
    hpu::InMemoryData data = blob_data(32 / devices);
    RankLogging model;
    t.fit(model, data);
    ASSERT_EQ(seen->metrics.size(), 16u);  // 512 samples, global batch 32
    const double mean = devices == 1 ? 1.0 : 1.5;  // (1 + 2) / 2 over two ranks
    for (size_t s = 0; s < seen->metrics.size(); ++s) {
      SCOPED_TRACE("step " + std::to_string(s));
      const hpu::Metrics &m = seen->metrics[s];
      ASSERT_TRUE(m.count("train_loss"));
      EXPECT_EQ(m.at("train_loss"), seen->losses[s]);  // this step's, not the last logging step's
      EXPECT_EQ(m.at("rank_mean"), mean);
      EXPECT_EQ(m.at("rank_own"), 1.0);  // global rank 0's
      EXPECT_EQ(m.at("via_map"), 10.0);
    }
    // The loggers still get every log_every_n_steps-th step, with the mean.
    std::istringstream csv(slurp(t.log_dir() + "/metrics.csv"));
    std::vector<std::vector<std::string>> rows;
    for (std::string line; std::getline(csv, line);) {
      rows.emplace_back();
      std::istringstream fields(line);
      for (std::string f; std::getline(fields, f, ',');) rows.back().push_back(f);
    }
    ASSERT_FALSE(rows.empty());
    const auto column = std::find(rows[0].begin(), rows[0].end(), "rank_mean") - rows[0].begin();
    std::vector<std::string> logged;
    for (size_t i = 1; i < rows.size(); ++i)
      if (size_t(column) < rows[i].size() && !rows[i][size_t(column)].empty())
        logged.push_back(rows[i][0] + ":" + rows[i][size_t(column)]);
    const std::string v = devices == 1 ? "1" : "1.5";
    // Batches 4, 9 and 14, each under the step it starts at (Lightning's
    // _batches_that_stepped).
    EXPECT_EQ(logged, std::vector<std::string>({"4:" + v, "9:" + v, "14:" + v}));
  }
}

TEST(Ranks, SyncDistNamesMustBeTheSameOnEveryRank) {
  struct OddOneOut : hpu::Classifier {
    explicit OddOneOut(int replica = 0) : Classifier(mlp(), adamw()), replica(replica) {}
    hpu::Tensor training_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y,
                              hpu::Metrics &out) override {
      if (replica == 1) log("only_rank_1", 1.0, {.sync_dist = true});
      return Classifier::training_step(ctx, x, y, out);
    }
    std::unique_ptr<hpu::LightningModule> clone() const override { return std::make_unique<OddOneOut>(replica + 1); }
    int replica;
  };
  TempDir dir;
  hpu::TrainerOptions o;
  o.devices = 2;
  o.max_epochs = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data(16);
  OddOneOut model;
  EXPECT_HPU_ERROR(t.fit(model, data), HPU_ERROR_INVALID_ARGUMENT,
                   "LightningModule::log: rank 1 logged 1 sync_dist metrics and rank 0 0");
}
