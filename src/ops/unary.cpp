// Unary ops on floating tensors: exp, log, tan, relu, gelu, tanh, sigmoid.
#include "kernels/elementwise.hpp"
#include "ops/op.hpp"

using namespace hpu;
using namespace hpu::ops;
using kernels::Unary;

namespace {

void forward(const char *name, Unary op, hpuStream_t stream, hpuTensor_t hx,
                    hpuTensor_t *out) {
  check_out(out, "out");
  TensorPtr x = input(hx, "x");
  require_floating(*x, "x");
  hpuDataType_t dt = autocast::decide(name, {x->dtype()}).apply(x->dtype());
  auto s = stream_for(stream, *x);
  TensorPtr X = as(*s, x, dt), y = empty_like(*x, dt, x->shape());
  if (y->numel() > 0)
    enqueue(*s, work({X.get(), y.get()}, *y, 1), [=] { kernels::unary(op, dt, X->data(), y->data(), y->numel()); });
  give(out, y);
}

void backward(Unary op, hpuStream_t stream, hpuTensor_t hg, hpuTensor_t hx,
                     hpuTensor_t *grad_x) {
  check_out(grad_x, "grad_x");
  TensorPtr g = input(hg, "grad_out"), x = input(hx, "x");
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
  give(grad_x, as(*s, gx, x->dtype()));
}

}  // namespace

extern "C" {

#define HPU_UNARY_OP_(Name, name, op)                                                              \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out) {             \
    HPU_API_BEGIN                                                                                  \
      forward(#name, op, stream, x, out);                                                          \
    HPU_API_END                                                                                    \
  }                                                                                                \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, \
                                          hpuTensor_t *grad_x) {                                   \
    HPU_API_BEGIN                                                                                  \
      backward(op, stream, grad_out, x, grad_x);                                                   \
    HPU_API_END                                                                                    \
  }

HPU_UNARY_OP_(Exp, exp, Unary::exp)
HPU_UNARY_OP_(Log, log, Unary::log)
HPU_UNARY_OP_(Tan, tan, Unary::tan)
HPU_UNARY_OP_(Relu, relu, Unary::relu)
HPU_UNARY_OP_(Gelu, gelu, Unary::gelu)
HPU_UNARY_OP_(Tanh, tanh, Unary::tanh)
HPU_UNARY_OP_(Sigmoid, sigmoid, Unary::sigmoid)

}  // extern "C"
