#include "comm/socket.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

constexpr uint64_t kSocketMagic = 0x31306b6373757068ull;  // "hpusck01"
constexpr uint32_t kSocketVersion = 1;
constexpr auto kHandshakeTime = std::chrono::seconds(10);

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

// Milliseconds to wait in one slice: at most 100 ms so abort and exit are seen.
int slice_ms(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<long long>(0, std::min<long long>(left, 100)));
}

void check_abort(const std::atomic<bool> *abort, const char *what) {
  if (abort && abort->load(std::memory_order_relaxed)) fail(HPU_ERROR_ABORTED, "%s was aborted", what);
  if (shutting_down()) fail(HPU_ERROR_ABORTED, "%s: the process is exiting", what);
}

bool wait_fd(int fd, short events, Deadline deadline, const std::atomic<bool> *abort, const char *what) {
  for (;;) {
    check_abort(abort, what);
    if (Clock::now() >= deadline) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, slice_ms(deadline));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) fail(HPU_ERROR_IO, "%s: poll failed: %s", what, strerror(errno));
  }
}

bool name_matches(const char *ifname, const char *prefix) { return strncmp(ifname, prefix, strlen(prefix)) == 0; }

}  // namespace

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

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

void set_nonblocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Fd listen_on(const Address &at, const char *what) {
  Fd fd(::socket(at.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail(HPU_ERROR_IO, "%s: socket failed: %s", what, strerror(errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr *>(&at.ss), at.len) != 0) {
    int e = errno;
    if (e == EADDRINUSE)
      fail(HPU_ERROR_ADDRESS_IN_USE, "%s: address %s is already in use (another job or a leftover process?)", what,
           at.str().c_str());
    if (e == EADDRNOTAVAIL) fail(HPU_ERROR_CONFIG, "%s: %s is not an address of this host", what, at.str().c_str());
    fail(HPU_ERROR_IO, "%s: cannot bind %s: %s", what, at.str().c_str(), strerror(e));
  }
  if (::listen(fd.get(), 512) != 0) fail(HPU_ERROR_IO, "%s: listen on %s failed: %s", what, at.str().c_str(),
                                        strerror(errno));
  return fd;
}

Fd connect_retry(const Address &to, Deadline deadline, const std::atomic<bool> *abort, const char *what) {
  for (int attempt = 1;; ++attempt) {
    check_abort(abort, what);
    Fd fd(::socket(to.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) fail(HPU_ERROR_IO, "%s: socket failed: %s", what, strerror(errno));
    int e = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr *>(&to.ss), to.len) != 0) {
      e = errno;
      if (e == EINPROGRESS) {
        if (!wait_fd(fd.get(), POLLOUT, deadline, abort, what))
          fail(HPU_ERROR_TIMEOUT, "%s: connecting to %s timed out", what, to.str().c_str());
        socklen_t len = sizeof e;
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &e, &len);
      }
    }
    if (e == 0) {
      set_nonblocking(fd.get(), false);
      set_nodelay(fd.get());
      return fd;
    }
    bool retry = e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH || e == EAGAIN ||
                 e == EINTR || e == ECONNRESET;
    if (!retry) fail(HPU_ERROR_IO, "%s: cannot connect to %s: %s", what, to.str().c_str(), strerror(e));
    auto pause = std::chrono::milliseconds(std::min(20 * attempt, 500));
    if (Clock::now() + pause >= deadline)
      fail(HPU_ERROR_TIMEOUT, "%s: nobody listens at %s (%s after %d attempts)", what, to.str().c_str(),
           strerror(e), attempt);
    if (attempt == 1 || attempt % 20 == 0)
      HPU_LOG(debug, "comm", "%s: %s: %s; retrying", what, to.str().c_str(), strerror(e));
    std::this_thread::sleep_for(pause);
  }
}

void write_all(int fd, const void *data, size_t bytes, Deadline deadline, const std::atomic<bool> *abort,
               const char *what) {
  auto *p = static_cast<const uint8_t *>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline, abort, what)) fail(HPU_ERROR_TIMEOUT, "%s: sending timed out", what);
      continue;
    }
    fail(HPU_ERROR_REMOTE, "%s: the connection broke: %s", what, strerror(errno));
  }
}

void read_all(int fd, void *data, size_t bytes, Deadline deadline, const std::atomic<bool> *abort,
              const char *what) {
  auto *p = static_cast<uint8_t *>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) fail(HPU_ERROR_REMOTE, "%s: the peer closed the connection", what);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_fd(fd, POLLIN, deadline, abort, what)) fail(HPU_ERROR_TIMEOUT, "%s: receiving timed out", what);
      continue;
    }
    fail(HPU_ERROR_REMOTE, "%s: the connection broke: %s", what, strerror(errno));
  }
}

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

// ---- Acceptor ---------------------------------------------------------------

struct Acceptor::Pending {
  Fd fd;
  std::string from;
  Deadline deadline;
  uint8_t nonce[16];
  Response response{};
  size_t have = 0;  // bytes of response + hello read so far
  std::vector<uint8_t> hello;
};

