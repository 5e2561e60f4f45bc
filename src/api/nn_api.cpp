// The neural-network ops at the C boundary: softmax, the losses, layer norm,
// dropout, embedding and the optimizer steps (the tensor math is in
// ops_api.cpp). Each checks its out-pointers, reads its options struct, looks
// its handles up (naming the argument), calls the ops layer (ops/ops.hpp) and
// hands the results out.
#include "api/ops_api.hpp"

using namespace hpu;
using namespace hpu::api;
using namespace hpu::ops;

namespace {

// The caller's loss options, or PyTorch's defaults when it passes NULL.
hpuLossOptions_t loss_options(const hpuLossOptions_t *options) {
  return read_optional_sized(options, hpuLossOptions_t HPU_LOSS_OPTIONS_INIT, "options");
}

}  // namespace

extern "C" {

#define HPU_SOFTMAX_OP_(Name, forward, backward)                                                              \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t x, int dim, hpuTensor_t *out) {               \
    HPU_API_BEGIN                                                                                             \
      check_out(out, "out");                                                                                  \
      TensorPtr t = input(x, "x");                                                                            \
      give(out, forward(stream, t, dim));                                                                     \
    HPU_API_END                                                                                               \
  }                                                                                                           \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t out, int dim, \
                                          hpuDataType_t input_dtype, hpuTensor_t *grad_x) {                   \
    HPU_API_BEGIN                                                                                             \
      check_out(grad_x, "grad_x");                                                                            \
      TensorPtr g = input(grad_out, "grad_out"), y = input(out, "out");                                       \
      give(grad_x, backward(stream, g, y, dim, input_dtype));                                                 \
    HPU_API_END                                                                                               \
  }

HPU_SOFTMAX_OP_(Softmax, ops::softmax, ops::softmax_backward)
HPU_SOFTMAX_OP_(LogSoftmax, ops::log_softmax, ops::log_softmax_backward)

#define HPU_LOSS_OP_(Name, forward, backward)                                                                 \
  HPU_API hpuStatus_t hpu##Name(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target, hpuTensor_t weight,\
                                const hpuLossOptions_t *options, hpuTensor_t *loss) {                         \
    HPU_API_BEGIN                                                                                             \
      check_out(loss, "loss");                                                                                \
      hpuLossOptions_t o = loss_options(options);                                                             \
      TensorPtr i = api::input(input, "input"), t = api::input(target, "target");                             \
      TensorPtr w = optional(weight, "weight");                                                               \
      give(loss, forward(stream, i, t, w, o));                                                                \
    HPU_API_END                                                                                               \
  }                                                                                                           \
  HPU_API hpuStatus_t hpu##Name##Backward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,       \
                                          hpuTensor_t target, hpuTensor_t weight,                             \
                                          const hpuLossOptions_t *options, hpuTensor_t *grad_input) {         \
    HPU_API_BEGIN                                                                                             \
      check_out(grad_input, "grad_input");                                                                    \
      hpuLossOptions_t o = loss_options(options);                                                             \
      TensorPtr i = api::input(input, "input"), t = api::input(target, "target");                             \
      TensorPtr w = optional(weight, "weight"), g = api::input(grad_loss, "grad_loss");                       \
      give(grad_input, backward(stream, g, i, t, w, o));                                                      \
    HPU_API_END                                                                                               \
  }

HPU_LOSS_OP_(NllLoss, ops::nll_loss, ops::nll_loss_backward)
HPU_LOSS_OP_(CrossEntropyLoss, ops::cross_entropy_loss, ops::cross_entropy_loss_backward)

HPU_API hpuStatus_t hpuLayerNorm(hpuStream_t stream, hpuTensor_t x, hpuTensor_t weight, hpuTensor_t bias,
                                 const hpuLayerNormOptions_t *options, hpuTensor_t *y, hpuTensor_t *mean,
                                 hpuTensor_t *rstd) {
  HPU_API_BEGIN
    check_out(y, "y");
    const hpuLayerNormOptions_t o =
        read_optional_sized(options, hpuLayerNormOptions_t HPU_LAYER_NORM_OPTIONS_INIT, "options");
    TensorPtr t = input(x, "x"), w = optional(weight, "weight"), b = optional(bias, "bias");
    LayerNormResult r = ops::layer_norm(stream, t, w, b, o);
    give(y, r.y);
    give(mean, r.mean);
    give(rstd, r.rstd);
  HPU_API_END
}

