// What a product does with its results as it stores them (GemmShape::ep):
// oneDNN's post-ops, the kernels' side of hpuMatmulOptions_t. In order, on
// r = alpha op(A) op(B):
//   r += bias (one value per column of C) and beta C, then r is rounded once
//   to C's type; then r = activation(r); then r *= activation's derivative at
//   backward_input (the backward of an activation whose output r is the
//   gradient of).
// Each gives the bits of a separate pass over the stored C (hpuRelu,
// hpuReluBackward). Or, with a sink, nothing is stored: the f32 results go to
// the sink, a row piece at a time (an optimizer step that takes the product
// as its gradient).
#pragma once

#include <cstdint>

namespace hpu::kernels {

enum class Activation { none, relu };

// Consumes a product's results in place of C's store. row() gets `cols`
// results (alpha applied, f32) of C's row-major elements at .. at + cols - 1
// of the whole C (element row * ldc + col; see Epilogue::at), each element
// once, from any thread; results is 64-byte aligned when the native kernels
// call it.
struct GemmSink {
  void (*row)(const GemmSink &sink, int64_t at, int64_t cols, const float *results) = nullptr;
  const void *state = nullptr;  // the sink's own
  // Arrays laid out as C that row() reads and writes (null: none), with their
  // element sizes: the native kernels prefetch the parts of the next tiles
  // while they compute this one, which the hardware prefetchers do not follow
  // (dozens of short row pieces per tile).
  static constexpr int kArrays = 4;
  const void *arrays[kArrays] = {};
  int elem_size[kArrays] = {};
};

struct Epilogue {
  // n values of C's type, added to each row before the rounding (beta must
  // be 0): the bits of C filled with the bias row by row and beta 1.
  const void *bias = nullptr;
  Activation activation = Activation::none;
  // r *= activation'(backward_input) (relu: 1 where backward_input > 0, else
  // 0): backward_input has C's type and m x n shape, row stride ld_backward.
  Activation backward = Activation::none;
  const void *backward_input = nullptr;
  int64_t ld_backward = 0;
  // No store: the results go to the sink (C's pointer is only passed
  // along); beta must be 0 and nothing above is set.
  const GemmSink *sink = nullptr;
  // Where this product's C starts in the sink's whole C, in elements (gemm
  // adds the offsets of its blocks and gemm_batched those of its matrices).
  int64_t at = 0;

  bool any() const { return bias || activation != Activation::none || backward != Activation::none || sink; }
};

}  // namespace hpu::kernels
