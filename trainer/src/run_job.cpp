// run_job: a job's data, model and Trainer, and its command (fit and test,
// validate, test or predict), as hpu-train and hpuTrainerRunJob run it.
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "log.hpp"

namespace hpu {

JobResult run_job(const Job &job, const std::function<void(Trainer &)> &before_fit) {
  if (job.command == "predict") check_predictions_path(job.predict_output);  // before any work
  FashionMNIST data(job.data.batch_size, job.data.root, size_t(job.data.val_size));
  Classifier model(ModelSpec{job.layers, job.optimizer, job.scheduler});
  Trainer trainer(job.trainer);
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
