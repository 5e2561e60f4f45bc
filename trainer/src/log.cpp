#include "log.hpp"

#include "error.hpp"

#include <cstdarg>

namespace hpu::detail {

void log(hpuLogLevel_t level, const char *fmt, ...) {
  hpuLogLevel_t threshold = HPU_LOG_WARN;
  if (hpuGetLogLevel(&threshold) != HPU_SUCCESS || level > threshold) return;
  va_list ap;
  va_start(ap, fmt);
  const std::string message = vformat(fmt, ap);
  va_end(ap);
  hpuLogWrite(level, "trainer", message.c_str());  // a line that cannot be written is not an error of the caller's
}

}  // namespace hpu::detail
