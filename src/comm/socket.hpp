// Sockets for the bootstrap and the tcp transport: addresses, listening and
// connecting with deadlines, and the handshake that keeps strangers out.
//
// The handshake (both directions authenticated, nothing secret on the wire):
//   server -> client  Challenge {magic, version, purpose, server nonce}
//   client -> server  Response  {magic, version, purpose, hello length, client nonce,
//                                mac(secret; server nonce, client nonce, hello)} + hello
//   server -> client  Accept    {mac(secret; client nonce, server nonce)}
// The mac is SipHash-2-4 keyed with the id's 16-byte secret. A connection with a
// wrong magic, version or purpose, a wrong mac (wrong secret, or a replay: the
// server nonce is fresh each time), a hello longer than kMaxHello, or that is
// too slow, is dropped and logged; the listener goes on.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/transport.hpp"

namespace hpu::comm {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd &&o) noexcept : fd_(o.release()) {}
  Fd &operator=(Fd &&o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset();

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct Address {
  sockaddr_storage ss{};
  socklen_t len = 0;

  bool valid() const { return len > 0; }
  uint16_t port() const;
  void set_port(uint16_t port);
  // "10.0.0.1:29500", "[fe80::1]:29500".
  std::string str() const;
  // Into and out of the 64 address bytes of a unique id (family 0 = none).
  void to_bytes(uint8_t out[64]) const;
  static Address from_bytes(const uint8_t in[64]);
  // Resolves `host` (name or literal; IPv4 preferred) with `port`. Throws
  // HPU_ERROR_CONFIG naming `what` when the host does not resolve.
  static Address resolve(const std::string &host, uint16_t port, const char *what);
  // The local address of a connected socket (the interface that reaches its peer).
  static Address local_of(int fd);
  static Address peer_of(int fd);
};

// The address this host offers others when nothing names one: the interface
// named by HPU_SOCKET_IFNAME, else the first up IPv4 interface that is not
// loopback (docker*, virbr* last), else 127.0.0.1. Port 0.
Address default_interface_address();

// A listening socket bound to `at` (port 0: any free port). A taken port throws
// HPU_ERROR_ADDRESS_IN_USE naming `what` and the address; an address that is
// not this host's, HPU_ERROR_CONFIG.
Fd listen_on(const Address &at, const char *what);

// Connects to `to`, retrying refusals and unreachable errors with backoff until
// the deadline (so ranks may start in any order). Throws HPU_ERROR_TIMEOUT
// naming `what`, HPU_ERROR_ABORTED when *abort becomes true.
Fd connect_retry(const Address &to, Deadline deadline, const std::atomic<bool> *abort, const char *what);

void set_nonblocking(int fd, bool on);
void set_nodelay(int fd);

// Blocking I/O bounded by a deadline (poll in slices; *abort checked). EOF or a
// reset throws HPU_ERROR_REMOTE naming `what`.
void write_all(int fd, const void *data, size_t bytes, Deadline deadline, const std::atomic<bool> *abort,
               const char *what);
void read_all(int fd, void *data, size_t bytes, Deadline deadline, const std::atomic<bool> *abort,
              const char *what);

// SipHash-2-4 of `data` under a 16-byte key.
uint64_t siphash(const uint8_t key[16], const void *data, size_t bytes);

// What a handshake is for, so that a bootstrap hello cannot open a data link.
enum class Purpose : uint32_t { bootstrap = 1, tcp_link = 2 };

constexpr size_t kMaxHello = 256;

// Client side: after connect, authenticates with `secret` and sends `hello`.
// Throws HPU_ERROR_REMOTE when the server is not a peer with the same secret.
void handshake_client(int fd, const uint8_t secret[16], Purpose purpose, const void *hello, size_t bytes,
                      Deadline deadline, const std::atomic<bool> *abort, const char *what);

// Server side: accepts connections on a listening socket and runs the
// handshake on each without blocking on any one of them; strangers are
// dropped and logged (HPU_LOG warn) while the listener goes on.
class Acceptor {
 public:
  Acceptor(Fd listener, const uint8_t secret[16], Purpose purpose, const char *name);
  ~Acceptor();

  struct Peer {
    Fd fd;
    std::vector<uint8_t> hello;
    std::string from;  // the peer's address, for messages
  };
  // Waits up to `timeout_ms` (-1: forever) for an authenticated connection
  // (returns kNewPeer, filling *peer) or for one of `watch` to become readable
  // (returns its index). Returns kIdle when the time passes with neither.
  static constexpr int kIdle = -1, kNewPeer = -2;
  int poll(const std::vector<int> &watch, Peer *peer, int timeout_ms);

  int listener() const { return listener_.get(); }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Pending;
  void accept_new();
  bool advance(Pending &p, Peer *peer);  // true when p is finished (accepted or dropped)
  void drop(Pending &p, const char *why);

  Fd listener_;
  uint8_t secret_[16];
  Purpose purpose_;
  std::string name_;
  std::vector<Pending *> pending_;
  uint64_t dropped_ = 0;
};

}  // namespace hpu::comm
