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
#include <optional>
#include <vector>

#include "kernels/elementwise.hpp"
#include "kernels/reduce.hpp"

namespace hpu {
class Tensor;
}

namespace hpu::ops {

using TensorPtr = std::shared_ptr<Tensor>;
using kernels::Binary;
using kernels::Reduce;
using kernels::Unary;

// The gradients of a two-operand op's a and b, in a's and b's types; a
// backward computes each only when wanted.
struct OperandGrads {
  TensorPtr a, b;
};

// a b for 2-dim (mm) and batched 3-dim (bmm) operands.
TensorPtr mm(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b);
OperandGrads mm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a, const TensorPtr &b,
                         bool want_a, bool want_b);
TensorPtr bmm(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b);
OperandGrads bmm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a, const TensorPtr &b,
                          bool want_a, bool want_b);

// beta bias + alpha a b, and its backward.
TensorPtr addmm(hpuStream_t stream, const TensorPtr &bias, const TensorPtr &a, const TensorPtr &b, double beta,
                double alpha);
struct AddmmGrads {
  TensorPtr bias, a, b;
};
AddmmGrads addmm_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &bias, const TensorPtr &a,
                          const TensorPtr &b, double beta, double alpha, bool want_bias, bool want_a, bool want_b);

// hpuAdamwOptions_t with param_copy looked up (nullptr: none).
struct AdamwOptions {
  double lr, beta1, beta2, eps, weight_decay;
  TensorPtr param_copy;
};
// hpuMatmulOptions_t with its tensors looked up (nullptr for NULL ones); the
// defaults are HPU_MATMUL_OPTIONS_INIT's (a plain torch.matmul).
struct MatmulOptions {
  double alpha = 1;
  TensorPtr bias;
  hpuActivation_t activation = HPU_ACTIVATION_NONE;
  TensorPtr pre_activation;
  hpuActivation_t activation_backward = HPU_ACTIVATION_NONE;
  TensorPtr activation_input;
  hpuDataType_t dtype = HPU_BOOL;  // HPU_BOOL: the type the product runs in
  TensorPtr c;
  double beta = 0;
  std::optional<AdamwOptions> adamw;
  TensorPtr adamw_exp_avg, adamw_exp_avg_sq;
  int64_t adamw_step = 0;
};
// torch.matmul with the epilogue in options (hpuMatmulEx), and its backward.
TensorPtr matmul(hpuStream_t stream, const TensorPtr &a, const TensorPtr &b, const MatmulOptions &options);
OperandGrads matmul_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &a, const TensorPtr &b,
                             bool want_a, bool want_b);

// x w^T + bias (bias optional), and its backward.
TensorPtr linear(hpuStream_t stream, const TensorPtr &x, const TensorPtr &w, const TensorPtr &bias);
struct LinearGrads {
  TensorPtr x, w, bias;
};
LinearGrads linear_backward(hpuStream_t stream, const TensorPtr &grad_y, const TensorPtr &x, const TensorPtr &w,
                            bool want_x, bool want_w, bool want_bias);

// Broadcasting add, sub, mul, div (op), under autocast by the op's name, and
// their backwards.
TensorPtr binary(hpuStream_t stream, Binary op, const TensorPtr &a, const TensorPtr &b);
OperandGrads binary_backward(hpuStream_t stream, Binary op, const TensorPtr &grad_out, const TensorPtr &a,
                            const TensorPtr &b, bool want_a, bool want_b);

// dst += alpha * src in place (gradient accumulation), src possibly dst itself.
void add_inplace(hpuStream_t stream, const TensorPtr &dst, const TensorPtr &src, double alpha);
// x *= alpha in place.
void scale_inplace(hpuStream_t stream, const TensorPtr &x, double alpha);

// Unary exp, log, tan, relu, gelu, tanh, sigmoid (op) of a floating tensor,
// under autocast by the op's name; the backward returns x's type.
TensorPtr unary(hpuStream_t stream, Unary op, const TensorPtr &x);
TensorPtr unary_backward(hpuStream_t stream, Unary op, const TensorPtr &grad_out, const TensorPtr &x);

