#include "core/error.hpp"

#include <cstdarg>
#include <cstdio>

namespace hpu {

static std::string vstrf(const char *fmt, va_list ap) {
  char small[256];
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n < 0) return fmt;
  if (static_cast<size_t>(n) < sizeof small) return std::string(small, n);
  std::string out(n, '\0');
  vsnprintf(out.data(), n + 1, fmt, ap);
  return out;
}

std::string strf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrf(fmt, ap);
  va_end(ap);
  return s;
}

void fail(hpuStatus_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vstrf(fmt, ap);
  va_end(ap);
  throw Error(status, std::move(s));
}

std::string format_bytes(uint64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return strf("%llu B", static_cast<unsigned long long>(bytes));
  if (v == static_cast<double>(static_cast<uint64_t>(v))) return strf("%.0f %s", v, units[u]);
  return strf("%.1f %s", v, units[u]);
}

}  // namespace hpu
