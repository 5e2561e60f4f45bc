// Vector paths of the fused optimizer updates (optim.cpp runs them on f32
// gradient blocks). Each path gives the same bits as the scalar path, which
// is the arithmetic optim.cpp always had: the same operations in the same
// order, one IEEE rounding each, no FMA. optim_paths(isa) gives one path
// explicitly (tests compare every path with the scalar one).
#pragma once

#include <cstddef>

#include "kernels/cpu.hpp"

namespace hpu::kernels {

// The per-step constants of AdamW, as f32.
struct AdamwConstants {
  float decay;         // 1 - lr * weight_decay
  float beta1, beta2;  // and 1 - beta1, 1 - beta2
  float one_minus_beta1, one_minus_beta2;
  float step_size;     // lr / (1 - beta1^step)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  float eps;
};

// The per-step constants of SGD, as f32.
struct SgdConstants {
  float lr, momentum, damp, weight_decay;  // damp = 1 - dampening
  bool nesterov, first;                    // first: the step that sets buf = d
};

struct OptimPaths {
  // For each i < n:
  //   w = w * decay;  m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g;
  //   w = w - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
  void (*adamw)(float *w, const float *g, float *m, float *v, size_t n, const AdamwConstants &c);
  // For each i < n: d = g + weight_decay * w; with momentum != 0,
  //   buf = first ? d : momentum * buf + damp * d;  d = nesterov ? d + momentum * buf : buf;
  // then w = w - lr * d. buf is not touched when momentum is 0.
  void (*sgd)(float *w, const float *g, float *buf, size_t n, const SgdConstants &c);
};

// The loops of one path; isa must be supported.
const OptimPaths &optim_paths(Isa isa);
// The path of best_isa().
const OptimPaths &optim_vec();

}  // namespace hpu::kernels
