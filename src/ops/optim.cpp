// Fused optimizer steps (SGD, AdamW) over f32 master weights.
#include <cmath>
#include <string>

#include "ops/ops.hpp"
#include "ops/optim.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

// INVALID_ARGUMENT unless t is f32 and contiguous, and with param, of
// param's shape on its device.
void check_state(const TensorPtr &t, const char *arg, const TensorPtr &param, const char *param_arg = "param") {
  if (param) {
    same_device(*param, param_arg, *t, arg);
    require_shape(*t, arg, param->shape(), (std::string(param_arg) + "'s shape").c_str());
  }
  if (t->dtype() != HPU_FLOAT32 || !t->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s%s: expected contiguous f32", arg, t->str().c_str(),
         t->contiguous() ? "" : " (not contiguous)");
}

void check_gradient(const TensorPtr &g, const TensorPtr &param) {
  same_device(*param, "param", *g, "grad");
  require_shape(*g, "grad", param->shape(), "param's shape");
  if (g->dtype() != HPU_FLOAT32 && g->dtype() != HPU_BFLOAT16 && g->dtype() != HPU_FLOAT16)
    fail(HPU_ERROR_UNSUPPORTED, "grad is %s: expected bf16, f16 or f32", g->str().c_str());
}

// INVALID_ARGUMENT unless t is bf16 or f16, contiguous, of param's shape on its device.
void check_low_copy(const TensorPtr &t, const char *arg, const TensorPtr &param, const char *param_arg) {
  same_device(*param, param_arg, *t, arg);
  require_shape(*t, arg, param->shape(), (std::string(param_arg) + "'s shape").c_str());
  if (t->dtype() != HPU_BFLOAT16 && t->dtype() != HPU_FLOAT16)
    fail(HPU_ERROR_UNSUPPORTED, "%s is %s: expected bf16 or f16", arg, t->str().c_str());
  if (!t->contiguous())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %s (not contiguous): expected contiguous", arg, t->str().c_str());
}

// options_arg->name in [lo, hi] (hi_open: [lo, hi)).
void check_value(const char *options_arg, const char *name, double v, double lo, double hi, bool hi_open) {
  HPU_CHECK_ARG(v >= lo && (hi_open ? v < hi : v <= hi), "%s->%s %g is not in [%g, %g%c", options_arg, name, v, lo, hi,
                hi_open ? ')' : ']');
}

}  // namespace

namespace hpu::ops {

void check_param(const TensorPtr &param, const char *arg) { check_state(param, arg, nullptr); }

AdamwArgs adamw_args(const TensorPtr &param, const char *param_arg, const Named &exp_avg, const Named &exp_avg_sq,
                     int64_t step, const AdamwOptions &o, const char *options_arg) {
  check_state(exp_avg.t, exp_avg.arg, param, param_arg);
  check_state(exp_avg_sq.t, exp_avg_sq.arg, param, param_arg);
  const std::string copy_arg = std::string(options_arg) + "->param_copy";
  if (o.param_copy) check_low_copy(o.param_copy, copy_arg.c_str(), param, param_arg);
  HPU_CHECK_ARG(step >= 1, "step %lld is not >= 1", static_cast<long long>(step));
  check_value(options_arg, "lr", o.lr, 0, 1e30, false);
  check_value(options_arg, "beta1", o.beta1, 0, 1, true);
  check_value(options_arg, "beta2", o.beta2, 0, 1, true);
  check_value(options_arg, "eps", o.eps, 0, 1e30, false);
  check_value(options_arg, "weight_decay", o.weight_decay, 0, 1e30, false);
  AdamwArgs a;
  a.exp_avg = exp_avg.t, a.exp_avg_sq = exp_avg_sq.t, a.copy = o.param_copy;
  a.constants = kernels::adamw_constants({o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}, step);
  return a;
}

}  // namespace hpu::ops

void ops::sgd_step(hpuStream_t stream, const TensorPtr &p, const TensorPtr &g, const TensorPtr &buf, int64_t step,
                   const hpuSgdOptions_t &o) {
  check_param(p, "param");
  check_gradient(g, p);
  if (buf) check_state(buf, "momentum_buf", p);
  HPU_CHECK_ARG(step >= 1, "step %lld is not >= 1", static_cast<long long>(step));
  check_value("options", "lr", o.lr, 0, 1e30, false);
  check_value("options", "momentum", o.momentum, 0, 1e30, false);
  check_value("options", "dampening", o.dampening, 0, 1, false);
  check_value("options", "weight_decay", o.weight_decay, 0, 1e30, false);
  HPU_CHECK_ARG(o.momentum == 0 || buf, "momentum_buf is NULL but options->momentum is %g", o.momentum);
  HPU_CHECK_ARG(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                "options->nesterov needs momentum > 0 and dampening 0 (momentum %g, dampening %g)", o.momentum,
                o.dampening);
  auto s = stream_for(stream, *p);
  TensorPtr G = as(*s, g, g->dtype());
  kernels::SgdParams sp{o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov != 0};
  // Per element: decay and gradient (2), momentum (3), nesterov (2), the update (2);
  // param and the momentum buffer read and written, the gradient read.
  uint64_t flops = 4 + (o.momentum != 0 ? 3 : 0) + (o.nesterov ? 2 : 0);
  TensorPtr B = o.momentum != 0 ? buf : nullptr;
  if (p->numel() > 0)
    enqueue(*s, work({p.get(), p.get(), G.get(), B.get(), B.get()}, *p, flops), [=] {
      kernels::sgd_step(p->data_as<float>(), G->dtype(), G->data(), buf ? buf->data_as<float>() : nullptr,
                        p->numel(), step, sp);
    });
}

void ops::adamw_step(hpuStream_t stream, const TensorPtr &p, const TensorPtr &g, const TensorPtr &exp_avg,
                     const TensorPtr &exp_avg_sq, int64_t step, const AdamwOptions &options) {
  check_param(p, "param");
  check_gradient(g, p);
  AdamwArgs a = adamw_args(p, "param", {exp_avg, "exp_avg"}, {exp_avg_sq, "exp_avg_sq"}, step, options, "options");
  auto s = stream_for(stream, *p);
  TensorPtr G = as(*s, g, g->dtype());
  TensorPtr m = a.exp_avg, v = a.exp_avg_sq, c = a.copy;
  const kernels::AdamwConstants k = a.constants;
  // Per element: decay (1), exp_avg (3), exp_avg_sq (4), the update (6); param
  // and both moments read and written, the gradient read, the copy written.
  if (p->numel() > 0)
    enqueue(*s, work({p.get(), p.get(), m.get(), m.get(), v.get(), v.get(), G.get(), c.get()}, *p, 14), [=] {
      kernels::adamw_step(p->data_as<float>(), G->dtype(), G->data(), m->data_as<float>(), v->data_as<float>(),
                          p->numel(), k, c ? c->dtype() : HPU_FLOAT32, c ? c->data() : nullptr, true);
    });
}
