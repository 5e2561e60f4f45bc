#include "transfer.hpp"

#include <algorithm>

namespace hpu {

namespace {

void *data_of(const Tensor &t) {
  void *d = nullptr;
  check(hpuTensorGetData(t.get(), &d));
  return d;
}

}  // namespace

size_t DeviceBatch::load(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B,
                         hpuDevice_t dev, hpuStream_t stream) {
  const size_t lo = size_t(b) * B, hi = std::min(lo + B, order.size());
  if (copied_) copied_->synchronize();  // the host buffer is free again
  if (ahead_set_ == &set && std::equal(order.begin() + lo, order.begin() + hi, ahead_indices_.begin(),
                                       ahead_indices_.end()))
    std::swap(host_, ahead_);  // ahead_ now holds the buffer the copy above read
  else
    set.gather(order.data() + lo, hi - lo, host_);
  ahead_set_ = nullptr;
  const size_t n = host_.size;
  std::vector<int64_t> shape = host_.x_shape();
  shape[0] = int64_t(std::max(n, B));
  if (!x_all_ || x_all_.device() != dev || x_all_.shape() != shape) {
    x_all_ = Tensor::empty(dev, HPU_FLOAT32, shape);
    y_all_ = Tensor::empty(dev, HPU_INT32, {shape[0]});
    rows_ = size_t(shape[0]);
    copied_ = std::make_unique<Event>();
  }
  shape[0] = int64_t(n);
  x = n == rows_ ? x_all_ : x_all_.window(0, shape);
  y = n == rows_ ? y_all_ : y_all_.window(0, {int64_t(n)});
  check(hpuMemcpyAsync(data_of(x_all_), host_.x.data(), host_.x.size() * sizeof(float), HPU_MEMCPY_HOST_TO_DEVICE,
                       stream));
  check(hpuMemcpyAsync(data_of(y_all_), host_.y.data(), host_.y.size() * sizeof(int32_t), HPU_MEMCPY_HOST_TO_DEVICE,
                       stream));
  copied_->record(stream);
  return n;
}

void DeviceBatch::prefetch(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B) {
  const size_t lo = std::min(size_t(b) * B, order.size()), hi = std::min(lo + B, order.size());
  ahead_set_ = nullptr;  // no queued copy reads ahead_: load() waited for its last one
  set.gather(order.data() + lo, hi - lo, ahead_);
  ahead_indices_.assign(order.begin() + lo, order.begin() + hi);
  ahead_set_ = &set;
}

void LossReadback::start(const Tensor &loss, hpuComm_t comm, hpuStream_t stream) {
  if (!dev_ || dev_.device() != loss.device()) {
    dev_ = Tensor::empty(loss.device(), HPU_FLOAT32, {});
    ready_ = std::make_unique<Event>();
  }
  check(hpuTensorCopy(dev_.get(), loss.get(), stream));
  void *d = data_of(dev_);
  if (comm) check(hpuAllreduce(d, d, 1, HPU_FLOAT32, HPU_AVG, comm, stream));
  check(hpuMemcpyAsync(host_.get(), d, sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST, stream));
  ready_->record(stream);
}

float LossReadback::wait() {
  if (ready_) ready_->synchronize();
  return *host_;
}

}  // namespace hpu
