// hpu_ddp: the communicators of a run, and the gradient synchronisation of one
// replica (bucketed allreduce overlapped with backward).
#pragma once

#include <hpu/comm.h>
#include <hpu/trainer/nn.hpp>

#include <memory>
#include <vector>

namespace hpu {

// One communicator per device of this process (hpuCommInitFromEnv: a launcher's
// environment makes processes and nodes ranks of one group; without one, the
// devices of this process form the group).
class Comms {
 public:
  explicit Comms(const std::vector<hpuDevice_t> &devs);
  ~Comms();
  Comms(const Comms &) = delete;
  Comms &operator=(const Comms &) = delete;
  hpuComm_t operator[](size_t i) const { return comms_[i]; }
  int rank(size_t i) const;  // global rank of this process's device i
  int size() const;          // ranks in the group
  // Fails every pending and later operation on every rank (peers get
  // HPU_ERROR_REMOTE): a failing replica makes the others fail, not hang.
  void abort();

 private:
  std::vector<hpuComm_t> comms_;
};

// A replica's gradients as windows of one flat f32 buffer, split into buckets
// (parameters in reverse order, as backward produces them, each bucket at least
// `bucket_bytes`). While armed, each bucket's averaging allreduce starts on the
// replica's communication stream as soon as backward has written its last
// gradient; wait() makes the compute stream wait for all of them.
class GradSync {
 public:
  GradSync(hpuComm_t comm, hpuDevice_t dev, hpuStream_t compute, const std::vector<Parameter *> &params,
           size_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync &) = delete;
  GradSync &operator=(const GradSync &) = delete;

  // Before a backward whose gradients complete an accumulation (the last
  // micro-batch before an optimizer step).
  void arm();
  // After that backward: starts the buckets no gradient has started yet (a
  // parameter without a gradient this step), in order, then queues on the
  // compute stream a wait for every bucket's allreduce.
  void wait();
  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t offset = 0, count = 0;  // elements of the flat buffer
    size_t params = 0;              // parameters in the bucket
    size_t pending = 0;             // gradients still to come this step
  };
  void ready(size_t bucket);
  void launch_ready();

  hpuComm_t comm_;
  std::vector<Parameter *> params_;
  hpuStream_t compute_, stream_ = nullptr;
  std::shared_ptr<GradSync *> link_;  // what the parameters' hooks reach this through
  hpuEvent_t grads_done_ = nullptr, reduced_ = nullptr;
  Tensor flat_;
  float *base_ = nullptr;
  std::vector<Bucket> buckets_;
  size_t launched_ = 0;  // buckets started this step, always a prefix
  bool armed_ = false;
};

}  // namespace hpu
