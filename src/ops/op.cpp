#include "ops/op.hpp"

#include "core/profiler.hpp"

namespace hpu::ops {

void same_device(const Tensor &x, const char *x_arg, const Tensor &t, const char *t_arg) {
  if (&x.device() != &t.device())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is on device %d but %s is on device %d", t_arg, t.device().ordinal(), x_arg,
         x.device().ordinal());
}

void require_floating(const Tensor &t, const char *arg) {
  if (!is_floating(t.dtype()))
    fail(HPU_ERROR_UNSUPPORTED, "%s is %s: a floating type (f16, bf16, f32, f64) is required", arg, t.str().c_str());
}

void require_index(const Tensor &t, const char *arg) {
  if (t.dtype() != HPU_INT32 && t.dtype() != HPU_INT64)
    fail(HPU_ERROR_UNSUPPORTED, "%s is %s: indices must be i32 or i64", arg, t.str().c_str());
}

void require_ndim(const Tensor &t, const char *arg, int ndim) {
  if (t.ndim() != ndim)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s: expected %d dim%s", arg, t.str().c_str(), ndim, ndim == 1 ? "" : "s");
}

void require_shape(const Tensor &t, const char *arg, const Dims &shape, const char *what) {
  if (t.shape() != shape)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s: expected shape %s (%s)", arg, t.str().c_str(), shape.str().c_str(),
         what);
}

void require_same_dtype(const Tensor &a, const char *a_arg, hpuDataType_t a_run, const Tensor &b,
                        const char *b_arg, hpuDataType_t b_run) {
  if (a_run != b_run)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "%s is %s but %s is %s: the types differ (convert one with hpuCast, or run under autocast)", a_arg,
         a.str().c_str(), b_arg, b.str().c_str());
}

int normalize_dim(int dim, int ndim, const char *arg) {
  int n = std::max(ndim, 1);
  if (dim < -n || dim >= n)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s %d is out of range for %d dim%s (-%d..%d)", arg, dim, ndim,
         ndim == 1 ? "" : "s", n, n - 1);
  return dim < 0 ? dim + n : dim;
}

TensorPtr as(Stream &s, const TensorPtr &x, hpuDataType_t dt) {
  if (x->dtype() == dt && x->contiguous()) return x;
  return copy_as(s, x, dt);
}

bool broadcast_strides(const Dims &shape, const Dims &target, Dims *strides) {
  if (shape.n > target.n) return false;
  Dims st;
  st.n = target.n;
  int64_t step = 1;
  for (int i = target.n - 1, j = shape.n - 1; i >= 0; --i, --j) {
    int64_t size = j >= 0 ? shape[j] : 1;
    if (size != target[i] && size != 1) return false;
    st[i] = size == 1 ? 0 : step;
    step *= size;
  }
  *strides = st;
  return true;
}

Dims pad_left(const Dims &shape, int n) {
  Dims d;
  d.n = n;
  int pad = n - shape.n;
  for (int i = 0; i < n; ++i) d[i] = i < pad ? 1 : shape[i - pad];
  return d;
}

void enqueue(Stream &s, std::function<void()> fn) {
  const char *op = prof::current_api();
  s.enqueue([op, fn = std::move(fn)] {
    try {
      fn();
    } catch (const Error &e) {
      throw Error(e.status(), strf("%s: %s", op ? op : "op", e.what()));
    }
  });
}

uint64_t bytes_of(std::initializer_list<const Tensor *> tensors) {
  uint64_t n = 0;
  for (const Tensor *t : tensors)
    if (t) n += t->nbytes();
  return n;
}

void enqueue(Stream &s, const Work &work, std::function<void()> fn) {
  if (prof::on()) prof::annotate(work.bytes, work.flops);
  try {
    enqueue(s, std::move(fn));
  } catch (...) {
    prof::annotate(0, 0);  // not taken: keep it off the next operation
    throw;
  }
}

TensorPtr copy_as(Stream &s, const TensorPtr &x, hpuDataType_t dt) {
  TensorPtr y = Tensor::empty(x->device(), dt, x->shape());
  if (y->numel() == 0) return y;
  // A conversion: each element read and written once, no arithmetic.
  if (prof::on()) prof::annotate(bytes_of({x.get(), y.get()}), 0);
  try {
    enqueue_copy(s, y, x);
  } catch (...) {
    prof::annotate(0, 0);
    throw;
  }
  return y;
}

bool overlap(const Tensor &a, const Tensor &b) {
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const Tensor &t) {
    int64_t last = 0;
    for (int i = 0; i < t.ndim(); ++i) last += (t.size(i) - 1) * t.strides()[i];
    const char *p = static_cast<const char *>(t.data());
    return std::make_pair(p, p + (last + 1) * static_cast<int64_t>(t.element_size()));
  };
  auto sa = span(a), sb = span(b);
  return sa.first < sb.second && sb.first < sa.second;
}

Split split_at(const Dims &shape, int dim) {
  Split s;
  for (int i = 0; i < shape.n; ++i) (i < dim ? s.outer : i == dim ? s.n : s.inner) *= shape[i];
  return s;
}

}  // namespace hpu::ops
