// Reductions the training loop needs beside sum/mean: the sum of squares that
// gradient clipping takes over every gradient, and argmax for accuracy.
#pragma once

#include <hpu/types.h>

#include <cstdint>

namespace hpu::kernels {

// Sum of x[i]^2 over n dense elements of a floating dt, accumulated in f64 in
// fixed chunks summed in order: the same bits whatever the thread count.
double sum_squares(hpuDataType_t dt, const void *x, int64_t n);

// For a dense [outer, n, inner] array (n >= 1) of any type but bf16/f16
// (widen those to f32 first): out[o, i] = the first j with the largest
// x[o, j, i]; a NaN counts as largest (the first NaN wins), as torch.argmax.
void argmax(hpuDataType_t dt, const void *x, int64_t outer, int64_t n, int64_t inner, int64_t *out);

}  // namespace hpu::kernels
