// The loops: fit (train epochs with validation), validate and test, in
// Lightning's order of hooks.
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "json.hpp"
#include "log.hpp"
#include "run.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>

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

// profiler="hpu": records one trace of a fit into default_root_dir
// (hpu_trace_fit<n>.json, n counting the fits there) on global rank 0, and at
// the end prints its summary and saves it beside the trace (.summary.txt).
class ProfileScope {
 public:
  ProfileScope(const TrainerConfig &c, bool rank0) {
    if (c.profiler != "hpu" || !rank0) return;
    for (int n = 0;; ++n) {
      base_ = c.default_root_dir + "/hpu_trace_fit" + std::to_string(n);
      if (::access((base_ + ".json").c_str(), F_OK) != 0) break;
    }
    check(hpuProfilerStart((base_ + ".json").c_str()));
    on_ = true;
  }
  ~ProfileScope() {
    if (!on_ || hpuProfilerStop() != HPU_SUCCESS) return;
    char *text = nullptr;
    if (hpuProfilerGetSummary(&text) != HPU_SUCCESS || !text) return;
    std::fprintf(stderr, "hpu profiler: trace %s.json\n%s\n", base_.c_str(), text);
    if (FILE *f = std::fopen((base_ + ".summary.txt").c_str(), "w")) {
      std::fputs(text, f);
      std::fclose(f);
    }
    hpuFree(text);
  }
  ProfileScope(const ProfileScope &) = delete;
  ProfileScope &operator=(const ProfileScope &) = delete;

 private:
  std::string base_;
  bool on_ = false;
};

template <class F>
void each(std::vector<Ref<Callback>> &cbs, F f) {
  for (auto &c : cbs) f(*c);
}

// Runs a loop; when it throws, the callbacks' on_exception sees the error
// before it propagates (what a hook throws there is dropped).
template <class F>
auto guarded(Trainer &t, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception &e) {
    for (auto &c : t.callbacks()) {
      try {
        c->on_exception(t, e);
      } catch (...) {
      }
    }
    throw;
  }
}

float scalar(const Tensor &t, hpuStream_t s) {
  hpuTensor_t f = nullptr;
  check(hpuCast(s, t.get(), HPU_FLOAT32, &f));
  return Tensor(f).to_vector<float>(s)[0];
}

// The bucket size of hpu_ddp's gradient allreduces (Lightning's is 25 MB; a
// smaller one lets the Fashion-MNIST MLP's buckets overlap its backward).
constexpr size_t kBucketBytes = size_t(2) << 20;

