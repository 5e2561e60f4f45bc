// The ops layer's C++ interface, called by the C boundary (src/api/ops_api.cpp,
// src/api/nn_api.cpp), which looks the handles up and hands the results out.
//
// Every op takes the stream handle (NULL: the default stream of the device of
// its first tensor argument), its input tensors (nullptr for an absent
// optional one) and plain values. It checks them, with messages that name the
// C argument ("x", "grad_out"), takes the autocast decision on the calling
// thread, casts its inputs, queues its kernels and returns the new tensors.
// The families follow include/hpu/ops.h.
#pragma once

#include <hpu/ops.h>

#include <memory>
#include <vector>

namespace hpu {
class Tensor;
}

namespace hpu::ops {

using TensorPtr = std::shared_ptr<Tensor>;

// Dropout with probability p (train false: a copy), and the u8 mask of kept
// elements when wanted; the backward applies the mask to grad_out.
struct DropoutResult {
  TensorPtr out, mask;
};
DropoutResult dropout(hpuStream_t stream, const TensorPtr &x, double p, bool train, bool want_mask);
TensorPtr dropout_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &mask, double p,
                           hpuDataType_t input_dtype);

// The rows of weight named by indices, and the gradient of weight.
TensorPtr embedding(hpuStream_t stream, const TensorPtr &weight, const TensorPtr &indices, int64_t padding_idx);
TensorPtr embedding_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &indices,
                             const TensorPtr &weight, int64_t padding_idx);

// The f32 sum of the squares of every element of tensors (named "tensors[i]").
TensorPtr squared_norm(hpuStream_t stream, std::vector<TensorPtr> tensors);
// The i64 index of the largest element along dim.
TensorPtr argmax(hpuStream_t stream, const TensorPtr &x, int dim, bool keepdim);

// x converted to dtype, and the backward: grad_out converted to x's type.
TensorPtr cast(hpuStream_t stream, const TensorPtr &x, hpuDataType_t dtype);
TensorPtr cast_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &x);

}  // namespace hpu::ops