HPU_API hpuStatus_t hpuLayerNormBackward(hpuStream_t stream, hpuTensor_t grad_y, hpuTensor_t x, hpuTensor_t mean,
                                         hpuTensor_t rstd, hpuTensor_t weight, hpuTensor_t *grad_x,
                                         hpuTensor_t *grad_weight, hpuTensor_t *grad_bias) {
  HPU_API_BEGIN
    TensorPtr g = input(grad_y, "grad_y"), t = input(x, "x"), mu = input(mean, "mean"), rs = input(rstd, "rstd");
    TensorPtr w = optional(weight, "weight");
    LayerNormGrads r = ops::layer_norm_backward(stream, g, t, mu, rs, w, grad_x != nullptr, grad_weight != nullptr,
                                                grad_bias != nullptr);
    give(grad_x, r.x);
    give(grad_weight, r.weight);
    give(grad_bias, r.bias);
  HPU_API_END
}

HPU_API hpuStatus_t hpuDropout(hpuStream_t stream, hpuTensor_t x, double p, int train, hpuTensor_t *out,
                               hpuTensor_t *mask) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr t = input(x, "x");
    DropoutResult r = ops::dropout(stream, t, p, train != 0, mask != nullptr);
    give(out, r.out);
    give(mask, r.mask);
  HPU_API_END
}

HPU_API hpuStatus_t hpuDropoutBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t mask, double p,
                                       hpuDataType_t input_dtype, hpuTensor_t *grad_x) {
  HPU_API_BEGIN
    check_out(grad_x, "grad_x");
    TensorPtr g = input(grad_out, "grad_out"), m = input(mask, "mask");
    give(grad_x, ops::dropout_backward(stream, g, m, p, input_dtype));
  HPU_API_END
}

HPU_API hpuStatus_t hpuEmbedding(hpuStream_t stream, hpuTensor_t weight, hpuTensor_t indices, int64_t padding_idx,
                                 hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr w = input(weight, "weight"), idx = input(indices, "indices");
    give(out, ops::embedding(stream, w, idx, padding_idx));
  HPU_API_END
}

HPU_API hpuStatus_t hpuEmbeddingBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t indices,
                                         hpuTensor_t weight, int64_t padding_idx, hpuTensor_t *grad_weight) {
  HPU_API_BEGIN
    check_out(grad_weight, "grad_weight");
    TensorPtr g = input(grad_out, "grad_out"), idx = input(indices, "indices"), w = input(weight, "weight");
    give(grad_weight, ops::embedding_backward(stream, g, idx, w, padding_idx));
  HPU_API_END
}

HPU_API hpuStatus_t hpuSgdStep(hpuStream_t stream, hpuTensor_t param, hpuTensor_t grad, hpuTensor_t momentum_buf,
                               int64_t step, const hpuSgdOptions_t *options) {
  HPU_API_BEGIN
    const hpuSgdOptions_t o = read_sized(options, hpuSgdOptions_t HPU_SGD_OPTIONS_INIT, "options");
    TensorPtr p = input(param, "param"), g = input(grad, "grad"), buf = optional(momentum_buf, "momentum_buf");
    ops::sgd_step(stream, p, g, buf, step, o);
  HPU_API_END
}

HPU_API hpuStatus_t hpuAdamwStep(hpuStream_t stream, hpuTensor_t param, hpuTensor_t grad, hpuTensor_t exp_avg,
                                 hpuTensor_t exp_avg_sq, int64_t step, const hpuAdamwOptions_t *options) {
  HPU_API_BEGIN
    TensorPtr p = input(param, "param"), g = input(grad, "grad");
    const hpuAdamwOptions_t o = read_sized(options, hpuAdamwOptions_t HPU_ADAMW_OPTIONS_INIT, "options");
    TensorPtr m = input(exp_avg, "exp_avg"), v = input(exp_avg_sq, "exp_avg_sq");
    ops::adamw_step(stream, p, g, m, v, step, adamw_options(o, "options->param_copy"));
  HPU_API_END
}

}  // extern "C"
