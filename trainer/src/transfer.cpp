#include "transfer.hpp"

#include "error.hpp"

#include <algorithm>

namespace hpu {

using detail::fail;

namespace {

void *data_of(const Tensor &t) {
  void *d = nullptr;
  check(hpuTensorGetData(t.get(), &d));
  return d;
}

}  // namespace

size_t DeviceBatch::load(const TensorDataset &set, const std::vector<size_t> &order, int64_t b, size_t B,
                         hpuDevice_t dev, hpuStream_t stream) {
  const size_t lo = std::min(size_t(b) * B, order.size()), hi = std::min(lo + B, order.size()), n = hi - lo;
  rows_.assign(order.begin() + lo, order.begin() + hi);
  for (int64_t k : rows_)
    if (size_t(k) >= set.size())
      fail(HPU_ERROR_INVALID_ARGUMENT, "sample index %zu out of range (dataset has %zu)", size_t(k), set.size());
  std::vector<int64_t> shape{int64_t(std::max(n, B))};
  shape.insert(shape.end(), set.sample_shape().begin(), set.sample_shape().end());
  if (!x_all_ || x_all_.device() != dev || x_all_.shape() != shape) {
    settle();  // copied_ is replaced: it must not leave a gather from `set` behind
    x_all_ = Tensor::empty(dev, HPU_FLOAT32, shape);
    y_all_ = Tensor::empty(dev, HPU_INT32, {shape[0]});
    capacity_ = size_t(shape[0]);
    copied_ = std::make_unique<Event>();
  }
  shape[0] = int64_t(n);
  x = n == capacity_ ? x_all_ : x_all_.window(0, shape);
  y = n == capacity_ ? y_all_ : y_all_.window(0, {int64_t(n)});
  check(hpuMemcpyRowsAsync(stream, data_of(x_all_), set.features().data(), set.sample_numel() * sizeof(float),
                           rows_.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  check(hpuMemcpyRowsAsync(stream, data_of(y_all_), set.labels().data(), sizeof(int32_t), rows_.data(), n,
                           HPU_MEMCPY_HOST_TO_DEVICE));
  copied_->record(stream);
  return n;
}

void LossReadback::start(const Tensor &loss, hpuComm_t comm, hpuStream_t stream) {
  if (!dev_ || dev_.device() != loss.device()) {
    dev_ = Tensor::empty(loss.device(), HPU_FLOAT32, {});
    ready_ = std::make_unique<Event>();
  }
  check(hpuTensorCopy(stream, dev_.get(), loss.get()));
  void *d = data_of(dev_);
  if (comm) check(hpuAllreduce(stream, comm, d, d, 1, HPU_FLOAT32, HPU_AVG));
  check(hpuMemcpyAsync(stream, host_.get(), d, sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST));
  ready_->record(stream);
}

float LossReadback::wait() {
  if (ready_) ready_->synchronize();
  return *host_;
}

}  // namespace hpu
