#include "tensor/tensor.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/registry.hpp"
#include "kernels/cast.hpp"

#include <mutex>
#include <unordered_map>

namespace hpu {

// ---- Dims -----------------------------------------------------------------------

Dims::Dims(std::initializer_list<int64_t> list) {
  if (list.size() > kMaxDims) fail(HPU_ERROR_INVALID_ARGUMENT, "%zu dims; at most %d", list.size(), kMaxDims);
  for (int64_t x : list) v[n++] = x;
}

Dims Dims::shape(int ndim, const int64_t *sizes, const char *arg) {
  HPU_CHECK_ARG(ndim >= 0 && ndim <= kMaxDims, "ndim %d is out of range (0..%d)", ndim, kMaxDims);
  HPU_CHECK_ARG(ndim == 0 || sizes != nullptr, "%s is NULL with ndim %d", arg, ndim);
  Dims d;
  d.n = ndim;
  for (int i = 0; i < ndim; ++i) {
    HPU_CHECK_ARG(sizes[i] >= 0, "%s[%d] is %lld; sizes must be >= 0", arg, i, static_cast<long long>(sizes[i]));
    d.v[i] = sizes[i];
  }
  HPU_CHECK_ARG(d.within_limit(), "%s %s is too large: its sizes (0 counted as 1) multiply past 2^60", arg,
                d.str().c_str());
  return d;
}

bool Dims::within_limit() const {
  int64_t product = 1;
  for (int i = 0; i < n; ++i)
    if (__builtin_mul_overflow(product, std::max<int64_t>(v[i], 1), &product) || product > kMaxElements) return false;
  return true;
}

int64_t Dims::numel() const {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= v[i];
  return p;
}

std::string Dims::str() const {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += strf(i ? ", %lld" : "%lld", static_cast<long long>(v[i]));
  return s + "]";
}

bool Dims::operator==(const Dims &o) const {
  if (n != o.n) return false;
  for (int i = 0; i < n; ++i)
    if (v[i] != o.v[i]) return false;
  return true;
}

Dims Dims::contiguous_strides() const {
  Dims s;
  s.n = n;
  int64_t step = 1;
  for (int i = n - 1; i >= 0; --i) {
    s.v[i] = step;
    step *= std::max<int64_t>(v[i], 1);
  }
  return s;
}

int furthest_element(const Dims &shape, const Dims &strides, int64_t max, int64_t *last) {
  int64_t sum = 0;
  for (int i = 0; i < shape.n; ++i) {
    if (shape[i] == 0) continue;
    int64_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) || __builtin_add_overflow(sum, reach, &sum) ||
        sum > max)
      return i;
  }
  *last = sum;
  return -1;
}

// ---- Storage and Tensor ------------------------------------------------------------

Storage::~Storage() {
  if (release) {
    release();
    device.import_released();
  }
  if (!owned || !data) return;
  try {
    device.free(data);
  } catch (const Error &e) {
    HPU_LOG(error, "tensor", "freeing tensor memory %p: %s", data, e.what());
  }
}

void Storage::adopt(std::function<void()> done) {
  device.import_added();
  release = std::move(done);
}

std::shared_ptr<Tensor> Tensor::empty(Device &dev, hpuDataType_t dtype, const Dims &shape) {
  HPU_CHECK_ARG(shape.within_limit(), "a result of shape %s would be too large: its sizes (0 counted as 1) multiply "
                "past 2^60", shape.str().c_str());
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  void *p = bytes ? dev.allocate(bytes) : nullptr;
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<Storage>(dev, p, bytes, true);
  } catch (...) {
    if (p) dev.free(p);
    throw;
  }
  return std::make_shared<Tensor>(std::move(storage), dtype, shape, shape.contiguous_strides(), 0);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, hpuDataType_t dtype, const Dims &shape, const Dims &strides,
               int64_t offset)
    : storage_(std::move(storage)), dtype_(dtype), shape_(shape), strides_(strides), offset_(offset),
      numel_(shape.numel()) {}

std::shared_ptr<Tensor> Tensor::view(const Dims &shape, const Dims &strides, int64_t offset) const {
  // Each entry point checks its arguments; this makes sure that no view
  // reaches outside the memory of its base, whatever an entry point missed.
  const int64_t room = static_cast<int64_t>(storage_->bytes / element_size());
  int64_t last = 0;
  if (offset < 0 || offset > room ||
      (shape.numel() > 0 && furthest_element(shape, strides, room - offset - 1, &last) >= 0))
    fail(HPU_ERROR_INTERNAL, "a view of shape %s, strides %s at element %lld reaches outside its base's %lld elements",
         shape.str().c_str(), strides.str().c_str(), static_cast<long long>(offset), static_cast<long long>(room));
  return std::make_shared<Tensor>(storage_, dtype_, shape, strides, offset);
}

bool Tensor::contiguous() const {
  if (numel_ == 0) return true;
  int64_t step = 1;
  for (int i = shape_.n - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != step) return false;
    step *= shape_[i];
  }
  return true;
}

