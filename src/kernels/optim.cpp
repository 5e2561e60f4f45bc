// Fused SGD and AdamW steps: one pass over parameter, gradient and state, on
// the best vector path (optim_vec.hpp).
#include "kernels/optim.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.hpp"
#include "kernels/optim_vec.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

// fn(begin, count, g) over the gradient as f32, block by block (a block's
// parameters stay in L1 for what follows the update): f32 gradients in
// place, bf16 and f16 ones widened.
template <class Fn>
void over_grad(hpuDataType_t grad_dt, const void *grad, int64_t n, Fn &&fn, bool parallel = true) {
  auto blocks = [&](int64_t i0, int64_t i1) {
    float g[kBlock];
    for (int64_t b = i0; b < i1; b += kBlock) {
      int64_t m = std::min<int64_t>(kBlock, i1 - b);
      if (grad_dt == HPU_FLOAT32) {
        fn(b, size_t(m), static_cast<const float *>(grad) + b);
        continue;
      }
      load_f32(grad_dt, static_cast<const char *>(grad) + b * 2, g, m);
      fn(b, size_t(m), g);
    }
  };
  if (parallel)
    parallel_for(n, 16384, blocks);
  else
    blocks(0, n);
}

}  // namespace

void sgd_step(float *param, hpuDataType_t grad_dt, const void *grad, float *buf, int64_t n, int64_t step,
              const SgdParams &p) {
  const SgdConstants c{static_cast<float>(p.lr), static_cast<float>(p.momentum), 1.0f - static_cast<float>(p.dampening),
                       static_cast<float>(p.weight_decay), p.nesterov, step <= 1};
  const auto loop = optim_vec().sgd;
  over_grad(grad_dt, grad, n, [&](int64_t b, size_t m, const float *g) {
    loop(param + b, g, c.momentum != 0.0f ? buf + b : nullptr, m, c);
  });
}

AdamwConstants adamw_constants(const AdamwParams &p, int64_t step) {
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2);
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(step));
  return {static_cast<float>(1.0 - p.lr * p.weight_decay),
          b1,
          b2,
          1.0f - b1,
          1.0f - b2,
          static_cast<float>(p.lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          static_cast<float>(p.eps)};
}

void adamw_step(float *param, hpuDataType_t grad_dt, const void *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                const AdamwConstants &c, hpuDataType_t copy_dt, void *copy, bool parallel) {
  const auto loop = optim_vec().adamw;
  over_grad(
      grad_dt, grad, n,
      [&](int64_t b, size_t m, const float *g) {
        loop(param + b, g, exp_avg + b, exp_avg_sq + b, m, c);
        if (copy) store_f32(copy_dt, param + b, static_cast<char *>(copy) + b * 2, m);
      },
      parallel);
}

void adamw_step(float *param, hpuDataType_t grad_dt, const void *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                int64_t step, const AdamwParams &p, hpuDataType_t copy_dt, void *copy) {
  adamw_step(param, grad_dt, grad, exp_avg, exp_avg_sq, n, adamw_constants(p, step), copy_dt, copy, true);
}

GemmSink AdamwSink::sink() const {
  GemmSink s;
  s.row = [](const GemmSink &self, int64_t at, int64_t cols, const float *g) {
    const AdamwSink &u = *static_cast<const AdamwSink *>(self.state);
    optim_vec().adamw(u.param + at, g, u.exp_avg + at, u.exp_avg_sq + at, static_cast<size_t>(cols), u.c);
    if (u.copy) store_f32(u.copy_dt, u.param + at, static_cast<char *>(u.copy) + at * 2, static_cast<size_t>(cols));
  };
  s.state = this;
  const void *arrays[] = {param, exp_avg, exp_avg_sq, copy};
  const int sizes[] = {4, 4, 4, 2};
  for (int i = 0; i < GemmSink::kArrays; ++i) s.arrays[i] = arrays[i], s.elem_size[i] = sizes[i];
  return s;
}

}  // namespace hpu::kernels
