// Layer normalisation over the last dims (ATen's normalized_shape), with its
// backward. The kernels see x as [rows, d]: d the product of the normalized dims.
#include <cmath>

#include "kernels/cast.hpp"
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

// x's shape split before its last k (normalized) dims: the shape of mean
// and rstd, and the shape of weight and bias.
struct Normalized {
  Dims rows_shape, shape;
  int64_t rows = 1, d = 1;
};

Normalized normalized(const Tensor &x, int k) {
  Normalized n;
  n.rows_shape.n = x.ndim() - k;
  n.shape.n = k;
  for (int i = 0; i < x.ndim(); ++i) {
    if (i < n.rows_shape.n) n.rows_shape[i] = x.size(i), n.rows *= x.size(i);
    else n.shape[i - n.rows_shape.n] = x.size(i), n.d *= x.size(i);
  }
  return n;
}

void check_param(const Tensor &x, const TensorPtr &p, const char *arg, const Normalized &n) {
  if (!p) return;
  same_device(x, "x", *p, arg);
  require_floating(*p, arg);
  require_shape(*p, arg, n.shape, "x's normalized dims");
}

}  // namespace

LayerNormResult ops::layer_norm(hpuStream_t stream, const TensorPtr &xt, const TensorPtr &w, const TensorPtr &b,
                                const hpuLayerNormOptions_t &options) {
  const int normalized_ndim = options.normalized_ndim;
  const double eps = options.eps;
  require_floating(*xt, "x");
  if (xt->ndim() < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s: it needs at least 1 dim", xt->str().c_str());
  HPU_CHECK_ARG(normalized_ndim >= 1 && normalized_ndim <= xt->ndim(),
                "options->normalized_ndim %d is out of range for x %s (1..%d)", normalized_ndim, xt->str().c_str(),
                xt->ndim());
  Normalized nz = normalized(*xt, normalized_ndim);
  const int64_t rows = nz.rows, d = nz.d;
  check_param(*xt, w, "weight", nz);
  check_param(*xt, b, "bias", nz);
  HPU_CHECK_ARG(eps >= 0 && eps < 1e300, "options->eps %g is not a finite number >= 0", eps);
  // lower_first_arg: only x takes the autocast type; weight and bias are read as they are.
  hpuDataType_t dt = autocast::decide("layer_norm", {xt->dtype()}).apply(xt->dtype());
  auto s = stream_for(stream, *xt);
  TensorPtr X = as(*s, xt, dt), W = w ? as(*s, w, w->dtype()) : nullptr, B = b ? as(*s, b, b->dtype()) : nullptr;
  TensorPtr out = empty_like(*xt, dt, xt->shape());
  TensorPtr mu = empty_like(*xt, HPU_FLOAT32, nz.rows_shape), rs = empty_like(*xt, HPU_FLOAT32, nz.rows_shape);
  // Per element: the mean (1), the variance (3), normalise, scale and shift (4).
  if (out->numel() > 0)
    enqueue(*s, work({X.get(), W.get(), B.get(), out.get(), mu.get(), rs.get()}, *out, 8), [=] {
      kernels::layer_norm(dt, X->data(), W ? W->dtype() : dt, W ? W->data() : nullptr, B ? B->dtype() : dt,
                          B ? B->data() : nullptr, eps, rows, d, dt, out->data(), mu->data_as<float>(),
                          rs->data_as<float>());
    });
  else if (rows > 0)  // d == 0: mean 0, rstd 1/sqrt(eps), as the formula gives
    enqueue(*s, work({mu.get(), rs.get()}, *mu, 0), [=] {
      kernels::fill(mu->data(), HPU_FLOAT32, rows, 0.0);
      kernels::fill(rs->data(), HPU_FLOAT32, rows, 1.0 / std::sqrt(eps));
    });
  return {out, mu, rs};
}

LayerNormGrads ops::layer_norm_backward(hpuStream_t stream, const TensorPtr &g, const TensorPtr &xt,
                                        const TensorPtr &mu, const TensorPtr &rs, const TensorPtr &w, bool want_x,
                                        bool want_weight, bool want_bias) {
  require_floating(*g, "grad_y");
  require_floating(*xt, "x");
  same_device(*xt, "x", *g, "grad_y");
  same_device(*xt, "x", *mu, "mean");
  same_device(*xt, "x", *rs, "rstd");
  if (xt->ndim() < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s: it needs at least 1 dim", xt->str().c_str());
  require_shape(*g, "grad_y", xt->shape(), "x's shape");
  // The forward normalized the dims of x that mean does not have.
  int k = xt->ndim() - mu->ndim();
  if (k < 1)
    fail(HPU_ERROR_INVALID_ARGUMENT, "mean is %s but x is %s: mean must have x's shape without the normalized dims",
         mu->str().c_str(), xt->str().c_str());
  Normalized nz = normalized(*xt, k);
  const int64_t rows = nz.rows, d = nz.d;
  check_param(*xt, w, "weight", nz);
  for (auto [t, arg] : {std::pair{mu, "mean"}, std::pair{rs, "rstd"}}) {
    if (t->dtype() != HPU_FLOAT32)
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s: expected f32 (hpuLayerNorm's output)", arg, t->str().c_str());
    require_shape(*t, arg, nz.rows_shape, "x's shape without the normalized dims");
  }
  hpuDataType_t dt = g->dtype(), pt = w ? w->dtype() : xt->dtype();
  auto s = stream_for(stream, *xt);
  TensorPtr G = as(*s, g, dt), X = as(*s, xt, dt), M = as(*s, mu, HPU_FLOAT32), R = as(*s, rs, HPU_FLOAT32);
  TensorPtr W = w ? as(*s, w, w->dtype()) : nullptr;
  TensorPtr gx = want_x ? empty_like(*xt, xt->dtype(), xt->shape()) : nullptr;
  TensorPtr gw = want_weight ? empty_like(*xt, pt, nz.shape) : nullptr;
  TensorPtr gb = want_bias ? empty_like(*xt, pt, nz.shape) : nullptr;
  // Per element: grad_x normalises x again and combines (9); the parameter
  // gradients accumulate (3 and 1). x and grad_y are read once per pass.
  uint64_t per = (gx ? 9 : 0) + (gw ? 3 : 0) + (gb ? 1 : 0);
  int passes = (gx ? 1 : 0) + (gw || gb ? 1 : 0);
  Work work_done = work({gx.get(), gw.get(), gb.get(), W.get(), M.get(), R.get()}, *X, per);
  work_done.bytes += passes * bytes_of({G.get(), X.get()});
  if ((gx || gw || gb) && d > 0)
    enqueue(*s, work_done, [=] {
      if (rows == 0) {  // no rows: the parameter gradients are zero
        if (gw) kernels::fill(gw->data(), pt, d, 0.0);
        if (gb) kernels::fill(gb->data(), pt, d, 0.0);
        return;
      }
      kernels::layer_norm_backward(dt, G->data(), dt, X->data(), M->data_as<float>(), R->data_as<float>(),
                                   W ? W->dtype() : dt, W ? W->data() : nullptr, rows, d, xt->dtype(),
                                   gx ? gx->data() : nullptr, pt, gw ? gw->data() : nullptr,
                                   gb ? gb->data() : nullptr);
    });
  return {gx, gw, gb};
}
