// The trainer's log lines: through libhpu's logging (hpuLogWrite) as component
// "trainer", so HPU_LOG_LEVEL filters them and hpuSetLogCallback and
// HPU_LOG_FILE receive them like libhpu's own. Progress bars and metric tables
// meant for the terminal are not log lines: they stay on the terminal.
#pragma once

#include <hpu/log.h>

namespace hpu::detail {

void log(hpuLogLevel_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hpu::detail
