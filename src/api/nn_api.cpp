// The neural-network ops at the C boundary: dropout and embedding (the
// tensor math is in ops_api.cpp). Each checks its out-pointers, looks its
// handles up (naming the argument), calls the ops layer (ops/ops.hpp) and
// hands the results out.
#include "api/api.hpp"
#include "ops/op.hpp"
#include "ops/ops.hpp"

using namespace hpu;
using namespace hpu::ops;

extern "C" {

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

}  // extern "C"
