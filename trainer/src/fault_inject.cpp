#include "fault_inject.hpp"

#include <cstdlib>
#include <cstring>

namespace hpu::detail {

int64_t injected_fault(const char *name) {
  const char *spec = std::getenv("HPU_FAULT_INJECT");
  const size_t len = std::strlen(name);
  for (const char *p = spec; p && *p;) {
    const char *end = std::strchr(p, ',');
    if (!end) end = p + std::strlen(p);
    if (size_t(end - p) > len && std::strncmp(p, name, len) == 0 && p[len] == '=') {
      char *stop = nullptr;
      long long v = std::strtoll(p + len + 1, &stop, 10);
      return stop == end && v >= 0 ? v : -1;
    }
    p = *end ? end + 1 : end;
  }
  return -1;
}

}  // namespace hpu::detail
