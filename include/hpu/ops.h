/* libhpu — named ops on tensors (Habana/ATen base names), each with its
 * backward; products with epilogues; fused optimizer steps. See hpu(7).
 *
 * Every op: stream first (NULL: the default stream of its tensors' device),
 * then inputs, attributes, outputs last. Inputs must be on one device and the
 * stream must belong to it. The op allocates its outputs on that device and
 * returns new handles (release them with hpuTensorRelease); outputs are set
 * only on success. The work is queued: results are ready in stream order, and
 * a failure while it runs (an index out of range) becomes the stream's sticky
 * error.
 *
 * Precision: the calling thread's autocast region decides, when the op is
 * enqueued, which type an op's floating inputs run in (hpuAutocastPush(3));
 * floating outputs have that type. A backward op runs in the type of the
 * gradient it is given (its forward's output type) and returns each input's
 * gradient in that input's type. bf16 and f16 accumulate in f32. */
#ifndef HPU_OPS_H
#define HPU_OPS_H

#include <hpu/tensor.h>

/* How a loss reduces over the batch. */
typedef enum hpuReduction {
  HPU_REDUCTION_NONE = 0, /* one loss per sample */
  HPU_REDUCTION_MEAN = 1, /* mean over samples whose target is not ignore_index */
  HPU_REDUCTION_SUM = 2
} hpuReduction_t;

/* Options of hpuNllLoss and hpuCrossEntropyLoss (PyTorch's keywords). */
typedef struct hpuLossOptions {
  size_t struct_size;
  hpuReduction_t reduction; /* default HPU_REDUCTION_MEAN */
  int64_t ignore_index;     /* class-index targets equal to it count nothing; -100 */
  double label_smoothing;   /* 0..1, cross entropy only (else 0); 0 */
} hpuLossOptions_t;

#define HPU_LOSS_OPTIONS_INIT {sizeof(hpuLossOptions_t), HPU_REDUCTION_MEAN, -100, 0.0}

/* Options of hpuLayerNorm. */
typedef struct hpuLayerNormOptions {
  size_t struct_size;
  int normalized_ndim; /* how many trailing dims of x are normalized; 1 */
  double eps;          /* added to the variance, >= 0; 1e-5 */
} hpuLayerNormOptions_t;

#define HPU_LAYER_NORM_OPTIONS_INIT {sizeof(hpuLayerNormOptions_t), 1, 1e-5}

/* torch.optim.SGD. */
typedef struct hpuSgdOptions {
  size_t struct_size;
  double lr;
  double momentum;     /* 0: no momentum buffer */
  double dampening;
  double weight_decay; /* L2: added to the gradient */
  int nesterov;
} hpuSgdOptions_t;

#define HPU_SGD_OPTIONS_INIT {sizeof(hpuSgdOptions_t), 0.01, 0.0, 0.0, 0.0, 0}

/* torch.optim.AdamW (decoupled weight decay). */
typedef struct hpuAdamwOptions {
  size_t struct_size;
  double lr;
  double beta1, beta2;
  double eps;
  double weight_decay;
  /* NULL, or a bf16 or f16 tensor of param's shape (contiguous) that gets
   * the new param converted to its type in the same pass (rounded to nearest
   * even as hpuCast does): the low-precision weights the next forward reads
   * under autocast, without a cast of their own. */
  hpuTensor_t param_copy;
} hpuAdamwOptions_t;

#define HPU_ADAMW_OPTIONS_INIT {sizeof(hpuAdamwOptions_t), 1e-3, 0.9, 0.999, 1e-8, 1e-2, NULL}

/* An activation a product applies as it stores its result. */
typedef enum hpuActivation {
  HPU_ACTIVATION_NONE = 0,
  HPU_ACTIVATION_RELU = 1 /* max(0, x); NaN and -0 stay */
} hpuActivation_t;

/* What hpuMatmulEx does with the product p = a b as it stores it (oneDNN's
 * primitive attributes and post-ops), in this order:
 *   r = alpha p + bias + beta c, in f32 (f64 for f64) and rounded once to
 *   the result's type; pre_activation = r; r = activation(r);
 *   r = r * activation_backward's derivative at activation_input.
 * Each step gives the bits of the separate op over the stored result
 * (hpuAddmm with the bias, hpuRelu, hpuReluBackward). All fields are
 * optional; the INIT macro sets none. */
