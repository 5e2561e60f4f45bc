// softmax and log_softmax along one dim, with their backwards.
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

TensorPtr forward(bool log, hpuStream_t stream, const TensorPtr &x, int dim) {
  require_floating(*x, "x");
  int d = normalize_dim(dim, x->ndim(), "dim");
  hpuDataType_t dt = autocast::decide(log ? "log_softmax" : "softmax", {x->dtype()}).apply(x->dtype());
  auto s = stream_for(stream, *x);
  Split sp = split_at(x->shape(), d);
  TensorPtr X = as(*s, x, dt), y = empty_like(*x, dt, x->shape());
  // Per element: subtract the max, exp, add to the sum, scale (log_softmax: log once per row instead).
  if (y->numel() > 0)
    enqueue(*s, work({X.get(), y.get()}, *y, 4), [=] { kernels::softmax(log, dt, X->data(), dt, y->data(), sp.outer, sp.n, sp.inner); });
  return y;
}

TensorPtr backward(bool log, hpuStream_t stream, const TensorPtr &g, const TensorPtr &y, int dim,
                   hpuDataType_t input_dtype) {
  same_device(*y, "out", *g, "grad_out");
  require_floating(*g, "grad_out");
  require_floating(*y, "out");
  require_shape(*g, "grad_out", y->shape(), "out's shape");
  check_dtype(input_dtype, "input_dtype");
  if (!is_floating(input_dtype))
    fail(HPU_ERROR_UNSUPPORTED, "input_dtype %s is not a floating type", dtype_name(input_dtype));
  int d = normalize_dim(dim, y->ndim(), "dim");
  hpuDataType_t dt = g->dtype();
  auto s = stream_for(stream, *y);
  Split sp = split_at(y->shape(), d);
  TensorPtr G = as(*s, g, dt), Y = as(*s, y, dt), gx = empty_like(*y, input_dtype, y->shape());
  // Per element: the product for the row's dot product, then the difference and its scaling.
  if (gx->numel() > 0)
    enqueue(*s, work({G.get(), Y.get(), gx.get()}, *gx, 4), [=] {
      kernels::softmax_backward(log, dt, G->data(), Y->data(), input_dtype, gx->data(), sp.outer, sp.n, sp.inner);
    });
  return gx;
}

}  // namespace

TensorPtr ops::softmax(hpuStream_t stream, const TensorPtr &x, int dim) { return forward(false, stream, x, dim); }

TensorPtr ops::softmax_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &out, int dim,
                                hpuDataType_t input_dtype) {
  return backward(false, stream, grad_out, out, dim, input_dtype);
}

TensorPtr ops::log_softmax(hpuStream_t stream, const TensorPtr &x, int dim) { return forward(true, stream, x, dim); }

TensorPtr ops::log_softmax_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &out, int dim,
                                    hpuDataType_t input_dtype) {
  return backward(true, stream, grad_out, out, dim, input_dtype);
}
