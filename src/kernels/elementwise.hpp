// Elementwise kernels on dense buffers. bf16 and f16 are computed in f32 and
// rounded once per result; f64 in f64; integers natively (division by zero
// throws HPU_ERROR_INVALID_ARGUMENT inside the queued op). Outputs may alias
// inputs (in-place). Large buffers run in parallel over the compute budget.
//
// To write a fused kernel of your own, work in blocks of kBlock elements:
// load_f32 each input block, compute on float arrays (plain loops
// vectorise), store_f32 the result; parallel_for (parallel.hpp) over blocks.
#pragma once

#include <hpu/types.h>

#include <cstddef>
#include <cstdint>

namespace hpu::kernels {

constexpr size_t kBlock = 1024;

// Widens n elements of a floating dt (f16, bf16, f32, f64) to f32, and back
// (rounding to nearest even).
void load_f32(hpuDataType_t dt, const void *src, float *dst, size_t n);
void store_f32(hpuDataType_t dt, const float *src, void *dst, size_t n);

enum class Binary { add, sub, mul, div, max, min, pow };
enum class Unary { neg, abs, exp, log, tan, tanh, sigmoid, relu, gelu, sqrt, rsqrt, reciprocal, square };

const char *binary_name(Binary op);
const char *unary_name(Unary op);

// True when the kernels do dt: binary every numeric type but bool
// (pow: floating only), unary floating types (neg, abs, relu, square: also
// signed integers).
bool binary_supports(Binary op, hpuDataType_t dt);
bool unary_supports(Unary op, hpuDataType_t dt);

// out[i] = a[i] op b[i].
void binary(Binary op, hpuDataType_t dt, const void *a, const void *b, void *out, size_t n);
// out[i] = a[i] op b   (b converted to dt's compute type).
void binary_scalar(Binary op, hpuDataType_t dt, const void *a, double b, void *out, size_t n);
// Broadcasting: out (dense, `shape`) [idx] = a[idx . a_strides] op b[idx . b_strides],
// strides in elements, 0 for broadcast dims.
void binary_strided(Binary op, hpuDataType_t dt, int ndim, const int64_t *shape, const void *a,
                    const int64_t *a_strides, const void *b, const int64_t *b_strides, void *out);

// out[i] = f(x[i]). gelu is the exact (erf) form, as ATen's default.
void unary(Unary op, hpuDataType_t dt, const void *x, void *out, size_t n);
// grad_in[i] = grad_out[i] * f'(x[i]), floating types.
void unary_backward(Unary op, hpuDataType_t dt, const void *x, const void *grad_out, void *grad_in, size_t n);

// y[i] = beta * y[i] + alpha * x[i]: accumulation (add_), x and y of any floating
// types (bf16 gradients into f32 buffers).
void axpby(float alpha, const void *x, hpuDataType_t x_dt, float beta, void *y, hpuDataType_t y_dt, size_t n);

}  // namespace hpu::kernels
