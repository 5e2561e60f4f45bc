#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace hpu {

static std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};

static const char *const kNames[] = {"off", "error", "warn", "info", "debug", "trace"};

bool parse_log_level(const char *text, LogLevel *level) {
  for (int i = 0; i <= static_cast<int>(LogLevel::trace); ++i) {
    if (strcasecmp(text, kNames[i]) == 0) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  if (strcasecmp(text, "warning") == 0) {
    *level = LogLevel::warn;
    return true;
  }
  return false;
}

const char *log_level_name(LogLevel level) { return kNames[static_cast<int>(level)]; }

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_write(LogLevel level, const char *component, const char *fmt, ...) {
  char line[1024];
  int n = snprintf(line, sizeof line, "hpu[%d] %s %s: ", static_cast<int>(getpid()),
                   log_level_name(level), component);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && static_cast<size_t>(n) < sizeof line) vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  // One write per line so that lines from several threads never interleave.
  size_t len = strnlen(line, sizeof line - 2);
  line[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}

}  // namespace hpu
