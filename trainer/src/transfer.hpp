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

// A replica's batch on its device. load() queues a gather of the batch's
// samples and labels straight from the dataset into device tensors allocated
// on first use (a shorter last batch uses their leading rows): no allocation,
// no host-side copy and no wait per step. Queued work that still reads the
// device tensors comes before the next gather on the same stream. The
// dataset must stay alive and unchanged until the gathers have run: settle()
// waits for them.
class DeviceBatch {
 public:
  DeviceBatch() = default;
  DeviceBatch(DeviceBatch &&) = default;
  DeviceBatch &operator=(DeviceBatch &&) = default;
  ~DeviceBatch() { settle(); }

  // Batch b (of size B) of `order` onto `stream`; returns its sample count.
  size_t load(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B, hpuDevice_t dev,
              hpuStream_t stream);
  // Waits, ignoring the stream's error, until no queued gather reads a dataset.
  void settle() { hpu::settle(copied_); }
  Tensor x, y;  // the loaded samples: x f32 {n, sample_shape...}, y i32 {n}

 private:
  std::vector<int64_t> rows_;  // the batch's sample numbers
  Tensor x_all_, y_all_;       // device buffers of capacity rows
  size_t capacity_ = 0;
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
