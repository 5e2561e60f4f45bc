// hpu_ddp: replicas in one process and in launched processes reach the same
// weights; a failing rank fails the others.
//
// The documented semantics (hpu-train(1), "hpu_ddp"): R ranks of batch B take
// together the samples one rank of batch R x B takes at each step, and average
// their gradients, so they compute the same step. Not bitwise: the single rank
// sums each weight gradient over R x B samples in one pass, the R ranks sum B
// samples each and then average, which rounds differently; the comparisons
// with devices=1 allow a tolerance for that. Between hpu_ddp runs (threads in
// one process, or processes) the collectives are deterministic and the
// comparison is bitwise.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "launch_util.hpp"
#include "test_util.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <csignal>
#include <map>
#include <thread>

using namespace trainer_test;

namespace {

hpu::TrainerOptions opts(const TempDir &dir, int devices, const char *precision) {
  hpu::TrainerOptions o;
  o.devices = devices;
  o.precision = precision;
  o.seed = 11;
  o.max_epochs = 2;
  o.log_every_n_steps = 4;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  return o;
}

// The weights after fitting the blobs for 2 epochs on `devices` devices with a
// global batch of 32.
std::vector<std::vector<float>> fit_blobs(int devices, const char *precision, hpu::Metrics *val = nullptr) {
  TempDir dir;
  hpu::Trainer t(opts(dir, devices, precision));
  hpu::InMemoryData data = blob_data(32 / devices);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_EQ(t.global_step(), 2 * 16);
  if (val) *val = t.state().callback_metrics;
  return weights(model);
}

double max_abs_diff(const std::vector<std::vector<float>> &a, const std::vector<std::vector<float>> &b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size());
    for (size_t k = 0; k < a[i].size() && k < b[i].size(); ++k) d = std::max(d, std::fabs(double(a[i][k]) - b[i][k]));
  }
  return d;
}

}  // namespace

TEST(Ddp, TwoDevicesMatchOneDeviceAtTheGlobalBatch32True) {
  hpu::Metrics m1, m2;
  auto one = fit_blobs(1, "32-true", &m1), two = fit_blobs(2, "32-true", &m2);
  // Summation order only (measured: ~1e-7), far below the weights' scale (~0.1).
  EXPECT_LT(max_abs_diff(one, two), 1e-5);
  EXPECT_NEAR(m1.at("val_acc"), m2.at("val_acc"), 1.0 / 128 + 1e-9);
  EXPECT_NEAR(m1.at("val_loss"), m2.at("val_loss"), 1e-3);
}

TEST(Ddp, TwoDevicesMatchOneDeviceAtTheGlobalBatchBf16Mixed) {
  auto one = fit_blobs(1, "bf16-mixed"), two = fit_blobs(2, "bf16-mixed");
  // The weight gradients accumulate in f32 under autocast too (measured: ~2e-7);
  // the margin covers a bf16 rounding that an f32 difference could tip.
  EXPECT_LT(max_abs_diff(one, two), 1e-4);
}

TEST(Ddp, ThreadedRunsAreBitwiseRepeatable) {
  EXPECT_EQ(fit_blobs(2, "bf16-mixed"), fit_blobs(2, "bf16-mixed"));
}

TEST(Ddp, TestMetricsAreReducedOverRanks) {
  // Each rank sees half of the test set; the metrics are over all of it.
  TempDir d1, d2;
  hpu::Trainer t1(opts(d1, 1, "32-true")), t2(opts(d2, 2, "32-true"));
  hpu::InMemoryData a = blob_data(32), b = blob_data(16);
  hpu::Classifier m1(mlp(), adamw()), m2(mlp(), adamw());
  t1.fit(m1, a);
  t2.fit(m2, b);
  hpu::Metrics r1 = t1.test(m1, a), r2 = t2.test(m2, b);
  EXPECT_NEAR(r1.at("test_acc"), r2.at("test_acc"), 1.0 / 128 + 1e-9);
  EXPECT_NEAR(r1.at("test_loss"), r2.at("test_loss"), 1e-3);
}

TEST(Ddp, GradientAccumulationAndClippingStayInStep) {
  auto run = [](int devices) {
    TempDir dir;
    hpu::TrainerOptions o = opts(dir, devices, "32-true");
    o.accumulate_grad_batches = 2;
    o.gradient_clip_val = 0.5;
    hpu::Trainer t(o);
    hpu::InMemoryData data = blob_data(32 / devices);
    hpu::Classifier model(mlp(), adamw());
    t.fit(model, data);
    EXPECT_EQ(t.global_step(), 2 * 8);
    return weights(model);
  };
  EXPECT_LT(max_abs_diff(run(1), run(2)), 1e-5);
}

