// What the trainer and its callbacks need from an optimizer: a name (as
// LearningRateMonitor logs it: "lr-AdamW"), the learning rate and momentum.
#pragma once

#include <optional>
#include <string>

namespace hpu {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;  // class name: "SGD", "AdamW"
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  double initial_lr() const { return initial_lr_; }
  // SGD's momentum or Adam's beta1; none when the optimizer has no momentum.
  virtual std::optional<double> momentum() const { return std::nullopt; }

 protected:
  explicit Optimizer(double lr) : lr_(lr), initial_lr_(lr) {}

 private:
  double lr_, initial_lr_;
};

}  // namespace hpu
