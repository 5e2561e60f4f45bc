// Logging at the C boundary.
#include "api/api.hpp"
#include "core/log.hpp"

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

}  // extern "C"
