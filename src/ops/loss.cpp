// nll_loss and cross_entropy_loss over [C], [N, C] or spatial [N, C, d1, ...]
// inputs and class-index targets, with optional class weights [C] and, for
// cross entropy, label smoothing and class-probability targets (a floating
// target of the input's shape).
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

struct Loss {
  TensorPtr input, target, weight;  // weight: contiguous, or nullptr
  int64_t n, c, inner;              // input seen as [n, c, inner]
  Dims loss_shape;                  // per-sample losses: input's shape without C
  hpuReduction_t reduction;
  int64_t ignore_index;
  double label_smoothing;
  bool probs;  // target holds class probabilities (cross entropy, floating target)
  std::shared_ptr<Stream> s;
};

// input [C] (one sample, target 0-dim), [N, C] (target [N]) or spatial
// [N, C, d1, ...] (target [N, d1, ...]), as ATen's nll_loss_nd; for cross
// entropy (fused), a floating target holds class probabilities of the input's
// shape.
Loss check(bool fused, hpuStream_t stream, const TensorPtr &input, const TensorPtr &target, const TensorPtr &w,
           const hpuLossOptions_t &o) {
  Loss l;
  l.input = input;
  l.target = target;
  same_device(*l.input, "input", *l.target, "target");
  require_floating(*l.input, "input");
  l.probs = fused && is_floating(l.target->dtype());
  if (!l.probs) require_index(*l.target, "target");
  HPU_CHECK_ARG(o.reduction == HPU_REDUCTION_NONE || o.reduction == HPU_REDUCTION_MEAN ||
                    o.reduction == HPU_REDUCTION_SUM,
                "options->reduction %d is not an hpuReduction_t", static_cast<int>(o.reduction));
  HPU_CHECK_ARG(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, "options->label_smoothing %g is not in 0..1",
                o.label_smoothing);
  HPU_CHECK_ARG(fused || o.label_smoothing == 0.0,
                "options->label_smoothing is %g: nll_loss has none (hpuCrossEntropyLoss has)", o.label_smoothing);
  l.reduction = o.reduction, l.ignore_index = o.ignore_index, l.label_smoothing = o.label_smoothing;
  const Dims &shape = l.input->shape();
  if (shape.n == 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "input is %s: expected [C], [N, C] or [N, C, d1, ...]", l.input->str().c_str());
  const bool batched = shape.n >= 2;
  l.n = batched ? shape[0] : 1;
  l.c = shape[batched ? 1 : 0];
  l.inner = 1;
  l.loss_shape = Dims{};
  if (batched) {
    l.loss_shape = Dims{l.n};
    for (int d = 2; d < shape.n; ++d) l.inner *= shape[d], l.loss_shape[l.loss_shape.n++] = shape[d];
  }
  if (l.probs)
    require_shape(*l.target, "target", shape,
                  "class probabilities have the input's shape; class indices are i32 or i64");
  else
    require_shape(*l.target, "target", l.loss_shape, "one class per sample of input");
  l.s = stream_for(stream, *l.input);
  if (w) {
    same_device(*l.input, "input", *w, "weight");
    require_floating(*w, "weight");
    require_shape(*w, "weight", Dims{l.c}, "one weight per class of input");
    l.weight = as(*l.s, w, w->dtype());
  }
  return l;
}

// nll reads one input element per sample and negates it; cross entropy reads
// every logit and per element subtracts the max, exps and adds (3), its
// backward also scales each (4), and label smoothing or class probabilities
// add a weighted sum (2).
Work work(bool fused, bool backward, const Loss &l, std::initializer_list<const Tensor *> tensors) {
  uint64_t per_class = fused ? (backward ? 4 : 3) + (l.label_smoothing != 0 || l.probs ? 2 : 0) : 0;
  uint64_t samples = static_cast<uint64_t>(l.n * l.inner);
  Work w{bytes_of(tensors) + bytes_of({l.weight.get()}),
         samples * (fused ? per_class * static_cast<uint64_t>(l.c) : 1)};
  if (!fused && !backward) w.bytes += samples * l.input->element_size();
  return w;
}

