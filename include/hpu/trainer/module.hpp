// LightningModule: what a model gives the trainer. Classifier: the one
// hpu-train builds, a stack of layers with a cross-entropy loss.
#pragma once

#include <hpu/trainer/callback.hpp>
#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/nn.hpp>
#include <hpu/trainer/predictions.hpp>
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
  // Lightning's predict_step: the predictions for a batch x [N, ...], one row
  // per sample, the same columns for every batch. By default hpu::Error
  // HPU_ERROR_UNSUPPORTED (the model does not predict).
  virtual Predictions predict_step(Context &ctx, const Tensor &x);
  // Lightning's save_hyperparameters: what the model is built from, as the
  // text of a JSON object; "" (the default) when it gives none. The trainer
  // saves it in checkpoints ("hyper_parameters") and gives it to the loggers
  // when a fit starts (CSVLogger's hparams.yaml).
  virtual std::string hyperparameters() const { return ""; }

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
  // own. When a checkpoint loads into the module, before its weights and
  // anything else are restored, it may read them: fit resuming from
  // ckpt_path, validate, test and predict with a ckpt_path (every replica),
  // Trainer::restore_checkpoint (every replica of the model that trainer
  // last ran) and load_from_checkpoint, as Lightning's.
  virtual void on_save_checkpoint(Checkpoint &ckpt) { (void)ckpt; }
  virtual void on_load_checkpoint(const Checkpoint &ckpt) { (void)ckpt; }
  // The module's layers by name ("net"), for the model summary; none by
  // default (the summary then shows the parameter totals only).
  virtual std::vector<std::pair<std::string, Module *>> named_modules() { return {}; }

 private:
  std::vector<Logged> logged_;
};

// Lightning's load_from_checkpoint for a model the caller built: creates its
// parameters on `dev` and loads the weights of the checkpoint at `path`.
// hpu::Error: as load_checkpoint_file for the file; HPU_ERROR_INVALID_ARGUMENT
// naming the path and the parameter when the checkpoint lacks a weight of the
// model, holds one the model lacks, or one of another shape (a checkpoint of
// another model).
// For use outside a Trainer: a Trainer creates the parameters of a model it
// has not run yet (setup_device, from its seed); give it ckpt_path instead.
void load_from_checkpoint(LightningModule &model, const std::string &path, hpuDevice_t dev);

// model.predict_step outside a Trainer: over the samples at x (f32,
// row-major, shape {n, sample dims...}), batch_size at a time, on `dev` (where
// the model's parameters are), under bf16 autocast when `bf16`; the rows of
// every batch in order. hpu::Error HPU_ERROR_INVALID_ARGUMENT when
// predict_step returns another number of rows than samples.
Predictions predict_samples(LightningModule &model, hpuDevice_t dev, const float *x, const std::vector<int64_t> &shape,
                            int64_t batch_size = 256, bool bf16 = false);

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
  // The model a job's sections describe; its hyperparameters are those
  // sections, so load_from_checkpoint can build it again.
  explicit Classifier(const ModelSpec &spec);
  // Lightning's Classifier.load_from_checkpoint: the model a checkpoint's
  // "hyper_parameters" describe, with its weights, on `dev`. hpu::Error as
  // load_from_checkpoint above, and HPU_ERROR_INVALID_ARGUMENT naming the path
  // when the checkpoint has no model layers among its hyperparameters (a
  // Classifier built from a Sequential saves only its optimizer and scheduler).
  static std::unique_ptr<Classifier> load_from_checkpoint(const std::string &path, hpuDevice_t dev);
  // The layers of a job's model section.
  static Sequential build(const std::vector<LayerSpec> &layers);

  void setup_device(hpuDevice_t dev, Rng &rng) override;
  std::vector<Parameter *> parameters() override;
  Tensor training_step(Context &ctx, const Tensor &x, const Tensor &y, Metrics &log) override;
  Metrics evaluation_step(Context &ctx, const Tensor &x, const Tensor &y) override;
  std::unique_ptr<Optimizer> configure_optimizers(const std::vector<Parameter *> &params) override;
  std::unique_ptr<LRScheduler> configure_scheduler(double base_lr, int64_t total_steps) override;
  std::unique_ptr<LightningModule> clone() const override;
  // Column "pred" (the class with the highest score), then "prob_0" ...
  // "prob_<C-1>" (the softmax of the scores).
  Predictions predict_step(Context &ctx, const Tensor &x) override;
  // {"model": {"layers": [...]}, "optimizer": {...}, "scheduler": {...}} as in
  // a job (no "model" when built from a Sequential).
  std::string hyperparameters() const override;
  // None: Classifier has no hooks. A class derived from it reads the
  // gradients (the default) unless it overrides needs() too.
  CallbackNeeds needs() const override;
  std::vector<std::pair<std::string, Module *>> named_modules() override { return {{"net", net_.get()}}; }
  Sequential &net() { return *net_; }

 private:
  std::vector<LayerSpec> layers_;  // empty when built from a Sequential
  std::unique_ptr<Sequential> net_;
  OptimizerSpec opt_;
  SchedulerSpec sched_;
};

}  // namespace hpu
