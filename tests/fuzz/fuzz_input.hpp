// Hands a fuzzer's input to readers that take a path: the bytes go into a
// memfd whose /proc/self/fd path is given out, so no file system is touched.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {

inline std::string as_file(const uint8_t *data, size_t size) {
  static int fd = memfd_create("hpu-fuzz-input", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    perror("fuzz input");
    _exit(2);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace fuzz