Dims loss_shape(const Loss &l) {
  return l.reduction == HPU_REDUCTION_NONE ? l.loss_shape : Dims{};
}

kernels::LossArgs args_of(const Loss &l, const TensorPtr &target) {
  kernels::LossArgs a;
  a.n = l.n, a.c = l.c, a.inner = l.inner;
  a.target_dt = target->dtype(), a.target = target->data();
  if (l.weight) a.weights = kernels::LossWeights{l.weight->dtype(), l.weight->data()};
  a.reduction = l.reduction, a.ignore_index = l.ignore_index, a.label_smoothing = l.label_smoothing;
  a.probs = l.probs;
  return a;
}

TensorPtr forward(bool fused, hpuStream_t stream, const TensorPtr &input, const TensorPtr &target,
                  const TensorPtr &weight, const hpuLossOptions_t &options) {
  Loss l = check(fused, stream, input, target, weight, options);
  hpuDataType_t dt =
      autocast::decide(fused ? "cross_entropy_loss" : "nll_loss", {l.input->dtype()}).apply(l.input->dtype());
  TensorPtr I = as(*l.s, l.input, dt), T = as(*l.s, l.target, l.target->dtype());
  TensorPtr y = empty_like(*l.input, dt, loss_shape(l));
  if (y->numel() > 0)
    enqueue(*l.s, work(fused, false, l, {fused ? I.get() : nullptr, T.get(), y.get()}), [=] {
      kernels::LossArgs a = args_of(l, T);
      (fused ? kernels::cross_entropy : kernels::nll_loss)(a, dt, I->data(), dt, y->data());
    });
  return y;
}

TensorPtr backward(bool fused, hpuStream_t stream, const TensorPtr &g, const TensorPtr &input,
                   const TensorPtr &target, const TensorPtr &weight, const hpuLossOptions_t &options) {
  Loss l = check(fused, stream, input, target, weight, options);
  same_device(*l.input, "input", *g, "grad_loss");
  require_floating(*g, "grad_loss");
  require_shape(*g, "grad_loss", loss_shape(l), "the forward's loss shape");
  hpuDataType_t dt = g->dtype();
  TensorPtr G = as(*l.s, g, dt), T = as(*l.s, l.target, l.target->dtype());
  TensorPtr I = fused ? as(*l.s, l.input, dt) : nullptr;
  TensorPtr gi = empty_like(*l.input, l.input->dtype(), l.input->shape());
  if (gi->numel() > 0)
    enqueue(*l.s, work(fused, true, l, {G.get(), T.get(), I.get(), gi.get()}), [=] {
      kernels::LossArgs a = args_of(l, T);
      if (fused)
        kernels::cross_entropy_backward(a, dt, G->data(), dt, I->data(), gi->dtype(), gi->data());
      else
        kernels::nll_loss_backward(a, dt, G->data(), gi->dtype(), gi->data());
    });
  return gi;
}

}  // namespace

TensorPtr ops::nll_loss(hpuStream_t stream, const TensorPtr &input, const TensorPtr &target, const TensorPtr &weight,
                        const hpuLossOptions_t &options) {
  return forward(false, stream, input, target, weight, options);
}

TensorPtr ops::nll_loss_backward(hpuStream_t stream, const TensorPtr &grad_loss, const TensorPtr &input,
                                 const TensorPtr &target, const TensorPtr &weight, const hpuLossOptions_t &options) {
  return backward(false, stream, grad_loss, input, target, weight, options);
}

TensorPtr ops::cross_entropy_loss(hpuStream_t stream, const TensorPtr &input, const TensorPtr &target,
                                  const TensorPtr &weight, const hpuLossOptions_t &options) {
  return forward(true, stream, input, target, weight, options);
}

TensorPtr ops::cross_entropy_loss_backward(hpuStream_t stream, const TensorPtr &grad_loss, const TensorPtr &input,
                                           const TensorPtr &target, const TensorPtr &weight,
                                           const hpuLossOptions_t &options) {
  return backward(true, stream, grad_loss, input, target, weight, options);
}
