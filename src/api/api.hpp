// The boundary: every exported function body sits between HPU_API_BEGIN and
// HPU_API_END, so that no C++ exception crosses the C ABI and every failure
// leaves a message naming the function on this thread.
#pragma once

#include <hpu/hpu.h>

#include <cstring>

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

namespace hpu::api {

// Copies a filled struct to the caller's, honouring its struct_size: a caller
// built against an older (smaller) struct gets the fields it knows.
template <class T>
void copy_sized(T *out, const T &filled, const char *name) {
  HPU_CHECK_ARG(out != nullptr, "%s is NULL", name);
  size_t n = out->struct_size;
  HPU_CHECK_ARG(n > sizeof(size_t) && n <= (size_t(1) << 16),
                "%s->struct_size is %zu; set it with the matching _INIT macro (%zu)", name, n, sizeof(T));
  if (n > sizeof(T)) n = sizeof(T);
  std::memcpy(reinterpret_cast<char *>(out) + sizeof(size_t), reinterpret_cast<const char *>(&filled) + sizeof(size_t),
              n - sizeof(size_t));
}

}  // namespace hpu::api
