// What the trainer holds while it fits, validates or tests a model.
#pragma once

#include <hpu/trainer/sampler.hpp>
#include <hpu/trainer/trainer.hpp>

#include <memory>

namespace hpu {

struct Trainer::Run {
  LightningModule *model = nullptr;
  DataModule *data = nullptr;
  hpuDevice_t dev = nullptr;
  Context ctx;
  bool bf16 = false;
  std::vector<Parameter *> params;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LRScheduler> sched;
  std::unique_ptr<DistributedSampler> sampler;
  int64_t batches_done = 0;  // of the current epoch
};

}  // namespace hpu
