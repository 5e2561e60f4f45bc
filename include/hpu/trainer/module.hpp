// LightningModule: what a model gives the trainer. Classifier: the one
// hpu-train builds, a stack of layers with a cross-entropy loss.
#pragma once

#include <hpu/trainer/job.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/scheduler.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpu {

// How LightningModule::log records a value (Lightning's self.log arguments).
struct LogOptions {
  // The mean of every rank's value rather than global rank 0's (Lightning's
  // sync_dist=True), at the cost of one small allreduce per step. Every rank
  // must then log the same names, at every step, as in Lightning.
  bool sync_dist = false;
};

class LightningModule {
 public:
  virtual ~LightningModule() = default;
  // Creates the parameters on `dev`; the trainer seeds `rng` the same on every
  // rank, so replicas start equal.
  virtual void setup_device(hpuDevice_t dev, Rng &rng) = 0;
  virtual std::vector<Parameter *> parameters() = 0;
  // The loss of one training batch (x: [N, ...] f32, y: [N] i32), its forward
  // recorded on ctx.tape. The loss is logged as "train_loss". Metrics to log
  // go into `log` (global rank 0's are kept), or through this->log() below.
  // After every step the trainer puts the step's values in callback_metrics
  // (what callbacks read) and, every log_every_n_steps, sends them to the
  // loggers.
  virtual Tensor training_step(Context &ctx, const Tensor &x, const Tensor &y, Metrics &log) = 0;
  // Lightning's self.log, from training_step: logs `value` under `name` for
  // this step; with {.sync_dist = true} the trainer logs the mean over every
  // rank, else global rank 0's value. The last call for a name in a step wins;
  // calls from evaluation_step are dropped (it returns its metrics).
  void log(const std::string &name, double value, LogOptions options = {}) {
    logged_.push_back({name, value, options.sync_dist});
  }
  // What log() recorded since the last call, in order (the trainer's, after
  // each training step).
  struct Logged {
    std::string name;
    double value = 0;
    bool sync_dist = false;
  };
  std::vector<Logged> take_logged() { return std::exchange(logged_, {}); }
  // Sums over one evaluation batch, e.g. {"loss": loss x N, "acc": correct};
  // the trainer divides by the samples seen and logs "<prefix><key>"
  // (prefix "val_" or "test_").
  virtual Metrics evaluation_step(Context &ctx, const Tensor &x, const Tensor &y) = 0;
  virtual std::unique_ptr<Optimizer> configure_optimizers(const std::vector<Parameter *> &params) = 0;
  // A schedule for the optimizer, given the run's total optimizer steps; none by default.
  virtual std::unique_ptr<LRScheduler> configure_scheduler(double base_lr, int64_t total_steps) {
    (void)base_lr, (void)total_steps;
    return nullptr;
  }
  // A replica with the same configuration, for another device (hpu_ddp).
  virtual std::unique_ptr<LightningModule> clone() const = 0;

 private:
  std::vector<Logged> logged_;
};

class Classifier : public LightningModule {
 public:
  Classifier(const Sequential &net, OptimizerSpec opt = {}, SchedulerSpec sched = {});
  // The layers of a job's model section.
  static Sequential build(const std::vector<LayerSpec> &layers);

  void setup_device(hpuDevice_t dev, Rng &rng) override;
  std::vector<Parameter *> parameters() override;
  Tensor training_step(Context &ctx, const Tensor &x, const Tensor &y, Metrics &log) override;
  Metrics evaluation_step(Context &ctx, const Tensor &x, const Tensor &y) override;
  std::unique_ptr<Optimizer> configure_optimizers(const std::vector<Parameter *> &params) override;
  std::unique_ptr<LRScheduler> configure_scheduler(double base_lr, int64_t total_steps) override;
  std::unique_ptr<LightningModule> clone() const override;
  Sequential &net() { return *net_; }

 private:
  std::unique_ptr<Sequential> net_;
  OptimizerSpec opt_;
  SchedulerSpec sched_;
};

}  // namespace hpu