typedef struct hpuMatmulOptions {
  size_t struct_size;
  double alpha;                          /* 1 */
  /* [n] (the result's last dim), any floating type, added to every row;
   * converted to the type the product runs in, as its inputs. Needs beta 0. */
  hpuTensor_t bias;
  hpuActivation_t activation;
  /* A tensor of the result's shape and type (contiguous) that gets r before
   * the activation: what an activation's backward takes (a relu's backward
   * may take the result itself: it is > 0 exactly where r is). */
  hpuTensor_t pre_activation;
  /* The result is the gradient of that activation's output: it is multiplied
   * by the activation's derivative at activation_input (the activation's
   * input, of the result's shape and type; for a relu its output serves as
   * well), the bits of hpuReluBackward(result, activation_input). */
  hpuActivation_t activation_backward;
  hpuTensor_t activation_input;
  /* The result's floating type, or HPU_BOOL (0, the INIT value): the type
   * the product runs in. bf16 and f16 products give f32 without rounding. */
  hpuDataType_t dtype;
  /* Accumulate: a tensor of the result's shape (contiguous; its type is the
   * result's) that the result is written into in place, with c's old values
   * weighted by beta (0: not read). Operands that overlap c are read as they
   * were before the call. */
  hpuTensor_t c;
  double beta;
  /* An AdamW step in place of the store: r = alpha p is the gradient of c
   * (f32 master weights), never stored; c, the moments (f32, c's shape,
   * contiguous) and adamw->param_copy take step adamw_step with the bits
   * hpuAdamwStep gives them from the stored gradient. The product runs in
   * bf16, f16 or f32; bias, pre_activation, the activations and beta are not
   * set. */
  const hpuAdamwOptions_t *adamw;
  hpuTensor_t adamw_exp_avg, adamw_exp_avg_sq;
  int64_t adamw_step;
} hpuMatmulOptions_t;

#define HPU_MATMUL_OPTIONS_INIT                                                                \
  {sizeof(hpuMatmulOptions_t), 1.0, NULL, HPU_ACTIVATION_NONE, NULL, HPU_ACTIVATION_NONE, NULL, HPU_BOOL, \
   NULL, 0.0, NULL, NULL, NULL, 0}

HPU_EXTERN_C_BEGIN

/* ---- matrix products ------------------------------------------------------
 * In the backward ops every gradient output may be NULL (not computed). */

/* out[m,n] = a[m,k] b[k,n]. */
HPU_API hpuStatus_t hpuMm(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuMmBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                  hpuTensor_t *grad_a, hpuTensor_t *grad_b);

/* out[B,m,n] = a[B,m,k] b[B,k,n]. */
HPU_API hpuStatus_t hpuBmm(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuBmmBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                   hpuTensor_t *grad_a, hpuTensor_t *grad_b);

/* out[m,n] = beta bias + alpha a[m,k] b[k,n]; bias is [n] or [m,n]. */
HPU_API hpuStatus_t hpuAddmm(hpuStream_t stream, hpuTensor_t bias, hpuTensor_t a, hpuTensor_t b, double beta,
                             double alpha, hpuTensor_t *out);
HPU_API hpuStatus_t hpuAddmmBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t bias, hpuTensor_t a,
                                     hpuTensor_t b, double beta, double alpha, hpuTensor_t *grad_bias,
                                     hpuTensor_t *grad_a, hpuTensor_t *grad_b);

/* torch.matmul: a [k] or [..., m, k], b [k] or [k, n] or [..., k, n]; batch
 * dims broadcast (right-aligned, equal or 1). A 1-dim operand's dim is removed
 * from the result. */
