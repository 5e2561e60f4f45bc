#include <hpu/trainer/scheduler.hpp>

#include "error.hpp"
#include "json.hpp"

#include <cmath>
#include <limits>

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

ReduceLROnPlateau::ReduceLROnPlateau(double base_lr, PlateauOptions o) : LRScheduler(Interval::epoch), o_(std::move(o)) {
  if (!(base_lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "lr is %g; expected >= 0", base_lr);
  if (o_.monitor.empty()) fail(HPU_ERROR_INVALID_ARGUMENT, "ReduceLROnPlateau monitor is empty; name a logged metric");
  if (o_.mode != "min" && o_.mode != "max")
    fail(HPU_ERROR_INVALID_ARGUMENT, "ReduceLROnPlateau mode is \"%s\"; accepted values: \"min\", \"max\"",
         o_.mode.c_str());
  if (o_.threshold_mode != "rel" && o_.threshold_mode != "abs")
    fail(HPU_ERROR_INVALID_ARGUMENT, "threshold_mode is \"%s\"; accepted values: \"rel\", \"abs\"",
         o_.threshold_mode.c_str());
  if (!(o_.factor > 0 && o_.factor < 1)) fail(HPU_ERROR_INVALID_ARGUMENT, "factor is %g; expected in (0, 1)", o_.factor);
  if (o_.patience < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "patience is %d; expected >= 0", o_.patience);
  if (o_.cooldown < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "cooldown is %d; expected >= 0", o_.cooldown);
  if (!(o_.threshold >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "threshold is %g; expected >= 0", o_.threshold);
  if (!(o_.min_lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "min_lr is %g; expected >= 0", o_.min_lr);
  if (!(o_.eps >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "eps is %g; expected >= 0", o_.eps);
  lr_ = base_lr;
  best_ = o_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::better(double a) const {
  const bool rel = o_.threshold_mode == "rel";
  if (o_.mode == "min") return a < (rel ? best_ * (1 - o_.threshold) : best_ - o_.threshold);
  return a > (rel ? best_ * (1 + o_.threshold) : best_ + o_.threshold);
}

// PyTorch's order: count the epoch good or bad, let a cooldown swallow it,
// reduce once the bad ones exceed the patience.
void ReduceLROnPlateau::step(double value) {
  if (better(value)) {
    best_ = value;
    bad_ = 0;
  } else {
    ++bad_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_ = 0;
  }
  if (bad_ > o_.patience) {
    const double reduced = std::max(lr_ * o_.factor, o_.min_lr);
    if (lr_ - reduced > o_.eps) lr_ = reduced;
    cooldown_left_ = o_.cooldown;
    bad_ = 0;
  }
}

std::string ReduceLROnPlateau::state_dict() const {
  detail::Json j(json_object());
  json_object_set_new(j.get(), "lr", json_real(lr_));
  // JSON has no infinity: null stands for "no best yet".
  json_object_set_new(j.get(), "best", std::isfinite(best_) ? json_real(best_) : json_null());
  json_object_set_new(j.get(), "num_bad_epochs", json_integer(bad_));
  json_object_set_new(j.get(), "cooldown_counter", json_integer(cooldown_left_));
  return detail::dump(j.get(), JSON_COMPACT);
}

void ReduceLROnPlateau::load_state_dict(const std::string &text) {
  detail::Json j = detail::parse_object(text, "ReduceLROnPlateau state", HPU_ERROR_IO);
  json_t *lr = json_object_get(j.get(), "lr"), *best = json_object_get(j.get(), "best");
  json_t *bad = json_object_get(j.get(), "num_bad_epochs"), *cool = json_object_get(j.get(), "cooldown_counter");
  if (!json_is_number(lr) || !(json_is_number(best) || json_is_null(best)) || !json_is_integer(bad) ||
      !json_is_integer(cool))
    fail(HPU_ERROR_IO, "ReduceLROnPlateau state lacks lr, best, num_bad_epochs or cooldown_counter");
  lr_ = json_number_value(lr);
  if (json_is_number(best)) best_ = json_number_value(best);
  bad_ = int(json_integer_value(bad));
  cooldown_left_ = int(json_integer_value(cool));
}

}  // namespace hpu
