#include "core/log.hpp"

#include <fcntl.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <shared_mutex>

#include "core/error.hpp"

namespace hpu {

namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};

struct Sink {
  std::shared_mutex mu;  // shared while a line is written, exclusive to change
  LogCallback callback = nullptr;
  void *user = nullptr;
  int fd = STDERR_FILENO;
};

Sink &sink() {
  static Sink *s = new Sink();  // never destroyed: threads may log during exit
  return *s;
}

thread_local int t_device = -1;
thread_local int t_rank = -1;

const char *const kNames[] = {"off", "error", "warn", "info", "debug", "trace"};
const char *const kUpper[] = {"OFF", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

void put_id(char *buf, size_t size, int value) {
  if (value < 0)
    snprintf(buf, size, "-");
  else
    snprintf(buf, size, "%d", value);
}

}  // namespace

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

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void set_log_file(const std::string &path, hpuStatus_t status, const char *setting) {
  int fd = STDERR_FILENO;
  if (!path.empty()) {
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) fail(status, "%s=%s: cannot open: %s", setting, path.c_str(), strerror(errno));
  }
  Sink &s = sink();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  if (s.fd != STDERR_FILENO) close(s.fd);
  s.fd = fd;
}

void set_log_callback(LogCallback callback, void *user) {
  Sink &s = sink();
  std::unique_lock<std::shared_mutex> lock(s.mu);
  s.callback = callback;
  s.user = user;
}

void set_log_device(int device) { t_device = device; }

LogRankScope::LogRankScope(int rank) : previous_(t_rank) { t_rank = rank; }
LogRankScope::~LogRankScope() { t_rank = previous_; }

void log_write(LogLevel level, const char *component, const char *fmt, ...) {
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char rank[16], device[16];
  put_id(rank, sizeof rank, t_rank);
  put_id(device, sizeof device, t_device);
  char line[1024];
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ hpu[%d] rank=%s device=%s %s %s: ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   static_cast<long>(tv.tv_usec), static_cast<int>(getpid()), rank, device,
                   kUpper[static_cast<int>(level)], component);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && static_cast<size_t>(n) < sizeof line) vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  size_t len = strnlen(line, sizeof line - 2);
  for (size_t i = 0; i < len; ++i)
    if (line[i] == '\n') line[i] = ' ';  // one event, one line

  Sink &s = sink();
  std::shared_lock<std::shared_mutex> lock(s.mu);
  if (s.callback) {
    line[len] = '\0';
    s.callback(static_cast<int>(level), line, s.user);
    return;
  }
  line[len++] = '\n';
  // One write per line so that lines from several threads never interleave.
  ssize_t ignored = write(s.fd, line, len);
  (void)ignored;
}

}  // namespace hpu
