// Dropout from the device's counter-based generator, with its backward.
#include <cmath>

#include "kernels/cast.hpp"
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"
#include "tensor/random.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

void check_p(double p) { HPU_CHECK_ARG(p >= 0 && p <= 1, "p %g is not a probability in [0, 1]", p); }

}  // namespace

DropoutResult ops::dropout(hpuStream_t stream, const TensorPtr &xt, double p, bool train, bool want_mask) {
  require_floating(*xt, "x");
  check_p(p);
  hpuDataType_t dt = autocast::decide("dropout", {xt->dtype()}).apply(xt->dtype());
  auto s = stream_for(stream, *xt);
  TensorPtr m = want_mask ? empty_like(*xt, HPU_UINT8, xt->shape()) : nullptr;
  TensorPtr y;
  int64_t n = xt->numel();
  if (!train) {
    y = copy_as(*s, xt, dt);
    if (m && n > 0) enqueue(*s, work({m.get()}, *m, 0), [=] { kernels::fill(m->data(), HPU_UINT8, n, 1.0); });
  } else {
    TensorPtr X = as(*s, xt, xt->dtype());
    y = empty_like(*xt, dt, xt->shape());
    // Counters are taken here, on the calling thread, so results follow the order of calls.
    RandomKey key = random_reserve(xt->device(), static_cast<uint64_t>(n));
    // A draw and a scaling per element.
    if (n > 0)
      enqueue(*s, work({X.get(), y.get(), m.get()}, *y, 2), [=] {
        kernels::dropout(X->dtype(), X->data(), dt, y->data(), m ? m->data_as<uint8_t>() : nullptr, n, p, key.seed,
                         key.offset);
      });
  }
  return {y, m};
}

TensorPtr ops::dropout_backward(hpuStream_t stream, const TensorPtr &g, const TensorPtr &m, double p,
                                hpuDataType_t input_dtype) {
  same_device(*g, "grad_out", *m, "mask");
  require_floating(*g, "grad_out");
  if (m->dtype() != HPU_UINT8 && m->dtype() != HPU_BOOL)
    fail(HPU_ERROR_INVALID_ARGUMENT, "mask is %s: expected u8 (hpuDropout's mask)", m->str().c_str());
  require_shape(*m, "mask", g->shape(), "grad_out's shape");
  check_p(p);
  check_dtype(input_dtype, "input_dtype");
  if (!is_floating(input_dtype))
    fail(HPU_ERROR_UNSUPPORTED, "input_dtype %s is not a floating type", dtype_name(input_dtype));
  auto s = stream_for(stream, *g);
  TensorPtr G = as(*s, g, g->dtype()), M = as(*s, m, m->dtype()), gx = empty_like(*g, input_dtype, g->shape());
  double scale = p < 1 ? 1 / (1 - p) : 0;
  if (gx->numel() > 0)
    enqueue(*s, work({G.get(), M.get(), gx.get()}, *gx), [=] {
      kernels::dropout_backward(G->dtype(), G->data(), M->data_as<uint8_t>(), scale, input_dtype, gx->data(),
                                gx->numel());
    });
  return gx;
}
