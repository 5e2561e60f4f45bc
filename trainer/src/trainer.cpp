#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"
#include "run.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace hpu {

using detail::fail;

const char *stage_name(Stage s) {
  switch (s) {
    case Stage::fit: return "fit";
    case Stage::validate: return "validate";
    case Stage::test: return "test";
    case Stage::predict: return "predict";
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
    options_.limit_predict_batches = n;
    options_.val_check_interval = 1.0;
    options_.check_val_every_n_epoch = 1;
    options_.num_sanity_val_steps = 0;
    options_.logger = false;
    config_.max_steps = n;
    config_.max_epochs = 1;
  }
  if (config_.strategy == "hpu_ddp") join_ranks();

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
    resolve_versions();
  }
}

// hpu_ddp: joins the group (this process's devices, and the launcher's
// processes when its environment is present); every rank takes rank 0's seed.
void Trainer::join_ranks() {
  std::vector<hpuDevice_t> devs;
  std::vector<hpuStream_t> streams;
  for (const Device &d : devices_) devs.push_back(d.get()), streams.push_back(d.default_stream());
  comms_ = std::make_unique<Comms>(devs, streams);
  const int world = comms_->size();
  if (world != config_.world_size)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "num_nodes x devices is %d x %d = %d, but the launch environment makes %d rank(s) of %d device(s) per "
         "process: start num_nodes processes with a launcher (torchrun, mpirun, srun; see hpuCommInitFromEnv(3))",
         config_.num_nodes, config_.devices, config_.world_size, world, config_.devices);
  config_.node_rank = comms_->rank(0) / config_.devices;
  config_.seed = comms_->broadcast({config_.seed})[0];
}

// Loggers writing to the same <save_dir>/<name> share one version, the first
// free one there as global rank 0 sees it (as Lightning, which resolves it on
// rank 0 and broadcasts it): the other ranks never look, so they cannot pick
// another one while rank 0 starts writing.
void Trainer::resolve_versions() {
  std::vector<std::string> bases;
  for (auto &l : loggers_)
    if (auto *f = dynamic_cast<FolderLogger *>(l.get())) {
      const std::string base = f->save_dir() + "/" + f->name();
      if (std::find(bases.begin(), bases.end(), base) == bases.end()) bases.push_back(base);
    }
  std::vector<uint64_t> versions;
  for (const std::string &b : bases) versions.push_back(is_global_zero() ? uint64_t(next_version(b)) : 0);
  if (comms_) versions = comms_->broadcast(versions);
  for (auto &l : loggers_)
    if (auto *f = dynamic_cast<FolderLogger *>(l.get())) {
      const auto at = std::find(bases.begin(), bases.end(), f->save_dir() + "/" + f->name()) - bases.begin();
      f->default_version(int(versions[size_t(at)]));
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

// As Lightning at the start of a fit: the loggers get the model's
// hyperparameters (CSVLogger writes hparams.yaml).
void Trainer::log_hyperparams(const LightningModule &model) {
  const std::string text = model.hyperparameters();
  if (text.empty() || !is_global_zero()) return;
  detail::parse_object(text, "the model's hyperparameters", HPU_ERROR_INVALID_ARGUMENT);
  for (auto &l : loggers_) l->log_hyperparams(text);
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
  // Lightning's "hyper_parameters": what load_from_checkpoint builds the model from.
  if (run_ && run_->model) {
    const std::string hp = run_->model->hyperparameters();
    if (!hp.empty())
      json_object_set_new(meta.get(), "hyper_parameters",
                          detail::parse_object(hp, "the model's hyperparameters", HPU_ERROR_INVALID_ARGUMENT).release());
  }
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
  // The hooks read their parts before anything is restored, the module's
  // (on every replica of the model this trainer ran) then the callbacks'
  // (Lightning's order).
  if (run_)
    for (Replica &r : run_->reps) r.model->on_load_checkpoint(ck);
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
