// Neural-network kernels on dense buffers. Each buffer has its own floating
// dtype; bf16/f16/f32 compute in f32, f64 in f64 (the accumulator follows the
// first input). Large work runs in parallel over the compute budget.
#pragma once

#include <hpu/ops.h>

#include <cstdint>

namespace hpu::kernels {

// ---- softmax (nn_softmax.cpp): the input seen as [outer, n, inner], normalised
// over n. log selects log_softmax.
void softmax(bool log, hpuDataType_t x_dt, const void *x, hpuDataType_t y_dt, void *y, int64_t outer, int64_t n,
             int64_t inner);
// From the forward's output y and its gradient dy.
void softmax_backward(bool log, hpuDataType_t dt, const void *dy, const void *y, hpuDataType_t dx_dt, void *dx,
                      int64_t outer, int64_t n, int64_t inner);

// ---- losses (nn_loss.cpp): input [n, c, inner] (inner: the product of any
// spatial dims, 1 for [n, c]), target [n, inner] (i32/i64): sample k = i *
// inner + s has the class scores input[i, :, s]. A target outside 0..c-1 that
// is not ignore_index throws HPU_ERROR_INVALID_ARGUMENT. loss holds n * inner
// values (HPU_REDUCTION_NONE) or one. Class weights (c values of any floating
// type; data nullptr: all 1) scale each sample's loss by the weight of its
// target class, and a mean divides by the sum of the counted samples' weights
// (as ATen does). label_smoothing (cross entropy only) is ATen's: a sample's
// loss is (1 - e) times its weighted nll plus e / c times the sum over the
// classes of weight[j] * -log_softmax[j]. With probs (cross entropy only),
// target instead holds class probabilities of any floating type laid out as
// input: sample k's loss is sum_j weight[j] q[j] -log_softmax[j] with q =
// (1 - e) target + e / c, nothing is ignored, and a mean divides by n * inner.
struct LossWeights {
  hpuDataType_t dt = HPU_FLOAT32;
  const void *data = nullptr;
};
struct LossArgs {
  int64_t n = 0, c = 0, inner = 1;
  hpuDataType_t target_dt = HPU_INT64;
  const void *target = nullptr;
  LossWeights weights;
  hpuReduction_t reduction = HPU_REDUCTION_MEAN;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  bool probs = false;  // target: class probabilities (floating, input's shape)
};
void nll_loss(const LossArgs &a, hpuDataType_t in_dt, const void *input, hpuDataType_t loss_dt, void *loss);
void nll_loss_backward(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t gi_dt,
                       void *grad_input);
// log_softmax over c, then nll.
void cross_entropy(const LossArgs &a, hpuDataType_t in_dt, const void *input, hpuDataType_t loss_dt, void *loss);
void cross_entropy_backward(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t in_dt,
                            const void *input, hpuDataType_t gi_dt, void *grad_input);

// ---- layer norm (nn_layer_norm.cpp) over the last dim d of [rows, d]; w and
// b may be null. mean and rstd: rows f32 values each.
void layer_norm(hpuDataType_t x_dt, const void *x, hpuDataType_t w_dt, const void *w, hpuDataType_t b_dt,
                const void *b, double eps, int64_t rows, int64_t d, hpuDataType_t y_dt, void *y, float *mean,
                float *rstd);
// dx, dw, db may be null (not computed).
void layer_norm_backward(hpuDataType_t dy_dt, const void *dy, hpuDataType_t x_dt, const void *x, const float *mean,
                         const float *rstd, hpuDataType_t w_dt, const void *w, int64_t rows, int64_t d,
                         hpuDataType_t dx_dt, void *dx, hpuDataType_t dw_dt, void *dw, void *db);

// ---- dropout (nn_dropout.cpp): element i is kept when the uniform draw of
// counter offset + i under seed is >= p; kept elements scaled by 1/(1-p).
void dropout(hpuDataType_t x_dt, const void *x, hpuDataType_t y_dt, void *y, uint8_t *mask, int64_t n, double p,
             uint64_t seed, uint64_t offset);
// dx[i] = mask[i] ? dy[i] * scale : 0.
void dropout_backward(hpuDataType_t dy_dt, const void *dy, const uint8_t *mask, double scale, hpuDataType_t dx_dt,
                      void *dx, int64_t n);

// ---- embedding (nn_embedding.cpp): weight [v, d]; n indices (i32/i64). An
// index outside 0..v-1 throws HPU_ERROR_INVALID_ARGUMENT.
void embedding(hpuDataType_t w_dt, const void *weight, int64_t v, int64_t d, hpuDataType_t idx_dt,
               const void *indices, int64_t n, hpuDataType_t out_dt, void *out);
// grad_weight = sum of dy rows into the rows their indices name, except
// padding_idx (negative: none).
void embedding_backward(hpuDataType_t dy_dt, const void *dy, hpuDataType_t idx_dt, const void *indices, int64_t n,
                        int64_t v, int64_t d, int64_t padding_idx, hpuDataType_t gw_dt, void *grad_weight);

// ---- broadcasting (nn_sum_to.cpp): out (dense, shape of ndim dims with
// out_shape[i] == 1 or == shape[i]) = scale * the sum of dense g (shape) over
// the dims out broadcasts.
void sum_to(hpuDataType_t g_dt, const void *g, int ndim, const int64_t *shape, const int64_t *out_shape,
            double scale, hpuDataType_t out_dt, void *out);

}  // namespace hpu::kernels
