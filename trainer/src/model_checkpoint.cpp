#include <hpu/trainer/callbacks.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "fs.hpp"
#include "json.hpp"
#include "log.hpp"

#include <cmath>
#include <unistd.h>

namespace hpu {

using detail::fail;

namespace {

// Lists the metric names for "not found" messages.
std::string metric_names(const Metrics &m) {
  std::string s;
  for (const auto &[k, v] : m) {
    (void)v;
    s += (s.empty() ? "" : ", ") + k;
  }
  return s.empty() ? "(none logged)" : s;
}

}  // namespace

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions o) : o_(std::move(o)) {
  if (o_.mode != "min" && o_.mode != "max")
    fail(HPU_ERROR_INVALID_ARGUMENT, "ModelCheckpoint mode is \"%s\"; accepted values: \"min\", \"max\"",
         o_.mode.c_str());
  if (o_.save_top_k < -1) fail(HPU_ERROR_INVALID_ARGUMENT, "save_top_k is %d; expected >= -1", o_.save_top_k);
  if (o_.monitor.empty() && o_.save_top_k > 1)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "save_top_k is %d without a monitor; there is no quantity to rank checkpoints by (use -1, 0 or 1, or set "
         "monitor)",
         o_.save_top_k);
  if (o_.every_n_epochs < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "every_n_epochs is %d; expected >= 0", o_.every_n_epochs);
  if (o_.every_n_train_steps < 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "every_n_train_steps is %lld; expected >= 0", (long long)o_.every_n_train_steps);
  if (o_.filename.empty()) o_.filename = "{epoch}-{step}";
  if (o_.filename.find('/') != std::string::npos)
    fail(HPU_ERROR_INVALID_ARGUMENT, "filename \"%s\" contains '/'; put folders in dirpath", o_.filename.c_str());
}

std::string ModelCheckpoint::state_key() const {
  return "ModelCheckpoint{monitor=" + o_.monitor + ",mode=" + o_.mode +
         ",every_n_train_steps=" + std::to_string(o_.every_n_train_steps) +
         ",every_n_epochs=" + std::to_string(o_.every_n_epochs) + "}";
}

void ModelCheckpoint::setup(Trainer &t, Stage stage) {
  if (dir_.empty()) dir_ = o_.dirpath.empty() ? t.log_dir() + "/checkpoints" : o_.dirpath;
  // A run killed while it wrote a checkpoint left that file's temporary
  // ("<name>.ckpt.tmp.XXXXXX"); the next fit into the folder removes them.
  if (stage == Stage::fit && t.is_global_zero())
    for (const std::string &name : detail::remove_stale_temporaries(dir_, ".ckpt"))
      detail::log(HPU_LOG_INFO, "ModelCheckpoint removed %s/%s, left by a run stopped while writing it", dir_.c_str(),
                  name.c_str());
}

std::optional<double> ModelCheckpoint::best_model_score() const {
  auto it = best_k_.find(best_path_);
  if (it == best_k_.end()) return std::nullopt;
  return it->second;
}

bool ModelCheckpoint::better(double a, double b) const {
  if (!std::isfinite(a)) return false;
  if (!std::isfinite(b)) return true;
  return o_.mode == "min" ? a < b : a > b;
}

// "{epoch}-{val_loss:.2f}" -> "epoch=3-val_loss=0.25", as Lightning's
// auto_insert_metric_name does.
std::string ModelCheckpoint::format_name(Trainer &t) const {
  std::string out;
  const std::string &f = o_.filename;
  for (size_t i = 0; i < f.size();) {
    if (f[i] != '{') {
      out += f[i++];
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) fail(HPU_ERROR_INVALID_ARGUMENT, "filename \"%s\" has an unclosed '{'", f.c_str());
    std::string field = f.substr(i + 1, close - i - 1), spec;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    std::string value;
    if (field == "epoch") {
      value = std::to_string(t.current_epoch());
    } else if (field == "step") {
      value = std::to_string(t.global_step());
    } else {
      auto it = t.state().callback_metrics.find(field);
      if (it == t.state().callback_metrics.end())
        fail(HPU_ERROR_INVALID_ARGUMENT, "filename \"%s\" names metric \"%s\", which was not logged; logged: %s",
             f.c_str(), field.c_str(), metric_names(t.state().callback_metrics).c_str());
      int prec = 4;
      if (spec.size() >= 3 && spec[0] == '.' && spec.back() == 'f') prec = std::atoi(spec.c_str() + 1);
      value = detail::format("%.*f", prec, it->second);
    }
    out += field + "=" + value;
    i = close + 1;
  }
  return out;
}

