#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"

namespace hpu {

LearningRateMonitor::LearningRateMonitor(std::string logging_interval, bool log_momentum)
    : interval_(std::move(logging_interval)), momentum_(log_momentum) {
  if (!interval_.empty() && interval_ != "step" && interval_ != "epoch")
    detail::fail(HPU_ERROR_INVALID_ARGUMENT,
                 "logging_interval is \"%s\"; accepted values: \"step\", \"epoch\" or none", interval_.c_str());
}

Metrics LearningRateMonitor::learning_rates(Trainer &t, bool momentum) {
  Metrics m;
  std::map<std::string, int> seen;
  for (Optimizer *o : t.state().optimizers) {
    int n = seen[o->name()]++;
    const std::string name = "lr-" + o->name() + (n ? "-" + std::to_string(n) : "");
    const size_t groups = o->param_groups().size();
    for (size_t g = 0; g < groups; ++g) {
      const std::string key = groups > 1 ? name + "/pg" + std::to_string(g + 1) : name;
      m[key] = o->group_lr(g);
      if (momentum) {
        auto mom = o->momentum();
        m[key + "-momentum"] = mom ? *mom : 0.0;
      }
    }
  }
  return m;
}

void LearningRateMonitor::on_train_batch_start(Trainer &t, int64_t) {
  if (interval_ == "epoch" || !t.should_update_logs()) return;
  Metrics m = learning_rates(t, momentum_);
  if (!m.empty()) t.log_metrics(m, t.global_step());
}

void LearningRateMonitor::on_train_epoch_start(Trainer &t) {
  if (interval_ == "step") return;
  Metrics m = learning_rates(t, momentum_);
  if (!m.empty()) t.log_metrics(m, t.global_step());
}

}  // namespace hpu