HPU_API hpuStatus_t hpuMatmul(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuMatmulBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                      hpuTensor_t *grad_a, hpuTensor_t *grad_b);
/* hpuMatmul with an epilogue (hpuMatmulOptions_t; options must not be NULL:
 * HPU_MATMUL_OPTIONS_INIT gives hpuMatmul). A linear layer is a b with b a
 * transposed view of the weight and options->bias; its input gradient with
 * options->activation_backward is the gradient of the relu before it; its
 * weight gradient with options->adamw steps the weight at once. *out gets
 * the result; with options->c, a new handle of c (out may then be NULL). */
HPU_API hpuStatus_t hpuMatmulEx(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, const hpuMatmulOptions_t *options,
                                hpuTensor_t *out);

/* y[..., out] = x[..., in] w[out, in]^T + bias[out]; bias may be NULL. The
 * bias gradient has w's type. */
HPU_API hpuStatus_t hpuLinear(hpuStream_t stream, hpuTensor_t x, hpuTensor_t w, hpuTensor_t bias, hpuTensor_t *y);
HPU_API hpuStatus_t hpuLinearBackward(hpuStream_t stream, hpuTensor_t grad_y, hpuTensor_t x, hpuTensor_t w,
                                      hpuTensor_t *grad_x, hpuTensor_t *grad_w, hpuTensor_t *grad_bias);

/* ---- elementwise ----------------------------------------------------------
 * Binary ops broadcast (numpy rules) and always compute in the wider of the
 * two types; gradients are summed back to each input's shape. */

HPU_API hpuStatus_t hpuAdd(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuAddBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                   hpuTensor_t *grad_a, hpuTensor_t *grad_b);
HPU_API hpuStatus_t hpuSub(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuSubBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                   hpuTensor_t *grad_a, hpuTensor_t *grad_b);
HPU_API hpuStatus_t hpuMul(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuMulBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                   hpuTensor_t *grad_a, hpuTensor_t *grad_b);
HPU_API hpuStatus_t hpuDiv(hpuStream_t stream, hpuTensor_t a, hpuTensor_t b, hpuTensor_t *out);
HPU_API hpuStatus_t hpuDivBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t a, hpuTensor_t b,
                                   hpuTensor_t *grad_a, hpuTensor_t *grad_b);

/* dst += alpha src, in place (gradient accumulation): same shape, any
 * floating types (bf16 gradients into an f32 buffer), dst contiguous. src may
 * be dst itself (dst *= 1 + alpha) or overlap it otherwise (src is then read
 * as it was before the call). */
HPU_API hpuStatus_t hpuAddInplace(hpuStream_t stream, hpuTensor_t dst, hpuTensor_t src, double alpha);

/* x *= alpha, in place (gradient clipping): x floating and contiguous;
 * computed in f32 (f64 for f64) and rounded once. */
HPU_API hpuStatus_t hpuScaleInplace(hpuStream_t stream, hpuTensor_t x, double alpha);

/* Unary ops on floating tensors; the backward takes the forward's input. gelu
 * is the exact (erf) form. */
