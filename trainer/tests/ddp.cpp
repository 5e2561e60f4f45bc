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
#include "test_util.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <cmath>
#include <csignal>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

// ---- processes: hpu-train under torchrun's variables on loopback ----------------

namespace {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
    std::abort();
  ::close(fd);
  return ntohs(a.sin_port);
}

// hpu-train with `args`, its output in `out`, under the environment `env`.
pid_t spawn(const std::vector<std::string> &args, const std::vector<std::pair<std::string, std::string>> &env,
            const std::string &out) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  for (const auto &[k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  FILE *f = std::freopen(out.c_str(), "w", stdout);
  if (!f || ::dup2(::fileno(stdout), 2) < 0) ::_exit(126);
  std::vector<char *> argv{const_cast<char *>(HPU_TRAIN_EXE)};
  for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(HPU_TRAIN_EXE, argv.data());
  ::_exit(127);
}

// The exit status of `pid`, or -1 (after killing it) when it runs past `limit`.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

const char *kJob = R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 64},
                       {"type": "relu"}, {"type": "linear", "in_features": 64, "out_features": 10}]},
  "data": {"name": "fashion_mnist", "batch_size": 32, "val_size": 1000},
  "optimizer": {"name": "adamw", "lr": 0.002},
  "trainer": {"precision": "bf16-mixed", "max_epochs": 1, "limit_train_batches": 30, "limit_val_batches": 4,
              "limit_test_batches": 4, "seed": 5, "enable_progress_bar": false, "logger": false,
              "callbacks": [{"type": "ModelCheckpoint", "save_last": true, "dirpath": "DIR"}]},
  "test": true
})";

std::string job_in(const TempDir &dir, const std::string &name) {
  std::string j = kJob;
  j.replace(j.find("DIR"), 3, dir / name);
  spit(dir / (name + ".json"), j);
  return dir / (name + ".json");
}

std::map<std::string, hpu::CheckpointTensor> state_dict(const std::string &path) {
  std::map<std::string, hpu::CheckpointTensor> out;
  for (auto &[k, v] : hpu::load_checkpoint_file(path).tensors)
    if (k.rfind("state_dict/", 0) == 0) out[k] = v;
  return out;
}

}  // namespace

TEST(Ddp, TwoProcessesReachTheWeightsOfTwoDevicesInOneProcess) {
  TempDir dir;
  const std::string threads = job_in(dir, "threads"), procs = job_in(dir, "procs");
  ASSERT_EQ(wait_for(spawn({threads, "--devices", "2"}, {}, dir / "threads.out"), std::chrono::seconds(300)), 0)
      << slurp(dir / "threads.out");
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(spawn({procs, "--devices", "1"},
                         {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", "2"},
                          {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}},
                         dir / ("procs" + std::to_string(r) + ".out")));
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(wait_for(pids[size_t(r)], std::chrono::seconds(300)), 0)
        << slurp(dir / ("procs" + std::to_string(r) + ".out"));
  // Rank 0 saved; rank 1 did not.
  ASSERT_TRUE(file_exists(dir / "procs/last.ckpt")) << slurp(dir / "procs0.out");
  const auto a = state_dict(dir / "threads/last.ckpt"), b = state_dict(dir / "procs/last.ckpt");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[k, v] : a) {
    ASSERT_TRUE(b.count(k)) << k;
    EXPECT_TRUE(v.bytes == b.at(k).bytes) << k << " differs";
  }
  // The test metrics printed by both runs agree (reduced over ranks).
  const std::string t = slurp(dir / "threads.out"), p = slurp(dir / "procs0.out");
  const auto acc = [](const std::string &s) {
    const size_t i = s.find("test_acc");
    return i == std::string::npos ? std::string("missing") : s.substr(i, s.find('\n', i) - i);
  };
  EXPECT_NE(acc(p), "missing") << p;
  EXPECT_EQ(acc(t), acc(p)) << t << "\n----\n" << p;
}

TEST(Ddp, AKilledProcessFailsItsPeerInsteadOfHanging) {
  TempDir dir;
  std::string job = job_in(dir, "killed");
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(spawn({job, "--devices", "1", "--max-epochs", "-1", "--limit-train-batches", "1.0"},
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
