// The built-in callbacks: DeviceStatsMonitor, ModelCheckpoint, EarlyStopping,
// LearningRateMonitor and the progress bar.
#pragma once

#include <hpu/trainer/callback.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpu {

// Logs the ten Habana memory figures of every device of this process, from
// hpuMemStats, at the start and end of each train/validation/test batch on
// logging steps (every log_every_n_steps), under Lightning's names:
// "DeviceStatsMonitor.on_train_batch_start/InUse" for the trainer's first
// device, "DeviceStatsMonitor.on_train_batch_start/hpu1/InUse" for local device
// 1 and so on. As Lightning's, the start and the end of a training batch are
// logged under that batch's step (global_step as the batch starts, before its
// optimizer step), so one row holds both.
class DeviceStatsMonitor : public Callback {
 public:
  std::string state_key() const override { return "DeviceStatsMonitor"; }
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  void on_train_batch_start(Trainer &t, int64_t) override;
  void on_train_batch_end(Trainer &t, const Metrics &, int64_t) override;
  void on_validation_batch_start(Trainer &t, int64_t) override { log(t, "on_validation_batch_start"); }
  void on_validation_batch_end(Trainer &t, int64_t) override { log(t, "on_validation_batch_end"); }
  void on_test_batch_start(Trainer &t, int64_t) override { log(t, "on_test_batch_start"); }
  void on_test_batch_end(Trainer &t, int64_t) override { log(t, "on_test_batch_end"); }

  // The figures of the trainer's devices with their logged names.
  static Metrics device_stats(Trainer &t, const std::string &hook);

 private:
  void log(Trainer &t, const char *hook);
  // The training batch in progress: its step and whether it logs.
  int64_t batch_step_ = 0;
  bool batch_logs_ = false;
};

// Saves checkpoints at the end of training epochs (after validation) or every
// n training steps. With `monitor`, keeps the save_top_k best by that metric
// (mode "min" or "max"); without, keeps the latest save_top_k. save_top_k -1
// keeps all, 0 none. save_last also writes "last.ckpt". Files are written
// atomically (a temporary "<name>.ckpt.tmp.XXXXXX", renamed), and a fit starts
// by removing such temporaries that a killed run left in the folder;
// `dirpath` defaults to <log_dir>/checkpoints and `filename` to
// "epoch={epoch}-step={step}" (any logged metric may appear as {name}).
struct ModelCheckpointOptions {
  std::string dirpath;
  std::string filename;
  std::string monitor;
  std::string mode = "min";
  int save_top_k = 1;
  bool save_last = false;
  int every_n_epochs = 1;
  int64_t every_n_train_steps = 0;
};

class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions o = {});  // hpu::Error for a bad option
  std::string state_key() const override;
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  std::string state_dict() const override;
  void load_state_dict(const std::string &json) override;
  void setup(Trainer &t, Stage s) override;
  void on_train_batch_end(Trainer &t, const Metrics &, int64_t) override;
  void on_train_epoch_end(Trainer &t) override;

  const std::string &best_model_path() const { return best_path_; }
  std::optional<double> best_model_score() const;
  const std::string &last_model_path() const { return last_path_; }
  const std::string &dirpath() const { return dir_; }
  // The kept checkpoints and their scores (the step, when nothing is monitored).
  const std::map<std::string, double> &best_k_models() const { return best_k_; }
  // Saves now, as at the end of an epoch (tests, manual use).
  void save(Trainer &t);

 private:
  std::string format_name(Trainer &t) const;
  bool better(double a, double b) const;
  ModelCheckpointOptions o_;
  std::string dir_;
  std::map<std::string, double> best_k_;
  std::string best_path_, last_path_;
  int64_t last_saved_step_ = -1;
};

// Stops training when `monitor` has not improved by more than min_delta for
// `patience` consecutive checks (at the end of each validation), when it is not
// finite (check_finite), reaches stopping_threshold or passes
// divergence_threshold. A monitor that was never logged is an hpu::Error naming
// the available metrics (strict).
struct EarlyStoppingOptions {
  std::string monitor;
  double min_delta = 0.0;
  int patience = 3;
  std::string mode = "min";
  bool strict = true;
  bool check_finite = true;
  std::optional<double> stopping_threshold;
  std::optional<double> divergence_threshold;
  bool check_on_train_epoch_end = false;
};

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions o);  // hpu::Error for a bad option
  std::string state_key() const override;
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  std::string state_dict() const override;
  void load_state_dict(const std::string &json) override;
  void on_validation_end(Trainer &t) override;
  void on_train_epoch_end(Trainer &t) override;

  int wait_count() const { return wait_; }
  std::optional<double> best_score() const { return best_; }
  int64_t stopped_epoch() const { return stopped_epoch_; }
  const std::string &reason() const { return reason_; }

 private:
  void check(Trainer &t);
  EarlyStoppingOptions o_;
  int wait_ = 0;
  std::optional<double> best_;
  int64_t stopped_epoch_ = 0;
  std::string reason_;
};

// Logs each optimizer's learning rate as "lr-<Name>" ("lr-AdamW", a suffix
// "-1", "-2" for repeated names), and with log_momentum "lr-<Name>-momentum",
// every logging step ("step") or every epoch ("epoch"); none: with the
// scheduler's interval. As Lightning's, an optimizer with several param
// groups logs each group's rate: "lr-AdamW/pg1", "lr-AdamW/pg2" (and
// "lr-AdamW/pg1-momentum").
class LearningRateMonitor : public Callback {
 public:
  explicit LearningRateMonitor(std::string logging_interval = "", bool log_momentum = false);
  std::string state_key() const override { return "LearningRateMonitor"; }
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  void on_train_batch_start(Trainer &t, int64_t) override;
  void on_train_epoch_start(Trainer &t) override;
  static Metrics learning_rates(Trainer &t, bool momentum);

 private:
  std::string interval_;
  bool momentum_;
};

// A live bar rewritten in place (\r) when `out` is a terminal; otherwise plain
// lines: one every refresh_rate batches (default: a tenth of the epoch) and one
// at the end of each epoch, so logs stay readable. Only the global rank 0 prints.
class ProgressBar : public Callback {
 public:
  explicit ProgressBar(int refresh_rate = 0, FILE *out = stderr, std::optional<bool> live = std::nullopt);
  std::string state_key() const override { return "ProgressBar"; }
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  void on_train_epoch_start(Trainer &t) override;
  void on_train_batch_end(Trainer &t, const Metrics &outputs, int64_t batch_idx) override;
  void on_train_epoch_end(Trainer &t) override;
  void on_validation_end(Trainer &t) override;
  void on_test_end(Trainer &t) override;
  bool live() const { return live_; }

 private:
  void line(Trainer &t, int64_t done, int64_t total, bool final);
  int refresh_;
  FILE *out_;
  bool live_;
  double epoch_start_ = 0;
  int64_t done_ = 0;  // batches of this epoch seen
  Metrics last_;
};

}  // namespace hpu