// Runs f(i, replica i) for every replica of this process, replica 0 on the
// calling thread and each other one on its thread (ReplicaThreads). When one
// throws, the communicators are aborted so that the others fail instead of
// waiting for it; the first error that is not such a consequence is rethrown.
template <class F>
void in_parallel(Trainer::Run &r, F f) {
  const size_t n = r.reps.size();
  std::vector<std::exception_ptr> errors(n);
  r.threads->run([&](size_t i) {
    try {
      f(i, r.reps[i]);
    } catch (...) {
      errors[i] = std::current_exception();
      if (r.comms) r.comms->abort();
    }
  });
  std::exception_ptr first;
  for (auto &e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error &err) {
      if (err.status() == HPU_ERROR_ABORTED || err.status() == HPU_ERROR_REMOTE) {
        if (!first) first = e;
        continue;
      }
      std::rethrow_exception(e);
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

// Waits, however a loop ends, until no queued gather reads the data module's
// samples: the caller may destroy it once fit, validate or test returns.
class SettleBatches {
 public:
  explicit SettleBatches(Trainer::Run &r) : r_(r) {}
  ~SettleBatches() {
    for (Replica &p : r_.reps) p.batch.settle();
  }
  SettleBatches(const SettleBatches &) = delete;
  SettleBatches &operator=(const SettleBatches &) = delete;

 private:
  Trainer::Run &r_;
};

// Every replica's metric sums become the sums over all ranks (f64 allreduces;
// each rank holds the same keys).
void sum_over_ranks(Trainer::Run &r, std::vector<Metrics> &sums) {
  in_parallel(r, [&](size_t i, Replica &p) {
    std::vector<double> v;
    for (const auto &kv : sums[i]) v.push_back(kv.second);
    Tensor t = Tensor::from_host(p.dev, HPU_FLOAT64, {int64_t(v.size())}, v.data());
    void *d = nullptr;
    check(hpuTensorGetData(t.get(), &d));
    check(hpuAllreduce(p.ctx.stream, (*r.comms)[i], d, d, v.size(), HPU_FLOAT64, HPU_SUM));
    v = t.to_vector<double>(p.ctx.stream);
    size_t k = 0;
    for (auto &kv : sums[i]) kv.second = v[k++];
  });
}

// Adds to `m` what the replicas' training_step logged with
// LightningModule::log: replica 0's values, and for sync_dist names the mean
// over every rank (each logs the same names).
void add_logged(Trainer::Run &r, int world_size, Metrics &m) {
  std::vector<Metrics> synced(r.reps.size());
  for (size_t i = 0; i < r.reps.size(); ++i)
    for (const LightningModule::Logged &l : r.reps[i].model->take_logged()) {
      if (l.sync_dist) synced[i][l.name] = l.value;
      else if (i == 0) m[l.name] = l.value;
    }
  for (size_t i = 1; i < synced.size(); ++i)
    if (!std::equal(synced[i].begin(), synced[i].end(), synced[0].begin(), synced[0].end(),
                    [](const auto &a, const auto &b) { return a.first == b.first; }))
      fail(HPU_ERROR_INVALID_ARGUMENT,
           "LightningModule::log: rank %d logged %zu sync_dist metrics and rank %d %zu, or other names; every rank "
           "must log the same ones",
           r.reps[i].rank, synced[i].size(), r.reps[0].rank, synced[0].size());
  if (synced[0].empty()) return;
  if (r.comms) sum_over_ranks(r, synced);
  for (const auto &[k, v] : synced[0]) m[k] = v / world_size;
}

void set_lr(Trainer::Run &r, double lr) {
  for (Replica &p : r.reps) p.opt->set_lr(lr);
}

// The learning rate of the next optimizer step.
double step_lr(const Trainer::Run &r) {
  const Optimizer &o = *r.reps[0].opt;
  return r.sched && r.sched->interval() == Interval::step ? r.sched->lr_at(o.steps()) : o.lr();
}

// Scales the gradients to a global L2 norm of at most `clip`, as
// torch.nn.utils.clip_grad_norm_.
void clip_gradients(Replica &r, double clip) {
  hpuStream_t s = r.ctx.stream;
  std::vector<hpuTensor_t> grads;
  for (Parameter *p : r.params) grads.push_back(p->grad.get());
  hpuTensor_t sq = nullptr;
  check(hpuSquaredNorm(s, grads.data(), grads.size(), &sq));
  const double norm = std::sqrt(double(scalar(Tensor(sq), s)));
  if (norm > clip) {
    const double scale = clip / (norm + 1e-6);
    for (Parameter *p : r.params) check(hpuAddInplace(s, p->grad.get(), p->grad.get(), scale - 1.0));
  }
}

}  // namespace

void Trainer::start(LightningModule &model, DataModule &data, Stage stage) {
  state_.stage = stage;
  data.setup();
  const bool fresh = !run_ || run_->model != &model;
  if (fresh) {
    run_ = std::make_unique<Run>();
    Run &r = *run_;
    r.model = &model;
    r.comms = comms_.get();
    std::vector<hpuDevice_t> devs;
    for (const Device &d : devices_) devs.push_back(d.get());
    r.reps.resize(devs.size());
    r.threads = std::make_unique<ReplicaThreads>(devs.size());
    for (size_t i = 0; i < devs.size(); ++i) {
      Replica &p = r.reps[i];
      if (i > 0) p.owned = model.clone();
      p.model = i > 0 ? p.owned.get() : &model;
      p.dev = devs[i];
      p.rank = r.comms ? r.comms->rank(i) : 0;
      p.ctx.stream = devices_[i].default_stream();
      p.ctx.plan = &p.plan;
      // The same seed on every rank: the replicas start equal.
      Rng init(mix_seed(config_.seed, 0x1d));
      p.model->setup_device(p.dev, init);
      p.params = p.model->parameters();
      if (r.comms) p.sync = std::make_unique<GradSync>((*r.comms)[i], p.dev, p.ctx.stream, p.params, kBucketBytes);
      check(hpuRandomSeed(p.dev, mix_seed(config_.seed, uint64_t(p.rank))));
    }
  }
  run_->data = &data;
  run_->bf16 = config_.precision == "bf16-mixed";
  for (Replica &p : run_->reps) p.plan.values_changed();  // the caller may have written the weights
  each(callbacks_, [&](Callback &c) { c.setup(*this, stage); });
}

void Trainer::finish(Stage stage) {
  each(callbacks_, [&](Callback &c) { c.teardown(*this, stage); });
  for (auto &l : loggers_)
    if (is_global_zero()) l->finalize();
}

void Trainer::fit(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  guarded(*this, [&] { run_fit(model, data, ckpt_path); });
}

bool Trainer::can_stop_early() const {
  return !options_.min_epochs || state_.current_epoch >= *options_.min_epochs;
}

void Trainer::run_fit(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  start(model, data, Stage::fit);
  ProfileScope profile(config_, is_global_zero());
  Run &r = *run_;
  SettleBatches settled(r);
  const TensorDataset &train = data.train_data();
  if (train.size() == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "the data module's training set is empty");
  // Whether a hook reads the gradients after backward or before the step.
  const bool reads_gradients = model.needs().gradients ||
                               std::any_of(callbacks_.begin(), callbacks_.end(),
                                           [](const Ref<Callback> &c) { return c->needs().gradients; });
  r.hooks_read_gradients = reads_gradients;
  for (Replica &p : r.reps) {
    p.opt = p.model->configure_optimizers(p.params);
    if (!p.opt) fail(HPU_ERROR_INVALID_ARGUMENT, "configure_optimizers returned no optimizer");
    // Clipping needs every gradient averaged (the global norm): unsharded then.
    if (p.sync && options_.gradient_clip_val > 0) p.sync->unshard();
    else if (p.sync) p.sync->shard(p.opt);
    p.opt->set_plan(&p.plan);
    // Whether anything but the optimizer reads a step's gradients.
    StepReaders readers;
    readers.gradients_shared = p.sync != nullptr || r.reps.size() > 1;
    readers.accumulate_grad_batches = options_.accumulate_grad_batches;
    readers.clipped = options_.gradient_clip_val > 0;
    readers.callbacks_read_gradients = reads_gradients;
    p.plan.plan_fit(readers);
    p.sampler = std::make_unique<DistributedSampler>(train.size(), config_.world_size, p.rank, true, config_.seed);
  }
  Replica &r0 = r.reps[0];
  state_.optimizers = {r0.opt.get()};
  state_.num_training_batches =
      limit_batches(options_.limit_train_batches, int64_t(r0.sampler->num_batches(size_t(data.batch_size()))));
  const int64_t accum = options_.accumulate_grad_batches;
  const int64_t steps_per_epoch = (state_.num_training_batches + accum - 1) / accum;
  int64_t total = config_.max_steps >= 0 ? config_.max_steps : steps_per_epoch * std::max<int64_t>(config_.max_epochs, 1);
  if (config_.max_steps >= 0 && config_.max_epochs >= 0) total = std::min(total, steps_per_epoch * config_.max_epochs);
  r.sched = model.configure_scheduler(r0.opt->lr(), std::max<int64_t>(total, 1));
  state_.global_step = 0;
  state_.current_epoch = 0;
  state_.should_stop = false;
  state_.validation_ran = false;
  r.batches_done = 0;
  r.started = std::chrono::steady_clock::now();
  if (!ckpt_path.empty()) restore_run(load_checkpoint_file(ckpt_path));
  // After the checkpoint loaded, as Lightning: a failed start writes nothing.
  log_hyperparams(model);
  if (options_.enable_model_summary && is_global_zero()) std::fprintf(stderr, "%s", model_summary(model).c_str());

  each(callbacks_, [&](Callback &c) { c.on_fit_start(*this); });
  sanity_check();
  each(callbacks_, [&](Callback &c) { c.on_train_start(*this); });
  while (config_.max_epochs < 0 || state_.current_epoch < config_.max_epochs) {
    if (state_.should_stop) {
      if (can_stop_early()) break;
      // Lightning's rule: the stop waits for min_epochs.
      detail::log(HPU_LOG_INFO, "asked to stop, but min_epochs=%lld is not reached; training continues",
                  (long long)*options_.min_epochs);
      state_.should_stop = false;
    }
    if (config_.max_steps >= 0 && state_.global_step >= config_.max_steps) break;
    if (r.batches_done < state_.num_training_batches) {
      if (r.sched && r.sched->interval() == Interval::epoch) set_lr(r, r.sched->lr_at(state_.current_epoch));
      train_epoch(r.batches_done);
      if (r.batches_done < state_.num_training_batches) break;  // stopped inside the epoch
    }
    ++state_.current_epoch;
    r.batches_done = 0;
  }
  each(callbacks_, [&](Callback &c) { c.on_train_end(*this); });
  each(callbacks_, [&](Callback &c) { c.on_fit_end(*this); });
  for (Replica &p : r.reps) check(hpuDeviceSynchronize(p.dev));
  finish(Stage::fit);
}

void Trainer::train_epoch(int64_t skip) {
  Run &r = *run_;
  const TensorDataset &set = r.data->train_data();
  const size_t B = size_t(r.data->batch_size());
  const int64_t nb = state_.num_training_batches;
  std::vector<std::vector<size_t>> orders;
  for (Replica &p : r.reps) {
    p.sampler->set_epoch(uint64_t(state_.current_epoch));
    orders.push_back(p.sampler->indices());
  }
  const BatchCount &vci = options_.val_check_interval;
  const int64_t every = vci.fraction ? std::max<int64_t>(1, int64_t(double(nb) * *vci.fraction)) : vci.batches;
  const bool val_epoch = (state_.current_epoch + 1) % options_.check_val_every_n_epoch == 0 &&
                         r.data->val_data().size() > 0;
  const int64_t accum = options_.accumulate_grad_batches;

  each(callbacks_, [&](Callback &c) { c.on_train_epoch_start(*this); });
  for (int64_t b = skip; b < nb; ++b) {
    if (config_.max_steps >= 0 && state_.global_step >= config_.max_steps) break;
    const bool step_now = (b + 1) % accum == 0 || b + 1 == nb;
    // The rate this batch's optimizer step uses, set before the hooks read it
    // (LearningRateMonitor). The batch logs under the step it starts at, as
    // Lightning's _batches_that_stepped: its optimizer step advances global_step.
    set_lr(r, step_lr(r));
    const int64_t batch_step = state_.global_step;
    each(callbacks_, [&](Callback &c) { c.on_train_batch_start(*this, b); });
    std::vector<Metrics> logs(r.reps.size());
    std::vector<float> losses(r.reps.size());
    // The step is queued, then the optimizer's; the host waits for the loss
    // only after that, so the stream has work while the host catches up.
    in_parallel(r, [&](size_t i, Replica &p) {
      p.batch.load(set, orders[i], b, B, p.dev, p.ctx.stream);
      AutocastScope autocast(r.bf16);
      p.ctx.training = true;
      if (p.sync && step_now) p.sync->arm();
      // Layers may apply the optimizer's update at once (StepPlan).
      if (step_now && p.plan.optimizer_in_backward()) p.opt->offer_step_in_backward(step_lr(r));
      Tensor loss = p.model->training_step(p.ctx, p.batch.x, p.batch.y, logs[i]);
      if (!p.loss_grad || p.loss_grad.dtype() != loss.dtype())
        p.loss_grad = Tensor::full(p.dev, loss.dtype(), {}, 1.0 / double(accum), p.ctx.stream);
      // Callbacks run on replica 0's thread, the calling one (in_parallel).
      p.model->on_before_backward(loss);
      if (i == 0) each(callbacks_, [&](Callback &c) { c.on_before_backward(*this, loss); });
      p.ctx.tape.backward(p.loss_grad);
      if (p.sync && step_now) p.sync->wait();
      if (r.hooks_read_gradients)
        for (Parameter *q : p.params) q->materialize_grad(p.ctx.stream);
      p.model->on_after_backward();
      if (i == 0) each(callbacks_, [&](Callback &c) { c.on_after_backward(*this); });
      p.loss.start(loss, r.comms ? (*r.comms)[i] : nullptr, p.ctx.stream);
    });
    r.batches_done = b + 1;
    const bool log_now = should_update_logs();
    if (step_now) optimizer_step();
    for (size_t i = 0; i < r.reps.size(); ++i) losses[i] = r.reps[i].loss.wait();
    // Callbacks see every step's values; the loggers get every n-th.
    Metrics m = logs[0];
    m["train_loss"] = losses[0];
    add_logged(r, config_.world_size, m);
    for (const auto &[k, v] : m) state_.callback_metrics[k] = v;
    if (log_now) log_metrics(m, batch_step);
    logs[0]["loss"] = losses[0];
    each(callbacks_, [&](Callback &c) { c.on_train_batch_end(*this, logs[0], b); });
    // Its metrics log under the batch's step, as Lightning's: validation runs
    // before _batches_that_stepped counts the batch's optimizer step.
    if (val_epoch && ((b + 1) % every == 0 || (vci.fraction && b + 1 == nb)) &&
        limit_batches(options_.limit_val_batches, 1) > 0)
      evaluate(Stage::validate, r.data->val_data(), options_.limit_val_batches, -1, batch_step);
    if (config_.max_time &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - r.started).count() >= *config_.max_time) {
      if (!state_.should_stop) detail::log(HPU_LOG_INFO, "max_time has passed; the fit stops");
      state_.should_stop = true;
    }
    if (state_.should_stop && can_stop_early()) break;
  }
  step_plateau();
  each(callbacks_, [&](Callback &c) { c.on_train_epoch_end(*this); });
}