namespace {

// An optimizer without a sharded form (with_params gives none): hpu_ddp then
// allreduces the gradients and every rank updates every weight.
template <class O>
struct Whole : O {
  using O::O;
  std::unique_ptr<hpu::Optimizer> with_params(std::vector<hpu::Parameter *>) const override { return nullptr; }
};

class UnshardedClassifier : public hpu::Classifier {
 public:
  explicit UnshardedClassifier(const hpu::OptimizerSpec &o) : Classifier(mlp(), o), o_(o) {}
  std::unique_ptr<hpu::Optimizer> configure_optimizers(const std::vector<hpu::Parameter *> &params) override {
    if (o_.name == "sgd") return std::make_unique<Whole<hpu::SGD>>(params, o_.lr, o_.momentum, o_.weight_decay, o_.nesterov);
    return std::make_unique<Whole<hpu::AdamW>>(params, o_.lr, o_.beta1, o_.beta2, o_.eps, o_.weight_decay);
  }
  std::unique_ptr<hpu::LightningModule> clone() const override { return std::make_unique<UnshardedClassifier>(o_); }

 private:
  hpu::OptimizerSpec o_;
};

struct ShardRun {
  std::vector<std::vector<float>> weights;
  std::map<std::string, hpu::CheckpointTensor> state;  // the checkpoint's optimizer tensors
  int64_t updated = 0;                                 // elements rank 0's optimizer updates
};

ShardRun fit_two(hpu::Classifier &model, const char *precision) {
  TempDir dir;
  hpu::Trainer t(opts(dir, 2, precision));
  hpu::InMemoryData data = blob_data(16);
  t.fit(model, data);
  ShardRun r;
  r.weights = weights(model);
  for (auto &[name, tensor] : t.make_checkpoint().tensors)
    if (name.rfind("optimizer/", 0) == 0) r.state[name] = tensor;
  for (hpu::Parameter *p : t.state().optimizers.at(0)->params()) r.updated += p->value.numel();
  return r;
}

}  // namespace

TEST(Ddp, ShardedOptimizerReachesTheUnshardedWeightsAndStateBitForBit) {
  const int64_t total = 16 * 32 + 32 + 2 * 32 + 32 * 4 + 4;  // the mlp's elements
  for (const char *precision : {"32-true", "bf16-mixed"}) {
    for (const hpu::OptimizerSpec &spec : {adamw(), sgd_momentum()}) {
      SCOPED_TRACE(std::string(precision) + " " + spec.name);
      hpu::Classifier sharded(mlp(), spec);
      UnshardedClassifier unsharded(spec);
      const ShardRun a = fit_two(sharded, precision), b = fit_two(unsharded, precision);
      EXPECT_EQ(a.updated, total / 2);  // rank 0's half of the one bucket
      EXPECT_EQ(b.updated, total);
      ASSERT_EQ(a.weights.size(), b.weights.size());
      for (size_t i = 0; i < a.weights.size(); ++i)
        EXPECT_TRUE(a.weights[i].size() == b.weights[i].size() &&
                    std::memcmp(a.weights[i].data(), b.weights[i].data(), a.weights[i].size() * 4) == 0)
            << "parameter " << i << " differs";
      // The whole state, under the unsharded names, gathered from both ranks.
      ASSERT_EQ(a.state.size(), b.state.size());
      EXPECT_EQ(a.state.size(), (spec.name == "sgd" ? 1u : 2u) * 6);
      for (const auto &[name, tensor] : b.state) {
        auto it = a.state.find(name);
        ASSERT_NE(it, a.state.end()) << name;
        EXPECT_EQ(it->second.shape, tensor.shape) << name;
        EXPECT_TRUE(it->second.bytes == tensor.bytes) << name;
      }
    }
  }
}

namespace {

// A classifier whose replica `fail_rank` throws at its `fail_at`-th step.
class Breaking : public hpu::Classifier {
 public:
  Breaking(int replica, int fail_at) : Classifier(mlp(), adamw()), replica_(replica), fail_at_(fail_at) {}
  hpu::Tensor training_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y,
                            hpu::Metrics &log) override {
    if (replica_ == 1 && ++steps_ == fail_at_) throw hpu::Error(HPU_ERROR_INVALID_ARGUMENT, "replica 1 broke");
    return Classifier::training_step(ctx, x, y, log);
  }
  std::unique_ptr<hpu::LightningModule> clone() const override {
    return std::make_unique<Breaking>(replica_ + 1, fail_at_);
  }

