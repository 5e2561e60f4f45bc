// nll_loss and cross_entropy_loss over [N, C] inputs and [N] class targets,
// with optional class weights [C].
#include "kernels/nn.hpp"
#include "ops/op.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

struct Loss {
  TensorPtr input, target, weight;  // weight: contiguous, or nullptr
  int64_t n, c;
  std::shared_ptr<Stream> s;
};

Loss check(hpuStream_t stream, hpuTensor_t hi, hpuTensor_t ht, hpuTensor_t hw, hpuReduction_t reduction) {
  Loss l;
  l.input = input(hi, "input");
  l.target = input(ht, "target");
  same_device(*l.input, "input", *l.target, "target");
  require_floating(*l.input, "input");
  require_index(*l.target, "target");
  HPU_CHECK_ARG(reduction == HPU_REDUCTION_NONE || reduction == HPU_REDUCTION_MEAN || reduction == HPU_REDUCTION_SUM,
                "reduction %d is not an hpuReduction_t", static_cast<int>(reduction));
  require_ndim(*l.input, "input", 2);
  l.n = l.input->size(0);
  l.c = l.input->size(1);
  require_shape(*l.target, "target", Dims{l.n}, "one class per row of input");
  l.s = stream_for(stream, *l.input);
  if (TensorPtr w = optional(hw, "weight")) {
    same_device(*l.input, "input", *w, "weight");
    require_floating(*w, "weight");
    require_shape(*w, "weight", Dims{l.c}, "one weight per class of input");
    l.weight = as(*l.s, w, w->dtype());
  }
  return l;
}

// nll reads one input element per sample and negates it; cross entropy reads
// every logit and per element subtracts the max, exps and adds (3), its
// backward also scales each (4). Targets read, results written.
Work work(bool fused, bool backward, const Loss &l, std::initializer_list<const Tensor *> tensors) {
  uint64_t per_sample = fused ? (backward ? 4 : 3) * static_cast<uint64_t>(l.c) : 1;
  Work w{bytes_of(tensors) + bytes_of({l.weight.get()}), per_sample * static_cast<uint64_t>(l.n)};
  if (!fused && !backward) w.bytes += static_cast<uint64_t>(l.n) * l.input->element_size();
  return w;
}

Dims loss_shape(const Loss &l, hpuReduction_t reduction) {
  return reduction == HPU_REDUCTION_NONE ? Dims{l.n} : Dims{};
}

kernels::LossWeights weights_of(const Loss &l) {
  return l.weight ? kernels::LossWeights{l.weight->dtype(), l.weight->data()} : kernels::LossWeights{};
}

void forward(bool fused, hpuStream_t stream, hpuTensor_t hi, hpuTensor_t ht, hpuTensor_t hw,
             hpuReduction_t reduction, int64_t ignore_index, hpuTensor_t *loss) {
  check_out(loss, "loss");
  Loss l = check(stream, hi, ht, hw, reduction);
  hpuDataType_t dt =
      autocast::decide(fused ? "cross_entropy_loss" : "nll_loss", {l.input->dtype()}).apply(l.input->dtype());
  TensorPtr I = as(*l.s, l.input, dt), T = as(*l.s, l.target, l.target->dtype());
  TensorPtr y = empty_like(*l.input, dt, loss_shape(l, reduction));
  if (y->numel() > 0)
    enqueue(*l.s, work(fused, false, l, {fused ? I.get() : nullptr, T.get(), y.get()}), [=] {
      auto f = fused ? kernels::cross_entropy : kernels::nll_loss;
      f(dt, I->data(), T->dtype(), T->data(), weights_of(l), l.n, l.c, reduction, ignore_index, dt, y->data());
    });
  give(loss, y);
}

