#include "ddp.hpp"

#include "error.hpp"

#include <memory>

namespace hpu {

using detail::fail;

// ---- Comms ----------------------------------------------------------------------

Comms::Comms(const std::vector<hpuDevice_t> &devs) : comms_(devs.size(), nullptr) {
  check(hpuCommInitFromEnv(comms_.data(), int(devs.size()), devs.data()));
}

Comms::~Comms() {
  for (hpuComm_t c : comms_) hpuCommDestroy(c);
}

int Comms::rank(size_t i) const {
  int r = 0;
  check(hpuCommUserRank(comms_[i], &r));
  return r;
}

int Comms::size() const {
  int n = 0;
  check(hpuCommCount(comms_[0], &n));
  return n;
}

void Comms::abort() {
  for (hpuComm_t c : comms_) hpuCommAbort(c);
}

// ---- GradSync -------------------------------------------------------------------

GradSync::GradSync(hpuComm_t comm, hpuDevice_t dev, hpuStream_t compute, const std::vector<Parameter *> &params,
                   size_t bucket_bytes)
    : comm_(comm), compute_(compute), link_(std::make_shared<GradSync *>(this)) {
  int64_t total = 0;
  for (Parameter *p : params) total += p->value.numel();
  flat_ = Tensor::full(dev, HPU_FLOAT32, {total}, 0.0, compute);
  void *base = nullptr;
  check(hpuTensorGetData(flat_.get(), &base));
  base_ = static_cast<float *>(base);
  // Backward produces the last layers' gradients first: lay the parameters out
  // last first, so that each bucket is a contiguous range filled early.
  int64_t offset = 0;
  for (size_t k = params.size(); k-- > 0;) {
    Parameter &p = *params[k];
    if (buckets_.empty() || size_t(buckets_.back().count) * sizeof(float) >= bucket_bytes)
      buckets_.push_back(Bucket{offset, 0, 0, 0});
    Bucket &b = buckets_.back();
    const std::vector<int64_t> shape = p.value.shape();
    hpuTensor_t view = nullptr;
    check(hpuTensorWindow(&view, flat_.get(), offset, int(shape.size()), shape.data()));
    p.grad = Tensor(view);
    const int64_t n = p.value.numel();
    offset += n;
    b.count += n;
    ++b.params;
    const size_t bucket = buckets_.size() - 1;
    // Once per step per parameter, however often backward adds into it; a
    // no-op once this GradSync is gone (the model may outlive the trainer).
    auto seen = std::make_shared<bool>(false);
    p.on_grad = [link = link_, bucket, seen](bool reset) {
      if (!*link) return;
      if (reset) *seen = false;
      else if (!*seen) *seen = true, (*link)->ready(bucket);
    };
  }
  check(hpuStreamCreate(&stream_, dev));
  check(hpuEventCreate(&grads_done_));
  check(hpuEventCreate(&reduced_));
  params_ = params;
}

// The parameters may be gone already (a model destroyed before its trainer).
GradSync::~GradSync() {
  *link_ = nullptr;
  if (stream_) hpuStreamSynchronize(stream_);
  hpuEventDestroy(grads_done_);
  hpuEventDestroy(reduced_);
  hpuStreamDestroy(stream_);
}

void GradSync::arm() {
  for (Parameter *p : params_) p->on_grad(true);
  for (Bucket &b : buckets_) b.pending = b.params;
  launched_ = 0;
  armed_ = true;
}

void GradSync::ready(size_t bucket) {
  if (!armed_) return;
  if (--buckets_[bucket].pending == 0) launch_ready();
}

// Starts the complete buckets that follow the started ones: every rank starts
// the same allreduces in the same order.
void GradSync::launch_ready() {
  if (launched_ < buckets_.size() && buckets_[launched_].pending == 0) {
    check(hpuEventRecord(grads_done_, compute_));
    check(hpuStreamWaitEvent(stream_, grads_done_));
  }
  while (launched_ < buckets_.size() && buckets_[launched_].pending == 0) {
    const Bucket &b = buckets_[launched_++];
    check(hpuAllreduce(base_ + b.offset, base_ + b.offset, size_t(b.count), HPU_FLOAT32, HPU_AVG, comm_, stream_));
  }
}

void GradSync::wait() {
  if (!armed_) fail(HPU_ERROR_INTERNAL, "GradSync::wait without arm");
  for (Parameter *p : params_) p->materialize_grad(compute_);  // zeros for the gradients that never came
  for (Bucket &b : buckets_) b.pending = 0;
  launch_ready();
  armed_ = false;
  check(hpuEventRecord(reduced_, stream_));
  check(hpuStreamWaitEvent(compute_, reduced_));
}

}  // namespace hpu
