// LightningModule: what a model gives the trainer. Classifier: the one
// hpu-train builds, a stack of layers with a cross-entropy loss.
#pragma once

#include <hpu/trainer/job.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/scheduler.hpp>

#include <memory>
#include <string>
#include <vector>

namespace hpu {

class LightningModule {
 public:
  virtual ~LightningModule() = default;
  // Creates the parameters on `dev`; the trainer seeds `rng` the same on every
  // rank, so replicas start equal.
  virtual void setup_device(hpuDevice_t dev, Rng &rng) = 0;
  virtual std::vector<Parameter *> parameters() = 0;
  // The loss of one training batch (x: [N, ...] f32, y: [N] i32), its forward
  // recorded on ctx.tape. Metrics to log go into `log` (the loss is logged as
  // "train_loss").
  virtual Tensor training_step(Context &ctx, const Tensor &x, const Tensor &y, Metrics &log) = 0;
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
