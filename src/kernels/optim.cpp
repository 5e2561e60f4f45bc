// Fused SGD and AdamW steps: one pass over parameter, gradient and state.
#include "kernels/optim.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

// fn(begin, g) over blocks of the gradient widened to f32.
template <class Fn>
void over_grad(hpuDataType_t grad_dt, const void *grad, int64_t n, Fn &&fn) {
  size_t es = grad_dt == HPU_FLOAT32 ? 4 : 2;
  parallel_for(n, 16384, [&](int64_t i0, int64_t i1) {
    float g[kBlock];
    for (int64_t b = i0; b < i1; b += kBlock) {
      int64_t m = std::min<int64_t>(kBlock, i1 - b);
      load_f32(grad_dt, static_cast<const char *>(grad) + b * es, g, m);
      fn(b, m, g);
    }
  });
}

}  // namespace

void sgd_step(float *param, hpuDataType_t grad_dt, const void *grad, float *buf, int64_t n, int64_t step,
              const SgdParams &p) {
  const float lr = static_cast<float>(p.lr), mom = static_cast<float>(p.momentum),
              damp = 1.0f - static_cast<float>(p.dampening), wd = static_cast<float>(p.weight_decay);
  const bool first = step <= 1;
  over_grad(grad_dt, grad, n, [&](int64_t b, int64_t m, float *g) {
    float *w = param + b;
    for (int64_t j = 0; j < m; ++j) {
      float d = g[j] + wd * w[j];
      if (mom != 0.0f) {
        float &v = buf[b + j];
        v = first ? d : mom * v + damp * d;
        d = p.nesterov ? d + mom * v : v;
      }
      w[j] -= lr * d;
    }
  });
}

void adamw_step(float *param, hpuDataType_t grad_dt, const void *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                int64_t step, const AdamwParams &p) {
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
  const float decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(p.lr / bc1), inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = static_cast<float>(p.eps);
  over_grad(grad_dt, grad, n, [&](int64_t b, int64_t m, float *g) {
    float *w = param + b, *mv = exp_avg + b, *vv = exp_avg_sq + b;
    for (int64_t j = 0; j < m; ++j) {
      w[j] *= decay;
      mv[j] = b1 * mv[j] + (1.0f - b1) * g[j];
      vv[j] = b2 * vv[j] + (1.0f - b2) * g[j] * g[j];
      w[j] -= step_size * mv[j] / (std::sqrt(vv[j]) * inv_sqrt_bc2 + eps);
    }
  });
}

}  // namespace hpu::kernels