Acceptor::Acceptor(Fd listener, const uint8_t secret[16], Purpose purpose, const char *name)
    : listener_(std::move(listener)), purpose_(purpose), name_(name) {
  std::memcpy(secret_, secret, 16);
  set_nonblocking(listener_.get(), true);
}

Acceptor::~Acceptor() {
  for (Pending *p : pending_) delete p;
}

void Acceptor::drop(Pending &p, const char *why) {
  ++dropped_;
  HPU_LOG(warn, "comm", "%s: dropped a connection from %s: %s", name_.c_str(), p.from.c_str(), why);
  p.fd.reset();
}

void Acceptor::accept_new() {
  for (;;) {
    int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    auto *p = new Pending();
    p->fd = Fd(c);
    p->from = Address::peer_of(c).str();
    p->deadline = Clock::now() + kHandshakeTime;
    random_nonce(p->nonce);
    Challenge ch{kSocketMagic, kSocketVersion, static_cast<uint32_t>(purpose_), {}};
    std::memcpy(ch.nonce, p->nonce, 16);
    // A fresh socket's buffer always takes 32 bytes.
    if (::send(c, &ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof ch)) {
      drop(*p, "it closed before the handshake");
      delete p;
      continue;
    }
    pending_.push_back(p);
  }
}

bool Acceptor::advance(Pending &p, Peer *peer) {
  for (;;) {
    size_t want = sizeof(Response) + (p.have >= sizeof(Response) ? p.response.hello_bytes : 0);
    if (p.have == want) break;
    uint8_t *dst = p.have < sizeof(Response) ? reinterpret_cast<uint8_t *>(&p.response) + p.have
                                             : p.hello.data() + (p.have - sizeof(Response));
    ssize_t n = ::recv(p.fd.get(), dst, want - p.have, MSG_DONTWAIT);
    if (n == 0) {
      drop(p, "it closed during the handshake");
      return true;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
      drop(p, strerror(errno));
      return true;
    }
    p.have += static_cast<size_t>(n);
    if (p.have == sizeof(Response)) {
      const Response &r = p.response;
      if (r.magic != kSocketMagic) {
        drop(p, strf("bad magic 0x%016llx (not a libhpu peer)", static_cast<unsigned long long>(r.magic)).c_str());
        return true;
      }
      if (r.version != kSocketVersion || r.purpose != static_cast<uint32_t>(purpose_)) {
        drop(p, strf("version %u purpose %u, expected version %u purpose %u", r.version, r.purpose, kSocketVersion,
                     static_cast<uint32_t>(purpose_)).c_str());
        return true;
      }
      if (r.hello_bytes > kMaxHello) {
        drop(p, strf("announced a hello of %u bytes (at most %zu)", r.hello_bytes, kMaxHello).c_str());
        return true;
      }
      p.hello.resize(r.hello_bytes);
    }
  }
  if (p.response.mac != client_mac(secret_, p.nonce, p.response.nonce, p.response.purpose, p.hello.data(),
                                   p.hello.size())) {
    drop(p, "wrong secret or a replayed handshake");
    return true;
  }
  Accept a{kSocketMagic, server_mac(secret_, p.nonce, p.response.nonce)};
  if (::send(p.fd.get(), &a, sizeof a, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof a)) {
    drop(p, "it closed before the handshake finished");
    return true;
  }
  set_nonblocking(p.fd.get(), false);
  set_nodelay(p.fd.get());
  peer->fd = std::move(p.fd);
  peer->hello = std::move(p.hello);
  peer->from = p.from;
  return true;
}

int Acceptor::poll(const std::vector<int> &watch, Peer *peer, int timeout_ms) {
  auto until = timeout_ms < 0 ? Deadline::max() : Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    for (int w : watch) fds.push_back({w, POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    for (Pending *p : pending_) fds.push_back({p->fd.get(), POLLIN, 0});
    auto now = Clock::now();
    auto next = until;
    for (Pending *p : pending_) next = std::min(next, p->deadline);
    int wait = next == Deadline::max() ? 100 : static_cast<int>(std::max<long long>(
        0, std::min<long long>(100, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1)));
    int r = ::poll(fds.data(), fds.size(), wait);
    if (r < 0 && errno != EINTR) fail(HPU_ERROR_IO, "%s: poll failed: %s", name_.c_str(), strerror(errno));
    for (size_t i = 0; i < watch.size(); ++i)
      if (r > 0 && fds[i].revents) return static_cast<int>(i);
    bool got = false;
    now = Clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending *p = pending_[i];
      bool finished;
      if (got) finished = false;
      else if (r > 0 && fds[watch.size() + 1 + i].revents) finished = advance(*p, peer);
      else finished = false;
      if (!finished && now >= p->deadline) {
        drop(*p, "it did not finish the handshake in time");
        finished = true;
      }
      if (finished) {
        got = got || peer->fd;
        delete p;
        pending_[i] = nullptr;
      }
    }
    pending_.erase(std::remove(pending_.begin(), pending_.end(), nullptr), pending_.end());
    if (r > 0 && fds[watch.size()].revents) accept_new();
    if (got) return kNewPeer;
    if (now >= until) return kIdle;
    if (shutting_down()) return kIdle;
  }
}

}  // namespace hpu::comm