// A metric-driven schedule (ReduceLROnPlateau) takes its monitor's value at
// the end of each training epoch; the rate it gives applies from the next.
void Trainer::step_plateau() {
  LRScheduler *s = run_->sched.get();
  if (!s || s->monitor().empty()) return;
  const Metrics &m = state_.callback_metrics;
  auto it = m.find(s->monitor());
  if (it != m.end()) {
    s->step(it->second);
    return;
  }
  std::string names;
  for (const auto &kv : m) names += (names.empty() ? "" : ", ") + kv.first;
  if (s->strict())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s conditioned on metric \"%s\", which is not available; available metrics: %s",
         s->name().c_str(), s->monitor().c_str(), names.empty() ? "(none logged)" : names.c_str());
  detail::log(HPU_LOG_WARN, "%s: metric \"%s\" was not logged; no step this epoch", s->name().c_str(),
              s->monitor().c_str());
}

void Trainer::optimizer_step() {
  Run &r = *run_;
  for (Replica &p : r.reps)
    for (Parameter *q : p.params)
      if (!p.plan.applied(*q)) q->materialize_grad(p.ctx.stream);
  each(callbacks_, [&](Callback &c) { c.on_before_optimizer_step(*this); });
  set_lr(r, step_lr(r));
  // Every replica holds the same averaged gradients (or, sharded, its slices of
  // them): the same clip, the same step.
  in_parallel(r, [&](size_t, Replica &p) {
    if (options_.gradient_clip_val > 0) clip_gradients(p, options_.gradient_clip_val);
    p.plan.values_changed();
    p.opt->step(p.ctx.stream);
    p.plan.step_done();
    if (p.sync) p.sync->gather_params();
    for (Parameter *q : p.params) q->zero_grad();  // the optimizer's may be slices (GradSync)
  });
  ++state_.global_step;
}

