#include <hpu/trainer/scheduler.hpp>

#include "error.hpp"

#include <cmath>

namespace hpu {

using detail::fail;

StepLR::StepLR(double base_lr, int64_t step_size, double gamma, Interval interval)
    : LRScheduler(interval), base_(base_lr), gamma_(gamma), step_size_(step_size) {
  if (!(base_lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "lr is %g; expected >= 0", base_lr);
  if (step_size < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "step_size is %lld; expected >= 1", (long long)step_size);
  if (!(gamma > 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "gamma is %g; expected > 0", gamma);
}

double StepLR::lr_at(int64_t t) const {
  if (t < 0) t = 0;
  return base_ * std::pow(gamma_, double(t / step_size_));
}

CosineWarmupLR::CosineWarmupLR(double base_lr, int64_t warmup_steps, int64_t total_steps, double min_lr,
                               Interval interval)
    : LRScheduler(interval), base_(base_lr), min_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (!(base_lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "lr is %g; expected >= 0", base_lr);
  if (warmup_steps < 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "warmup_steps is %lld; expected >= 0", (long long)warmup_steps);
  if (total_steps <= warmup_steps)
    fail(HPU_ERROR_INVALID_ARGUMENT, "total_steps is %lld; expected more than warmup_steps (%lld)",
         (long long)total_steps, (long long)warmup_steps);
  if (!(min_lr >= 0 && min_lr <= base_lr))
    fail(HPU_ERROR_INVALID_ARGUMENT, "min_lr is %g; expected in [0, lr = %g]", min_lr, base_lr);
}

double CosineWarmupLR::lr_at(int64_t t) const {
  if (t < 0) t = 0;
  if (t < warmup_) return base_ * double(t + 1) / double(warmup_);
  if (t >= total_) return min_;
  double progress = double(t - warmup_) / double(total_ - warmup_);
  return min_ + 0.5 * (base_ - min_) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace hpu
