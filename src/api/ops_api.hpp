// What the ops' exports (ops_api.cpp, nn_api.cpp) do around the ops layer
// (ops/ops.hpp): look the tensor handles up, naming the argument, check the
// out-pointers and hand the results out.
#pragma once

#include "api/api.hpp"
#include "ops/ops.hpp"
#include "tensor/tensor.hpp"

namespace hpu::api {

using ops::TensorPtr;

// The tensor behind a handle (HPU_ERROR_INVALID_HANDLE naming arg); NULL
// gives nullptr for optional inputs.
inline TensorPtr input(hpuTensor_t h, const char *arg) { return tensor_from_handle(h, arg); }
inline TensorPtr optional(hpuTensor_t h, const char *arg) { return h ? tensor_from_handle(h, arg) : nullptr; }

inline void check_out(const void *out, const char *arg) { HPU_CHECK_ARG(out != nullptr, "%s is NULL", arg); }

// Stores a handle for t in *out.
inline void give(hpuTensor_t *out, TensorPtr t) {
  if (out && t) *out = tensor_handle(std::move(t));
}

// o for the ops layer, its param_copy looked up naming copy_arg.
inline ops::AdamwOptions adamw_options(const hpuAdamwOptions_t &o, const char *copy_arg) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, optional(o.param_copy, copy_arg)};
}

}  // namespace hpu::api
