// Data-type conversion as an op, with its backward.
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

TensorPtr ops::cast(hpuStream_t stream, const TensorPtr &x, hpuDataType_t dtype) {
  check_dtype(dtype, "dtype");
  auto s = stream_for(stream, *x);
  return copy_as(*s, x, dtype);
}

TensorPtr ops::cast_backward(hpuStream_t stream, const TensorPtr &g, const TensorPtr &x) {
  same_device(*x, "x", *g, "grad_out");
  require_floating(*g, "grad_out");
  require_floating(*x, "x");
  require_shape(*g, "grad_out", x->shape(), "x's shape");
  auto s = stream_for(stream, *x);
  return copy_as(*s, g, x->dtype());
}
