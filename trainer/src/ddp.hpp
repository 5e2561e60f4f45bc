// hpu_ddp: the communicators of a run, and the gradient synchronisation of one
// replica (bucketed allreduce overlapped with backward).
#pragma once

#include <hpu/comm.h>
#include <hpu/trainer/nn.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpu {

// One communicator per device of this process (hpuCommInitFromEnv: a launcher's
// environment makes processes and nodes ranks of one group; without one, the
// devices of this process form the group). streams[i], on devs[i], carries the
// trainer's own collectives (broadcast).
class Comms {
 public:
  Comms(const std::vector<hpuDevice_t> &devs, const std::vector<hpuStream_t> &streams);
  ~Comms();
  Comms(const Comms &) = delete;
  Comms &operator=(const Comms &) = delete;
  hpuComm_t operator[](size_t i) const { return comms_[i]; }
  int rank(size_t i) const;  // global rank of this process's device i
  int size() const;          // ranks in the group
  // Global rank 0's `values` on every rank (every rank calls it); returns
  // once they have arrived.
  std::vector<uint64_t> broadcast(std::vector<uint64_t> values) const;
  // Fails every pending and later operation on every rank (peers get
  // HPU_ERROR_REMOTE): a failing replica makes the others fail, not hang.
  void abort();

 private:
  std::vector<hpuComm_t> comms_;
  std::vector<hpuDevice_t> devs_;
  std::vector<hpuStream_t> streams_;
};

// A replica's parameters and gradients as windows of two flat f32 buffers of
// the same layout, split into buckets (parameters in reverse order, as
// backward produces them, each bucket at least `bucket_bytes`, padded to a
// multiple of the rank count). While armed, each bucket's gradients are
// averaged on the replica's communication stream as soon as backward has
// written its last one; wait() makes the compute stream wait for all of them.
//
// Unsharded, every bucket is allreduced and every rank's optimizer updates
// every parameter. Sharded (ZeRO stage 1), rank r owns the r-th of the N equal
// slices of every bucket: a bucket's gradients are reduce-scattered (rank r
// gets the average of its slice), the optimizer updates the owned slices only
// and keeps state for them only, and gather_params() all-gathers the updated
// slices into every rank's parameters. Each element goes through the same
// arithmetic as unsharded, so the weights are the same; the gradients outside
// a rank's slices are its own, not averaged.
class GradSync {
 public:
  GradSync(hpuComm_t comm, hpuDevice_t dev, hpuStream_t compute, const std::vector<Parameter *> &params,
           size_t bucket_bytes);
  ~GradSync();
  GradSync(const GradSync &) = delete;
  GradSync &operator=(const GradSync &) = delete;

  // Replaces `opt` by the same optimizer over this rank's slices
  // (Optimizer::with_params) and turns sharding on; leaves it and turns
  // sharding off when the optimizer has no such form. Every rank must make
  // the same choice.
  void shard(std::unique_ptr<Optimizer> &opt);
  void unshard() { sharded_ = false; }
  bool sharded() const { return sharded_; }

  // Before a backward whose gradients complete an accumulation (the last
  // micro-batch before an optimizer step).
  void arm();
  // After that backward: starts the buckets no gradient has started yet (a
  // parameter without a gradient this step), in order, then queues on the
  // compute stream a wait for every bucket's reduction.
  void wait();
  // Sharded, after the optimizer step was queued: all-gathers the updated
  // slices; the compute stream waits for them. Nothing unsharded.
  void gather_params();

  // Sharded: the state of the sharded optimizer `opt` as the unsharded one
  // names it ("exp_avg/1.weight"), whole: every rank's slices all-gathered
  // (a collective: every rank calls it). Returns when the tensors are written.
  void gather_state(Optimizer &opt, std::vector<std::pair<std::string, Tensor>> &out);
  // Sharded: fills this rank's slices of `opt`'s state from whole tensors as
  // gather_state names them; find(name) gives a tensor's f32 elements and
  // count, or nullptr when the checkpoint lacks it.
  using StateSource = std::function<const float *(const std::string &name, size_t count)>;
  void scatter_state(Optimizer &opt, const StateSource &find);

  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t offset = 0, count = 0;  // elements of the flat buffers, padding included
    size_t params = 0;              // parameters in the bucket
    size_t pending = 0;             // gradients still to come this step
  };
  void ready(size_t bucket);
  void launch_ready();
  int64_t slice_count(const Bucket &b) const { return b.count / ranks_; }
  int64_t slice_offset(const Bucket &b) const { return b.offset + rank_ * slice_count(b); }

  hpuComm_t comm_;
  int ranks_ = 1, rank_ = 0;
  std::vector<Parameter *> params_;
  std::vector<int64_t> offsets_;  // of each parameter in the flat buffers
  hpuDevice_t dev_;
  hpuStream_t compute_, stream_ = nullptr;
  std::shared_ptr<GradSync *> link_;  // what the parameters' hooks reach this through
  hpuEvent_t grads_done_ = nullptr, reduced_ = nullptr, stepped_ = nullptr, gathered_ = nullptr;
  Tensor flat_, values_;
  float *base_ = nullptr, *values_base_ = nullptr;
  std::vector<Bucket> buckets_;
  std::vector<Parameter> slices_;  // sharded: this rank's slice of each bucket
  size_t launched_ = 0;            // buckets started this step, always a prefix
  bool armed_ = false, sharded_ = false;
};

}  // namespace hpu
