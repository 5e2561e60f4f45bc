// The host <-> device traffic of a training step, queued so that it never
// stops the replica's stream: the batch goes in through buffers kept for the
// whole run, the loss comes out into host memory behind an event.
#pragma once

#include <hpu/hpu.hpp>
#include <hpu/trainer/data.hpp>

#include <memory>
#include <vector>

namespace hpu {

// Waits, ignoring the stream's error, until the work before `event` is over.
inline void settle(const std::unique_ptr<Event> &event) {
  if (event) hpuEventSynchronize(event->get());
}

// A replica's batch on its device. load() gathers the samples into a host
// buffer and queues one copy into device tensors allocated on first use (a
// shorter last batch uses their leading rows): no allocation and no wait per
// step. The next load() waits for the previous copy before it refills the
// host buffer; queued work that still reads the device tensors comes before
// the next copy on the same stream. prefetch() gathers a batch ahead into a
// second host buffer, which the load() of the same samples then copies from.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  DeviceBatch(DeviceBatch &&) = default;
  DeviceBatch &operator=(DeviceBatch &&) = default;
  // Waits for a copy still queued from the host buffer (a failed fit may end
  // with one in flight).
  ~DeviceBatch() { settle(copied_); }

  // Batch b (of size B) of `order` onto `stream`; returns its sample count.
  size_t load(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B, hpuDevice_t dev,
              hpuStream_t stream);
  // Gathers batch b of `order` now, while the stream still runs earlier work,
  // for a later load() of the same samples from the same set.
  void prefetch(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B);
  Tensor x, y;  // the loaded samples: x f32 {n, sample_shape...}, y i32 {n}

 private:
  Batch host_;
  Batch ahead_;  // prefetch()'s samples: indices ahead_indices_ of *ahead_set_
  const TensorDataset *ahead_set_ = nullptr;
  std::vector<size_t> ahead_indices_;
  Tensor x_all_, y_all_;  // device buffers of capacity rows
  size_t rows_ = 0;
  std::unique_ptr<Event> copied_;
};

// A replica's step loss as a host float: start() queues its conversion to
// f32, its average over the ranks (hpu_ddp) and a copy to the host; wait()
// returns it once the stream got there, while later work keeps running.
class LossReadback {
 public:
  LossReadback() = default;
  LossReadback(LossReadback &&) = default;
  LossReadback &operator=(LossReadback &&) = default;
  ~LossReadback() { settle(ready_); }  // a copy into host_ may still be queued

  void start(const Tensor &loss, hpuComm_t comm, hpuStream_t stream);
  float wait();

 private:
  Tensor dev_;  // f32 scalar on the replica's device
  std::unique_ptr<float> host_ = std::make_unique<float>(0.0f);
  std::unique_ptr<Event> ready_;
};

}  // namespace hpu
