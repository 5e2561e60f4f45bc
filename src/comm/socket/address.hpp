// Socket addresses: IPv4 and IPv6, as text, as the 64 address bytes of a
// unique id, resolved from names, and the interface this host offers others.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace hpu::comm {

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

}  // namespace hpu::comm