Metrics Trainer::evaluate(Stage stage, const TensorDataset &set, const BatchCount &limit, int64_t max_batches,
                          int64_t log_step) {
  Run &r = *run_;
  const bool val = stage == Stage::validate;
  const Stage outer = state_.stage;
  const std::string prefix = val ? "val_" : "test_";
  const size_t B = size_t(r.data->batch_size());
  std::vector<std::vector<size_t>> orders;
  for (Replica &p : r.reps) orders.push_back(DistributedSampler(set.size(), config_.world_size, p.rank, false, 0).indices());
  int64_t nb = set.size() ? limit_batches(limit, int64_t((orders[0].size() + B - 1) / B)) : 0;
  if (max_batches >= 0) nb = std::min(nb, max_batches);
  (val ? state_.num_val_batches : state_.num_test_batches) = nb;
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_start(*this) : c.on_test_start(*this); });
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_epoch_start(*this) : c.on_test_epoch_start(*this); });
  std::vector<Metrics> sums(r.reps.size());
  std::vector<double> seen(r.reps.size(), 0.0);
  for (Replica &p : r.reps) {
    p.ctx.training = false;
    p.ctx.tape.clear();
  }
  for (int64_t b = 0; b < nb; ++b) {
    each(callbacks_, [&](Callback &c) { val ? c.on_validation_batch_start(*this, b) : c.on_test_batch_start(*this, b); });
    in_parallel(r, [&](size_t i, Replica &p) {
      const size_t n = p.batch.load(set, orders[i], b, B, p.dev, p.ctx.stream);
      AutocastScope autocast(r.bf16);
      for (const auto &[k, v] : p.model->evaluation_step(p.ctx, p.batch.x, p.batch.y)) sums[i][k] += v;
      seen[i] += double(n);
    });
    each(callbacks_, [&](Callback &c) { val ? c.on_validation_batch_end(*this, b) : c.on_test_batch_end(*this, b); });
  }
  for (Replica &p : r.reps) {
    p.ctx.training = true;
    p.model->take_logged();  // LightningModule::log is for training_step (module.hpp)
  }
  if (val && outer == Stage::fit && !state_.sanity_checking) state_.validation_ran = true;
  // Sums and sample counts of every rank (the keys are the same on every rank).
  for (size_t i = 0; i < r.reps.size(); ++i) sums[i]["\x01seen"] = seen[i];
  if (r.comms) sum_over_ranks(r, sums);
  Metrics out;
  const double total = sums[0]["\x01seen"];
  for (const auto &[k, v] : sums[0])
    if (k != "\x01seen") out[prefix + k] = total > 0 ? v / total : NAN;
  if (!out.empty() && !state_.sanity_checking) log_metrics(out, log_step >= 0 ? log_step : state_.global_step);
  state_.stage = outer;
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_epoch_end(*this) : c.on_test_epoch_end(*this); });
  each(callbacks_, [&](Callback &c) { val ? c.on_validation_end(*this) : c.on_test_end(*this); });
  return out;
}

