// What the ops share: checks with messages that name the argument and its
// shape, casts of inputs, output allocation, and queueing a kernel with the
// work it does.
#pragma once

#include <hpu/ops.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "autocast/autocast.hpp"
#include "core/error.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

namespace hpu::ops {

// INVALID_ARGUMENT unless t lives on x's device.
void same_device(const Tensor &x, const char *x_arg, const Tensor &t, const char *t_arg);
// UNSUPPORTED unless t is f16, bf16, f32 or f64.
void require_floating(const Tensor &t, const char *arg);
// UNSUPPORTED unless t is i32 or i64.
void require_index(const Tensor &t, const char *arg);
// INVALID_ARGUMENT unless t has `ndim` dims ("a is f32[2, 3, 4]: expected 2 dims").
void require_ndim(const Tensor &t, const char *arg, int ndim);
// INVALID_ARGUMENT unless t's shape is `shape`.
void require_shape(const Tensor &t, const char *arg, const Dims &shape, const char *what);
// INVALID_ARGUMENT unless the two run types agree (after autocast).
void require_same_dtype(const Tensor &a, const char *a_arg, hpuDataType_t a_run, const Tensor &b,
                        const char *b_arg, hpuDataType_t b_run);
// A dim index in 0..ndim-1 (negative counts from the end), or INVALID_ARGUMENT.
int normalize_dim(int dim, int ndim, const char *arg);

// x as a contiguous tensor of type dt: x itself, or a converted copy queued on s.
TensorPtr as(Stream &s, const TensorPtr &x, hpuDataType_t dt);

// True when a's and b's elements may share bytes.
bool overlap(const Tensor &a, const Tensor &b);

// Always a new contiguous tensor: a converted copy of x queued on s.
TensorPtr copy_as(Stream &s, const TensorPtr &x, hpuDataType_t dt);

// What the profiler shows for one queued kernel (hpuProfilerStart(3)): bytes
// read + written and floating-point operations. Each op family counts its
// work in one place (a `work` function in its file); each element a kernel
// reads or writes counts once, an element updated in place twice.
struct Work {
  uint64_t bytes = 0, flops = 0;
};
// The bytes of these tensors' elements (nullptr counts nothing).
uint64_t bytes_of(std::initializer_list<const Tensor *> tensors);
// A kernel that reads or writes `tensors` (an in-place one lists its tensor
// twice) and does flops_per_element operations per element of `per`.
inline Work work(std::initializer_list<const Tensor *> tensors, const Tensor &per, uint64_t flops_per_element = 1) {
  return {bytes_of(tensors), static_cast<uint64_t>(per.numel()) * flops_per_element};
}

// Queues a kernel on s with the work it does. An error it throws when it runs
// (a target out of range) becomes the stream's sticky error, prefixed with the
// op's name.
void enqueue(Stream &s, const Work &work, std::function<void()> fn);
// The same for callers that annotate their work themselves (prof::annotate).
void enqueue(Stream &s, std::function<void()> fn);

// A new tensor on x's device.
inline TensorPtr empty_like(const Tensor &x, hpuDataType_t dt, const Dims &shape) {
  return Tensor::empty(x.device(), dt, shape);
}

// Element strides of a contiguous tensor of `shape` read as `target`
// (numpy broadcasting: right-aligned, size-1 or missing dims get stride 0).
// False when shape does not broadcast to target.
bool broadcast_strides(const Dims &shape, const Dims &target, Dims *strides);
// `shape` with leading 1s up to n dims.
Dims pad_left(const Dims &shape, int n);

// Shape of a [outer, n, inner] split around dim.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const Dims &shape, int dim);

}  // namespace hpu::ops
