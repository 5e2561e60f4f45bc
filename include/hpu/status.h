/* libhpu — statuses, error reporting, version, library-owned memory. */
#ifndef HPU_STATUS_H
#define HPU_STATUS_H

#include <hpu/types.h>

/* The one list of statuses: name, number (fixed forever), meaning.
 * It generates the enum, hpuGetErrorName and hpuGetErrorString. */
#define HPU_STATUS_MAP(X)                                                          \
  X(HPU_SUCCESS, 0, "success")                                                     \
  X(HPU_ERROR_INVALID_ARGUMENT, 1, "invalid argument")                             \
  X(HPU_ERROR_INVALID_HANDLE, 2, "invalid handle or device pointer")              \
  X(HPU_ERROR_OUT_OF_MEMORY, 3, "out of memory")                                   \
  X(HPU_ERROR_NOT_FOUND, 4, "not found")                                           \
  X(HPU_ERROR_BUSY, 5, "object still has live children")                           \
  X(HPU_ERROR_NOT_READY, 6, "work still pending")                                  \
  X(HPU_ERROR_UNSUPPORTED, 7, "unsupported")                                       \
  X(HPU_ERROR_CONFIG, 8, "bad configuration")                                      \
  X(HPU_ERROR_IO, 9, "input/output error")                                         \
  X(HPU_ERROR_NOT_AVAILABLE, 10, "transport or hardware not available")            \
  X(HPU_ERROR_INVALID_USAGE, 11, "invalid usage")                                  \
  X(HPU_ERROR_REMOTE, 12, "remote peer failed")                                    \
  X(HPU_ERROR_TIMEOUT, 13, "timed out")                                            \
  X(HPU_ERROR_ABORTED, 14, "aborted")                                              \
  X(HPU_ERROR_ADDRESS_IN_USE, 15, "address in use")                                \
  X(HPU_ERROR_INTERNAL, 99, "internal error")

typedef enum hpuStatus {
#define HPU_STATUS_ENUM_(name, value, text) name = value,
  HPU_STATUS_MAP(HPU_STATUS_ENUM_)
#undef HPU_STATUS_ENUM_
} hpuStatus_t;

HPU_EXTERN_C_BEGIN

/* Static name of a status ("HPU_ERROR_OUT_OF_MEMORY"); "HPU_STATUS_UNKNOWN" for
 * a number that is not a status. Never fails; thread-safe. */
HPU_API const char *hpuGetErrorName(hpuStatus_t status);

/* Static one-line description of a status. Never fails; thread-safe. */
HPU_API const char *hpuGetErrorString(hpuStatus_t status);

/* Detail of the last failed call on this thread, naming the function, the
 * argument and its value; "" if no call has failed on this thread. The string
 * stays valid until the next failing call on the same thread. */
HPU_API const char *hpuGetLastErrorMessage(void);

/* Makes a copy of `message` this thread's last error message, for libraries
 * and bindings built on libhpu (libhpu-trainer) whose failures should read
 * like libhpu's own; the message should start with the failing function. */
HPU_API hpuStatus_t hpuSetLastErrorMessage(const char *message);

/* The library's version as HPU_VERSION encodes it: (major<<16)|(minor<<8)|patch. */
HPU_API int hpuGetVersion(void);

/* Releases memory that libhpu allocated for the caller (strings, JSON).
 * NULL is accepted. */
HPU_API void hpuFree(void *ptr);

HPU_EXTERN_C_END

#endif /* HPU_STATUS_H */
