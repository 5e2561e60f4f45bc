#include "ddp.hpp"

#include "error.hpp"

#include <algorithm>
#include <memory>

namespace hpu {

using detail::fail;

// ---- Comms ----------------------------------------------------------------------

Comms::Comms(const std::vector<hpuDevice_t> &devs, const std::vector<hpuStream_t> &streams)
    : comms_(devs.size(), nullptr), devs_(devs), streams_(streams) {
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

std::vector<uint64_t> Comms::broadcast(std::vector<uint64_t> values) const {
  if (values.empty()) return values;
  std::vector<Tensor> t;
  for (size_t i = 0; i < comms_.size(); ++i) {
    t.push_back(Tensor::from_host(devs_[i], HPU_UINT64, {int64_t(values.size())}, values.data()));
    void *p = nullptr;
    check(hpuTensorGetData(t[i].get(), &p));
    check(hpuBroadcast(streams_[i], comms_[i], p, p, values.size(), HPU_UINT64, 0));
  }
  for (size_t i = 0; i < t.size(); ++i) values = t[i].to_vector<uint64_t>(streams_[i]);
  return values;
}

void Comms::abort() {
  for (hpuComm_t c : comms_) hpuCommAbort(c);
}

// ---- GradSync -------------------------------------------------------------------

namespace {

float *data_of(const Tensor &t) {
  void *p = nullptr;
  check(hpuTensorGetData(t.get(), &p));
  return static_cast<float *>(p);
}

Tensor window(const Tensor &flat, int64_t offset, const std::vector<int64_t> &shape) {
  hpuTensor_t view = nullptr;
  check(hpuTensorWindow(&view, flat.get(), offset, int(shape.size()), shape.data()));
  return Tensor(view);
}

}  // namespace

GradSync::GradSync(hpuComm_t comm, hpuDevice_t dev, hpuStream_t compute, const std::vector<Parameter *> &params,
                   size_t bucket_bytes)
    : comm_(comm), params_(params), offsets_(params.size()), dev_(dev), compute_(compute),
      link_(std::make_shared<GradSync *>(this)) {
  check(hpuCommCount(comm, &ranks_));
  check(hpuCommUserRank(comm, &rank_));
  // Backward produces the last layers' gradients first: lay the parameters out
  // last first, so that each bucket is a contiguous range filled early.
  int64_t offset = 0;
  for (size_t k = params.size(); k-- > 0;) {
    if (buckets_.empty() || size_t(buckets_.back().count) * sizeof(float) >= bucket_bytes)
      buckets_.push_back(Bucket{offset, 0, 0, 0});
    Bucket &b = buckets_.back();
    offsets_[k] = offset;
    const int64_t n = params[k]->value.numel();
    offset += n;
    b.count += n;
    ++b.params;
    if (k == 0 || size_t(b.count) * sizeof(float) >= bucket_bytes) {  // the bucket is complete: pad it
      const int64_t pad = (ranks_ - b.count % ranks_) % ranks_;
      b.count += pad;
      offset += pad;
    }
  }
  flat_ = Tensor::full(dev, HPU_FLOAT32, {offset}, 0.0, compute);
  values_ = Tensor::full(dev, HPU_FLOAT32, {offset}, 0.0, compute);
  base_ = data_of(flat_);
  values_base_ = data_of(values_);
  for (size_t k = 0; k < params.size(); ++k) {
    Parameter &p = *params[k];
    const std::vector<int64_t> shape = p.value.shape();
    Tensor value = window(values_, offsets_[k], shape);
    check(hpuTensorCopy(compute, value.get(), p.value.get()));
    p.value = value;
    p.grad = window(flat_, offsets_[k], shape);
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket &b = buckets_[i];
    Parameter s;
    s.name = "slice" + std::to_string(i);
    s.value = window(values_, slice_offset(b), {slice_count(b)});
    s.grad = window(flat_, slice_offset(b), {slice_count(b)});
    slices_.push_back(std::move(s));
  }
  size_t bucket = buckets_.size();
  for (size_t k = 0; k < params.size(); ++k) {
    while (bucket > 0 && buckets_[bucket - 1].offset > offsets_[k]) --bucket;
    // Once per step per parameter, however often backward adds into it; a
    // no-op once this GradSync is gone (the model may outlive the trainer).
    auto seen = std::make_shared<bool>(false);
    params[k]->on_grad = [link = link_, b = bucket - 1, seen](bool reset) {
      if (!*link) return;
      if (reset) *seen = false;
      else if (!*seen) *seen = true, (*link)->ready(b);
    };
  }
  check(hpuStreamCreate(&stream_, dev));
  for (hpuEvent_t *e : {&grads_done_, &reduced_, &stepped_, &gathered_}) check(hpuEventCreate(e));
}

// The parameters may be gone already (a model destroyed before its trainer).
GradSync::~GradSync() {
  *link_ = nullptr;
  if (stream_) hpuStreamSynchronize(stream_);
  for (hpuEvent_t e : {grads_done_, reduced_, stepped_, gathered_}) hpuEventDestroy(e);
  hpuStreamDestroy(stream_);
}

void GradSync::shard(std::unique_ptr<Optimizer> &opt) {
  std::vector<Parameter *> slices;
  for (Parameter &s : slices_) slices.push_back(&s);
  std::unique_ptr<Optimizer> sharded = opt->with_params(slices);
  sharded_ = sharded != nullptr;
  if (sharded_) opt = std::move(sharded);
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
// the same collectives in the same order.
void GradSync::launch_ready() {
  if (launched_ < buckets_.size() && buckets_[launched_].pending == 0) {
    check(hpuEventRecord(compute_, grads_done_));
    check(hpuStreamWaitEvent(stream_, grads_done_));
  }
  while (launched_ < buckets_.size() && buckets_[launched_].pending == 0) {
    const Bucket &b = buckets_[launched_++];
    float *g = base_ + b.offset;
    if (sharded_)
      check(hpuReduceScatter(stream_, comm_, g, base_ + slice_offset(b), size_t(slice_count(b)), HPU_FLOAT32, HPU_AVG));
    else
      check(hpuAllreduce(stream_, comm_, g, g, size_t(b.count), HPU_FLOAT32, HPU_AVG));
  }
}

void GradSync::wait() {
  if (!armed_) fail(HPU_ERROR_INTERNAL, "GradSync::wait without arm");
  for (Parameter *p : params_) p->materialize_grad(compute_);  // zeros for the gradients that never came
  for (Bucket &b : buckets_) b.pending = 0;
  launch_ready();
  armed_ = false;
  check(hpuEventRecord(stream_, reduced_));
  check(hpuStreamWaitEvent(compute_, reduced_));
}

void GradSync::gather_params() {
  if (!sharded_) return;
  check(hpuEventRecord(compute_, stepped_));
  check(hpuStreamWaitEvent(stream_, stepped_));
  for (const Bucket &b : buckets_)
    check(hpuAllgather(stream_, comm_, values_base_ + slice_offset(b), values_base_ + b.offset, size_t(slice_count(b)),
                       HPU_FLOAT32));
  check(hpuEventRecord(stream_, gathered_));
  check(hpuStreamWaitEvent(compute_, gathered_));
}

namespace {

// "exp_avg/slice3" -> ("exp_avg", 3).
std::pair<std::string, size_t> split_state_name(const std::string &name) {
  const size_t slash = name.rfind('/');
  const std::string prefix = "slice";
  if (slash == std::string::npos || name.compare(slash + 1, prefix.size(), prefix) != 0)
    fail(HPU_ERROR_INTERNAL, "sharded optimizer state %s is not named <kind>/slice<n>", name.c_str());
  return {name.substr(0, slash), size_t(std::stoul(name.substr(slash + 1 + prefix.size())))};
}

}  // namespace

void GradSync::gather_state(Optimizer &opt, std::vector<std::pair<std::string, Tensor>> &out) {
  std::vector<std::pair<std::string, Tensor>> st;
  opt.state(st);
  const int64_t total = flat_.numel();
  std::vector<std::pair<std::string, Tensor>> whole;  // one flat tensor per kind of state
  check(hpuEventRecord(compute_, stepped_));
  check(hpuStreamWaitEvent(stream_, stepped_));
  for (const auto &[name, t] : st) {
    const auto [kind, i] = split_state_name(name);
    auto w = std::find_if(whole.begin(), whole.end(), [&k = kind](const auto &e) { return e.first == k; });
    if (w == whole.end()) w = whole.emplace(w, kind, Tensor::full(dev_, HPU_FLOAT32, {total}, 0.0, stream_));
    const Bucket &b = buckets_.at(i);
    check(hpuMemcpyAsync(stream_, data_of(w->second) + slice_offset(b), data_of(t),
                         size_t(slice_count(b)) * sizeof(float), HPU_MEMCPY_DEVICE_TO_DEVICE));
  }
  for (const auto &[kind, t] : whole) {
    float *base = data_of(t);
    for (const Bucket &b : buckets_)
      check(hpuAllgather(stream_, comm_, base + slice_offset(b), base + b.offset, size_t(slice_count(b)), HPU_FLOAT32));
    for (size_t k = 0; k < params_.size(); ++k)
      out.emplace_back(kind + "/" + params_[k]->name, window(t, offsets_[k], params_[k]->value.shape()));
  }
  check(hpuStreamSynchronize(stream_));
}

void GradSync::scatter_state(Optimizer &opt, const StateSource &find) {
  std::vector<std::pair<std::string, Tensor>> st;
  opt.state(st);
  std::vector<float> slice;
  for (auto &[name, t] : st) {
    const auto [kind, i] = split_state_name(name);
    const Bucket &b = buckets_.at(i);
    const int64_t begin = slice_offset(b), end = begin + slice_count(b);
    slice.assign(size_t(slice_count(b)), 0.0f);
    for (size_t k = 0; k < params_.size(); ++k) {
      const int64_t n = params_[k]->value.numel(), lo = std::max(begin, offsets_[k]), hi = std::min(end, offsets_[k] + n);
      if (lo >= hi) continue;
      const std::string whole = kind + "/" + params_[k]->name;
      const float *src = find(whole, size_t(n));
      if (!src) fail(HPU_ERROR_INVALID_ARGUMENT, "the checkpoint lacks optimizer state %s", whole.c_str());
      std::copy(src + (lo - offsets_[k]), src + (hi - offsets_[k]), slice.begin() + (lo - begin));
    }
    t.copy_from_host(slice.data(), slice.size() * sizeof(float), compute_);
  }
  check(hpuStreamSynchronize(compute_));
}

}  // namespace hpu
