// The boundary's error handling, and the status functions.
#include "api/api.hpp"

#include <cstdlib>
#include <new>
#include <string>

#include "core/log.hpp"

namespace hpu::api {

namespace {
thread_local std::string t_last_error;
}

const char *last_error() noexcept { return t_last_error.c_str(); }

void set_last_error(const char *message) { t_last_error = message; }

hpuStatus_t set_error(const char *function, hpuStatus_t status, const std::string &message) noexcept {
  try {
    t_last_error = std::string(function) + ": " + message;
    HPU_LOG(debug, "api", "%s -> %s", t_last_error.c_str(), hpuGetErrorName(status));
  } catch (...) {
    t_last_error.clear();
  }
  return status;
}

hpuStatus_t fail_from_exception(const char *function) noexcept {
  try {
    throw;
  } catch (const Error &e) {
    return set_error(function, e.status(), e.what());
  } catch (const std::bad_alloc &) {
    return set_error(function, HPU_ERROR_OUT_OF_MEMORY, "host memory exhausted");
  } catch (const std::exception &e) {
    return set_error(function, HPU_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return set_error(function, HPU_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace hpu::api

extern "C" {

HPU_API const char *hpuGetErrorName(hpuStatus_t status) {
  switch (status) {
#define HPU_STATUS_NAME_(name, value, text) \
  case name:                                \
    return #name;
    HPU_STATUS_MAP(HPU_STATUS_NAME_)
#undef HPU_STATUS_NAME_
  }
  return "HPU_STATUS_UNKNOWN";
}

HPU_API const char *hpuGetErrorString(hpuStatus_t status) {
  switch (status) {
#define HPU_STATUS_TEXT_(name, value, text) \
  case name:                                \
    return text;
    HPU_STATUS_MAP(HPU_STATUS_TEXT_)
#undef HPU_STATUS_TEXT_
  }
  return "unknown status";
}

HPU_API const char *hpuGetLastErrorMessage(void) { return hpu::api::last_error(); }

// Neither initialises the library nor appears in profiles: it only stores text.
HPU_API hpuStatus_t hpuSetLastErrorMessage(const char *message) {
  if (!message) return hpu::api::set_error(__func__, HPU_ERROR_INVALID_ARGUMENT, "message is NULL");
  try {
    hpu::api::set_last_error(message);
  } catch (...) {
    return hpu::api::fail_from_exception(__func__);
  }
  return HPU_SUCCESS;
}

HPU_API int hpuGetVersion(void) { return HPU_VERSION; }

HPU_API void hpuFree(void *ptr) { std::free(ptr); }

}  // extern "C"
