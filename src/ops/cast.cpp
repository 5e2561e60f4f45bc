// Data-type conversion as an op, with its backward.
#include "ops/op.hpp"

using namespace hpu;
using namespace hpu::ops;

extern "C" {

HPU_API hpuStatus_t hpuCast(hpuStream_t stream, hpuTensor_t x, hpuDataType_t dtype, hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr xt = input(x, "x");
    check_dtype(dtype, "dtype");
    auto s = stream_for(stream, *xt);
    give(out, copy_as(*s, xt, dtype));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCastBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x) {
  HPU_API_BEGIN
    check_out(grad_x, "grad_x");
    TensorPtr g = input(grad_out, "grad_out"), xt = input(x, "x");
    same_device(*xt, "x", *g, "grad_out");
    require_floating(*g, "grad_out");
    require_floating(*xt, "x");
    require_shape(*g, "grad_out", xt->shape(), "x's shape");
    auto s = stream_for(stream, *xt);
    give(grad_x, copy_as(*s, g, xt->dtype()));
  HPU_API_END
}

}  // extern "C"
