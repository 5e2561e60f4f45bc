// The loops: fit (train epochs with validation), validate and test, in
// Lightning's order of hooks.
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"
#include "run.hpp"

#include <cmath>

namespace hpu {

using detail::fail;

namespace {

// An autocast region for bf16-mixed; nothing for 32-true.
class AutocastScope {
 public:
  explicit AutocastScope(bool on) : on_(on) {
    if (on_) check(hpuAutocastPush(1, HPU_BFLOAT16));
  }
  ~AutocastScope() {
    if (on_) hpuAutocastPop();
  }
  AutocastScope(const AutocastScope &) = delete;
  AutocastScope &operator=(const AutocastScope &) = delete;

 private:
  bool on_;
};

template <class F>
void each(std::vector<Ref<Callback>> &cbs, F f) {
  for (auto &c : cbs) f(*c);
}

float scalar(const Tensor &t, hpuStream_t s) {
  hpuTensor_t f = nullptr;
  check(hpuCast(s, t.get(), HPU_FLOAT32, &f));
  return Tensor(f).to_vector<float>(s)[0];
}

}  // namespace

void Trainer::start(LightningModule &model, DataModule &data, Stage stage) {
  if (config_.world_size > 1)
    fail(HPU_ERROR_UNSUPPORTED,
         "strategy \"%s\" with %d ranks: this build trains on one device (devices=1, num_nodes=1); "
         "multi-device training is not implemented yet",
         config_.strategy.c_str(), config_.world_size);
  state_.stage = stage;
  data.setup();
  const bool fresh = !run_ || run_->model != &model;
  if (fresh) {
    run_ = std::make_unique<Run>();
    run_->model = &model;
    run_->dev = devices_[0].get();
    run_->ctx.stream = devices_[0].default_stream();
    Rng init(mix_seed(config_.seed, 0x1d));
    model.setup_device(run_->dev, init);
    run_->params = model.parameters();
    check(hpuRandomSeed(run_->dev, mix_seed(config_.seed, uint64_t(global_rank()))));
  }
  run_->data = &data;
  run_->bf16 = config_.precision == "bf16-mixed";
  each(callbacks_, [&](Callback &c) { c.setup(*this, stage); });
}

void Trainer::finish(Stage stage) {
  each(callbacks_, [&](Callback &c) { c.teardown(*this, stage); });
  for (auto &l : loggers_)
    if (is_global_zero()) l->finalize();
}

void Trainer::fit(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  start(model, data, Stage::fit);
  Run &r = *run_;
  const TensorDataset &train = data.train_data();
  if (train.size() == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "the data module's training set is empty");
  r.opt = model.configure_optimizers(r.params);
  if (!r.opt) fail(HPU_ERROR_INVALID_ARGUMENT, "configure_optimizers returned no optimizer");
  state_.optimizers = {r.opt.get()};
  r.sampler = std::make_unique<DistributedSampler>(train.size(), config_.world_size, global_rank(), true, config_.seed);
  state_.num_training_batches =
      limit_batches(options_.limit_train_batches, int64_t(r.sampler->num_batches(size_t(data.batch_size()))));
  const int64_t accum = options_.accumulate_grad_batches;
  const int64_t steps_per_epoch = (state_.num_training_batches + accum - 1) / accum;
  int64_t total = config_.max_steps >= 0 ? config_.max_steps : steps_per_epoch * std::max<int64_t>(config_.max_epochs, 1);
  if (config_.max_steps >= 0 && config_.max_epochs >= 0) total = std::min(total, steps_per_epoch * config_.max_epochs);
  r.sched = model.configure_scheduler(r.opt->lr(), std::max<int64_t>(total, 1));
  state_.global_step = 0;
  state_.current_epoch = 0;
  state_.should_stop = false;
  state_.validation_ran = false;
  r.batches_done = 0;
  if (!ckpt_path.empty()) restore_run(load_checkpoint_file(ckpt_path));

  each(callbacks_, [&](Callback &c) { c.on_fit_start(*this); });
  each(callbacks_, [&](Callback &c) { c.on_train_start(*this); });
  while (!state_.should_stop && (config_.max_epochs < 0 || state_.current_epoch < config_.max_epochs)) {
    if (config_.max_steps >= 0 && state_.global_step >= config_.max_steps) break;
    if (r.batches_done < state_.num_training_batches) {
      if (r.sched && r.sched->interval() == Interval::epoch) r.opt->set_lr(r.sched->lr_at(state_.current_epoch));
      train_epoch(r.batches_done);
      if (r.batches_done < state_.num_training_batches) break;  // stopped inside the epoch
    }
    ++state_.current_epoch;
    r.batches_done = 0;
  }
  each(callbacks_, [&](Callback &c) { c.on_train_end(*this); });
  each(callbacks_, [&](Callback &c) { c.on_fit_end(*this); });
  check(hpuDeviceSynchronize(r.dev));
  finish(Stage::fit);
}

void Trainer::train_epoch(int64_t skip) {
  Run &r = *run_;
  const TensorDataset &set = r.data->train_data();
  const size_t B = size_t(r.data->batch_size());
  const int64_t nb = state_.num_training_batches;
  r.sampler->set_epoch(uint64_t(state_.current_epoch));
  const std::vector<size_t> order = r.sampler->indices();
  const BatchCount &vci = options_.val_check_interval;
  const int64_t every = vci.fraction ? std::max<int64_t>(1, int64_t(double(nb) * *vci.fraction)) : vci.batches;
  const bool val_epoch = (state_.current_epoch + 1) % options_.check_val_every_n_epoch == 0 &&
                         r.data->val_data().size() > 0;
  const int64_t accum = options_.accumulate_grad_batches;

  each(callbacks_, [&](Callback &c) { c.on_train_epoch_start(*this); });
  Batch batch;
  for (int64_t b = skip; b < nb; ++b) {
    if (config_.max_steps >= 0 && state_.global_step >= config_.max_steps) break;
    const size_t lo = size_t(b) * B, hi = std::min(lo + B, order.size());
    set.gather(order.data() + lo, hi - lo, batch);
    Tensor x = Tensor::from_host(r.dev, HPU_FLOAT32, batch.x_shape(), batch.x.data());
    Tensor y = Tensor::from_host(r.dev, HPU_INT32, {int64_t(batch.size)}, batch.y.data());
    each(callbacks_, [&](Callback &c) { c.on_train_batch_start(*this, b); });
    Metrics logs;
    float loss_value;
    {
      AutocastScope autocast(r.bf16);
      r.ctx.training = true;
      Tensor loss = r.model->training_step(r.ctx, x, y, logs);
      r.ctx.tape.backward(Tensor::full(r.dev, loss.dtype(), {}, 1.0 / double(accum), r.ctx.stream));
      loss_value = scalar(loss, r.ctx.stream);
    }
    r.batches_done = b + 1;
    const bool log_now = should_update_logs();
    if ((b + 1) % accum == 0 || b + 1 == nb) optimizer_step();
    if (log_now) {
      Metrics m = logs;
      m["train_loss"] = loss_value;
      log_metrics(m, state_.global_step);
    }
    logs["loss"] = loss_value;
    each(callbacks_, [&](Callback &c) { c.on_train_batch_end(*this, logs, b); });
    if (val_epoch && ((b + 1) % every == 0 || (vci.fraction && b + 1 == nb)) &&
        limit_batches(options_.limit_val_batches, 1) > 0)
      evaluate(Stage::validate, r.data->val_data(), options_.limit_val_batches);
    if (state_.should_stop) break;
  }
  each(callbacks_, [&](Callback &c) { c.on_train_epoch_end(*this); });
}

void Trainer::optimizer_step() {
  Run &r = *run_;
  hpuStream_t s = r.ctx.stream;
  if (options_.gradient_clip_val > 0) {
    // The global L2 norm over every gradient, as torch.nn.utils.clip_grad_norm_.
    double sq = 0;
    for (Parameter *p : r.params) {
      hpuTensor_t m = nullptr, sum = nullptr;
      check(hpuMul(s, p->grad.get(), p->grad.get(), &m));
      Tensor tm(m);
      check(hpuSum(s, tm.get(), nullptr, 0, 0, &sum));
      sq += double(scalar(Tensor(sum), s));
    }
    const double norm = std::sqrt(sq), clip = options_.gradient_clip_val;
    if (norm > clip) {
      const double scale = clip / (norm + 1e-6);
      for (Parameter *p : r.params) check(hpuAddInplace(s, p->grad.get(), scale - 1.0, p->grad.get()));
    }
  }
  each(callbacks_, [&](Callback &c) { c.on_before_optimizer_step(*this); });
  if (r.sched && r.sched->interval() == Interval::step) r.opt->set_lr(r.sched->lr_at(r.opt->steps()));
  r.opt->step(s);
  r.opt->zero_grad(s);
  ++state_.global_step;
}

Metrics Trainer::evaluate(Stage stage, const TensorDataset &set, const BatchCount &limit) {
  Run &r = *run_;
  const bool val = stage == Stage::validate;
  const Stage outer = state_.stage;
  const std::string prefix = val ? "val_" : "test_";
  const size_t B = size_t(r.data->batch_size());
  DistributedSampler sampler(set.size(), config_.world_size, global_rank(), false, 0);
  const int64_t nb = set.size() ? limit_batches(limit, int64_t(sampler.num_batches(B))) : 0;
  (val ? state_.num_val_batches : state_.num_test_batches) = nb;
  const std::vector<size_t> order = sampler.indices();
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_start(*this) : c.on_test_start(*this); });
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_epoch_start(*this) : c.on_test_epoch_start(*this); });
  Metrics sums;
  double seen = 0;
  Batch batch;
  r.ctx.training = false;
  r.ctx.tape.clear();
  for (int64_t b = 0; b < nb; ++b) {
    const size_t lo = size_t(b) * B, hi = std::min(lo + B, order.size());
    set.gather(order.data() + lo, hi - lo, batch);
    Tensor x = Tensor::from_host(r.dev, HPU_FLOAT32, batch.x_shape(), batch.x.data());
    Tensor y = Tensor::from_host(r.dev, HPU_INT32, {int64_t(batch.size)}, batch.y.data());
    each(callbacks_, [&](Callback &c) { val ? c.on_validation_batch_start(*this, b) : c.on_test_batch_start(*this, b); });
    {
      AutocastScope autocast(r.bf16);
      for (const auto &[k, v] : r.model->evaluation_step(r.ctx, x, y)) sums[k] += v;
    }
    seen += double(batch.size);
    each(callbacks_, [&](Callback &c) { val ? c.on_validation_batch_end(*this, b) : c.on_test_batch_end(*this, b); });
  }
  r.ctx.training = true;
  if (val && outer == Stage::fit) state_.validation_ran = true;
  Metrics out;
  for (const auto &[k, v] : sums) out[prefix + k] = seen > 0 ? v / seen : NAN;
  if (!out.empty()) log_metrics(out, state_.global_step);
  state_.stage = outer;
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_epoch_end(*this) : c.on_test_epoch_end(*this); });
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_end(*this) : c.on_test_end(*this); });
  return out;
}

