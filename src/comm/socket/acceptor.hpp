// The server side of the handshake (handshake.hpp): accepts connections on a
// listening socket and runs the handshake on each without blocking on any one
// of them; strangers are dropped and logged (HPU_LOG warn) while the listener
// goes on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/socket/fd.hpp"
#include "comm/socket/handshake.hpp"

namespace hpu::comm {

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
