// sum and mean over a set of dims, with their backwards.
#include <cstdio>
#include <vector>

#include "kernels/cast.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/reduce.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

namespace {

struct Plan {
  bool reduced[kMaxDims] = {};
  Dims out;           // the result's shape
  Dims kept;          // x's shape with reduced dims set to 1
  int64_t count = 1;  // elements reduced into each result
};

Plan plan(const Tensor &x, const int *dims, int ndims, bool keepdim) {
  HPU_CHECK_ARG(ndims >= 0 && ndims <= std::max(x.ndim(), 1), "ndims %d is not in 0..%d for x %s", ndims,
                std::max(x.ndim(), 1), x.str().c_str());
  HPU_CHECK_ARG(dims != nullptr || ndims == 0, "dims is NULL and ndims is %d", ndims);
  Plan p;
  for (int i = 0; i < ndims; ++i) {
    char arg[24];
    std::snprintf(arg, sizeof arg, "dims[%d]", i);
    int d = normalize_dim(dims[i], x.ndim(), arg);
    if (x.ndim() == 0) continue;
    HPU_CHECK_ARG(!p.reduced[d], "dims[%d] %d names dim %d a second time", i, dims[i], d);
    p.reduced[d] = true;
  }
  for (int i = 0; i < x.ndim(); ++i) {
    bool r = ndims == 0 || p.reduced[i];
    p.reduced[i] = r;
    p.kept.v[p.kept.n++] = r ? 1 : x.size(i);
    if (r) p.count *= x.size(i);
    if (!r || keepdim) p.out.v[p.out.n++] = r ? 1 : x.size(i);
  }
  return p;
}

// Reduces the runs of reduced dims one pass each, last run first; passes
// before the last write the accumulator type.
void run(Reduce op, const Tensor &x, const Plan &p, const void *src, hpuDataType_t dt, void *dst,
         hpuDataType_t out_dt) {
  hpuDataType_t acc = is_floating(dt) ? (dt == HPU_FLOAT64 ? HPU_FLOAT64 : HPU_FLOAT32) : HPU_INT64;
  std::vector<std::pair<int, int>> runs;  // [begin, end) of reduced dims
  for (int i = 0; i < x.ndim(); ++i)
    if (p.reduced[i]) {
      if (!runs.empty() && runs.back().second == i)
        runs.back().second = i + 1;
      else
        runs.push_back({i, i + 1});
    }
  if (runs.empty()) runs.push_back({0, 0});  // a 0-dim x: one pass of n = 1
  Dims cur = x.shape();
  std::vector<char> bufs[2];
  const void *in = src;
  hpuDataType_t in_dt = dt;
  for (size_t r = runs.size(); r-- > 0;) {
    int64_t outer = 1, n = 1, inner = 1;
    for (int i = 0; i < cur.n; ++i) (i < runs[r].first ? outer : i < runs[r].second ? n : inner) *= cur[i];
    bool last = r == 0;
    void *out = dst;
    if (!last) {
      bufs[r % 2].resize(static_cast<size_t>(outer * inner) * dtype_size(acc));
      out = bufs[r % 2].data();
    }
    kernels::reduce(op, in_dt, in, outer, n, inner, out, last ? out_dt : acc);
    for (int i = runs[r].first; i < runs[r].second; ++i) cur[i] = 1;
    in = out;
    in_dt = acc;
  }
}

}  // namespace

TensorPtr ops::reduce(hpuStream_t stream, Reduce op, const TensorPtr &x, const int *dims, int ndims, bool keepdim) {
  if (op == Reduce::mean) require_floating(*x, "x");
  Plan p = plan(*x, dims, ndims, keepdim);
  hpuDataType_t dt = is_floating(x->dtype())
                         ? autocast::decide(op == Reduce::sum ? "sum" : "mean", {x->dtype()}).apply(x->dtype())
                         : x->dtype();
  if (!kernels::reduce_supports(op, dt))
    fail(HPU_ERROR_UNSUPPORTED, "x is %s: %s does not support %s", x->str().c_str(), kernels::reduce_name(op),
         dtype_name(dt));
  hpuDataType_t out_dt = is_floating(dt) ? dt : HPU_INT64;
  auto s = stream_for(stream, *x);
  TensorPtr X = as(*s, x, dt), y = empty_like(*x, out_dt, p.out);
  // One operation per input element.
  if (y->numel() > 0) enqueue(*s, work({X.get(), y.get()}, *X), [=] { run(op, *X, p, X->data(), dt, y->data(), out_dt); });
  return y;
}

TensorPtr ops::reduce_backward(hpuStream_t stream, Reduce op, const TensorPtr &g, const TensorPtr &x,
                               const int *dims, int ndims, bool keepdim) {
  same_device(*x, "x", *g, "grad_out");
  require_floating(*g, "grad_out");
  require_floating(*x, "x");
  Plan p = plan(*x, dims, ndims, keepdim);
  require_shape(*g, "grad_out", p.out, "the forward's output shape");
  hpuDataType_t dt = g->dtype();
  auto s = stream_for(stream, *x);
  TensorPtr G = as(*s, g, dt), gx = empty_like(*x, dt, x->shape());
  Dims src;  // grad_out read over x's shape: stride 0 along reduced dims
  broadcast_strides(p.kept, x->shape(), &src);
  Dims dense = x->shape().contiguous_strides();
  double scale = op == Reduce::mean ? 1.0 / static_cast<double>(p.count) : 1.0;
  // A broadcast copy, and a scaling pass over gx for mean.
  Work w = scale != 1.0 ? work({G.get(), gx.get(), gx.get(), gx.get()}, *gx) : work({G.get(), gx.get()}, *gx, 0);
  if (gx->numel() > 0)
    enqueue(*s, w, [=] {
      kernels::copy_strided(G->data(), dt, src.data(), gx->data(), dt, dense.data(), x->ndim(), x->shape().data());
      if (scale != 1.0)
        kernels::binary_scalar(kernels::Binary::mul, dt, gx->data(), scale, gx->data(), gx->numel());
    });
  return as(*s, gx, x->dtype());
}
