// Dropout from the device's counter-based generator, with its backward.
#include <cmath>

#include "kernels/cast.hpp"
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "tensor/random.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

void check_p(double p) { HPU_CHECK_ARG(p >= 0 && p <= 1, "p %g is not a probability in [0, 1]", p); }

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuDropout(hpuStream_t stream, hpuTensor_t x, double p, int train, hpuTensor_t *out,
                               hpuTensor_t *mask) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr xt = input(x, "x");
    require_floating(*xt, "x");
    check_p(p);
    hpuDataType_t dt = autocast::decide("dropout", {xt->dtype()}).apply(xt->dtype());
    auto s = stream_for(stream, *xt);
    TensorPtr m = mask ? empty_like(*xt, HPU_UINT8, xt->shape()) : nullptr;
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
    give(out, y);
    give(mask, m);
  HPU_API_END
}

HPU_API hpuStatus_t hpuDropoutBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t mask, double p,
                                       hpuDataType_t input_dtype, hpuTensor_t *grad_x) {
  HPU_API_BEGIN
    check_out(grad_x, "grad_x");
    TensorPtr g = input(grad_out, "grad_out"), m = input(mask, "mask");
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
    give(grad_x, gx);
  HPU_API_END
}

}  // extern "C"
