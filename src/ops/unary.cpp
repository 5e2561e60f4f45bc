// Unary ops on floating tensors: exp, log, tan, relu, gelu, tanh, sigmoid.
#include "kernels/elementwise.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

TensorPtr ops::unary(hpuStream_t stream, Unary op, const TensorPtr &x) {
  require_floating(*x, "x");
  // Autocast's op lists name unary ops as the kernels do ("exp", "gelu").
  hpuDataType_t dt = autocast::decide(kernels::unary_name(op), {x->dtype()}).apply(x->dtype());
  auto s = stream_for(stream, *x);
  TensorPtr X = as(*s, x, dt), y = empty_like(*x, dt, x->shape());
  if (y->numel() > 0)
    enqueue(*s, work({X.get(), y.get()}, *y, 1), [=] { kernels::unary(op, dt, X->data(), y->data(), y->numel()); });
  return y;
}

TensorPtr ops::unary_backward(hpuStream_t stream, Unary op, const TensorPtr &g, const TensorPtr &x) {
  same_device(*x, "x", *g, "grad_out");
  require_floating(*g, "grad_out");
  require_floating(*x, "x");
  require_shape(*g, "grad_out", x->shape(), "x's shape");
  hpuDataType_t dt = g->dtype();
  auto s = stream_for(stream, *x);
  TensorPtr G = as(*s, g, dt), X = as(*s, x, dt), gx = empty_like(*x, dt, x->shape());
  if (gx->numel() > 0)
    enqueue(*s, work({X.get(), G.get(), gx.get()}, *gx, 2),
            [=] { kernels::unary_backward(op, dt, X->data(), G->data(), gx->data(), gx->numel()); });
  return as(*s, gx, x->dtype());
}
