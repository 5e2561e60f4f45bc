// Logging. One line per event:
//   2026-11-21T10:55:12.123456Z hpu[1234] rank=0 device=1 WARN alloc: message
// to the host's callback (hpuSetLogCallback) if set, else to HPU_LOG_FILE if
// set, else to stderr; lines below HPU_LOG_LEVEL (error, warn, info, debug,
// trace) are dropped before they are formatted.
#pragma once

#include <hpu/status.h>

#include <string>

namespace hpu {

enum class LogLevel { off = 0, error = 1, warn = 2, info = 3, debug = 4, trace = 5 };

// Parses "off", "error".."trace" (any case; "warning" too); false on an unknown name.
bool parse_log_level(const char *text, LogLevel *level);

void set_log_level(LogLevel level);
LogLevel log_level();

// Appends lines to this file from now on ("" = back to stderr). It is opened
// non-blocking: a full pipe or FIFO drops a line rather than stopping the
// thread that logs. Throws Error(status, "<setting>=<path>: cannot open: ...").
void set_log_file(const std::string &path, hpuStatus_t status = HPU_ERROR_CONFIG, const char *setting = "HPU_LOG_FILE");

using LogCallback = void (*)(int level, const char *line, void *user);
// Waits for running calls of the previous callback before it returns.
void set_log_callback(LogCallback callback, void *user);

// What the calling thread works for, shown in its lines (-1: not known).
void set_log_device(int device);

// The communicator rank the calling thread works for until the scope ends,
// shown in its lines as rank=N: a communicator's set-up and each of its
// operations (comm/communicator.cpp). Scopes nest; the end restores the rank
// before.
class LogRankScope {
 public:
  explicit LogRankScope(int rank);
  ~LogRankScope();
  LogRankScope(const LogRankScope &) = delete;
  LogRankScope &operator=(const LogRankScope &) = delete;

 private:
  int previous_;
};

void log_write(LogLevel level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace hpu

#define HPU_LOG(level, component, ...)                                                 \
  do {                                                                                 \
    if (static_cast<int>(::hpu::LogLevel::level) <= static_cast<int>(::hpu::log_level())) \
      ::hpu::log_write(::hpu::LogLevel::level, component, __VA_ARGS__);                \
  } while (0)
