// Tensors and the random generator at the C boundary.
#include <cmath>
#include <cstring>
#include <limits>

#include "api/api.hpp"
#include "device/device.hpp"
#include "kernels/cast.hpp"
#include "kernels/random.hpp"
#include "tensor/random.hpp"
#include "tensor/tensor.hpp"

using namespace hpu;

namespace {

// Checks bytes against the tensor's size for a host copy.
void check_host_copy(const Tensor &t, const void *host, const char *host_arg, size_t bytes) {
  HPU_CHECK_ARG(host != nullptr || bytes == 0, "%s is NULL", host_arg);
  HPU_CHECK_ARG(bytes == t.nbytes(), "bytes %zu does not match the tensor %s (%zu bytes)", bytes, t.str().c_str(),
                t.nbytes());
}

// Queues a host <-> tensor copy on s: host memory is dense row-major.
void enqueue_host_copy(Stream &s, const std::shared_ptr<Tensor> &t, void *dst, const void *src, bool to_host) {
  if (t->numel() == 0) return;
  s.enqueue([t, dst, src, to_host] {
    if (t->contiguous()) {
      std::memcpy(dst, src, t->nbytes());
      return;
    }
    Dims dense = t->shape().contiguous_strides();
    if (to_host)
      kernels::copy_strided(src, t->dtype(), t->strides().data(), dst, t->dtype(), dense.data(), t->ndim(),
                            t->shape().data());
    else
      kernels::copy_strided(src, t->dtype(), dense.data(), dst, t->dtype(), t->strides().data(), t->ndim(),
                            t->shape().data());
  });
}

// Queues fn(dense buffer) writing every element of t: directly when t is
// contiguous, else into a temporary that is then copied into t's layout.
template <class Fn>
void enqueue_dense_write(Stream &s, const std::shared_ptr<Tensor> &t, Fn fn) {
  if (t->numel() == 0) return;
  if (t->contiguous()) {
    s.enqueue([t, fn] { fn(t->data()); });
    return;
  }
  auto tmp = Tensor::empty(t->device(), t->dtype(), t->shape());
  s.enqueue([tmp, fn] { fn(tmp->data()); });
  enqueue_copy(s, t, tmp);
}

int normalise_dim(int dim, int ndim, const char *arg) {
  HPU_CHECK_ARG(dim >= -ndim && dim < ndim, "%s %d is out of range for %d dims (%d..%d)", arg, dim, ndim, -ndim,
                ndim - 1);
  return dim < 0 ? dim + ndim : dim;
}

std::shared_ptr<Tensor> contiguous_base(hpuTensor_t base) {
  auto b = tensor_from_handle(base, "base");
  if (!b->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "base %s with strides %s is not contiguous; copy it first (hpuTensorCopy)",
         b->str().c_str(), b->strides().str().c_str());
  return b;
}

// Checks that a fill value can be stored in dt.
void check_fill_value(hpuDataType_t dt, double value) {
  if (is_floating(dt) || dt == HPU_BOOL) return;
  HPU_CHECK_ARG(std::isfinite(value) && value == std::trunc(value), "value %g is not an integer, as %s requires",
                value, dtype_name(dt));
  double lo = 0, hi = 0;
  kernels::dispatch(dt, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_integral_v<T>) {
      lo = static_cast<double>(std::numeric_limits<T>::min());
      hi = static_cast<double>(std::numeric_limits<T>::max());
    }
  });
  HPU_CHECK_ARG(value >= lo && value <= hi, "value %g is out of range for %s (%g..%g)", value, dtype_name(dt), lo, hi);
}

std::shared_ptr<Tensor> floating_tensor(hpuTensor_t tensor) {
  auto t = tensor_from_handle(tensor, "tensor");
  if (!is_floating(t->dtype()))
    fail(HPU_ERROR_UNSUPPORTED, "tensor is %s; random fills take f16, bf16, f32 or f64", t->str().c_str());
  return t;
}

