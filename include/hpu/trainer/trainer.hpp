// hpu::Trainer: Lightning's Trainer for emulated HPUs.
#pragma once

#include <hpu/hpu.hpp>
#include <hpu/trainer/callback.hpp>
#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/checkpoint.hpp>
#include <hpu/trainer/data.hpp>
#include <hpu/trainer/logger.hpp>
#include <hpu/trainer/module.hpp>
#include <hpu/trainer/optimizer.hpp>
#include <hpu/trainer/options.hpp>
#include <hpu/trainer/rng.hpp>

#include <memory>
#include <string>
#include <vector>

struct json_t;  // jansson's, for a private member

namespace hpu {

class Comms;  // hpu_ddp's communicators (trainer/src/ddp.hpp)

// Where the loop is; what callbacks read (and EarlyStopping's should_stop).
struct TrainerState {
  Stage stage = Stage::fit;
  int64_t current_epoch = 0;
  int64_t global_step = 0;            // optimizer steps taken
  int64_t num_training_batches = 0;   // per epoch, after limits
  int64_t num_val_batches = 0;
  int64_t num_test_batches = 0;
  int64_t num_predict_batches = 0;
  bool should_stop = false;
  bool validation_ran = false;        // a validation has run during this fit
  bool sanity_checking = false;       // fit's validation before training (num_sanity_val_steps)
  Metrics callback_metrics;           // the latest value of every logged metric, after every step
  std::vector<Optimizer *> optimizers;
};

class Trainer {
 public:
  // Resolves the options (hpu::Error for a bad one) and opens the devices.
  // With hpu_ddp it joins the group of every rank (hpuCommInitFromEnv(3); under
  // a launcher, the call returns once every process has joined), checks that it
  // has num_nodes x devices ranks, and takes global rank 0's seed and log
  // version: the ranks agree on both before anything is written.
  explicit Trainer(TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  const TrainerConfig &config() const { return config_; }
  const TrainerOptions &options() const { return options_; }
  TrainerState &state() { return state_; }
  const TrainerState &state() const { return state_; }
  int64_t current_epoch() const { return state_.current_epoch; }
  int64_t global_step() const { return state_.global_step; }
  // Of this process's first device; with hpu_ddp under a launcher node_rank is
  // the process's rank among the launched processes (from the collectives).
  int global_rank() const { return config_.node_rank * config_.devices; }
  bool is_global_zero() const { return global_rank() == 0; }

  // This process's devices (rank global_rank() + i on devices()[i]).
  const std::vector<Device> &devices() const { return devices_; }
  std::vector<Ref<Callback>> &callbacks() { return callbacks_; }
  std::vector<Ref<Logger>> &loggers() { return loggers_; }
  // The first of the callbacks of type T, or nullptr.
  template <class T>
  T *callback() {
    for (auto &c : callbacks_)
      if (auto *p = dynamic_cast<T *>(c.get())) return p;
    return nullptr;
  }

  // The first logger's folder, else default_root_dir. The same on every rank
  // (global rank 0 picks the version); only global rank 0 creates it, when it
  // first writes there.
  std::string log_dir();
  // Whether this step is a logging step (every log_every_n_steps, and when stopping).
  bool should_update_logs() const;
  // Sends metrics to every logger (global rank 0 only) and records them in the
  // callback metrics. (The training loop records each step's metrics in the
  // callback metrics and calls this every log_every_n_steps.)
  void log_metrics(const Metrics &metrics, int64_t step);

  // Lightning's fit: trains `model` on `data` for max_epochs / max_steps
  // (at least min_epochs, at most max_time), validating every
  // val_check_interval after num_sanity_val_steps batches of validation;
  // resumes from `ckpt_path` when given (weights, optimizer, epoch and batch
  // position, random state, callbacks). When fit, validate or test throws,
  // the callbacks' on_exception sees the error before it propagates.
  void fit(LightningModule &model, DataModule &data, const std::string &ckpt_path = "");
  // One pass over the validation / test set; the metrics ("val_loss",
  // "val_acc", ...) averaged over the samples of every rank. As Lightning's
  // ckpt_path: "" uses the model's current weights; "best" loads
  // ModelCheckpoint's best checkpoint (hpu::Error HPU_ERROR_INVALID_ARGUMENT
  // without a ModelCheckpoint, HPU_ERROR_INVALID_USAGE when it has saved none
  // yet); "last" its last checkpoint (save_last), or, when there is none, the
  // current weights with a warning; anything else is a checkpoint's path. The
  // loaded weights stay in the model.
  Metrics validate(LightningModule &model, DataModule &data, const std::string &ckpt_path = "");
  Metrics test(LightningModule &model, DataModule &data, const std::string &ckpt_path = "");
  // Lightning's predict: model.predict_step over data.predict_data() (its
  // first limit_predict_batches batches), with ckpt_path as for test. Under
  // hpu_ddp each rank predicts its share and the rows are gathered: every
  // rank gets every row, in data set order, whatever the layout. hpu::Error
  // HPU_ERROR_INVALID_ARGUMENT for an empty predict set.
  Predictions predict(LightningModule &model, DataModule &data, const std::string &ckpt_path = "");
  // The checkpoint file ckpt_path names ("best", "last" or a path, as above;
  // "" when none is to be loaded); `stage` names the call in messages.
  std::string checkpoint_file(const std::string &ckpt_path, Stage stage) const;

  // The trainer's part of a checkpoint: epoch, step, seed, callbacks' states,
  // and while fitting the weights, optimizer state and random state. Under
  // hpu_ddp every rank calls both (as in Lightning): a sharded optimizer's
  // state is gathered from every rank. save_checkpoint writes on global rank 0.
  Checkpoint make_checkpoint() const;
  void save_checkpoint(const std::string &path) const;
  // Restores what make_checkpoint saved (hpu::Error for a mismatch): the
  // module's on_load_checkpoint (on every replica of the model this trainer
  // last ran, if any) and the callbacks' first, then the trainer's state
  // and the callbacks' states.
  void restore_checkpoint(const Checkpoint &ckpt);

 private:
  TrainerOptions options_;
  TrainerConfig config_;
  TrainerState state_;
  std::vector<Device> devices_;
  std::vector<Ref<Callback>> callbacks_;
  std::vector<Ref<Logger>> loggers_;
  std::unique_ptr<Comms> comms_;  // hpu_ddp
  void join_ranks();
  void resolve_versions();

 public:
  struct Run;  // what a fit, validate or test holds (run.hpp)

 private:
  std::unique_ptr<Run> run_;
  void start(LightningModule &model, DataModule &data, Stage stage);
  void finish(Stage stage);
  void run_fit(LightningModule &model, DataModule &data, const std::string &ckpt_path);
  Metrics run_validate(LightningModule &model, DataModule &data, const std::string &ckpt_path);
  Metrics run_test(LightningModule &model, DataModule &data, const std::string &ckpt_path);
  Predictions run_predict(LightningModule &model, DataModule &data, const std::string &ckpt_path);
  // max_batches >= 0: at most that many of the batches the limit lets run;
  // log_step >= 0: the step its metrics log under (by default global_step).
  Metrics evaluate(Stage stage, const TensorDataset &set, const BatchCount &limit, int64_t max_batches = -1,
                   int64_t log_step = -1);
  bool can_stop_early() const;  // min_epochs reached
  void sanity_check();
  void step_plateau();
  void train_epoch(int64_t skip);
  void optimizer_step();
  void restore_run(const Checkpoint &ck);
  void load_weights(const std::string &ckpt_path, Stage stage);
  void log_hyperparams(const LightningModule &model);
  void add_run_state(Checkpoint &ck, json_t *meta) const;
};

}  // namespace hpu
