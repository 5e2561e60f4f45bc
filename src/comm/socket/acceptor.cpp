// The handshake's server side, run on many connections at once.
#include "comm/socket/acceptor.hpp"

#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

using namespace handshake;

namespace {

constexpr auto kHandshakeTime = std::chrono::seconds(10);

}  // namespace

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
