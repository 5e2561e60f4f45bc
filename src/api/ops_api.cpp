// The tensor-math ops at the C boundary: casts, norms and argmax (the
// layers, losses and dropout are in nn_api.cpp). Each checks its
// out-pointers, looks its handles up (naming the argument), calls the ops
// layer (ops/ops.hpp) and hands the results out.
#include <cstdio>
#include <vector>

#include "api/api.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

extern "C" {

HPU_API hpuStatus_t hpuSquaredNorm(hpuStream_t stream, const hpuTensor_t *tensors, size_t count,
                                   hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    HPU_CHECK_ARG(tensors != nullptr, "tensors is NULL with count %zu", count);
    std::vector<TensorPtr> xs;
    for (size_t i = 0; i < count; ++i) {
      char arg[32];
      std::snprintf(arg, sizeof arg, "tensors[%zu]", i);
      xs.push_back(input(tensors[i], arg));
    }
    give(out, ops::squared_norm(stream, std::move(xs)));
  HPU_API_END
}

HPU_API hpuStatus_t hpuArgmax(hpuStream_t stream, hpuTensor_t x, int dim, int keepdim, hpuTensor_t *indices) {
  HPU_API_BEGIN
    check_out(indices, "indices");
    TensorPtr t = input(x, "x");
    give(indices, ops::argmax(stream, t, dim, keepdim != 0));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCast(hpuStream_t stream, hpuTensor_t x, hpuDataType_t dtype, hpuTensor_t *out) {
  HPU_API_BEGIN
    check_out(out, "out");
    TensorPtr t = input(x, "x");
    give(out, ops::cast(stream, t, dtype));
  HPU_API_END
}

HPU_API hpuStatus_t hpuCastBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x) {
  HPU_API_BEGIN
    check_out(grad_x, "grad_x");
    TensorPtr g = input(grad_out, "grad_out"), t = input(x, "x");
    give(grad_x, ops::cast_backward(stream, g, t));
  HPU_API_END
}

}  // extern "C"
