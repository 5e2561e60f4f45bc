// The status functions.
#include "api/api.hpp"

#include <cstdlib>
#include <string>

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
