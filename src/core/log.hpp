// Logging to stderr under HPU_LOG_LEVEL (error, warn, info, debug, trace).
#pragma once

namespace hpu {

enum class LogLevel { off = 0, error = 1, warn = 2, info = 3, debug = 4, trace = 5 };

// Parses "error".."trace" (or "off"); false on an unknown name.
bool parse_log_level(const char *text, LogLevel *level);
const char *log_level_name(LogLevel level);

void set_log_level(LogLevel level);
LogLevel log_level();

// One line: "hpu[pid] LEVEL component: message".
void log_write(LogLevel level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace hpu

#define HPU_LOG(level, component, ...)                                                 \
  do {                                                                                 \
    if (static_cast<int>(::hpu::LogLevel::level) <= static_cast<int>(::hpu::log_level())) \
      ::hpu::log_write(::hpu::LogLevel::level, component, __VA_ARGS__);                \
  } while (0)
