// Errors inside libhpu: an exception carrying a status and a message, and the
// formatting helper every message is built with.
#pragma once

#include <hpu/status.h>

#include <stdexcept>
#include <string>

namespace hpu {

// printf-style formatting into a std::string.
std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

class Error : public std::runtime_error {
 public:
  Error(hpuStatus_t status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  hpuStatus_t status() const { return status_; }

 private:
  hpuStatus_t status_;
};

[[noreturn]] void fail(hpuStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Human-readable byte count: "96 GiB", "1.5 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace hpu

// Throws HPU_ERROR_INVALID_ARGUMENT with a formatted message unless cond holds.
#define HPU_CHECK_ARG(cond, ...)                                   \
  do {                                                             \
    if (!(cond)) ::hpu::fail(HPU_ERROR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)
