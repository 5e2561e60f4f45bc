// The handshake that keeps strangers out of the bootstrap and the tcp links
// (both directions authenticated, nothing secret on the wire):
//   server -> client  Challenge {magic, version, purpose, server nonce}
//   client -> server  Response  {magic, version, purpose, hello length, client nonce,
//                                mac(secret; server nonce, client nonce, hello)} + hello
//   server -> client  Accept    {mac(secret; client nonce, server nonce)}
// The mac is SipHash-2-4 keyed with the id's 16-byte secret. A connection with a
// wrong magic, version or purpose, a wrong mac (wrong secret, or a replay: the
// server nonce is fresh each time), a hello longer than kMaxHello, or that is
// too slow, is dropped and logged; the listener goes on (acceptor.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "comm/deadline.hpp"

namespace hpu::comm {

// SipHash-2-4 of `data` under a 16-byte key.
uint64_t siphash(const uint8_t key[16], const void *data, size_t bytes);

// What a handshake is for, so that a bootstrap hello cannot open a data link.
enum class Purpose : uint32_t { bootstrap = 1, tcp_link = 2 };

constexpr size_t kMaxHello = 256;

// Client side: after connect, authenticates with `secret` and sends `hello`.
// Throws HPU_ERROR_REMOTE when the server is not a peer with the same secret.
void handshake_client(int fd, const uint8_t secret[16], Purpose purpose, const void *hello, size_t bytes,
                      Deadline deadline, const std::atomic<bool> *abort, const char *what);

// The messages above and their macs, for the server side (Acceptor).
namespace handshake {

constexpr uint64_t kSocketMagic = 0x31306b6373757068ull;  // "hpusck01"
constexpr uint32_t kSocketVersion = 1;

struct Challenge {
  uint64_t magic;
  uint32_t version;
  uint32_t purpose;
  uint8_t nonce[16];
};
struct Response {
  uint64_t magic;
  uint32_t version;
  uint32_t purpose;
  uint32_t hello_bytes;
  uint32_t reserved;
  uint8_t nonce[16];
  uint64_t mac;
};
struct Accept {
  uint64_t magic;
  uint64_t mac;
};

void random_nonce(uint8_t out[16]);
uint64_t client_mac(const uint8_t secret[16], const uint8_t server_nonce[16], const uint8_t client_nonce[16],
                    uint32_t purpose, const void *hello, size_t bytes);
uint64_t server_mac(const uint8_t secret[16], const uint8_t server_nonce[16], const uint8_t client_nonce[16]);

}  // namespace handshake

}  // namespace hpu::comm
