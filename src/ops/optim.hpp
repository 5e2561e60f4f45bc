// The argument checks of AdamW steps, shared by ops::adamw_step (optim.cpp)
// and ops::matmul's AdamW epilogue (matmul.cpp).
#pragma once

#include "kernels/optim.hpp"
#include "ops/op.hpp"

namespace hpu::ops {

// A parameter an optimizer updates: f32 and contiguous, else INVALID_ARGUMENT naming arg.
void check_param(const TensorPtr &param, const char *arg);

// The checked state and settings of an AdamW step of param.
struct AdamwArgs {
  TensorPtr exp_avg, exp_avg_sq;
  TensorPtr copy;  // options.param_copy: bf16 or f16, param's shape, contiguous
  kernels::AdamwConstants constants;
};
// A tensor and its name in messages.
struct Named {
  TensorPtr t;
  const char *arg;
};
// param (named param_arg in messages) checked by check_param; options named
// options_arg.
AdamwArgs adamw_args(const TensorPtr &param, const char *param_arg, const Named &exp_avg, const Named &exp_avg_sq,
                     int64_t step, const AdamwOptions &options, const char *options_arg);

}  // namespace hpu::ops
