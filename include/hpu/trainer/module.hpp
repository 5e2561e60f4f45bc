// LightningModule: what a model gives the trainer. Classifier: the one
// hpu-train builds, a stack of layers with a cross-entropy loss.
#pragma once

#include <hpu/trainer/callback.hpp>
#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/scheduler.hpp>

#include <memory>
#include <string>
#include <utility>
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

  // Lightning's hooks of the module. Around each training batch's backward,
  // on every replica (each on its own thread): `loss` is the replica's loss;
  // after backward, parameters() hold its gradients as Callback's
  // on_after_backward describes.
  virtual void on_before_backward(const Tensor &loss) { (void)loss; }
  virtual void on_after_backward() {}
  // What the module's hooks read, for the step planner (Callback::needs): by
  // default the gradients, so that on_after_backward sees them stored; a
  // module whose hooks read none says so (Classifier does) and keeps the
  // optimizer step in the backward.
  virtual CallbackNeeds needs() const { return {}; }
  // As Callback's: on save (replica 0's module), after the trainer and the
  // callbacks filled `ckpt`, the module may add tensors and meta keys of its
  // own; when fit resumes from a checkpoint (every replica), before anything
  // is restored, it may read them.
  virtual void on_save_checkpoint(Checkpoint &ckpt) { (void)ckpt; }
  virtual void on_load_checkpoint(const Checkpoint &ckpt) { (void)ckpt; }
  // The module's layers by name ("net"), for the model summary; none by
  // default (the summary then shows the parameter totals only).
  virtual std::vector<std::pair<std::string, Module *>> named_modules() { return {}; }
};

// Lightning's ModelSummary: one row per named module of `model` and, below
// it, one per child layer ("net.0"), up to `max_depth` levels, with its type
// (Module::name()) and parameter count, then the totals (parameters and
// their f32 size). The model's parameters must exist (setup_device). The
// trainer prints it on global rank 0 at the start of fit when
// enable_model_summary is true (the default).
std::string model_summary(LightningModule &model, int max_depth = 2);

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
  // None: Classifier has no hooks. A class derived from it reads the
  // gradients (the default) unless it overrides needs() too.
  CallbackNeeds needs() const override;
  std::vector<std::pair<std::string, Module *>> named_modules() override { return {{"net", net_.get()}}; }
  Sequential &net() { return *net_; }

 private:
  std::unique_ptr<Sequential> net_;
  OptimizerSpec opt_;
  SchedulerSpec sched_;
};

}  // namespace hpu
