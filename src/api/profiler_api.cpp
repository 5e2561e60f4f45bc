// The profiler at the C boundary.
#include <cstdlib>
#include <cstring>

#include "api/api.hpp"
#include "core/profiler.hpp"

using namespace hpu;

extern "C" {

HPU_API hpuStatus_t hpuProfilerStart(const char *path) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(path != nullptr && *path, "path is %s", path ? "empty" : "NULL");
  prof::start(path);
  HPU_API_END
}

HPU_API hpuStatus_t hpuProfilerStop(void) {
  HPU_API_BEGIN
  prof::stop();
  HPU_API_END
}

HPU_API hpuStatus_t hpuProfilerGetSummary(char **text) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(text != nullptr, "text is NULL");
  *text = api::c_string(prof::last_summary());
  HPU_API_END
}

}  // extern "C"
