// Learning-rate schedules: pure functions of the step (or epoch) count, so a
// resumed run continues exactly where it stopped; and ReduceLROnPlateau,
// driven by a logged metric, whose state checkpoints save.
#pragma once

#include <cstdint>
#include <string>

namespace hpu {

enum class Interval { step, epoch };

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  virtual std::string name() const = 0;
  // The learning rate after `t` steps (or epochs) of the schedule's interval.
  virtual double lr_at(int64_t t) const = 0;
  Interval interval() const { return interval_; }
  // A schedule driven by a logged metric (Lightning's lr_scheduler_config
  // "monitor") names it; the trainer then calls step() with its value at
  // the end of every training epoch, before on_train_epoch_end (so that a
  // checkpoint saved there holds the stepped state). "": a pure schedule.
  virtual std::string monitor() const { return ""; }
  virtual void step(double value) { (void)value; }
  // Whether a monitor that was never logged is an error (else the step is
  // skipped).
  virtual bool strict() const { return true; }
  // The state a checkpoint saves, as JSON text ("": none, a pure schedule).
  virtual std::string state_dict() const { return ""; }
  virtual void load_state_dict(const std::string &json) { (void)json; }

 protected:
  explicit LRScheduler(Interval interval) : interval_(interval) {}

 private:
  Interval interval_;
};

// PyTorch's StepLR: base_lr x gamma^floor(t / step_size).
class StepLR : public LRScheduler {
 public:
  // Throws hpu::Error for base_lr < 0, step_size < 1 or gamma <= 0.
  StepLR(double base_lr, int64_t step_size, double gamma = 0.1, Interval interval = Interval::epoch);
  std::string name() const override { return "StepLR"; }
  double lr_at(int64_t t) const override;

 private:
  double base_, gamma_;
  int64_t step_size_;
};

// Linear warmup from base_lr / warmup_steps to base_lr over warmup_steps, then
// a half cosine from base_lr down to min_lr at total_steps, min_lr after that.
class CosineWarmupLR : public LRScheduler {
 public:
  // Throws hpu::Error for base_lr < 0, warmup_steps < 0, total_steps <=
  // warmup_steps or min_lr outside [0, base_lr].
  CosineWarmupLR(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0,
                 Interval interval = Interval::step);
  std::string name() const override { return "CosineWarmupLR"; }
  double lr_at(int64_t t) const override;

 private:
  double base_, min_;
  int64_t warmup_, total_;
};

// torch.optim.lr_scheduler.ReduceLROnPlateau, monitoring a metric as
// Lightning's {"scheduler": ..., "monitor": "val_loss"}: when the metric has
// not improved for more than `patience` epochs, the rate becomes
// max(lr x factor, min_lr) (a change smaller than eps is skipped), then
// `cooldown` epochs pass before bad epochs count again. Improving means
// beating the best value by more than `threshold`: relatively
// (best x (1 - threshold) in mode "min", best x (1 + threshold) in "max")
// or, with threshold_mode "abs", by that amount.
struct PlateauOptions {
  std::string monitor = "val_loss";
  std::string mode = "min";            // "min" | "max"
  double factor = 0.1;                 // in (0, 1)
  int patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  // "rel" | "abs"
  int cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;
  bool strict = true;                  // a monitor never logged is an error
};

class ReduceLROnPlateau : public LRScheduler {
 public:
  // Throws hpu::Error (HPU_ERROR_INVALID_ARGUMENT) naming the option for an
  // empty monitor, a mode or threshold_mode not listed, factor outside
  // (0, 1), or a negative lr, patience, threshold, cooldown, min_lr or eps.
  ReduceLROnPlateau(double base_lr, PlateauOptions o = {});
  std::string name() const override { return "ReduceLROnPlateau"; }
  double lr_at(int64_t) const override { return lr_; }  // the current rate
  std::string monitor() const override { return o_.monitor; }
  bool strict() const override { return o_.strict; }
  void step(double value) override;
  std::string state_dict() const override;
  void load_state_dict(const std::string &json) override;

  int num_bad_epochs() const { return bad_; }
  double best() const { return best_; }

 private:
  bool better(double a) const;
  PlateauOptions o_;
  double lr_;
  double best_;
  int bad_ = 0, cooldown_left_ = 0;
};

}  // namespace hpu
