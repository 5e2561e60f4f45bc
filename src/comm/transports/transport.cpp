// What every transport shares: waiting with a deadline, and the sticky error.
#include "comm/transports/transport.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

void futex_wake(std::atomic<uint32_t> *word, bool shared) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

void futex_wait(std::atomic<uint32_t> *word, uint32_t seen, Clock::duration slice, bool shared) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
          0);
}

}  // namespace

std::string Request::describe() const {
  if (is_send) return strf("send of %zu bytes to rank %d (tag 0x%" PRIx64 ")", bytes, peer, tag);
  return strf("receive of %zu bytes from rank %d (tag 0x%" PRIx64 ")", bytes, peer, tag);
}

void Transport::complete(Request &r) {
  // Against wait_all's look: either it sees the request done, or this sees it awaited.
  r.state_.store(Request::State::done, std::memory_order_seq_cst);
  if (!wake_on_awaited_ || r.awaited_.load(std::memory_order_seq_cst)) ring();
}

void Transport::complete_with_error(Request &r, hpuStatus_t status, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.status_ = status;
    r.message_ = message;
  }
  r.state_.store(Request::State::failed, std::memory_order_release);
  ring();
}

void Transport::use_doorbell(std::atomic<uint32_t> *word, std::atomic<uint32_t> *sleepers, bool shared) {
  shared_.store(shared, std::memory_order_relaxed);
  sleepers_.store(sleepers, std::memory_order_relaxed);
  word_.store(word, std::memory_order_release);
}

void Transport::ring() {
  auto *word = word_.load(std::memory_order_acquire);
  word->fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed)->load(std::memory_order_seq_cst))
    futex_wake(word, shared_.load(std::memory_order_relaxed));
}

hpuStatus_t Transport::error(std::string *message) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (message) *message = error_message_;
  return error_;
}

void Transport::throw_if_failed() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  throw Error(error_, error_message_);
}

void Transport::fail_all(hpuStatus_t status, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_ != HPU_SUCCESS) return;
    error_ = status;
    error_message_ = message;
    failed_.store(true, std::memory_order_release);
  }
  HPU_LOG(debug, "comm", "rank %d: %s: %s", rank_, hpuGetErrorName(status), message.c_str());
  ring();
  on_fail(status, message);
}

// A failed request breaks the collective it belongs to on every rank: the
// endpoint fails (telling the peers, which would otherwise wait for data that
// never comes) before the request's own error is thrown.
void Transport::throw_request_error(const Request &r) {
  hpuStatus_t status;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = r.status_;
    message = r.message_;
  }
  fail_all(status, message);
  throw Error(status, message);
}

bool Transport::test(Request &r) {
  throw_if_failed();
  progress();
  if (r.state() == Request::State::failed) throw_request_error(r);
  return r.done();
}

// True once ready(); false at the deadline. ready() throws on failure.
bool Transport::poll_until(const std::function<bool()> &ready, Deadline deadline) {
  // Poll first: a peer usually answers within microseconds, far sooner than a
  // sleep and a wake-up would. The first busy_spin_ of it without system calls
  // (set_polling), then yielding the CPU between looks, which lets the peer
  // run on this core when ranks outnumber cores.
  const auto start = Clock::now(), spin_until = start + spin_, busy_until = start + busy_spin_;
  for (auto now = start; now < spin_until; now = Clock::now()) {
    progress();
    if (ready()) return true;
    if (now < busy_until)
      cpu_relax();
    else
      sched_yield();
  }
  std::atomic<uint32_t> *word = word_.load(std::memory_order_acquire);
  std::atomic<uint32_t> *sleepers = sleepers_.load(std::memory_order_relaxed);
  const bool shared = shared_.load(std::memory_order_relaxed);
  for (;;) {
    // Announce the sleep, then look once more: a ring after `seen` was read
    // makes the futex wait return at once.
    sleepers->fetch_add(1, std::memory_order_seq_cst);
    uint32_t seen = word->load(std::memory_order_seq_cst);
    // A waker that rings only when it sees a sleeper (the shm bell) fences
    // between its write and that look; this one pairs with it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool done = false;
    try {
      progress();
      done = ready();
    } catch (...) {
      sleepers->fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    auto now = Clock::now();
    if (!done && now < deadline) {
      // Sleep in slices so that process exit is noticed.
      auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100));
      futex_wait(word, seen, slice, shared);
    }
    sleepers->fetch_sub(1, std::memory_order_relaxed);
    if (done) return true;
    if (now >= deadline) return false;
    if (shutting_down() && !ready()) fail_all(HPU_ERROR_ABORTED, "the process is exiting");
  }
}

void Transport::time_out(const std::string &what) {
  fail_all(HPU_ERROR_TIMEOUT, strf("rank %d timed out waiting for %s", rank_, what.c_str()));
  throw_if_failed();
}

void Transport::wait_all(Request *const *requests, size_t n, Deadline deadline) {
  auto ready = [&] {
    throw_if_failed();
    for (size_t i = 0; i < n; ++i)
      if (requests[i]->state() == Request::State::failed) throw_request_error(*requests[i]);
    // The last request still pending is the one whose completion wakes this
    // thread (set_wake_on_awaited): named before it is looked at once more.
    for (size_t i = n; i-- > 0;) {
      Request &r = *requests[i];
      if (r.done()) continue;
      r.awaited_.store(true, std::memory_order_seq_cst);
      if (r.state_.load(std::memory_order_seq_cst) == Request::State::pending) return false;
    }
    return true;
  };
  if (poll_until(ready, deadline)) return;
  std::string what;
  for (size_t i = 0; i < n; ++i)
    if (!requests[i]->done()) what += (what.empty() ? "" : "; ") + requests[i]->describe();
  time_out(what);
}

void Transport::wait_until(const std::function<bool()> &ready, Deadline deadline,
                           const std::function<std::string()> &what) {
  auto ready_or_throw = [&] {
    throw_if_failed();
    return ready();
  };
  if (!poll_until(ready_or_throw, deadline)) time_out(what());
}

void Transport::wait(std::initializer_list<Request *> requests, Deadline deadline) {
  Request *raw[8];
  size_t n = 0;
  for (Request *r : requests)
    if (r) {
      if (n == 8) fail(HPU_ERROR_INTERNAL, "wait takes at most 8 requests in a list; use a vector");
      raw[n++] = r;
    }
  wait_all(raw, n, deadline);
}

void Transport::wait(const std::vector<Request *> &requests, Deadline deadline) {
  std::vector<Request *> raw;
  for (Request *r : requests)
    if (r) raw.push_back(r);
  wait_all(raw.data(), raw.size(), deadline);
}

void Transport::wait(const std::vector<RequestPtr> &requests, Deadline deadline) {
  std::vector<Request *> raw;
  raw.reserve(requests.size());
  for (auto &r : requests)
    if (r) raw.push_back(r.get());
  wait_all(raw.data(), raw.size(), deadline);
}

}  // namespace hpu::comm