HPU_API hpuStatus_t hpuExp(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuExpBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuLog(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuLogBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuTan(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuTanBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuRelu(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuReluBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuGelu(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuGeluBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuTanh(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuTanhBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuSigmoid(hpuStream_t stream, hpuTensor_t x, hpuTensor_t *out);
HPU_API hpuStatus_t hpuSigmoidBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x,
                                       hpuTensor_t *grad_x);

/* ---- normalisation and losses ---------------------------------------------- */

/* Softmax along `dim` (negative counts from the end). The backward takes the
 * forward's output and the type of its input (as ATen's
 * _softmax_backward_data), the type grad_x gets. */
HPU_API hpuStatus_t hpuSoftmax(hpuStream_t stream, hpuTensor_t x, int dim, hpuTensor_t *out);
HPU_API hpuStatus_t hpuSoftmaxBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t out, int dim,
                                       hpuDataType_t input_dtype, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuLogSoftmax(hpuStream_t stream, hpuTensor_t x, int dim, hpuTensor_t *out);
HPU_API hpuStatus_t hpuLogSoftmaxBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t out, int dim,
                                          hpuDataType_t input_dtype, hpuTensor_t *grad_x);

/* The losses (ATen's nll_loss and cross_entropy_loss): input [N, C], target
 * [N] class indices (i32 or i64) in 0..C-1 or options->ignore_index (those
 * samples count nothing). The loss is [N] for HPU_REDUCTION_NONE, else a
 * 0-dim tensor. As in ATen, input may also be one sample [C] (target and loss
 * 0-dim) or spatial [N, C, d1, ...] (target and per-sample loss [N, d1, ...]).
 * weight: class weights [C], any floating type, or NULL (all 1); sample i's
 * loss is multiplied by weight[target_i], and HPU_REDUCTION_MEAN divides the
 * sum by the sum of the counted samples' weights. options NULL: the defaults
 * of HPU_LOSS_OPTIONS_INIT, PyTorch's. The backward takes the forward's
 * arguments and the gradient of its loss, and gives input's gradient. */
HPU_API hpuStatus_t hpuNllLoss(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target, hpuTensor_t weight,
                               const hpuLossOptions_t *options, hpuTensor_t *loss);
HPU_API hpuStatus_t hpuNllLossBackward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,
                                       hpuTensor_t target, hpuTensor_t weight, const hpuLossOptions_t *options,
                                       hpuTensor_t *grad_input);

/* log_softmax over the classes then nll_loss, fused: input holds logits.
 * With options->label_smoothing e (0..1), a counted sample's loss is (1 - e)
 * times its weighted loss above plus e / C times the sum over the classes j of
 * weight[j] * -log_softmax(input)[j]; HPU_REDUCTION_MEAN divides by the
 * counted samples' target weights, as above.
 * target may also hold class probabilities (PyTorch's soft targets): a
 * floating target of input's shape. A sample's loss is then sum_j weight[j]
 * q[j] -log_softmax(input)[j] with q = (1 - e) target + e / C, ignore_index
 * plays no part, and HPU_REDUCTION_MEAN divides by the number of samples (not
 * by weights). */
HPU_API hpuStatus_t hpuCrossEntropyLoss(hpuStream_t stream, hpuTensor_t input, hpuTensor_t target,
                                        hpuTensor_t weight, const hpuLossOptions_t *options, hpuTensor_t *loss);
HPU_API hpuStatus_t hpuCrossEntropyLossBackward(hpuStream_t stream, hpuTensor_t grad_loss, hpuTensor_t input,
                                                hpuTensor_t target, hpuTensor_t weight,
                                                const hpuLossOptions_t *options, hpuTensor_t *grad_input);

/* Layer normalisation over the last options->normalized_ndim dims D of x
 * (1..x's ndim; ATen's normalized_shape is x's shape from there): y = (x -
 * mean) rstd weight + bias, rstd = 1 / sqrt(var + options->eps); weight and
 * bias have those dims' shape, or are NULL. mean and rstd (f32, x's shape
 * without the normalized dims) are what the backward needs; either output may
 * be NULL. options NULL: HPU_LAYER_NORM_OPTIONS_INIT (the last dim, eps
 * 1e-5). hpuLayerNormBackward tells the normalized dims from mean's shape. */
HPU_API hpuStatus_t hpuLayerNorm(hpuStream_t stream, hpuTensor_t x, hpuTensor_t weight, hpuTensor_t bias,
                                 const hpuLayerNormOptions_t *options, hpuTensor_t *y, hpuTensor_t *mean,
                                 hpuTensor_t *rstd);
HPU_API hpuStatus_t hpuLayerNormBackward(hpuStream_t stream, hpuTensor_t grad_y, hpuTensor_t x, hpuTensor_t mean,
                                         hpuTensor_t rstd, hpuTensor_t weight, hpuTensor_t *grad_x,
                                         hpuTensor_t *grad_weight, hpuTensor_t *grad_bias);

/* Dropout: with `train` nonzero each element is zeroed with probability p
 * and the rest scaled by 1/(1-p), drawing from the device's generator
 * (hpuRandomSeed(3)); mask (u8, x's shape, 1 = kept) may be NULL. With train
 * 0, out is a copy of x and the mask all ones. */
HPU_API hpuStatus_t hpuDropout(hpuStream_t stream, hpuTensor_t x, double p, int train, hpuTensor_t *out,
                               hpuTensor_t *mask);
/* grad_x (of type input_dtype, the forward's input type) = grad_out masked
 * and scaled as the forward did. */
HPU_API hpuStatus_t hpuDropoutBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t mask, double p,
                                       hpuDataType_t input_dtype, hpuTensor_t *grad_x);

/* Rows of weight [V, D] picked by indices (i32 or i64, any shape): out is
 * [indices..., D]. An index equal to padding_idx (negative: none) gets no
 * gradient. An index outside 0..V-1 fails the stream. */
HPU_API hpuStatus_t hpuEmbedding(hpuStream_t stream, hpuTensor_t weight, hpuTensor_t indices, int64_t padding_idx,
                                 hpuTensor_t *out);
HPU_API hpuStatus_t hpuEmbeddingBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t indices,
                                         hpuTensor_t weight, int64_t padding_idx, hpuTensor_t *grad_weight);

/* ---- reductions and casts ------------------------------------------------- */

/* Sum / mean over `ndims` dims (each once; negative counts from the end;
 * ndims 0: all dims). keepdim keeps reduced dims as size 1. Integer sums
 * give i64; mean needs a floating type. The backward takes the forward's
 * input and the same attributes. */
HPU_API hpuStatus_t hpuSum(hpuStream_t stream, hpuTensor_t x, const int *dims, int ndims, int keepdim,
                           hpuTensor_t *out);
HPU_API hpuStatus_t hpuSumBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, const int *dims,
                                   int ndims, int keepdim, hpuTensor_t *grad_x);
