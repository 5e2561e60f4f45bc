/* libhpu — logging: level, destination, and a host callback. */
#ifndef HPU_LOG_H
#define HPU_LOG_H

#include <hpu/status.h>

typedef enum hpuLogLevel {
  HPU_LOG_OFF = 0,
  HPU_LOG_ERROR = 1,
  HPU_LOG_WARN = 2,
  HPU_LOG_INFO = 3,
  HPU_LOG_DEBUG = 4,
  HPU_LOG_TRACE = 5
} hpuLogLevel_t;

/* Receives one complete log line (no trailing newline) and the `user` pointer
 * given to hpuSetLogCallback. Called from any libhpu thread, one call at a
 * time per line; it must not call hpuSetLogCallback. */
typedef void (*hpuLogCallback_t)(hpuLogLevel_t level, const char *line, void *user);

HPU_EXTERN_C_BEGIN

/* Routes log lines to `callback` instead of stderr or HPU_LOG_FILE; NULL
 * restores the default. When it returns, the previous callback is no longer
 * running and will not be called again. */
HPU_API hpuStatus_t hpuSetLogCallback(hpuLogCallback_t callback, void *user);

/* Appends log lines to the file at `path` from now on, as HPU_LOG_FILE does;
 * NULL or "" goes back to stderr. A callback still comes first. The file is
 * opened non-blocking: a full pipe or FIFO drops a line rather than stopping
 * the thread that logs (the Node binding reads lines from a pipe this way). */
HPU_API hpuStatus_t hpuSetLogFile(const char *path);

/* Sets the level below which lines are dropped (overrides HPU_LOG_LEVEL). */
HPU_API hpuStatus_t hpuSetLogLevel(hpuLogLevel_t level);
HPU_API hpuStatus_t hpuGetLogLevel(hpuLogLevel_t *level);

/* Writes `message` as one line of `component` (letters, digits, '_', '-',
 * '.'; e.g. "trainer") at `level` (HPU_LOG_ERROR..HPU_LOG_TRACE) through
 * libhpu's logging: same format, level filter, HPU_LOG_FILE and callback as
 * libhpu's own lines. For libraries and bindings built on libhpu. */
HPU_API hpuStatus_t hpuLogWrite(hpuLogLevel_t level, const char *component, const char *message);

HPU_EXTERN_C_END

#endif /* HPU_LOG_H */
