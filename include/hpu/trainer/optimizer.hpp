// What the trainer and its callbacks need from an optimizer: a name (as
// LearningRateMonitor logs it: "lr-AdamW"), the learning rate, momentum, a
// step over its parameters, their groups (torch.optim's param_groups) and
// the state a checkpoint saves.
#pragma once

#include <hpu/hpu.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpu {

struct Parameter;
class StepPlan;

// Some of an optimizer's parameters with settings of their own, as a
// torch.optim param group: the common one is no weight decay on biases and
// norm weights (ParamGroup{no_decay, std::nullopt, 0.0}). A setting left
// unset is the optimizer's. A group's lr is its base rate: a schedule
// scales it as it scales the optimizer's (lr x lr() / initial_lr()).
struct ParamGroup {
  std::vector<Parameter *> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;  // class name: "SGD", "AdamW"
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  double initial_lr() const { return initial_lr_; }
  // SGD's momentum or Adam's beta1; none when the optimizer has no momentum.
  virtual std::optional<double> momentum() const { return std::nullopt; }
  // One update of every parameter from its gradient, queued on `stream`.
  virtual void step(hpuStream_t stream) { (void)stream; }
  // Offers the next step's update of each parameter, with learning rate lr,
  // through plan() to the layer that computes its gradient in the coming
  // backward (StepPlan::offer); that layer may apply it at once in place of
  // storing the gradient, and the next step() skips what it applied
  // (StepPlan::applied). Returns false when this optimizer cannot (the
  // default). The trainer asks when its plan says nothing else reads the
  // gradients (StepPlan::optimizer_in_backward).
  virtual bool offer_step_in_backward(double lr) {
    (void)lr;
    return false;
  }
  // The step plan of the replica this optimizer runs on (set by the trainer;
  // null outside it): its offers and the parameters' low-precision copies.
  void set_plan(StepPlan *plan) { plan_ = plan; }
  StepPlan *plan() const { return plan_; }
  // Sets every gradient to zero.
  void zero_grad(hpuStream_t stream);
  // The state tensors a checkpoint saves, by name (not the parameters):
  // "<kind>/<parameter name>", as "exp_avg/1.weight".
  virtual void state(std::vector<std::pair<std::string, Tensor>> &out) { (void)out; }
  // The same optimizer (settings, learning rate, steps taken) over other
  // parameters, with zero state; nullptr when it cannot have one. Optimizers
  // whose update of each element depends only on that element (SGD, AdamW)
  // return one unless groups have settings of their own (a slice may span
  // parameters of two groups): hpu_ddp then gives each rank a slice of
  // every parameter to update (see hpu-train(1), "hpu_ddp").
  virtual std::unique_ptr<Optimizer> with_params(std::vector<Parameter *> params) const {
    (void)params;
    return nullptr;
  }
  int64_t steps() const { return steps_; }
  void set_steps(int64_t n) { steps_ = n; }
  // Every parameter, group after group.
  const std::vector<Parameter *> &params() const { return params_; }
  // The groups as given (one group of every parameter, without settings of
  // its own, when the optimizer was given parameters).
  const std::vector<ParamGroup> &param_groups() const { return groups_; }
  // Whether some group with parameters has a setting of its own.
  bool has_group_settings() const;
  // The learning rate param_groups()[g] steps with now: its own lr scaled as
  // the optimizer's is (see ParamGroup), or lr(). hpu::Error
  // (HPU_ERROR_INVALID_ARGUMENT) for a g past the groups.
  double group_lr(size_t g) const;

 protected:
  explicit Optimizer(double lr, std::vector<Parameter *> params = {});
  // hpu::Error (HPU_ERROR_INVALID_ARGUMENT) for a parameter in two groups
  // or a group's lr or weight_decay below 0, naming the group.
  Optimizer(double lr, std::vector<ParamGroup> groups);
  // The learning rate of params()[i] when the optimizer's is `lr`, and its
  // weight decay (`weight_decay`, the optimizer's, when its group sets none).
  double lr_of(size_t i, double lr) const;
  double weight_decay_of(size_t i, double weight_decay) const;
  int64_t steps_ = 0;

 private:
  double group_rate(const ParamGroup &g, double lr) const;
  StepPlan *plan_ = nullptr;
  double lr_, initial_lr_;
  std::vector<Parameter *> params_;
  std::vector<ParamGroup> groups_;
  std::vector<size_t> group_of_;  // params_[i]'s group
};

}  // namespace hpu
