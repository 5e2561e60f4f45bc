// run_job: a job's data, model and Trainer, fitted and tested, as hpu-train and
// hpuTrainerRunJob run it.
#include <hpu/trainer/job.hpp>
#include <hpu/trainer/trainer.hpp>

#include "error.hpp"
#include "log.hpp"

namespace hpu {

JobResult run_job(const Job &job, const std::function<void(Trainer &)> &before_fit) {
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
  Classifier model(Classifier::build(layers), job.optimizer, job.scheduler);
  Trainer trainer(job.trainer);
  const TrainerConfig &c = trainer.config();
  detail::log(HPU_LOG_INFO, "job: %d device(s) per process, world size %d, strategy %s, precision %s, seed %llu, logs in %s",
              c.devices, c.world_size, c.strategy.c_str(), c.precision.c_str(), (unsigned long long)c.seed,
              trainer.log_dir().c_str());
  if (before_fit) before_fit(trainer);
  trainer.fit(model, data, job.ckpt_path);
  JobResult r;
  if (auto *ck = trainer.callback<ModelCheckpoint>()) r.best_model_path = ck->best_model_path();
  if (job.test) r.test = trainer.test(model, data);
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
