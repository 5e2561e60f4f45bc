// The argument checks of AdamW steps, shared by hpuAdamwStep(WithCopy)
// (optim.cpp) and hpuLinearBackwardAdamwStep (matmul.cpp).
#pragma once

#include "kernels/optim.hpp"
#include "ops/op.hpp"

namespace hpu::ops {

// A parameter an optimizer updates: f32 and contiguous, else INVALID_ARGUMENT naming arg.
TensorPtr adamw_param(hpuTensor_t h, const char *arg);

// The checked state and settings of an AdamW step of param.
struct AdamwArgs {
  TensorPtr exp_avg, exp_avg_sq;
  TensorPtr copy;  // with_copy: bf16 or f16, param's shape, contiguous
  kernels::AdamwConstants constants;
};
// param (named param_arg in messages) checked by adamw_param.
AdamwArgs adamw_args(const TensorPtr &param, const char *param_arg, hpuTensor_t exp_avg, hpuTensor_t exp_avg_sq,
                     int64_t step, const hpuAdamwOptions_t *options, bool with_copy, hpuTensor_t copy,
                     const char *copy_arg);

}  // namespace hpu::ops