// Lightning's sanity check: num_sanity_val_steps validation batches before
// training, their metrics not logged.
void Trainer::sanity_check() {
  const int64_t steps = options_.num_sanity_val_steps;
  if (steps == 0 || run_->data->val_data().size() == 0 || limit_batches(options_.limit_val_batches, 1) == 0) return;
  state_.sanity_checking = true;
  each(callbacks_, [&](Callback &c) { c.on_sanity_check_start(*this); });
  try {
    evaluate(Stage::validate, run_->data->val_data(), options_.limit_val_batches, steps);
  } catch (...) {
    state_.sanity_checking = false;
    throw;
  }
  state_.sanity_checking = false;
  each(callbacks_, [&](Callback &c) { c.on_sanity_check_end(*this); });
}

Metrics Trainer::validate(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  return guarded(*this, [&] { return run_validate(model, data, ckpt_path); });
}

Metrics Trainer::test(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  return guarded(*this, [&] { return run_test(model, data, ckpt_path); });
}

Predictions Trainer::predict(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  return guarded(*this, [&] { return run_predict(model, data, ckpt_path); });
}

Metrics Trainer::run_validate(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  start(model, data, Stage::validate);
  SettleBatches settled(*run_);
  load_weights(ckpt_path, Stage::validate);
  Metrics m = evaluate(Stage::validate, data.val_data(), options_.limit_val_batches);
  finish(Stage::validate);
  return m;
}

