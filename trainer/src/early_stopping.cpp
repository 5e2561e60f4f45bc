#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"
#include "log.hpp"

#include <cmath>

namespace hpu {

using detail::fail;

EarlyStopping::EarlyStopping(EarlyStoppingOptions o) : o_(std::move(o)) {
  if (o_.monitor.empty()) fail(HPU_ERROR_INVALID_ARGUMENT, "EarlyStopping monitor is empty; name a logged metric");
  if (o_.mode != "min" && o_.mode != "max")
    fail(HPU_ERROR_INVALID_ARGUMENT, "EarlyStopping mode is \"%s\"; accepted values: \"min\", \"max\"",
         o_.mode.c_str());
  if (o_.patience < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "patience is %d; expected >= 0", o_.patience);
  if (!std::isfinite(o_.min_delta))
    fail(HPU_ERROR_INVALID_ARGUMENT, "min_delta is %g; expected a finite value", o_.min_delta);
  o_.min_delta = std::fabs(o_.min_delta);
}

std::string EarlyStopping::state_key() const { return "EarlyStopping{monitor=" + o_.monitor + ",mode=" + o_.mode + "}"; }

void EarlyStopping::on_validation_end(Trainer &t) {
  if (!o_.check_on_train_epoch_end && t.state().stage == Stage::fit) check(t);
}

void EarlyStopping::on_train_epoch_end(Trainer &t) {
  if (o_.check_on_train_epoch_end) check(t);
}

void EarlyStopping::check(Trainer &t) {
  // Neither the sanity check's metrics nor a fast_dev_run count (Lightning's).
  if (t.state().sanity_checking || t.options().fast_dev_run.batches) return;
  const Metrics &m = t.state().callback_metrics;
  auto it = m.find(o_.monitor);
  if (it == m.end()) {
    if (!o_.strict) return;
    std::string names;
    for (const auto &[k, v] : m) {
      (void)v;
      names += (names.empty() ? "" : ", ") + k;
    }
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "early stopping conditioned on metric \"%s\", which is not available; available metrics: %s",
         o_.monitor.c_str(), names.empty() ? "(none logged)" : names.c_str());
  }
  const double v = it->second;
  const bool min = o_.mode == "min";
  auto stop = [&](std::string why) {
    reason_ = std::move(why);
    stopped_epoch_ = t.current_epoch();
    t.state().should_stop = true;
    detail::log(HPU_LOG_INFO, "EarlyStopping stops the fit in epoch %lld: %s", (long long)stopped_epoch_, reason_.c_str());
  };
  if (o_.check_finite && !std::isfinite(v)) {
    stop(detail::format("monitored metric %s = %g is not finite", o_.monitor.c_str(), v));
    return;
  }
  if (o_.stopping_threshold && (min ? v < *o_.stopping_threshold : v > *o_.stopping_threshold)) {
    stop(detail::format("stopping threshold reached: %s = %g %s %g", o_.monitor.c_str(), v, min ? "<" : ">",
                        *o_.stopping_threshold));
    return;
  }
  if (o_.divergence_threshold && (min ? v > *o_.divergence_threshold : v < *o_.divergence_threshold)) {
    stop(detail::format("divergence threshold passed: %s = %g %s %g", o_.monitor.c_str(), v, min ? ">" : "<",
                        *o_.divergence_threshold));
    return;
  }
  const bool improved = !best_ || (min ? v < *best_ - o_.min_delta : v > *best_ + o_.min_delta);
  if (improved) {
    best_ = v;
    wait_ = 0;
    return;
  }
  if (++wait_ >= o_.patience)
    stop(detail::format("%s did not improve in the last %d checks; best score: %g", o_.monitor.c_str(), wait_, *best_));
}

std::string EarlyStopping::state_dict() const {
  detail::Json j(json_object());
  json_object_set_new(j.get(), "wait_count", json_integer(wait_));
  json_object_set_new(j.get(), "stopped_epoch", json_integer(stopped_epoch_));
  json_object_set_new(j.get(), "best_score", best_ ? json_real(*best_) : json_null());
  json_object_set_new(j.get(), "patience", json_integer(o_.patience));
  return detail::dump(j.get(), JSON_COMPACT);
}

void EarlyStopping::load_state_dict(const std::string &text) {
  detail::Json j = detail::parse_object(text, "EarlyStopping state", HPU_ERROR_IO);
  wait_ = int(json_integer_value(json_object_get(j.get(), "wait_count")));
  stopped_epoch_ = json_integer_value(json_object_get(j.get(), "stopped_epoch"));
  json_t *b = json_object_get(j.get(), "best_score");
  best_ = json_is_number(b) ? std::optional<double>(json_number_value(b)) : std::nullopt;
}

}  // namespace hpu
