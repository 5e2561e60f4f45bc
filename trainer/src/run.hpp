// What the trainer holds while it fits, validates or tests a model.
#pragma once

#include <hpu/trainer/sampler.hpp>
#include <hpu/trainer/trainer.hpp>

#include "ddp.hpp"
#include "replica_threads.hpp"
#include "transfer.hpp"

#include <chrono>
#include <memory>

namespace hpu {

// One model replica on one device of this process (hpu_ddp: global rank
// `rank`; hpu_single: the only one).
struct Replica {
  std::unique_ptr<LightningModule> owned;  // the clones; replica 0 is the user's model
  LightningModule *model = nullptr;
  hpuDevice_t dev = nullptr;
  int rank = 0;
  Context ctx;
  StepPlan plan;  // ctx.plan and opt's plan
  std::vector<Parameter *> params;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<DistributedSampler> sampler;
  std::unique_ptr<GradSync> sync;  // hpu_ddp only
  DeviceBatch batch;
  LossReadback loss;
  Tensor loss_grad;  // the gradient backward starts from: 1 / accumulate_grad_batches
};

struct Trainer::Run {
  LightningModule *model = nullptr;
  DataModule *data = nullptr;
  bool bf16 = false;
  Comms *comms = nullptr;        // hpu_ddp only: the trainer's, which outlive the replicas' GradSyncs
  std::vector<Replica> reps;     // one per device of this process; reps[0] runs callbacks
  std::unique_ptr<ReplicaThreads> threads;
  std::unique_ptr<LRScheduler> sched;
  int64_t batches_done = 0;  // of the current epoch
  bool hooks_read_gradients = false;  // a hook reads them after backward (materialized first)
  std::chrono::steady_clock::time_point started;  // of the fit, for max_time
};

}  // namespace hpu
