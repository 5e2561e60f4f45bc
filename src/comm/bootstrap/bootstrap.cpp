// What every bootstrap shares: unique ids, random bytes, and where a rank runs.
#include "comm/bootstrap/bootstrap.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "core/error.hpp"

namespace hpu::comm {

void random_bytes(void *out, size_t n) {
  auto *p = static_cast<uint8_t *>(out);
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(HPU_ERROR_IO, "getrandom failed: %s", strerror(errno));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

namespace {

std::string read_first_line(const char *path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

UniqueId UniqueId::make() {
  UniqueId id;
  id.magic = kMagic;
  id.version = kVersion;
  random_bytes(id.secret, sizeof id.secret);
  return id;
}

UniqueId UniqueId::from(const hpuUniqueId_t &pub, const char *what) {
  UniqueId id;
  std::memcpy(static_cast<void *>(&id), &pub, sizeof id);
  if (id.magic != kMagic)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is not a unique id made by hpuGetUniqueId (bad magic 0x%016llx)", what,
         static_cast<unsigned long long>(id.magic));
  if (id.version != kVersion)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s has version %u; this libhpu reads version %u", what, id.version, kVersion);
  return id;
}

hpuUniqueId_t UniqueId::to_public() const {
  hpuUniqueId_t pub;
  std::memcpy(&pub, this, sizeof pub);
  return pub;
}

std::string UniqueId::short_name() const {
  return strf("%02x%02x%02x%02x", secret[0], secret[1], secret[2], secret[3]);
}

Locality this_process(int device) {
  static const uint64_t host =
      std::hash<std::string>()(read_first_line("/etc/machine-id") + "/" +
                               read_first_line("/proc/sys/kernel/random/boot_id"));
  static const uint64_t process = [] {
    uint64_t v;
    random_bytes(&v, sizeof v);
    return v;
  }();
  Locality l;
  l.host = host;
  l.process = process;
  l.pid = static_cast<int32_t>(getpid());
  l.device = device;
  return l;
}
}  // namespace hpu::comm
