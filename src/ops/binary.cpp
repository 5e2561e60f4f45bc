// Broadcasting binary ops (add, sub, mul, div) with their backwards, and the
// in-place accumulate and scale used for gradients.
#include <vector>

#include "kernels/elementwise.hpp"
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

// The type two run types combine to: the wider float, a float over an
// integer, an integer with itself; int / int divides in f32 (true division).
hpuDataType_t combine(Binary op, const Tensor &a, hpuDataType_t ta, const Tensor &b, hpuDataType_t tb) {
  bool fa = is_floating(ta), fb = is_floating(tb);
  hpuDataType_t t;
  if (fa && fb)
    t = autocast::wider(ta, tb);
  else if (fa || fb)
    t = fa ? ta : tb;
  else if (ta == tb)
    t = op == Binary::div ? HPU_FLOAT32 : ta;
  else
    fail(HPU_ERROR_UNSUPPORTED, "a is %s and b is %s: mixed integer types (convert one with hpuCast)",
         a.str().c_str(), b.str().c_str());
  if (!kernels::binary_supports(op, t))
    fail(HPU_ERROR_UNSUPPORTED, "a is %s and b is %s: %s does not support %s", a.str().c_str(), b.str().c_str(),
         kernels::binary_name(op), dtype_name(t));
  return t;
}

