#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"
#include "run.hpp"

#include <map>

namespace hpu {

using detail::fail;

const char *stage_name(Stage s) {
  switch (s) {
    case Stage::fit: return "fit";
    case Stage::validate: return "validate";
    case Stage::test: return "test";
  }
  return "?";
}

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) {
  config_ = resolve_options(options_, device_count());
  for (int i = 0; i < config_.devices; ++i) devices_.emplace_back(i);
  if (const int64_t n = options_.fast_dev_run.batches) {
    // Lightning's smoke test: n batches of each loop, one epoch, nothing
    // written (no loggers; ModelCheckpoint and EarlyStopping stand aside).
    options_.limit_train_batches = options_.limit_val_batches = options_.limit_test_batches = n;
    options_.val_check_interval = 1.0;
    options_.check_val_every_n_epoch = 1;
    options_.num_sanity_val_steps = 0;
    options_.logger = false;
    config_.max_steps = n;
    config_.max_epochs = 1;
  }

  callbacks_ = options_.callbacks;
  bool has_bar = false, has_ckpt = false;
  for (auto &c : callbacks_) {
    has_bar |= dynamic_cast<ProgressBar *>(c.get()) != nullptr;
    has_ckpt |= dynamic_cast<ModelCheckpoint *>(c.get()) != nullptr;
  }
  if (has_bar && !options_.enable_progress_bar)
    fail(HPU_ERROR_INVALID_ARGUMENT, "enable_progress_bar is false, but callbacks holds a ProgressBar");
  if (has_ckpt && !options_.enable_checkpointing)
    fail(HPU_ERROR_INVALID_ARGUMENT, "enable_checkpointing is false, but callbacks holds a ModelCheckpoint");
  if (options_.enable_progress_bar && !has_bar) callbacks_.emplace_back(ProgressBar{});
  if (options_.enable_checkpointing && !has_ckpt && !options_.fast_dev_run.batches)
    callbacks_.emplace_back(ModelCheckpoint{});
  std::map<std::string, int> keys;
  for (auto &c : callbacks_)
    if (++keys[c->state_key()] == 2)
      fail(HPU_ERROR_INVALID_ARGUMENT,
           "two callbacks have the state key \"%s\"; their checkpoint states would collide (give them different "
           "monitors)",
           c->state_key().c_str());

  if (options_.logger.enabled) {
    loggers_ = options_.logger.list;
    if (loggers_.empty()) loggers_.emplace_back(CSVLogger(config_.default_root_dir));
    // Loggers writing to the same <save_dir>/<name> share one version.
    std::map<std::string, int> versions;
    for (auto &l : loggers_)
      if (auto *f = dynamic_cast<FolderLogger *>(l.get())) {
        std::string base = f->save_dir() + "/" + f->name();
        auto it = versions.find(base);
        if (it == versions.end()) it = versions.emplace(base, next_version(base)).first;
        f->default_version(it->second);
      }
  }
}

Trainer::~Trainer() {
  for (auto &l : loggers_) {
    try {
      if (is_global_zero()) l->finalize();
    } catch (...) {
    }
  }
}

std::string Trainer::log_dir() {
  if (!loggers_.empty()) return loggers_.front()->log_dir();
  return config_.default_root_dir;
}

bool Trainer::should_update_logs() const {
  return (state_.global_step + 1) % options_.log_every_n_steps == 0 || state_.should_stop;
}

void Trainer::log_metrics(const Metrics &metrics, int64_t step) {
  for (const auto &[k, v] : metrics) state_.callback_metrics[k] = v;
  if (!is_global_zero()) return;
  Metrics m = metrics;
  if (state_.stage == Stage::fit) m.emplace("epoch", double(state_.current_epoch));
  for (auto &l : loggers_) l->log_metrics(m, step);
}

Checkpoint Trainer::make_checkpoint() const {
  detail::Json meta(json_object());
  json_object_set_new(meta.get(), "producer", json_string("hpu-trainer"));
  json_object_set_new(meta.get(), "epoch", json_integer(state_.current_epoch));
  json_object_set_new(meta.get(), "global_step", json_integer(state_.global_step));
  json_object_set_new(meta.get(), "seed", json_integer(json_int_t(config_.seed)));
  json_object_set_new(meta.get(), "precision", json_string(config_.precision.c_str()));
  json_object_set_new(meta.get(), "world_size", json_integer(config_.world_size));
  json_t *cbs = json_object();
  for (const auto &c : callbacks_) {
    std::string s = c->state_dict();
    if (s.empty()) continue;
    json_error_t err;
    json_t *j = json_loads(s.c_str(), 0, &err);
    if (!j) fail(HPU_ERROR_INTERNAL, "callback %s saved invalid JSON: %s", c->state_key().c_str(), err.text);
    json_object_set_new(cbs, c->state_key().c_str(), j);
  }
  json_object_set_new(meta.get(), "callbacks", cbs);
  Checkpoint ck;
  if (run_ && run_->model) add_run_state(ck, meta.get());
  ck.meta = detail::dump(meta.get(), JSON_COMPACT | JSON_PRESERVE_ORDER);
  // The hooks add their own parts to what the trainer saved.
  for (const auto &c : callbacks_) c->on_save_checkpoint(*this, ck);
  if (run_ && run_->model) run_->model->on_save_checkpoint(ck);
  return ck;
}

// Every rank makes the checkpoint (a sharded optimizer's state is gathered
// from every rank); global rank 0 writes it.
void Trainer::save_checkpoint(const std::string &path) const {
  Checkpoint ck = make_checkpoint();
  if (is_global_zero()) save_checkpoint_file(path, ck);
}

void Trainer::restore_checkpoint(const Checkpoint &ck) {
  // The hooks read their parts before anything is restored (Lightning's order).
  for (auto &c : callbacks_) c->on_load_checkpoint(*this, ck);
  detail::Json meta = detail::parse_object(ck.meta, "checkpoint meta", HPU_ERROR_IO);
  json_t *epoch = json_object_get(meta.get(), "epoch"), *step = json_object_get(meta.get(), "global_step");
  if (!json_is_integer(epoch) || !json_is_integer(step))
    fail(HPU_ERROR_IO, "checkpoint meta lacks integer \"epoch\" and \"global_step\"");
  state_.current_epoch = json_integer_value(epoch);
  state_.global_step = json_integer_value(step);
  json_t *cbs = json_object_get(meta.get(), "callbacks");
  for (auto &c : callbacks_) {
    json_t *s = cbs ? json_object_get(cbs, c->state_key().c_str()) : nullptr;
    if (s) c->load_state_dict(detail::dump(s, JSON_COMPACT | JSON_ENCODE_ANY));
  }
}

}  // namespace hpu