Metrics Trainer::run_test(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  start(model, data, Stage::test);
  SettleBatches settled(*run_);
  load_weights(ckpt_path, Stage::test);
  Metrics m = evaluate(Stage::test, data.test_data(), options_.limit_test_batches);
  finish(Stage::test);
  return m;
}

Predictions Trainer::run_predict(LightningModule &model, DataModule &data, const std::string &ckpt_path) {
  start(model, data, Stage::predict);
  Run &r = *run_;
  SettleBatches settled(r);
  load_weights(ckpt_path, Stage::predict);
  const TensorDataset &set = data.predict_data();
  if (set.size() == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "the data module's predict set is empty");
  const size_t B = size_t(data.batch_size());
  const int world = config_.world_size;
  std::vector<std::vector<size_t>> orders;
  for (Replica &p : r.reps) orders.push_back(DistributedSampler(set.size(), world, p.rank, false, 0).indices());
  const int64_t nb = limit_batches(options_.limit_predict_batches, int64_t((orders[0].size() + B - 1) / B));
  state_.num_predict_batches = nb;
  each(callbacks_, [&](Callback &c) { c.on_predict_start(*this); });
  std::vector<Predictions> mine(r.reps.size());
  for (Replica &p : r.reps) {
    p.ctx.training = false;
    p.ctx.tape.clear();
  }
  for (int64_t b = 0; b < nb; ++b) {
    each(callbacks_, [&](Callback &c) { c.on_predict_batch_start(*this, b); });
    in_parallel(r, [&](size_t i, Replica &p) {
      const size_t n = p.batch.load(set, orders[i], b, B, p.dev, p.ctx.stream);
      AutocastScope autocast(r.bf16);
      Predictions rows = p.model->predict_step(p.ctx, p.batch.x);
      if (rows.rows() != n || rows.values.size() != n * rows.columns.size())
        fail(HPU_ERROR_INVALID_ARGUMENT, "predict_step returned %zu rows of %zu columns (%zu values) for %zu samples",
             rows.rows(), rows.columns.size(), rows.values.size(), n);
      mine[i].append(rows);
    });
    each(callbacks_, [&](Callback &c) { c.on_predict_batch_end(*this, b); });
  }
  for (Replica &p : r.reps) p.ctx.training = true;
  // Rank q's row j is position q + j x world of the sampler's (unshuffled,
  // padded) order, that is sample q + j x world: gathered, the rows come in
  // data set order, the padding's repeats last.
  Predictions out = mine[0];
  if (r.comms && nb > 0) {
    const size_t count = mine[0].values.size();
    std::vector<std::vector<double>> all(r.reps.size());
    in_parallel(r, [&](size_t i, Replica &p) {
      Tensor send = Tensor::from_host(p.dev, HPU_FLOAT64, {int64_t(count)}, mine[i].values.data());
      Tensor recv = Tensor::empty(p.dev, HPU_FLOAT64, {int64_t(count) * world});
      void *s = nullptr, *d = nullptr;
      check(hpuTensorGetData(send.get(), &s));
      check(hpuTensorGetData(recv.get(), &d));
      check(hpuAllgather(p.ctx.stream, (*r.comms)[i], s, d, count, HPU_FLOAT64));
      all[i] = recv.to_vector<double>(p.ctx.stream);
    });
    const size_t cols = out.columns.size(), rows = mine[0].rows();
    out.values.clear();
    for (size_t j = 0; j < rows; ++j)
      for (int q = 0; q < world; ++q) {
        const double *row = all[0].data() + (size_t(q) * rows + j) * cols;
        out.values.insert(out.values.end(), row, row + cols);
      }
  }
  out.values.resize(std::min(out.rows(), set.size()) * out.columns.size());
  each(callbacks_, [&](Callback &c) { c.on_predict_end(*this); });
  finish(Stage::predict);
  return out;
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
  const Replica &r = run_->reps[0];
  check(hpuDeviceSynchronize(r.dev));
  for (Parameter *p : r.params) ck.tensors["state_dict/" + p->name] = to_host(p->value);
  if (r.opt) {
    std::vector<std::pair<std::string, Tensor>> st;
    if (r.sync && r.sync->sharded()) {
      // Every replica takes part in gathering the slices; replica 0's copy is saved.
      std::vector<std::vector<std::pair<std::string, Tensor>>> all(run_->reps.size());
      in_parallel(*run_, [&](size_t i, Replica &p) { p.sync->gather_state(*p.opt, all[i]); });
      st = std::move(all[0]);
    } else {
      r.opt->state(st);
    }
    for (auto &[name, t] : st) ck.tensors["optimizer/" + name] = to_host(t);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r.opt->name().c_str()));
    json_object_set_new(o, "steps", json_integer(r.opt->steps()));
    json_object_set_new(o, "lr", json_real(r.opt->lr()));
    json_object_set_new(meta, "optimizer", o);
  }
  json_object_set_new(meta, "batches_done", json_integer(run_->batches_done));
  if (run_->sched) {
    const std::string st = run_->sched->state_dict();
    if (!st.empty())
      json_object_set_new(meta, "lr_scheduler", detail::parse_object(st, "scheduler state", HPU_ERROR_INTERNAL).release());
  }
  hpuRandomState_t rs = HPU_RANDOM_STATE_INIT;
  check(hpuRandomGetState(r.dev, &rs));
  json_t *rng = json_object();
  json_object_set_new(rng, "seed", json_string(std::to_string(rs.seed).c_str()));
  json_object_set_new(rng, "offset", json_string(std::to_string(rs.offset).c_str()));
  json_object_set_new(meta, "device_rng", rng);
}

