// The squared L2 norm over many tensors (gradient clipping) and argmax along
// a dim (accuracy).
#include <cstdio>
#include <vector>

#include "kernels/norm.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

TensorPtr ops::squared_norm(hpuStream_t stream, std::vector<TensorPtr> xs) {
  HPU_CHECK_ARG(!xs.empty(), "count is 0: at least one tensor is needed (it names the device)");
  for (size_t i = 0; i < xs.size(); ++i) {
    char arg[32];
    std::snprintf(arg, sizeof arg, "tensors[%zu]", i);
    same_device(*xs[0], "tensors[0]", *xs[i], arg);
    require_floating(*xs[i], arg);
  }
  auto s = stream_for(stream, *xs[0]);
  for (TensorPtr &x : xs) x = as(*s, x, x->dtype());
  TensorPtr y = empty_like(*xs[0], HPU_FLOAT32, Dims{});
  Work w{bytes_of({y.get()}), 0};  // a square and an add per element
  for (const TensorPtr &x : xs) w.bytes += x->nbytes(), w.flops += 2 * static_cast<uint64_t>(x->numel());
  enqueue(*s, w, [=] {
    double total = 0;
    for (const TensorPtr &x : xs)
      if (x->numel() > 0) total += kernels::sum_squares(x->dtype(), x->data(), x->numel());
    *y->data_as<float>() = static_cast<float>(total);
  });
  return y;
}

TensorPtr ops::argmax(hpuStream_t stream, const TensorPtr &t, int dim, bool keepdim) {
  int d = normalize_dim(dim, t->ndim(), "dim");
  if (t->dtype() == HPU_BOOL)
    fail(HPU_ERROR_UNSUPPORTED, "x is %s: argmax needs a numeric type", t->str().c_str());
  Split sp = split_at(t->shape(), d);
  if (sp.n == 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "x is %s: dim %d is empty, so it has no largest element", t->str().c_str(),
         dim);
  Dims shape;
  for (int i = 0; i < t->ndim(); ++i)
    if (i != d || keepdim) shape.v[shape.n++] = i == d ? 1 : t->size(i);
  hpuDataType_t dt = t->dtype() == HPU_BFLOAT16 || t->dtype() == HPU_FLOAT16 ? HPU_FLOAT32 : t->dtype();
  auto s = stream_for(stream, *t);
  TensorPtr X = as(*s, t, dt), y = empty_like(*t, HPU_INT64, shape);
  if (y->numel() > 0)  // a comparison per element
    enqueue(*s, work({X.get(), y.get()}, *X), [=] { kernels::argmax(dt, X->data(), sp.outer, sp.n, sp.inner, y->data_as<int64_t>()); });
  return y;
}