 private:
  int replica_, fail_at_, steps_ = 0;
};

}  // namespace

TEST(Ddp, AFailingReplicaFailsTheFitWithItsError) {
  TempDir dir;
  hpu::Trainer t(opts(dir, 2, "32-true"));
  hpu::InMemoryData data = blob_data(16);
  Breaking model(0, 5);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_HPU_ERROR(t.fit(model, data), HPU_ERROR_INVALID_ARGUMENT, "replica 1 broke");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));  // not the comm timeout
  EXPECT_EQ(t.global_step(), 4);
}

// ---- processes: hpu-train under torchrun's variables on loopback (launch_util.hpp) ----

TEST(Ddp, TwoProcessesReachTheWeightsOfTwoDevicesInOneProcess) {
  TempDir dir;
  const std::string threads = job_in(dir, "threads"), procs = job_in(dir, "procs");
  ASSERT_EQ(wait_for(spawn({threads, "--devices", "2"}, {}, dir / "threads.out"), std::chrono::seconds(300)), 0)
      << slurp(dir / "threads.out");
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(spawn({procs, "--devices", "1", "--num-nodes", "2"},
                         {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", "2"},
                          {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}},
                         dir / (r ? "procs1.out" : "procs.out")));
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(wait_for(pids[size_t(r)], std::chrono::seconds(300)), 0) << slurp(dir / (r ? "procs1.out" : "procs.out"));
  // Rank 0 saved (rank 1 did not), the same weights and test metrics (reduced over ranks).
  expect_same_run(dir, "threads", "procs");
}

TEST(Ddp, AKilledProcessFailsItsPeerInsteadOfHanging) {
  TempDir dir;
  std::string job = job_in(dir, "killed");
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(spawn({job, "--devices", "1", "--num-nodes", "2", "--max-epochs", "-1", "--limit-train-batches",
                          "1.0"},
                         {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", "2"},
                          {"RANK", std::to_string(r)}, {"HPU_COMM_TIMEOUT", "20"}},
                         dir / ("killed" + std::to_string(r) + ".out")));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ::kill(pids[1], SIGKILL);
  EXPECT_EQ(wait_for(pids[1], std::chrono::seconds(10)), 128 + SIGKILL);
  const int st = wait_for(pids[0], std::chrono::seconds(60));
  const std::string out = slurp(dir / "killed0.out");
  EXPECT_NE(st, -1) << "rank 0 hung:\n" << out;
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("HPU_ERROR_"), std::string::npos) << out;
}

// Counts optimizer steps.
struct StepCounter : hpu::Callback {
  std::string state_key() const override { return "StepCounter"; }
  void on_before_optimizer_step(hpu::Trainer &) override { ++n; }
  int64_t n = 0;
};

TEST(Ddp, AResumedTwoDeviceRunEndsWithBitIdenticalWeights) {
  TempDir dir;
  hpu::InMemoryData data = blob_data(16);
  const hpu::OptimizerSpec sgd = sgd_momentum();
  const hpu::SchedulerSpec cosine = fixed_cosine();
  auto run = [&](int64_t epochs, const std::string &root, const std::string &resume) {
    hpu::TrainerOptions o = opts(dir, 2, "32-true");
    o.max_epochs = epochs;
    o.default_root_dir = root;
    o.enable_checkpointing = true;
    auto steps = std::make_shared<StepCounter>();
    o.callbacks = {hpu::ModelCheckpoint({.save_top_k = 0, .save_last = true}), steps};
    hpu::Trainer t(o);
    auto model = std::make_unique<hpu::Classifier>(mlp(true), sgd, cosine);  // dropout: the device RNGs resume too
    t.fit(*model, data, resume);
    EXPECT_EQ(t.global_step(), epochs * 16);  // 512 samples, global batch 32
    EXPECT_EQ(steps->n, resume.empty() ? epochs * 16 : (epochs - 2) * 16);  // the resumed run continues at epoch 2
    return std::make_pair(weights(*model), t.callback<hpu::ModelCheckpoint>()->last_model_path());
  };
  auto whole = run(4, dir / "whole", "");
  auto half = run(2, dir / "half", "");
  ASSERT_FALSE(half.second.empty());
  auto resumed = run(4, dir / "resumed", half.second);
  expect_bit_identical(whole.first, resumed.first);
  EXPECT_NE(std::memcmp(half.first[0].data(), whole.first[0].data(), half.first[0].size() * 4), 0);
}