void backward(bool fused, hpuStream_t stream, hpuTensor_t hg, hpuTensor_t hi, hpuTensor_t ht, hpuTensor_t hw,
              hpuReduction_t reduction, int64_t ignore_index, hpuTensor_t *grad_input) {
  check_out(grad_input, "grad_input");
  Loss l = check(stream, hi, ht, hw, reduction);
  TensorPtr g = input(hg, "grad_loss");
  same_device(*l.input, "input", *g, "grad_loss");
  require_floating(*g, "grad_loss");
  require_shape(*g, "grad_loss", loss_shape(l, reduction), "the forward's loss shape");
  hpuDataType_t dt = g->dtype();
  TensorPtr G = as(*l.s, g, dt), T = as(*l.s, l.target, l.target->dtype());
  TensorPtr I = fused ? as(*l.s, l.input, dt) : nullptr;
  TensorPtr gi = empty_like(*l.input, l.input->dtype(), l.input->shape());
  if (gi->numel() > 0)
    enqueue(*l.s, work(fused, true, l, {G.get(), T.get(), I.get(), gi.get()}), [=] {
      if (fused)
        kernels::cross_entropy_backward(dt, G->data(), dt, I->data(), T->dtype(), T->data(), weights_of(l), l.n, l.c,
                                        reduction, ignore_index, gi->dtype(), gi->data());
      else
        kernels::nll_loss_backward(dt, G->data(), T->dtype(), T->data(), weights_of(l), l.n, l.c, reduction,
                                   ignore_index, gi->dtype(), gi->data());
    });
  give(grad_input, gi);
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuNllLoss(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target, hpuReduction_t reduction,
                               int64_t ignore_index, hpuTensor_t *loss) {
  HPU_API_BEGIN
    forward(false, stream, input, target, nullptr, reduction, ignore_index, loss);
  HPU_API_END
}

HPU_API hpuStatus_t hpuNllLossBackward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,
                                       hpuTensor_t target, hpuReduction_t reduction, int64_t ignore_index,
                                       hpuTensor_t *grad_input) {
  HPU_API_BEGIN
    backward(false, stream, grad_loss, input, target, nullptr, reduction, ignore_index, grad_input);
  HPU_API_END
}

HPU_API hpuStatus_t hpuNllLossWeighted(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target, hpuTensor_t weight,
                                       hpuReduction_t reduction, int64_t ignore_index, hpuTensor_t *loss) {
  HPU_API_BEGIN
    forward(false, stream, input, target, weight, reduction, ignore_index, loss);
  HPU_API_END
}

HPU_API hpuStatus_t hpuNllLossWeightedBackward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,
                                               hpuTensor_t target, hpuTensor_t weight, hpuReduction_t reduction,
                                               int64_t ignore_index, hpuTensor_t *grad_input) {
  HPU_API_BEGIN
    backward(false, stream, grad_loss, input, target, weight, reduction, ignore_index, grad_input);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCrossEntropyLoss(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target,
                                        hpuReduction_t reduction, int64_t ignore_index, hpuTensor_t *loss) {
  HPU_API_BEGIN
    forward(true, stream, input, target, nullptr, reduction, ignore_index, loss);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCrossEntropyLossBackward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,
                                                hpuTensor_t target, hpuReduction_t reduction,
                                                int64_t ignore_index, hpuTensor_t *grad_input) {
  HPU_API_BEGIN
    backward(true, stream, grad_loss, input, target, nullptr, reduction, ignore_index, grad_input);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCrossEntropyLossWeighted(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target,
                                                hpuTensor_t weight, hpuReduction_t reduction, int64_t ignore_index,
                                                hpuTensor_t *loss) {
  HPU_API_BEGIN
    forward(true, stream, input, target, weight, reduction, ignore_index, loss);
  HPU_API_END
}

HPU_API hpuStatus_t hpuCrossEntropyLossWeightedBackward(hpuStream_t stream, hpuTensor_t grad_loss,
                                                        hpuTensor_t input, hpuTensor_t target, hpuTensor_t weight,
                                                        hpuReduction_t reduction, int64_t ignore_index,
                                                        hpuTensor_t *grad_input) {
  HPU_API_BEGIN
    backward(true, stream, grad_loss, input, target, weight, reduction, ignore_index, grad_input);
  HPU_API_END
}

}  // extern "C"
