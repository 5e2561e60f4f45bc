// Embedding lookup and its backward.
#include "kernels/nn.hpp"
#include "ops/op.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

void check_weight(const Tensor &w) {
  require_floating(w, "weight");
  require_ndim(w, "weight", 2);
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuEmbedding(hpuStream_t stream, hpuTensor_t weight, hpuTensor_t indices, int64_t padding_idx,
                                 hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr w = input(weight, "weight"), idx = input(indices, "indices");
    same_device(*w, "weight", *idx, "indices");
    check_weight(*w);
    require_index(*idx, "indices");
    HPU_CHECK_ARG(padding_idx < w->size(0), "padding_idx %lld is not a row of weight %s",
                  static_cast<long long>(padding_idx), w->str().c_str());
    HPU_CHECK_ARG(idx->ndim() < kMaxDims, "indices is %s: at most %d dims (the result adds one)", idx->str().c_str(),
                  kMaxDims - 1);
    hpuDataType_t dt = autocast::decide("embedding", {w->dtype()}).apply(w->dtype());
    int64_t v = w->size(0), d = w->size(1), n = idx->numel();
    Dims shape = idx->shape();
    shape.v[shape.n++] = d;
    auto s = stream_for(stream, *w);
    TensorPtr W = as(*s, w, w->dtype()), I = as(*s, idx, idx->dtype()), y = empty_like(*w, dt, shape);
    // A gather: the indices and the rows they name read, the rows written.
    if (n > 0)
      enqueue(*s, {bytes_of({I.get(), y.get()}) + y->numel() * W->element_size(), 0}, [=] { kernels::embedding(W->dtype(), W->data(), v, d, I->dtype(), I->data(), n, dt, y->data()); });
    give(out, y);
  HPU_API_END
}

HPU_API hpuStatus_t hpuEmbeddingBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t indices,
                                         hpuTensor_t weight, int64_t padding_idx, hpuTensor_t *grad_weight) {
  HPU_API_BEGIN
    check_out(grad_weight, "grad_weight");
    TensorPtr g = input(grad_out, "grad_out"), idx = input(indices, "indices"), w = input(weight, "weight");
    same_device(*w, "weight", *idx, "indices");
    same_device(*w, "weight", *g, "grad_out");
    check_weight(*w);
    require_index(*idx, "indices");
    require_floating(*g, "grad_out");
    HPU_CHECK_ARG(padding_idx < w->size(0), "padding_idx %lld is not a row of weight %s",
                  static_cast<long long>(padding_idx), w->str().c_str());
    HPU_CHECK_ARG(idx->ndim() < kMaxDims, "indices is %s: at most %d dims", idx->str().c_str(), kMaxDims - 1);
    int64_t v = w->size(0), d = w->size(1), n = idx->numel();
    Dims shape = idx->shape();
    shape.v[shape.n++] = d;
    require_shape(*g, "grad_out", shape, "indices' shape plus weight's row size");
    auto s = stream_for(stream, *w);
    TensorPtr G = as(*s, g, g->dtype()), I = as(*s, idx, idx->dtype()), gw = empty_like(*w, w->dtype(), w->shape());
    // A scatter-add: grad_out and the indices read, grad_weight written once
    // (zeroed) and each named row read and written once more per index.
    if (gw->numel() > 0)
      enqueue(*s, {bytes_of({G.get(), I.get(), gw.get()}) + 2 * G->numel() * gw->element_size(),
                   static_cast<uint64_t>(G->numel())}, [=] {
        kernels::embedding_backward(G->dtype(), G->data(), I->dtype(), I->data(), n, v, d, padding_idx, gw->dtype(),
                                    gw->data());
      });
    give(grad_weight, gw);
  HPU_API_END
}

}  // extern "C"