void *Tensor::data() const {
  if (numel_ == 0 || !storage_->data) return nullptr;
  return static_cast<char *>(storage_->data) + offset_ * static_cast<int64_t>(element_size());
}

std::string Tensor::str() const { return std::string(dtype_name(dtype_)) + shape_.str(); }

// ---- handles ---------------------------------------------------------------------

namespace {

Registry<Tensor> &registry() {
  static auto *r = new Registry<Tensor>(HandleKind::tensor, "tensor");  // never destroyed
  return *r;
}

// References a handle holds beyond its first (hpuTensorRetain); most handles
// have none, so they live here rather than in every registry slot. The lock
// also makes a release's count-then-remove one step against a retain.
struct ExtraRefs {
  std::mutex mu;
  std::unordered_map<hpuTensor_t, int64_t> count;
};

ExtraRefs &extra_refs() {
  static auto *r = new ExtraRefs;  // never destroyed
  return *r;
}

[[noreturn]] void not_live(hpuTensor_t t, const char *arg) {
  fail(HPU_ERROR_INVALID_HANDLE, "%s %p is not a live tensor handle (released, foreign or of another kind)", arg,
       static_cast<void *>(t));
}

}  // namespace

void retain_tensor_handle(hpuTensor_t t) {
  if (t == nullptr) fail(HPU_ERROR_INVALID_HANDLE, "tensor is NULL");
  ExtraRefs &r = extra_refs();
  std::lock_guard<std::mutex> lock(r.mu);
  try {
    registry().get(t);
  } catch (const Error &) {
    not_live(t, "tensor");
  }
  ++r.count[t];
}

hpuTensor_t tensor_handle(std::shared_ptr<Tensor> t) {
  Allocator &a = t->device().allocator();
  const uintptr_t wrapped = t->storage()->wrapped;
  if (wrapped) a.pin(wrapped);
  try {
    return reinterpret_cast<hpuTensor_t>(registry().add(std::move(t)));
  } catch (...) {
    if (wrapped) a.unpin(wrapped);
    throw;
  }
}

std::shared_ptr<Tensor> tensor_from_handle(hpuTensor_t t, const char *arg) {
  if (t == nullptr) fail(HPU_ERROR_INVALID_HANDLE, "%s is NULL", arg);
  try {
    return registry().get(t);
  } catch (const Error &) {
    not_live(t, arg);
  }
}

void release_tensor_handle(hpuTensor_t t) {
  if (t == nullptr) return;
  ExtraRefs &r = extra_refs();
  std::shared_ptr<Tensor> last;  // destroyed after the lock is let go
  std::lock_guard<std::mutex> lock(r.mu);
  try {
    auto it = r.count.find(t);
    if (it == r.count.end()) {
      last = registry().remove(t);
      const Storage &s = *last->storage();
      if (s.wrapped) s.device.allocator().unpin(s.wrapped);
    } else {
      registry().get(t);
      if (--it->second == 0) r.count.erase(it);
    }
  } catch (const Error &) {
    not_live(t, "tensor");
  }
}

void check_dtype(int dt, const char *arg) {
  HPU_CHECK_ARG(kernels::dtype_valid(dt), "%s %d is not an hpuDataType_t (0..%d)", arg, dt, HPU_NUM_DATA_TYPES - 1);
}

std::shared_ptr<Stream> stream_for(hpuStream_t stream, const Tensor &t) {
  std::shared_ptr<Stream> s = stream_from_handle(stream, &t.device());
  if (&s->device() != &t.device())
    fail(HPU_ERROR_INVALID_ARGUMENT, "stream %p belongs to device %d, the tensor to device %d",
         static_cast<void *>(stream), s->device().ordinal(), t.device().ordinal());
  return s;
}

// ---- copies ----------------------------------------------------------------------

void enqueue_copy(Stream &s, const std::shared_ptr<Tensor> &dst, const std::shared_ptr<Tensor> &src) {
  if (dst->shape() != src->shape())
    fail(HPU_ERROR_INVALID_ARGUMENT, "dst is %s but src is %s; shapes must match", dst->str().c_str(),
         src->str().c_str());
  if (dst->numel() == 0) return;
  s.enqueue([dst, src] {
    if (dst->contiguous() && src->contiguous())
      kernels::cast(src->data(), src->dtype(), dst->data(), dst->dtype(), static_cast<size_t>(dst->numel()));
    else
      kernels::copy_strided(src->data(), src->dtype(), src->strides().data(), dst->data(), dst->dtype(),
                            dst->strides().data(), dst->ndim(), dst->shape().data());
  });
}

std::shared_ptr<Tensor> contiguous(Stream &s, const std::shared_ptr<Tensor> &t) {
  if (t->contiguous()) return t;
  auto out = Tensor::empty(t->device(), t->dtype(), t->shape());
  enqueue_copy(s, out, t);
  return out;
}

}  // namespace hpu