Dims broadcast_shape(const Tensor &a, const Tensor &b) {
  Dims out;
  out.n = std::max(a.ndim(), b.ndim());
  for (int i = 0; i < out.n; ++i) {
    int ia = a.ndim() - out.n + i, ib = b.ndim() - out.n + i;
    int64_t sa = ia >= 0 ? a.size(ia) : 1, sb = ib >= 0 ? b.size(ib) : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(HPU_ERROR_INVALID_ARGUMENT, "a is %s and b is %s: the shapes do not broadcast (dim %d: %lld vs %lld)",
           a.str().c_str(), b.str().c_str(), i, static_cast<long long>(sa), static_cast<long long>(sb));
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

struct Operands {
  TensorPtr a, b;
  Dims shape, sa, sb;  // result shape; a's and b's broadcast strides over it
  std::shared_ptr<Stream> s;
};

Operands operands(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b) {
  Operands o;
  o.a = a;
  o.b = b;
  same_device(*a, "a", *b, "b");
  o.shape = broadcast_shape(*a, *b);
  broadcast_strides(a->shape(), o.shape, &o.sa);
  broadcast_strides(b->shape(), o.shape, &o.sb);
  o.s = stream_for(stream, *a);
  return o;
}

// grad = sum of g over the dims x broadcast, times scale, in x's type.
TensorPtr reduce_to(Stream &s, const TensorPtr &g, const Dims &shape, const TensorPtr &x, double scale) {
  TensorPtr r = empty_like(*x, x->dtype(), x->shape());
  Dims to = pad_left(x->shape(), shape.n);
  if (r->numel() > 0)
    enqueue(s, work({g.get(), r.get()}, *g), [=] { kernels::sum_to(g->dtype(), g->data(), shape.n, shape.data(), to.data(), scale, r->dtype(), r->data()); });
  return r;
}

// t = a op b over the broadcast shape (dense), queued on s.
TensorPtr apply(Stream &s, Binary op, const TensorPtr &a, const Dims &sa, const TensorPtr &b, const Dims &sb,
                const Dims &shape) {
  TensorPtr t = empty_like(*a, a->dtype(), shape);
  if (t->numel() > 0)
    enqueue(s, work({a.get(), b.get(), t.get()}, *t), [=] {
      kernels::binary_strided(op, a->dtype(), shape.n, shape.data(), a->data(), sa.data(), b->data(), sb.data(),
                              t->data());
    });
  return t;
}

}  // namespace

TensorPtr ops::binary(hpuStream_t stream, Binary op, const TensorPtr &a, const TensorPtr &b) {
  Operands o = operands(stream, a, b);
  // Autocast's op lists name binary ops as the kernels do ("add", "mul").
  autocast::Decision d = autocast::decide(kernels::binary_name(op), {o.a->dtype(), o.b->dtype()});
  hpuDataType_t dt = combine(op, *o.a, d.apply(o.a->dtype()), *o.b, d.apply(o.b->dtype(), 1));
  TensorPtr A = as(*o.s, o.a, dt), B = as(*o.s, o.b, dt), y = empty_like(*o.a, dt, o.shape);
  if (y->numel() > 0)
    enqueue(*o.s, work({A.get(), B.get(), y.get()}, *y), [=] {
      if (A->shape() == B->shape())
        kernels::binary(op, dt, A->data(), B->data(), y->data(), y->numel());
      else
        kernels::binary_strided(op, dt, o.shape.n, o.shape.data(), A->data(), o.sa.data(), B->data(), o.sb.data(),
                                y->data());
    });
  return y;
}

OperandGrads ops::binary_backward(hpuStream_t stream, Binary op, const TensorPtr &g, const TensorPtr &a,
                                 const TensorPtr &b, bool want_a, bool want_b) {
  Operands o = operands(stream, a, b);
  same_device(*o.a, "a", *g, "grad_out");
  require_floating(*g, "grad_out");
  require_floating(*o.a, "a");
  require_floating(*o.b, "b");
  require_shape(*g, "grad_out", o.shape, "a and b broadcast together");
  hpuDataType_t dt = g->dtype();
  Stream &s = *o.s;
  Dims dense = o.shape.contiguous_strides();
  TensorPtr G = as(s, g, dt);
  OperandGrads r;
  switch (op) {
    case Binary::add:
    case Binary::sub:
      if (want_a) r.a = reduce_to(s, G, o.shape, o.a, 1.0);
      if (want_b) r.b = reduce_to(s, G, o.shape, o.b, op == Binary::sub ? -1.0 : 1.0);
      break;
    case Binary::mul: {
      TensorPtr A = as(s, o.a, dt), B = as(s, o.b, dt);
      if (want_a) r.a = reduce_to(s, apply(s, Binary::mul, G, dense, B, o.sb, o.shape), o.shape, o.a, 1.0);
      if (want_b) r.b = reduce_to(s, apply(s, Binary::mul, G, dense, A, o.sa, o.shape), o.shape, o.b, 1.0);
      break;
    }
    default: {  // div: d/da = g / b, d/db = -(g / b) a / b
      TensorPtr A = as(s, o.a, dt), B = as(s, o.b, dt);
      TensorPtr q = apply(s, Binary::div, G, dense, B, o.sb, o.shape);
      if (want_a) r.a = reduce_to(s, q, o.shape, o.a, 1.0);
      if (want_b) {
        TensorPtr qa = apply(s, Binary::mul, q, dense, A, o.sa, o.shape);
        r.b = reduce_to(s, apply(s, Binary::div, qa, dense, B, o.sb, o.shape), o.shape, o.b, -1.0);
      }
    }
  }
  return r;
}

void ops::add_inplace(hpuStream_t stream, const TensorPtr &y, const TensorPtr &x, double alpha) {
  same_device(*y, "dst", *x, "src");
  require_floating(*x, "src");
  require_floating(*y, "dst");
  require_shape(*x, "src", y->shape(), "dst's shape");
  if (!y->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "dst is %s with strides %s: it must be contiguous", y->str().c_str(),
         y->strides().str().c_str());
  auto s = stream_for(stream, *y);
  // src may be dst itself (the kernel reads each block before writing it);
  // any other overlap reads a copy taken first.
  bool same = x->data() == y->data() && x->dtype() == y->dtype() && x->contiguous();
  TensorPtr X = !same && overlap(*x, *y) ? copy_as(*s, x, x->dtype()) : as(*s, x, x->dtype());
  if (y->numel() > 0)
    enqueue(*s, work({X.get(), y.get(), y.get()}, *y, 2), [=] {
      kernels::axpby(static_cast<float>(alpha), X->data(), X->dtype(), 1.0f, y->data(), y->dtype(), y->numel());
    });
}

void ops::scale_inplace(hpuStream_t stream, const TensorPtr &t, double alpha) {
  require_floating(*t, "x");
  if (!t->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s with strides %s: it must be contiguous", t->str().c_str(),
         t->strides().str().c_str());
  auto s = stream_for(stream, *t);
  if (t->numel() > 0)
    enqueue(*s, work({t.get(), t.get()}, *t), [=] { kernels::binary_scalar(Binary::mul, t->dtype(), t->data(), alpha, t->data(), t->numel()); });
}
