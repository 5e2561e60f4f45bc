// Vector paths of the f32 elementwise loops that are limited by memory rather
// than arithmetic (add, relu, ...). Each path gives the same bits as the
// scalar path: IEEE add/sub/mul/div/sqrt round the same in every lane width,
// no FMA contraction, and max/min/relu keep the scalar rules for NaN and
// signed zeros. elementwise.cpp runs them (best_isa()) for f32 and, on
// widened blocks, for bf16/f16; elementwise_paths(isa) gives one explicitly
// (tests compare every path with the scalar one).
#pragma once

#include <cstddef>

#include "kernels/cpu.hpp"
#include "kernels/elementwise.hpp"

namespace hpu::kernels {

constexpr int kBinaryOps = static_cast<int>(Binary::pow) + 1;
constexpr int kUnaryOps = static_cast<int>(Unary::square) + 1;

// nullptr where an op has no vector loop (pow, and the unary functions that
// call libm: exp, log, tan, tanh, sigmoid, gelu).
struct ElementwisePaths {
  void (*binary[kBinaryOps])(const float *a, const float *b, float *out, size_t n);
  void (*binary_scalar[kBinaryOps])(const float *a, float b, float *out, size_t n);
  void (*unary[kUnaryOps])(const float *x, float *out, size_t n);
  // out[i] = g[i] * (x[i] > 0 ? 1 : 0)
  void (*relu_backward)(const float *x, const float *g, float *out, size_t n);
  // y[i] = beta * y[i] + alpha * x[i]; with beta == 0, alpha * x[i]
  void (*axpby)(float alpha, const float *x, float beta, float *y, size_t n);
};

// The loops of one path; isa must be supported.
const ElementwisePaths &elementwise_paths(Isa isa);
// The path of best_isa().
const ElementwisePaths &elementwise_vec();

}  // namespace hpu::kernels