// The shape of each single-value getter: look the tensor up, check the
// out-pointer (named out_arg), store get(tensor).
template <class T, class Get>
void get_property(hpuTensor_t tensor, T *out, const char *out_arg, Get get) {
  auto t = tensor_from_handle(tensor, "tensor");
  HPU_CHECK_ARG(out != nullptr, "%s is NULL", out_arg);
  *out = get(*t);
}

}  // namespace

extern "C" {

// ---- life --------------------------------------------------------------------------

HPU_API hpuStatus_t hpuTensorCreate(hpuTensor_t *tensor, hpuDevice_t dev, hpuDataType_t dtype, int ndim,
                                    const int64_t *shape) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(tensor != nullptr, "tensor is NULL");
  Device &d = device_from_handle(dev);
  check_dtype(dtype, "dtype");
  Dims sh = Dims::shape(ndim, shape, "shape");
  *tensor = tensor_handle(Tensor::empty(d, dtype, sh));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorCreateFromHost(hpuTensor_t *tensor, hpuDevice_t dev, hpuDataType_t dtype, int ndim,
                                            const int64_t *shape, const void *data) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(tensor != nullptr, "tensor is NULL");
  Device &d = device_from_handle(dev);
  check_dtype(dtype, "dtype");
  Dims sh = Dims::shape(ndim, shape, "shape");
  HPU_CHECK_ARG(data != nullptr || sh.numel() == 0, "data is NULL");
  auto t = Tensor::empty(d, dtype, sh);
  auto s = d.default_stream();
  enqueue_host_copy(*s, t, t->data(), data, false);
  s->synchronize();
  *tensor = tensor_handle(t);
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorWrap(hpuTensor_t *tensor, void *data, hpuDataType_t dtype, int ndim,
                                  const int64_t *shape, const int64_t *strides) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(tensor != nullptr, "tensor is NULL");
  HPU_CHECK_ARG(data != nullptr, "data is NULL");
  check_dtype(dtype, "dtype");
  Dims sh = Dims::shape(ndim, shape, "shape");
  Dims st = sh.contiguous_strides();
  if (strides) {
    for (int i = 0; i < ndim; ++i) {
      HPU_CHECK_ARG(strides[i] >= 0, "strides[%d] is %lld; strides must be >= 0", i,
                    static_cast<long long>(strides[i]));
      st[i] = strides[i];
    }
  }
  const size_t es = dtype_size(dtype);
  HPU_CHECK_ARG(reinterpret_cast<uintptr_t>(data) % es == 0, "data %p is not aligned to the %zu-byte %s elements",
                data, es, dtype_name(dtype));
  // Bytes from data to the end of the last element (strides are >= 0, so data
  // is the lowest byte): an element past INT64_MAX bytes is out of any memory.
  int64_t last = 0;
  int bad = furthest_element(sh, st, std::numeric_limits<int64_t>::max() / static_cast<int64_t>(es) - 1, &last);
  if (bad >= 0)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "strides[%d] %lld puts element %lld of dim %d (shape %s, strides %s) more than 8 EiB past data %p", bad,
         static_cast<long long>(st[bad]), static_cast<long long>(sh[bad] - 1), bad, sh.str().c_str(),
         st.str().c_str(), data);
  size_t extent = sh.numel() == 0 ? 0 : (static_cast<size_t>(last) + 1) * es;
  // Pinned from the check until the handle pins it too: no free comes between.
  DeviceMemory m = device_memory(data, std::max<size_t>(extent, 1), "data", true);
  struct Unpin {
    DeviceMemory m;
    ~Unpin() { m.device->allocator().unpin(m.base); }
  } unpin{m};
  auto storage = std::make_shared<Storage>(*m.device, data, extent, false);
  storage->wrapped = m.base;
  *tensor = tensor_handle(std::make_shared<Tensor>(std::move(storage), dtype, sh, st, 0));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorRelease(hpuTensor_t tensor) {
  HPU_API_BEGIN
  release_tensor_handle(tensor);
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorRetain(hpuTensor_t tensor) {
  HPU_API_BEGIN
  retain_tensor_handle(tensor);
  HPU_API_END
}

// ---- data ----------------------------------------------------------------------------

HPU_API hpuStatus_t hpuTensorCopyFromHost(hpuStream_t stream, hpuTensor_t tensor, const void *src, size_t bytes) {
  HPU_API_BEGIN
  auto t = tensor_from_handle(tensor, "tensor");
  check_host_copy(*t, src, "src", bytes);
  auto s = stream_for(stream, *t);
  enqueue_host_copy(*s, t, t->data(), src, false);
  s->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorCopyToHost(hpuStream_t stream, hpuTensor_t tensor, void *dst, size_t bytes) {
  HPU_API_BEGIN
  auto t = tensor_from_handle(tensor, "tensor");
  check_host_copy(*t, dst, "dst", bytes);
  auto s = stream_for(stream, *t);
  enqueue_host_copy(*s, t, dst, t->data(), true);
  s->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorCopy(hpuStream_t stream, hpuTensor_t dst, hpuTensor_t src) {
  HPU_API_BEGIN
  auto d = tensor_from_handle(dst, "dst");
  auto s = tensor_from_handle(src, "src");
  auto st = stream_from_handle(stream, &d->device());
  if (&st->device() != &d->device() && &st->device() != &s->device())
    fail(HPU_ERROR_INVALID_ARGUMENT, "stream %p belongs to device %d; dst is on device %d, src on device %d",
         static_cast<void *>(stream), st->device().ordinal(), d->device().ordinal(), s->device().ordinal());
  enqueue_copy(*st, d, s);
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorFill(hpuStream_t stream, hpuTensor_t tensor, double value) {
  HPU_API_BEGIN
  auto t = tensor_from_handle(tensor, "tensor");
  check_fill_value(t->dtype(), value);
  auto s = stream_for(stream, *t);
  const hpuDataType_t dt = t->dtype();
  const size_t n = static_cast<size_t>(t->numel());
  enqueue_dense_write(*s, t, [dt, n, value](void *p) { kernels::fill(p, dt, n, value); });
  HPU_API_END
}

// ---- views -------------------------------------------------------------------------------

HPU_API hpuStatus_t hpuTensorReshape(hpuTensor_t *view, hpuTensor_t base, int ndim, const int64_t *shape) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(view != nullptr, "view is NULL");
  auto b = contiguous_base(base);
  HPU_CHECK_ARG(ndim >= 0 && ndim <= kMaxDims, "ndim %d is out of range (0..%d)", ndim, kMaxDims);
  HPU_CHECK_ARG(ndim == 0 || shape != nullptr, "shape is NULL with ndim %d", ndim);
  int64_t sizes[kMaxDims];
  int infer = -1;
  for (int i = 0; i < ndim; ++i) {
    sizes[i] = shape[i];
    if (shape[i] == -1) {
      HPU_CHECK_ARG(infer < 0, "shape[%d] and shape[%d] are both -1; at most one size is inferred", infer, i);
      infer = i;
      sizes[i] = 1;  // for now: Dims::shape checks the product of the others
    } else {
      HPU_CHECK_ARG(shape[i] >= 0, "shape[%d] is %lld; sizes must be >= 0 (or one -1)", i,
                    static_cast<long long>(shape[i]));
    }
  }
  Dims sh = Dims::shape(ndim, sizes, infer >= 0 ? "shape (its -1 taken as 1)" : "shape");
  if (infer >= 0) {
    const int64_t known = sh.numel();
    HPU_CHECK_ARG(known != 0 && b->numel() % known == 0, "shape[%d] = -1 cannot be inferred: %lld elements into %lld",
                  infer, static_cast<long long>(b->numel()), static_cast<long long>(known));
    sh[infer] = b->numel() / known;
  }
  HPU_CHECK_ARG(sh.numel() == b->numel(), "shape %s has %lld elements but base %s has %lld", sh.str().c_str(),
                static_cast<long long>(sh.numel()), b->str().c_str(), static_cast<long long>(b->numel()));
  *view = tensor_handle(b->view(sh, sh.contiguous_strides(), b->offset()));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorSlice(hpuTensor_t *view, hpuTensor_t base, int dim, int64_t start, int64_t end,
                                   int64_t step) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(view != nullptr, "view is NULL");
  auto b = tensor_from_handle(base, "base");
  HPU_CHECK_ARG(b->ndim() > 0, "base %s has no dims to slice", b->str().c_str());
  int d = normalise_dim(dim, b->ndim(), "dim");
  int64_t size = b->size(d);
  HPU_CHECK_ARG(start >= 0 && start <= size, "start %lld is out of range for dim %d of size %lld",
                static_cast<long long>(start), d, static_cast<long long>(size));
  HPU_CHECK_ARG(end >= start && end <= size, "end %lld is out of range (start %lld .. size %lld)",
                static_cast<long long>(end), static_cast<long long>(start), static_cast<long long>(size));
  HPU_CHECK_ARG(step >= 1, "step %lld must be >= 1", static_cast<long long>(step));
  // Every quantity below stays inside the base's span, so nothing overflows:
  // (n - 1) x step < size, and an element's offset is one of the base's.
  const int64_t n = end == start ? 0 : (end - start - 1) / step + 1;
  Dims sh = b->shape(), st = b->strides();
  sh[d] = n;
  // A dim of one element is never stepped along: it keeps the base's stride
  // (stride x step may not fit).
  if (n > 1) st[d] *= step;
  // An empty view reads nothing; it stays at the base's offset (start x
  // stride may not fit when start is the size).
  int64_t offset = b->offset();
  if (sh.numel() > 0) offset += start * b->strides()[d];
  *view = tensor_handle(b->view(sh, st, offset));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorTranspose(hpuTensor_t *view, hpuTensor_t base, int dim0, int dim1) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(view != nullptr, "view is NULL");
  auto b = tensor_from_handle(base, "base");
  int d0 = normalise_dim(dim0, b->ndim(), "dim0"), d1 = normalise_dim(dim1, b->ndim(), "dim1");
  Dims sh = b->shape(), st = b->strides();
  std::swap(sh[d0], sh[d1]);
  std::swap(st[d0], st[d1]);
  *view = tensor_handle(b->view(sh, st, b->offset()));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorWindow(hpuTensor_t *view, hpuTensor_t base, int64_t offset, int ndim,
                                    const int64_t *shape) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(view != nullptr, "view is NULL");
  auto b = contiguous_base(base);
  Dims sh = Dims::shape(ndim, shape, "shape");
  HPU_CHECK_ARG(offset >= 0 && offset <= b->numel(), "offset %lld is out of range for base %s (0..%lld)",
                static_cast<long long>(offset), b->str().c_str(), static_cast<long long>(b->numel()));
  HPU_CHECK_ARG(sh.numel() <= b->numel() - offset,
                "shape %s (%lld elements) at offset %lld runs past the end of base %s (%lld elements)",
                sh.str().c_str(), static_cast<long long>(sh.numel()), static_cast<long long>(offset),
                b->str().c_str(), static_cast<long long>(b->numel()));
  *view = tensor_handle(b->view(sh, sh.contiguous_strides(), b->offset() + offset));
  HPU_API_END
}

// ---- introspection -------------------------------------------------------------------------

HPU_API hpuStatus_t hpuTensorGetDtype(hpuTensor_t tensor, hpuDataType_t *dtype) {
  HPU_API_BEGIN
  get_property(tensor, dtype, "dtype", [](const Tensor &t) { return t.dtype(); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetShape(hpuTensor_t tensor, int *ndim, int64_t *shape) {
  HPU_API_BEGIN
  auto t = tensor_from_handle(tensor, "tensor");
  HPU_CHECK_ARG(ndim != nullptr, "ndim is NULL");
  if (shape) std::memcpy(shape, t->shape().data(), sizeof(int64_t) * static_cast<size_t>(t->ndim()));
  *ndim = t->ndim();
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetStrides(hpuTensor_t tensor, int64_t *strides) {
  HPU_API_BEGIN
  auto t = tensor_from_handle(tensor, "tensor");
  HPU_CHECK_ARG(strides != nullptr, "strides is NULL");
  std::memcpy(strides, t->strides().data(), sizeof(int64_t) * static_cast<size_t>(t->ndim()));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetNumel(hpuTensor_t tensor, int64_t *numel) {
  HPU_API_BEGIN
  get_property(tensor, numel, "numel", [](const Tensor &t) { return t.numel(); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetElementSize(hpuTensor_t tensor, size_t *size) {
  HPU_API_BEGIN
  get_property(tensor, size, "size", [](const Tensor &t) { return t.element_size(); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetDevice(hpuTensor_t tensor, hpuDevice_t *dev) {
  HPU_API_BEGIN
  get_property(tensor, dev, "dev", [](const Tensor &t) { return t.device().handle(); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorGetData(hpuTensor_t tensor, void **data) {
  HPU_API_BEGIN
  get_property(tensor, data, "data", [](const Tensor &t) { return t.data(); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorIsContiguous(hpuTensor_t tensor, int *contiguous) {
  HPU_API_BEGIN
  get_property(tensor, contiguous, "contiguous", [](const Tensor &t) { return t.contiguous() ? 1 : 0; });
  HPU_API_END
}

// ---- random numbers ------------------------------------------------------------------------

HPU_API hpuStatus_t hpuRandomSeed(hpuDevice_t dev, uint64_t seed) {
  HPU_API_BEGIN
  random_set_state(device_from_handle(dev), RandomKey{seed, 0});
  HPU_API_END
}

HPU_API hpuStatus_t hpuRandomGetState(hpuDevice_t dev, hpuRandomState_t *state) {
  HPU_API_BEGIN
  RandomKey k = random_state(device_from_handle(dev));
  hpuRandomState_t out = HPU_RANDOM_STATE_INIT;
  out.seed = k.seed;
  out.offset = k.offset;
  api::copy_sized(state, out, "state");
  HPU_API_END
}

HPU_API hpuStatus_t hpuRandomSetState(hpuDevice_t dev, const hpuRandomState_t *state) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  HPU_CHECK_ARG(state != nullptr, "state is NULL");
  HPU_CHECK_ARG(state->struct_size >= sizeof(hpuRandomState_t) && state->struct_size <= (size_t(1) << 16),
                "state->struct_size is %zu; set it with HPU_RANDOM_STATE_INIT (%zu)", state->struct_size,
                sizeof(hpuRandomState_t));
  random_set_state(d, RandomKey{state->seed, state->offset});
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorFillUniform(hpuStream_t stream, hpuTensor_t tensor, double low, double high) {
  HPU_API_BEGIN
  auto t = floating_tensor(tensor);
  HPU_CHECK_ARG(std::isfinite(low) && std::isfinite(high) && low < high,
                "[low, high) = [%g, %g) is not a finite, non-empty range", low, high);
  auto s = stream_for(stream, *t);
  const hpuDataType_t dt = t->dtype();
  const size_t n = static_cast<size_t>(t->numel());
  RandomKey key = random_reserve(t->device(), n);
  enqueue_dense_write(*s, t, [=](void *p) { kernels::fill_uniform(p, dt, n, key.seed, key.offset, low, high); });
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorFillNormal(hpuStream_t stream, hpuTensor_t tensor, double mean, double std) {
  HPU_API_BEGIN
  auto t = floating_tensor(tensor);
  HPU_CHECK_ARG(std::isfinite(mean), "mean %g is not finite", mean);
  HPU_CHECK_ARG(std::isfinite(std) && std >= 0, "std %g must be finite and >= 0", std);
  auto s = stream_for(stream, *t);
  const hpuDataType_t dt = t->dtype();
  const size_t n = static_cast<size_t>(t->numel());
  RandomKey key = random_reserve(t->device(), n);
  enqueue_dense_write(*s, t, [=](void *p) { kernels::fill_normal(p, dt, n, key.seed, key.offset, mean, std); });
  HPU_API_END
}

}  // extern "C"
