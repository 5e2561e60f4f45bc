// run_job: a job's data, model and Trainer, and its command (fit and test,
// validate, test or predict), as hpu-train and hpuTrainerRunJob run it; one at
// a time in a process, and cancellable (hpuTrainerCancelJob, hpu-train's Ctrl-C).
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "job_control.hpp"
#include "log.hpp"

#include <atomic>

namespace hpu {

namespace {

// The process's job: none, running, or running with a cancel asked for.
enum JobState { kIdle, kRunning, kCancelled };
std::atomic<int> g_job{kIdle};

// Stops the job before its next batch once a cancel was asked for. Batches
// start between whole steps, and checkpoints are written inside a hook that
// runs to its end, so the job leaves only whole checkpoint files.
class Cancellation : public Callback {
 public:
  std::string state_key() const override { return "Cancellation"; }
  CallbackNeeds needs() const override { return CallbackNeeds::none(); }
  void on_train_batch_start(Trainer &t, int64_t batch) override { check(t, "training", batch); }
  void on_validation_batch_start(Trainer &t, int64_t batch) override { check(t, "validation", batch); }
  void on_test_batch_start(Trainer &t, int64_t batch) override { check(t, "test", batch); }
  void on_predict_batch_start(Trainer &t, int64_t batch) override { check(t, "predict", batch); }

 private:
  static void check(const Trainer &t, const char *stage, int64_t batch) {
    if (g_job.load(std::memory_order_relaxed) != kCancelled) return;
    detail::fail(HPU_ERROR_ABORTED, "cancelled by hpuTrainerCancelJob before %s batch %lld (epoch %lld, global step %lld)",
                 stage, static_cast<long long>(batch), static_cast<long long>(t.current_epoch()),
                 static_cast<long long>(t.global_step()));
  }
};

}  // namespace

namespace detail {

bool cancel_job() {
  int state = kRunning;
  return g_job.compare_exchange_strong(state, kCancelled) || state == kCancelled;
}

}  // namespace detail

JobResult run_job(const Job &job, const std::function<void(Trainer &)> &before_fit) {
  int idle = kIdle;
  if (!g_job.compare_exchange_strong(idle, kRunning))
    detail::fail(HPU_ERROR_INVALID_USAGE, "another job is running in this process; one runs at a time");
  struct Done {
    ~Done() { g_job.store(kIdle); }
  } done;
  if (job.command == "predict") check_predictions_path(job.predict_output);  // before any work
  // The data first: the model is checked against what it holds.
  std::unique_ptr<DataModule> data_module = make_data(job.data);
  DataModule &data = *data_module;
  data.setup();
  std::vector<LayerSpec> layers = job.layers;
  check_layers(layers, data.train_data().sample_shape(), data.num_classes(),
               detail::format("the data has %d classes, so cross-entropy needs %d class scores%s", data.num_classes(),
                              data.num_classes(),
                              job.data.name == "fashion_mnist" || job.data.files.num_classes
                                  ? ""
                                  : " (the largest label + 1; set data.num_classes when a class has no samples)"));
  Classifier model(ModelSpec{layers, job.optimizer, job.scheduler});
  Trainer trainer(job.trainer);
  trainer.callbacks().emplace_back(Cancellation{});
  const TrainerConfig &c = trainer.config();
  detail::log(HPU_LOG_INFO, "job: %d device(s) per process, world size %d, strategy %s, precision %s, seed %llu, logs in %s",
              c.devices, c.world_size, c.strategy.c_str(), c.precision.c_str(), (unsigned long long)c.seed,
              trainer.log_dir().c_str());
  if (before_fit) before_fit(trainer);
  JobResult r;
  r.command = job.command;
  if (job.command == "fit") {
    // Found out before training rather than after.
    if (job.test && job.test_ckpt_path == "best" && !trainer.callback<ModelCheckpoint>())
      trainer.checkpoint_file("best", Stage::test);
    trainer.fit(model, data, job.ckpt_path);
    if (auto *ck = trainer.callback<ModelCheckpoint>()) r.best_model_path = ck->best_model_path();
    if (job.test) r.test = trainer.test(model, data, job.test_ckpt_path);
  } else if (job.command == "validate") {
    r.validate = trainer.validate(model, data, job.ckpt_path);
  } else if (job.command == "test") {
    r.test = trainer.test(model, data, job.ckpt_path);
  } else {
    r.predictions = trainer.predict(model, data, job.ckpt_path);
    r.predictions_path = job.predict_output;
    if (trainer.is_global_zero()) write_predictions(job.predict_output, r.predictions);
  }
  r.metrics = trainer.state().callback_metrics;
  r.epoch = trainer.current_epoch();
  r.global_step = trainer.global_step();
  r.global_rank = trainer.global_rank();
  r.world_size = c.world_size;
  r.log_dir = trainer.log_dir();
  for (const Device &d : trainer.devices()) r.memory.push_back(d.mem_stats());
  return r;
}

}  // namespace hpu
