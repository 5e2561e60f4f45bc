// Embedding lookup and its backward.
#include "kernels/nn.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

void check_weight(const Tensor &w) {
  require_floating(w, "weight");
  require_ndim(w, "weight", 2);
}

}  // namespace

TensorPtr ops::embedding(hpuStream_t stream, const TensorPtr &w, const TensorPtr &idx, int64_t padding_idx) {
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
  return y;
}

TensorPtr ops::embedding_backward(hpuStream_t stream, const TensorPtr &g, const TensorPtr &idx, const TensorPtr &w,
                                  int64_t padding_idx) {
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
  return gw;
}
