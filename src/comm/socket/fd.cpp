// Owned descriptors, listening, connecting and blocking I/O with deadlines.
#include "comm/socket/fd.hpp"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

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

}  // namespace

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
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

}  // namespace hpu::comm