// softmax and log_softmax along dim; the backwards take the forward's output
// and return input_dtype.
TensorPtr softmax(hpuStream_t stream, const TensorPtr &x, int dim);
TensorPtr softmax_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &out, int dim,
                           hpuDataType_t input_dtype);
TensorPtr log_softmax(hpuStream_t stream, const TensorPtr &x, int dim);
TensorPtr log_softmax_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &out, int dim,
                               hpuDataType_t input_dtype);

// nll_loss and cross_entropy_loss (weight optional); the backwards return the
// gradient of input.
TensorPtr nll_loss(hpuStream_t stream, const TensorPtr &input, const TensorPtr &target, const TensorPtr &weight,
                   const hpuLossOptions_t &options);
TensorPtr nll_loss_backward(hpuStream_t stream, const TensorPtr &grad_loss, const TensorPtr &input,
                            const TensorPtr &target, const TensorPtr &weight, const hpuLossOptions_t &options);
TensorPtr cross_entropy_loss(hpuStream_t stream, const TensorPtr &input, const TensorPtr &target,
                             const TensorPtr &weight, const hpuLossOptions_t &options);
TensorPtr cross_entropy_loss_backward(hpuStream_t stream, const TensorPtr &grad_loss, const TensorPtr &input,
                                      const TensorPtr &target, const TensorPtr &weight,
                                      const hpuLossOptions_t &options);

// Layer normalisation over x's last options.normalized_ndim dims (weight and
// bias optional): y, and the f32 mean and rstd the backward takes.
struct LayerNormResult {
  TensorPtr y, mean, rstd;
};
LayerNormResult layer_norm(hpuStream_t stream, const TensorPtr &x, const TensorPtr &weight, const TensorPtr &bias,
                           const hpuLayerNormOptions_t &options);
// Its backward: the gradients of x, weight and bias, each computed only when wanted.
struct LayerNormGrads {
  TensorPtr x, weight, bias;
};
LayerNormGrads layer_norm_backward(hpuStream_t stream, const TensorPtr &grad_y, const TensorPtr &x,
                                   const TensorPtr &mean, const TensorPtr &rstd, const TensorPtr &weight,
                                   bool want_x, bool want_weight, bool want_bias);

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

// sum or mean (op) over dims[0..ndims) (none: all dims), and the backwards.
TensorPtr reduce(hpuStream_t stream, Reduce op, const TensorPtr &x, const int *dims, int ndims, bool keepdim);
TensorPtr reduce_backward(hpuStream_t stream, Reduce op, const TensorPtr &grad_out, const TensorPtr &x,
                          const int *dims, int ndims, bool keepdim);

// The f32 sum of the squares of every element of tensors (named "tensors[i]").
TensorPtr squared_norm(hpuStream_t stream, std::vector<TensorPtr> tensors);
// The i64 index of the largest element along dim.
TensorPtr argmax(hpuStream_t stream, const TensorPtr &x, int dim, bool keepdim);

// x converted to dtype, and the backward: grad_out converted to x's type.
TensorPtr cast(hpuStream_t stream, const TensorPtr &x, hpuDataType_t dtype);
TensorPtr cast_backward(hpuStream_t stream, const TensorPtr &grad_out, const TensorPtr &x);

// Optimizer steps on f32 parameters in place: SGD (momentum_buf optional)
// and AdamW.
void sgd_step(hpuStream_t stream, const TensorPtr &param, const TensorPtr &grad, const TensorPtr &momentum_buf,
              int64_t step, const hpuSgdOptions_t &options);
void adamw_step(hpuStream_t stream, const TensorPtr &param, const TensorPtr &grad, const TensorPtr &exp_avg,
                const TensorPtr &exp_avg_sq, int64_t step, const AdamwOptions &options);

}  // namespace hpu::ops