Metrics Trainer::validate(LightningModule &model, DataModule &data) {
  start(model, data, Stage::validate);
  Metrics m = evaluate(Stage::validate, data.val_data(), options_.limit_val_batches);
  finish(Stage::validate);
  return m;
}

Metrics Trainer::test(LightningModule &model, DataModule &data) {
  start(model, data, Stage::test);
  Metrics m = evaluate(Stage::test, data.test_data(), options_.limit_test_batches);
  finish(Stage::test);
  return m;
}

// ---- checkpoints of a run ----------------------------------------------------------

namespace {

CheckpointTensor to_host(const Tensor &t) {
  CheckpointTensor c;
  c.dtype = t.dtype();
  c.shape = t.shape();
  c.bytes.resize(size_t(t.numel()) * t.element_size());
  t.copy_to_host(c.bytes.data(), c.bytes.size());
  return c;
}

void from_host(Tensor &t, const CheckpointTensor &c, const std::string &name) {
  if (c.dtype != t.dtype() || c.shape != t.shape())
    fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s does not match the model (dtype or shape differs)",
         name.c_str());
  t.copy_from_host(c.bytes.data(), c.bytes.size());
}

}  // namespace

void Trainer::add_run_state(Checkpoint &ck, json_t *meta) const {
  const Run &r = *run_;
  check(hpuDeviceSynchronize(r.dev));
  for (Parameter *p : r.params) ck.tensors["state_dict/" + p->name] = to_host(p->value);
  if (r.opt) {
    std::vector<std::pair<std::string, Tensor>> st;
    r.opt->state(st);
    for (auto &[name, t] : st) ck.tensors["optimizer/" + name] = to_host(t);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r.opt->name().c_str()));
    json_object_set_new(o, "steps", json_integer(r.opt->steps()));
    json_object_set_new(o, "lr", json_real(r.opt->lr()));
    json_object_set_new(meta, "optimizer", o);
  }
  json_object_set_new(meta, "batches_done", json_integer(r.batches_done));
  hpuRandomState_t rs = HPU_RANDOM_STATE_INIT;
  check(hpuRandomGetState(r.dev, &rs));
  json_t *rng = json_object();
  json_object_set_new(rng, "seed", json_string(std::to_string(rs.seed).c_str()));
  json_object_set_new(rng, "offset", json_string(std::to_string(rs.offset).c_str()));
  json_object_set_new(meta, "device_rng", rng);
}

