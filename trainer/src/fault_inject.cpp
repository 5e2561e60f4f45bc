#include "fault_inject.hpp"

#include <hpu/hpu.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

namespace hpu::detail {

namespace {

std::mutex g_mu;
std::optional<std::string> g_override;

// The specification in force: the override, else libhpu's setting ("" when
// unset, or when the configuration is bad: libhpu reports that itself).
std::string specification() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_override) return *g_override;
  }
  char *value = nullptr;
  if (hpuConfigGet("HPU_FAULT_INJECT", &value, nullptr) != HPU_SUCCESS) return "";
  std::string spec = value;
  hpuFree(value);
  return spec;
}

}  // namespace

int64_t injected_fault(const char *name) {
  const std::string spec = specification();
  const size_t len = std::strlen(name);
  for (const char *p = spec.c_str(); *p;) {
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

void override_injected_faults(const char *spec) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (spec) g_override = spec;
  else g_override.reset();
}

}  // namespace hpu::detail
