// Fused optimizer steps over f32 master weights, in place. grad may be bf16,
// f16 or f32; the arithmetic is f32, as torch.optim does for f32 parameters.
#pragma once

#include <hpu/types.h>

#include <cstdint>

#include "kernels/epilogue.hpp"
#include "kernels/optim_vec.hpp"

namespace hpu::kernels {

struct SgdParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};

// torch.optim.SGD; buf may be null when momentum is 0; step 1 sets buf = g.
void sgd_step(float *param, hpuDataType_t grad_dt, const void *grad, float *buf, int64_t n, int64_t step,
              const SgdParams &p);

struct AdamwParams {
  double lr, beta1, beta2, eps, weight_decay;
};

// torch.optim.AdamW (bias-corrected, decoupled weight decay). With a copy
// (copy_dt bf16 or f16), also writes the new param converted to copy_dt, in
// the same pass.
void adamw_step(float *param, hpuDataType_t grad_dt, const void *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                int64_t step, const AdamwParams &p, hpuDataType_t copy_dt = HPU_FLOAT32, void *copy = nullptr);
// The same with the step's constants (adamw_constants); on the calling thread
// alone unless `parallel`.
void adamw_step(float *param, hpuDataType_t grad_dt, const void *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                const AdamwConstants &c, hpuDataType_t copy_dt, void *copy, bool parallel);
// AdamW's constants (bias corrections included) for step `step` (from 1).
AdamwConstants adamw_constants(const AdamwParams &p, int64_t step);

// An AdamW step that takes a product's results as its gradient, never stored
// (GemmSink): param, the moments and the copy (null: none) are laid out as the
// product's C, and each element is updated as adamw_step updates it, with its
// bits.
struct AdamwSink {
  float *param = nullptr, *exp_avg = nullptr, *exp_avg_sq = nullptr;
  void *copy = nullptr;
  hpuDataType_t copy_dt = HPU_BFLOAT16;
  AdamwConstants c{};
  // The sink (its state is this struct, which must outlive the product).
  GemmSink sink() const;
};

}  // namespace hpu::kernels
