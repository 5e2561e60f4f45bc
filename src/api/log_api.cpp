// Logging at the C boundary.
#include "api/api.hpp"
#include "core/log.hpp"

#include <cctype>
#include <cstring>

using namespace hpu;

extern "C" {

// Works before initialisation, so that a host can capture initialisation's lines.
HPU_API hpuStatus_t hpuSetLogCallback(hpuLogCallback_t callback, void *user) {
  try {
    set_log_callback(reinterpret_cast<LogCallback>(callback), user);
  } catch (...) {
    return api::fail_from_exception(__func__);
  }
  return HPU_SUCCESS;
}

HPU_API hpuStatus_t hpuSetLogFile(const char *path) {
  HPU_API_BEGIN
  set_log_file(path ? path : "", HPU_ERROR_IO, "path");
  HPU_API_END
}

HPU_API hpuStatus_t hpuSetLogLevel(hpuLogLevel_t level) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(level >= HPU_LOG_OFF && level <= HPU_LOG_TRACE, "level %d is not an hpuLogLevel_t (0..5)",
                static_cast<int>(level));
  set_log_level(static_cast<LogLevel>(level));
  HPU_API_END
}

HPU_API hpuStatus_t hpuGetLogLevel(hpuLogLevel_t *level) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(level != nullptr, "level is NULL");
  *level = static_cast<hpuLogLevel_t>(log_level());
  HPU_API_END
}

// Not an API call of its own in profiles (it is how other layers log).
HPU_API hpuStatus_t hpuLogWrite(hpuLogLevel_t level, const char *component, const char *message) {
  try {
    HPU_CHECK_ARG(level >= HPU_LOG_ERROR && level <= HPU_LOG_TRACE,
                  "level %d is not a level a line can have (HPU_LOG_ERROR..HPU_LOG_TRACE: 1..5)", static_cast<int>(level));
    HPU_CHECK_ARG(component != nullptr, "component is NULL");
    HPU_CHECK_ARG(message != nullptr, "message is NULL");
    const size_t n = std::strlen(component);
    HPU_CHECK_ARG(n > 0 && n <= 32, "component \"%.40s\" has %zu characters; expected 1..32", component, n);
    for (size_t i = 0; i < n; ++i) {
      const char c = component[i];
      HPU_CHECK_ARG(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.',
                    "component \"%s\" has '%c' at %zu; expected letters, digits, '_', '-' or '.'", component, c, i);
    }
    ensure_init();  // HPU_LOG_LEVEL and HPU_LOG_FILE apply
    if (static_cast<int>(level) <= static_cast<int>(log_level()))
      log_write(static_cast<LogLevel>(level), component, "%s", message);
  } catch (...) {
    return api::fail_from_exception(__func__);
  }
  return HPU_SUCCESS;
}

}  // extern "C"