void Trainer::restore_run(const Checkpoint &ck) {
  Run &r = *run_;
  restore_checkpoint(ck);
  for (Parameter *p : r.params) {
    auto it = ck.tensors.find("state_dict/" + p->name);
    if (it == ck.tensors.end()) fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint lacks the weights of %s", p->name.c_str());
    from_host(p->value, it->second, p->name);
  }
  detail::Json meta = detail::parse_object(ck.meta, "checkpoint meta", HPU_ERROR_IO);
  if (r.opt) {
    json_t *o = json_object_get(meta.get(), "optimizer");
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || r.opt->name() != name)
      fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint's optimizer is %s, the model's is %s", name ? name : "none",
           r.opt->name().c_str());
    std::vector<std::pair<std::string, Tensor>> st;
    r.opt->state(st);
    for (auto &[n, t] : st) {
      auto it = ck.tensors.find("optimizer/" + n);
      if (it == ck.tensors.end()) fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint lacks optimizer state %s", n.c_str());
      from_host(t, it->second, n);
    }
    r.opt->set_steps(json_integer_value(json_object_get(o, "steps")));
    r.opt->set_lr(json_number_value(json_object_get(o, "lr")));
  }
  r.batches_done = json_integer_value(json_object_get(meta.get(), "batches_done"));
  json_t *rng = json_object_get(meta.get(), "device_rng");
  if (rng) {
    hpuRandomState_t rs = HPU_RANDOM_STATE_INIT;
    rs.seed = std::stoull(json_string_value(json_object_get(rng, "seed")));
    rs.offset = std::stoull(json_string_value(json_object_get(rng, "offset")));
    check(hpuRandomSetState(r.dev, &rs));
  }
}

}  // namespace hpu
