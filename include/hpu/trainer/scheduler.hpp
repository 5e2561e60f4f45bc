// Learning-rate schedules: pure functions of the step (or epoch) count, so a
// resumed run continues exactly where it stopped.
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

}  // namespace hpu
