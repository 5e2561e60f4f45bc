// LightningModule::log(..., {.sync_dist = true}) across processes: two
// processes (this executable launched again as each rank, with torchrun's
// variables) fit a custom module that logs a value of its rank's; every
// rank's callback metrics hold the mean with sync_dist, its own value
// without, at every step.
#include <hpu/trainer.hpp>

#include "error.hpp"
#include "fit_util.hpp"
#include "launch_util.hpp"
#include "test_util.hpp"

#include <cstdlib>

using namespace trainer_test;

namespace {

// Set to the file a rank writes its results to: the executable then runs as
// that rank (RankMain) instead of running the tests.
constexpr const char *kRankOut = "HPU_TEST_SYNC_DIST_OUT";

// Rank r logs r + 1 under both names, one synced.
class RankValue : public hpu::Classifier {
 public:
  explicit RankValue(int rank) : Classifier(mlp(), adamw()), rank_(rank) {}
  hpu::Tensor training_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y,
                            hpu::Metrics &out) override {
    log("synced", rank_ + 1.0, {.sync_dist = true});
    log("own", rank_ + 1.0);
    return Classifier::training_step(ctx, x, y, out);
  }
  std::unique_ptr<hpu::LightningModule> clone() const override { return std::make_unique<RankValue>(rank_); }

 private:
  int rank_;
};

// "<step> synced=<v> own=<v>" for every step's callback metrics.
struct Seen : hpu::Callback {
  std::string state_key() const override { return "Seen"; }
  void on_train_batch_end(hpu::Trainer &t, const hpu::Metrics &, int64_t) override {
    const hpu::Metrics &m = t.state().callback_metrics;
    auto at = [&](const char *k) { return m.count(k) ? hpu::detail::number_text(m.at(k)) : std::string("none"); };
    lines += std::to_string(t.global_step()) + " synced=" + at("synced") + " own=" + at("own") + "\n";
  }
  std::string lines;
};

// One rank: a fit of 2 nodes x 1 device; writes the lines Seen recorded, or
// the error, to `out`.
int run_rank(const std::string &out) {
  try {
    const int rank = std::atoi(std::getenv("RANK"));
    auto seen = std::make_shared<Seen>();
    hpu::TrainerOptions o = silent_run(std::getenv("HPU_TEST_ROOT"), 3);
    o.devices = 1;
    o.num_nodes = 2;
    o.strategy = "hpu_ddp";
    o.limit_train_batches = hpu::BatchCount{4};
    o.limit_val_batches = hpu::BatchCount{0};
    o.num_sanity_val_steps = 0;
    o.callbacks = {seen};
    hpu::Trainer t(o);
    hpu::InMemoryData data = blob_data(16);
    RankValue model(rank);
    t.fit(model, data);
    spit(out, "global_rank " + std::to_string(t.global_rank()) + "\n" + seen->lines);
    return 0;
  } catch (const std::exception &e) {
    spit(out, std::string("error: ") + e.what() + "\n");
    return 1;
  }
}

struct RankMain {
  RankMain() {
    if (const char *out = std::getenv(kRankOut)) std::_Exit(run_rank(out));
  }
} rank_main;

// This executable as rank `rank` of 2, its results in dir/rank<rank>.
pid_t launch_rank(const TempDir &dir, int rank, int port) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setenv(kRankOut, (dir / ("rank" + std::to_string(rank))).c_str(), 1);
  ::setenv("HPU_TEST_ROOT", dir.path().c_str(), 1);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  char self[] = "/proc/self/exe";
  char *argv[] = {self, nullptr};
  ::execv(self, argv);
  ::_exit(127);
}

}  // namespace

TEST(SyncDistProcs, EveryRankSeesTheMeanWithSyncDistAndItsOwnValueWithout) {
  TempDir dir;
  const int port = free_port();
  const pid_t a = launch_rank(dir, 0, port), b = launch_rank(dir, 1, port);
  EXPECT_EQ(wait_for(a, std::chrono::seconds(120)), 0) << slurp(dir / "rank0");
  EXPECT_EQ(wait_for(b, std::chrono::seconds(120)), 0) << slurp(dir / "rank1");
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    // 512 samples over 2 ranks of 16 a batch, 4 batches: steps 1 to 4.
    std::string want = "global_rank " + std::to_string(rank) + "\n";
    for (int step = 1; step <= 4; ++step)
      want += std::to_string(step) + " synced=1.5 own=" + std::to_string(rank + 1) + "\n";
    EXPECT_EQ(slurp(dir / ("rank" + std::to_string(rank))), want);
  }
}
