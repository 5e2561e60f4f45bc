// The handshake's client side, its macs, and SipHash-2-4.
#include "comm/socket/handshake.hpp"

#include <sys/random.h>

#include <cstring>
#include <vector>

#include "comm/socket/fd.hpp"
#include "core/error.hpp"

namespace hpu::comm {

namespace handshake {

void random_nonce(uint8_t out[16]) {
  size_t got = 0;
  while (got < 16) {
    ssize_t n = getrandom(out + got, 16 - got, 0);
    if (n < 0 && errno != EINTR) fail(HPU_ERROR_IO, "getrandom failed: %s", strerror(errno));
    if (n > 0) got += static_cast<size_t>(n);
  }
}

uint64_t client_mac(const uint8_t secret[16], const uint8_t server_nonce[16], const uint8_t client_nonce[16],
                    uint32_t purpose, const void *hello, size_t bytes) {
  std::vector<uint8_t> m(36 + bytes);
  std::memcpy(m.data(), server_nonce, 16);
  std::memcpy(m.data() + 16, client_nonce, 16);
  std::memcpy(m.data() + 32, &purpose, 4);
  if (bytes) std::memcpy(m.data() + 36, hello, bytes);
  return siphash(secret, m.data(), m.size());
}

uint64_t server_mac(const uint8_t secret[16], const uint8_t server_nonce[16], const uint8_t client_nonce[16]) {
  uint8_t m[33];
  std::memcpy(m, client_nonce, 16);
  std::memcpy(m + 16, server_nonce, 16);
  m[32] = 'S';
  return siphash(secret, m, sizeof m);
}

}  // namespace handshake

using namespace handshake;

// SipHash-2-4 (Aumasson and Bernstein), from the paper's description.
uint64_t siphash(const uint8_t key[16], const void *data, size_t bytes) {
  auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  uint64_t k0, k1;
  std::memcpy(&k0, key, 8);
  std::memcpy(&k1, key + 8, 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  };
  auto *p = static_cast<const uint8_t *>(data);
  size_t whole = bytes & ~size_t(7);
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m;
    std::memcpy(&m, p + i, 8);
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(bytes & 0xff) << 56;
  for (size_t i = 0; i < (bytes & 7); ++i) last |= static_cast<uint64_t>(p[whole + i]) << (8 * i);
  v3 ^= last;
  round();
  round();
  v0 ^= last;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

void handshake_client(int fd, const uint8_t secret[16], Purpose purpose, const void *hello, size_t bytes,
                      Deadline deadline, const std::atomic<bool> *abort, const char *what) {
  if (bytes > kMaxHello) fail(HPU_ERROR_INTERNAL, "%s: hello of %zu bytes is too long", what, bytes);
  Challenge c;
  read_all(fd, &c, sizeof c, deadline, abort, what);
  if (c.magic != kSocketMagic || c.version != kSocketVersion || c.purpose != static_cast<uint32_t>(purpose))
    fail(HPU_ERROR_REMOTE, "%s: the listener is not a libhpu peer of this version (magic 0x%016llx, version %u)",
         what, static_cast<unsigned long long>(c.magic), c.version);
  Response r{};
  r.magic = kSocketMagic;
  r.version = kSocketVersion;
  r.purpose = static_cast<uint32_t>(purpose);
  r.hello_bytes = static_cast<uint32_t>(bytes);
  random_nonce(r.nonce);
  r.mac = client_mac(secret, c.nonce, r.nonce, r.purpose, hello, bytes);
  std::vector<uint8_t> out(sizeof r + bytes);
  std::memcpy(out.data(), &r, sizeof r);
  if (bytes) std::memcpy(out.data() + sizeof r, hello, bytes);
  write_all(fd, out.data(), out.size(), deadline, abort, what);
  Accept a;
  read_all(fd, &a, sizeof a, deadline, abort, what);
  if (a.magic != kSocketMagic || a.mac != server_mac(secret, c.nonce, r.nonce))
    fail(HPU_ERROR_REMOTE, "%s: the listener does not know this group's secret", what);
}

}  // namespace hpu::comm
