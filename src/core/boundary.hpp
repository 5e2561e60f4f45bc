// The C boundary's macros: every exported function body sits between
// HPU_API_BEGIN and HPU_API_END, so that no C++ exception crosses the C ABI and
// every failure leaves a message naming the function on this thread. In core
// so that whatever defines an exported function needs nothing above core.
#pragma once

#include <hpu/status.h>

#include <string>

#include "core/error.hpp"
#include "core/profiler.hpp"
#include "core/runtime.hpp"

namespace hpu::api {

// Turns the exception in flight into a status and the thread's last error
// message, prefixed with the function name.
hpuStatus_t fail_from_exception(const char *function) noexcept;

// Records a failure without an exception (for functions that return early).
hpuStatus_t set_error(const char *function, hpuStatus_t status, const std::string &message) noexcept;

const char *last_error() noexcept;
void set_last_error(const char *message);  // as given (hpuSetLastErrorMessage)

}  // namespace hpu::api

#define HPU_API_BEGIN                              \
  try {                                            \
    ::hpu::prof::ApiScope hpu_api_scope_(__func__); \
    ::hpu::ensure_init();

#define HPU_API_END                                   \
  }                                                   \
  catch (...) {                                       \
    return ::hpu::api::fail_from_exception(__func__); \
  }                                                   \
  return HPU_SUCCESS;
