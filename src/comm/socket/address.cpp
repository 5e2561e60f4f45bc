// Socket addresses and the interface this host offers.
#include "comm/socket/address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/config.hpp"
#include "core/error.hpp"

namespace hpu::comm {

namespace {

bool name_matches(const char *ifname, const char *prefix) { return strncmp(ifname, prefix, strlen(prefix)) == 0; }

}  // namespace

uint16_t Address::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in &>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6 &>(ss).sin6_port);
  return 0;
}

void Address::set_port(uint16_t port) {
  if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in &>(ss).sin_port = htons(port);
  if (ss.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6 &>(ss).sin6_port = htons(port);
}

std::string Address::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in &>(ss).sin_addr, host, sizeof host);
    return strf("%s:%u", host, port());
  }
  if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 &>(ss).sin6_addr, host, sizeof host);
    return strf("[%s]:%u", host, port());
  }
  return "(no address)";
}

void Address::to_bytes(uint8_t out[64]) const {
  std::memset(out, 0, 64);
  static_assert(sizeof(sockaddr_in6) <= 64, "an address fits a unique id");
  if (valid()) std::memcpy(out, &ss, std::min<size_t>(len, 64));
}

Address Address::from_bytes(const uint8_t in[64]) {
  Address a;
  sa_family_t family;
  std::memcpy(&family, in, sizeof family);
  if (family == AF_INET) a.len = sizeof(sockaddr_in);
  else if (family == AF_INET6) a.len = sizeof(sockaddr_in6);
  else return a;
  std::memcpy(&a.ss, in, a.len);
  return a;
}

Address Address::resolve(const std::string &host, uint16_t port, const char *what) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) fail(HPU_ERROR_CONFIG, "%s: cannot resolve host \"%s\": %s", what, host.c_str(), gai_strerror(rc));
  Address a;
  for (int family : {AF_INET, AF_INET6}) {
    for (addrinfo *r = res; r && !a.valid(); r = r->ai_next) {
      if (r->ai_family != family) continue;
      std::memcpy(&a.ss, r->ai_addr, r->ai_addrlen);
      a.len = static_cast<socklen_t>(r->ai_addrlen);
    }
  }
  freeaddrinfo(res);
  if (!a.valid()) fail(HPU_ERROR_CONFIG, "%s: host \"%s\" has no IPv4 or IPv6 address", what, host.c_str());
  a.set_port(port);
  return a;
}

Address Address::local_of(int fd) {
  Address a;
  a.len = sizeof a.ss;
  if (getsockname(fd, reinterpret_cast<sockaddr *>(&a.ss), &a.len) != 0) a.len = 0;
  return a;
}

Address Address::peer_of(int fd) {
  Address a;
  a.len = sizeof a.ss;
  if (getpeername(fd, reinterpret_cast<sockaddr *>(&a.ss), &a.len) != 0) a.len = 0;
  return a;
}

Address default_interface_address() {
  const std::string ifname = config_now().comm.socket_ifname;
  const char *want = ifname.empty() ? nullptr : ifname.c_str();
  ifaddrs *list = nullptr;
  Address best;
  int best_rank = 99;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs *i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      int family = i->ifa_addr->sa_family;
      if (family != AF_INET && family != AF_INET6) continue;
      int rank;
      if (want) {
        if (strcmp(i->ifa_name, want) != 0) continue;
        rank = family == AF_INET ? 0 : 1;
      } else {
        bool link_local6 = family == AF_INET6 &&
                           IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6 *>(i->ifa_addr)->sin6_addr);
        if (link_local6) continue;
        if (i->ifa_flags & IFF_LOOPBACK) rank = 6;
        else if (name_matches(i->ifa_name, "docker") || name_matches(i->ifa_name, "virbr")) rank = 4;
        else rank = 0;
        if (family == AF_INET6) ++rank;
      }
      if (rank < best_rank) {
        best_rank = rank;
        best.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        std::memcpy(&best.ss, i->ifa_addr, best.len);
      }
    }
    freeifaddrs(list);
  }
  if (want && !best.valid())
    fail(HPU_ERROR_CONFIG, "HPU_SOCKET_IFNAME is \"%s\", but no up interface of that name has an address", want);
  if (!best.valid()) best = Address::resolve("127.0.0.1", 0, "loopback");
  best.set_port(0);
  return best;
}

}  // namespace hpu::comm