HPU_API hpuStatus_t hpuMean(hpuStream_t stream, hpuTensor_t x, const int *dims, int ndims, int keepdim,
                            hpuTensor_t *out);
HPU_API hpuStatus_t hpuMeanBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, const int *dims,
                                    int ndims, int keepdim, hpuTensor_t *grad_x);

/* The squared L2 norm of `count` (>= 1) floating tensors of any shapes and
 * strides on one device, sum over all of x^2, as one f32 0-dim tensor (the
 * total norm of gradient clipping is its square root). Accumulated in f64 in
 * a fixed order: the same bits on every run. Autocast does not apply. */
HPU_API hpuStatus_t hpuSquaredNorm(hpuStream_t stream, const hpuTensor_t *tensors, size_t count, hpuTensor_t *out);

/* Index (i64) of the largest element along `dim` (negative counts from the
 * end), the first one on ties; a NaN counts as largest, as torch.argmax.
 * keepdim keeps `dim` as size 1. x of any type but bool; `dim` must not be
 * empty. No backward. */
HPU_API hpuStatus_t hpuArgmax(hpuStream_t stream, hpuTensor_t x, int dim, int keepdim, hpuTensor_t *indices);

/* A new contiguous tensor of x converted to dtype; the backward converts the
 * gradient back to x's type. */
HPU_API hpuStatus_t hpuCast(hpuStream_t stream, hpuTensor_t x, hpuDataType_t dtype, hpuTensor_t *out);
HPU_API hpuStatus_t hpuCastBackward(hpuStream_t stream, hpuTensor_t grad_out, hpuTensor_t x, hpuTensor_t *grad_x);

/* ---- optimizer steps (in place, fused) -------------------------------------
 * param: f32 master weights; grad: bf16, f16 or f32, param's shape; state
 * tensors f32 of param's shape, all contiguous. step counts from 1. */

/* momentum_buf may be NULL when options->momentum is 0; at step 1 it is set
 * to the gradient, as torch does. */
HPU_API hpuStatus_t hpuSgdStep(hpuStream_t stream, hpuTensor_t param, hpuTensor_t grad, hpuTensor_t momentum_buf,
                               int64_t step, const hpuSgdOptions_t *options);
/* With options->param_copy, the new param is also written there. */
HPU_API hpuStatus_t hpuAdamwStep(hpuStream_t stream, hpuTensor_t param, hpuTensor_t grad, hpuTensor_t exp_avg,
                                 hpuTensor_t exp_avg_sq, int64_t step, const hpuAdamwOptions_t *options);

HPU_EXTERN_C_END

#endif /* HPU_OPS_H */