void Trainer::restore_run(const Checkpoint &ck) {
  Run &run = *run_;
  restore_checkpoint(ck);  // the hooks, then the trainer's and the callbacks' state
  detail::Json meta = detail::parse_object(ck.meta, "checkpoint meta", HPU_ERROR_IO);
  json_t *rng = json_object_get(meta.get(), "device_rng");
  for (Replica &r : run.reps) {
    for (Parameter *p : r.params) {
      auto it = ck.tensors.find("state_dict/" + p->name);
      if (it == ck.tensors.end())
        fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint lacks the weights of %s", p->name.c_str());
      from_host(p->value, it->second, p->name);
    }
    r.plan.values_changed();
    if (r.opt) {
      json_t *o = json_object_get(meta.get(), "optimizer");
      const char *name = json_string_value(json_object_get(o, "name"));
      if (!name || r.opt->name() != name)
        fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint's optimizer is %s, the model's is %s", name ? name : "none",
             r.opt->name().c_str());
      if (r.sync && r.sync->sharded()) {
        r.sync->scatter_state(*r.opt, [&](const std::string &n, size_t count) -> const float * {
          auto it = ck.tensors.find("optimizer/" + n);
          if (it == ck.tensors.end()) return nullptr;
          if (it->second.dtype != HPU_FLOAT32 || it->second.bytes.size() != count * sizeof(float))
            fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s does not match the model (dtype or shape differs)",
                 n.c_str());
          return reinterpret_cast<const float *>(it->second.bytes.data());
        });
      } else {
        std::vector<std::pair<std::string, Tensor>> st;
        r.opt->state(st);
        for (auto &[n, t] : st) {
          auto it = ck.tensors.find("optimizer/" + n);
          if (it == ck.tensors.end())
            fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint lacks optimizer state %s", n.c_str());
          from_host(t, it->second, n);
        }
      }
      r.opt->set_steps(json_integer_value(json_object_get(o, "steps")));
      r.opt->set_lr(json_number_value(json_object_get(o, "lr")));
    }
    if (rng) {
      // Rank 0's generator as saved; the others' seeds as start() made them,
      // at the same offset (every rank draws the same amount).
      hpuRandomState_t rs = HPU_RANDOM_STATE_INIT;
      rs.seed = r.rank == 0 ? std::stoull(json_string_value(json_object_get(rng, "seed")))
                            : mix_seed(config_.seed, uint64_t(r.rank));
      rs.offset = std::stoull(json_string_value(json_object_get(rng, "offset")));
      check(hpuRandomSetState(r.dev, &rs));
    }
  }
  run.batches_done = json_integer_value(json_object_get(meta.get(), "batches_done"));
  json_t *sched = json_object_get(meta.get(), "lr_scheduler");
  if (run.sched && sched) run.sched->load_state_dict(detail::dump(sched, JSON_COMPACT));
}

}  // namespace hpu
