// Sockets for the bootstrap and the tcp transport: an owned descriptor,
// listening, connecting with retries, and blocking I/O bounded by a deadline.
#pragma once

#include <atomic>
#include <cstddef>

#include "comm/deadline.hpp"
#include "comm/socket/address.hpp"

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

}  // namespace hpu::comm