void ModelCheckpoint::on_train_batch_end(Trainer &t, const Metrics &, int64_t) {
  if (t.options().fast_dev_run.batches) return;  // saves nothing, as Lightning's
  if (o_.every_n_train_steps > 0 && t.global_step() > 0 && t.global_step() % o_.every_n_train_steps == 0) save(t);
}

void ModelCheckpoint::on_train_epoch_end(Trainer &t) {
  if (t.options().fast_dev_run.batches) return;
  if (o_.every_n_train_steps == 0 && o_.every_n_epochs > 0 && (t.current_epoch() + 1) % o_.every_n_epochs == 0)
    save(t);
}

void ModelCheckpoint::save(Trainer &t) {
  if (dir_.empty()) setup(t, Stage::fit);
  if (last_saved_step_ == t.global_step()) return;
  last_saved_step_ = t.global_step();
  double score = double(t.global_step());
  if (!o_.monitor.empty()) {
    auto it = t.state().callback_metrics.find(o_.monitor);
    if (it == t.state().callback_metrics.end() && !t.state().validation_ran) {
      // As Lightning: before any validation (a fit stopped by max_steps
      // inside the first epoch) the monitor may not exist yet; skip.
      detail::log(HPU_LOG_WARN, "ModelCheckpoint(monitor=\"%s\") skipped a save: no validation has run yet",
                  o_.monitor.c_str());
      last_saved_step_ = -1;
      return;
    }
    if (it == t.state().callback_metrics.end())
      fail(HPU_ERROR_INVALID_ARGUMENT,
           "ModelCheckpoint(monitor=\"%s\") could not find the monitored key in the logged metrics: %s",
           o_.monitor.c_str(), metric_names(t.state().callback_metrics).c_str());
    score = it->second;
  }
  // As Lightning does, the bookkeeping is updated before writing, so that each
  // file holds the callback state that includes itself.
  if (o_.save_last) last_path_ = dir_ + "/last.ckpt";
  std::string path, dropped;
  if (o_.save_top_k != 0) {
    // Without a monitor the newest checkpoint ranks highest.
    auto higher = [&](double a, double b) { return o_.monitor.empty() ? a > b : better(a, b); };
    std::string worst;
    for (const auto &[p, s] : best_k_)
      if (worst.empty() || higher(best_k_[worst], s)) worst = p;
    const bool room = o_.save_top_k == -1 || int(best_k_.size()) < o_.save_top_k;
    if (room || higher(score, best_k_[worst])) {
      std::string base = dir_ + "/" + format_name(t);
      path = base + ".ckpt";
      for (int v = 1; detail::exists(path) && !best_k_.count(path); ++v) path = base + "-v" + std::to_string(v) + ".ckpt";
      best_k_[path] = score;
      if (!room && worst != path) {
        dropped = worst;
        best_k_.erase(worst);
      }
      best_path_.clear();
      for (const auto &[p, s] : best_k_)
        if (best_path_.empty() || higher(s, best_k_[best_path_])) best_path_ = p;
    }
  }
  if (!path.empty()) {
    t.save_checkpoint(path);
    if (t.is_global_zero())
      detail::log(HPU_LOG_INFO, "ModelCheckpoint saved %s (%s = %g)", path.c_str(),
                  o_.monitor.empty() ? "step" : o_.monitor.c_str(), score);
  }
  if (!dropped.empty() && t.is_global_zero()) ::unlink(dropped.c_str());
  if (o_.save_last) t.save_checkpoint(last_path_);
}

std::string ModelCheckpoint::state_dict() const {
  detail::Json j(json_object());
  json_object_set_new(j.get(), "dirpath", json_string(dir_.c_str()));
  json_object_set_new(j.get(), "best_model_path", json_string(best_path_.c_str()));
  json_object_set_new(j.get(), "last_model_path", json_string(last_path_.c_str()));
  json_t *k = json_object();
  for (const auto &[p, s] : best_k_) json_object_set_new(k, p.c_str(), json_real(s));
  json_object_set_new(j.get(), "best_k_models", k);
  return detail::dump(j.get(), JSON_COMPACT);
}

void ModelCheckpoint::load_state_dict(const std::string &text) {
  detail::Json j = detail::parse_object(text, "ModelCheckpoint state", HPU_ERROR_IO);
  const char *dir = json_string_value(json_object_get(j.get(), "dirpath"));
  // Another folder's top-k list would delete files this run does not own.
  if (!dir || (!dir_.empty() && dir_ != dir)) return;
  dir_ = dir;
  if (const char *b = json_string_value(json_object_get(j.get(), "best_model_path"))) best_path_ = b;
  if (const char *l = json_string_value(json_object_get(j.get(), "last_model_path"))) last_path_ = l;
  best_k_.clear();
  const char *p;
  json_t *v;
  json_object_foreach(json_object_get(j.get(), "best_k_models"), p, v) best_k_[p] = json_number_value(v);
}

}  // namespace hpu
