// The boundary's error handling: the thread's last error message.
#include "core/boundary.hpp"

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
