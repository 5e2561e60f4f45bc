// The transport: this rank's endpoint of pairwise, tagged, non-blocking
// messages to every other rank of a communicator. Algorithms are written only
// against this interface; each transport (local: threads of one process; shm,
// tcp, verbs: processes and hosts) implements it. As in Gloo and NCCL, the
// bootstrap only exchanges addresses; a transport is made from them.
//
// The model
//   - isend/irecv post a message and return a Request at once (they never wait
//     for the peer; a transport may do bounded local work such as a copy while
//     posting). Messages between one ordered pair of ranks are matched by tag;
//     several messages with the same (peer, tag) match in posting order. A
//     receive names its exact size; a different incoming size is a usage error.
//   - A receive may carry a Combine: instead of storing the incoming bytes, the
//     transport stores out[i] = in[i] (+) local[i], calling the combine kernel on
//     element-aligned pieces as they arrive (a local transport straight from
//     the sender's memory, with no staging copy; a network transport from its
//     receive buffers). That lets rings reduce data once, where it lands.
//   - Requests complete through complete()/complete_with_error(), which ring
//     this endpoint's doorbell. wait() is written once here: it polls (calling
//     progress(), for transports that progress in the waiting thread) for a
//     bounded time, since a peer usually answers within microseconds, then
//     sleeps on the doorbell until the requests complete, the deadline passes
//     (HPU_ERROR_TIMEOUT), the endpoint fails (its sticky error) or is aborted
//     (HPU_ERROR_ABORTED). The doorbell is a futex word; a transport may place
//     it in memory shared with its peers (shm), so that a peer process wakes
//     the waiter itself, with no thread in between. A ring costs a system call
//     only when someone sleeps.
//   - Memory that a transport may access directly (RDMA, a peer's mapping)
//     is registered first; isend/irecv name the registration. Transports that
//     do not need it (local, tcp) return a plain record; unregistered memory
//     (mr == nullptr) is always allowed, a transport copies it if it must.
//   - Each collective's first frame to a peer carries an OpHeader (sequence,
//     collective, data type, count, root, reduction). begin() declares the
//     operation this rank is running; a transport compares every frame header
//     it receives with it (header_mismatch) at arrival, or at begin() for frames
//     that came early, and fails the operation with HPU_ERROR_INVALID_USAGE
//     naming both ranks and both calls. A frame from an operation this rank has
//     already finished is a mismatch too.
//   - What only some transports can do (chains of steps posted up front, a
//     memory area every rank maps) are capabilities (capability.hpp): an
//     algorithm asks for one with find<C>() and takes another path without it.
//   - fail_all(status, message) makes an error sticky on this endpoint, wakes every
//     waiter and tells every peer (best effort, never blocking): a peer adopts
//     the status (HPU_ERROR_ABORTED becomes HPU_ERROR_REMOTE there), so one
//     rank's timeout, mismatch or abort fails the whole group promptly instead
//     of leaving the others to their deadlines. fail_all() may be called from any
//     thread, also while other threads wait.
//
// Thread safety: one thread runs the operations of an endpoint at a time (the
// communicator serialises them); fail_all(), abort() and the completion calls may
// come from any thread.
#pragma once

#include <hpu/hpu.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "comm/deadline.hpp"
#include "comm/wire.hpp"

namespace hpu::comm {

// One pause of a spinning wait (a hint to the CPU; no system call).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// out[i] = in[i] (+) local[i] for n elements; `in` is what arrived, `local` may
// equal `out` (in place). Called on element-aligned pieces, from whichever
// thread delivers the data; must not block.
struct Combine {
  void (*fn)(void *out, const void *in, const void *local, size_t n, const void *ctx) = nullptr;
  const void *ctx = nullptr;    // the kernel's argument (data type, operation)
  const void *local = nullptr;  // the local operand, as long as the receive
  size_t elem_size = 1;         // bytes per element: pieces are multiples of it
};

// Registered memory. Transports extend it with what they need (keys, handles).
struct MemoryRegion {
  virtual ~MemoryRegion() = default;
  void *base = nullptr;
  size_t bytes = 0;
};
using MemoryRegionPtr = std::unique_ptr<MemoryRegion>;

// isend/irecv copy their descriptor (and the Combine); the memory they point
// to must stay valid, and a send's bytes unchanged, until the request is done.
struct SendDesc {
  int peer = -1;
  uint64_t tag = 0;
  const void *data = nullptr;
  size_t bytes = 0;
  const MemoryRegion *mr = nullptr;  // covering [data, data + bytes), or nullptr
  const OpHeader *header = nullptr;  // the first frame of an operation to this peer
};

struct RecvDesc {
  int peer = -1;
  uint64_t tag = 0;
  void *data = nullptr;
  size_t bytes = 0;
  const MemoryRegion *mr = nullptr;
  const OpHeader *expect = nullptr;  // point to point: the header the frame must match
  const Combine *combine = nullptr;  // nullptr: store the bytes as they are
};

// One posted send or receive. Transports derive from it to keep their state.
class Request {
 public:
  enum class State { pending, done, failed };
  Request(bool is_send, int peer, uint64_t tag, size_t bytes)
      : is_send(is_send), peer(peer), tag(tag), bytes(bytes) {}
  virtual ~Request() = default;

  bool done() const { return state_.load(std::memory_order_acquire) != State::pending; }
  State state() const { return state_.load(std::memory_order_acquire); }
  // "receive of 4096 bytes from rank 3 (tag 0x...)", for timeout messages.
  std::string describe() const;

  const bool is_send;
  const int peer;
  const uint64_t tag;
  const size_t bytes;

 private:
  friend class Transport;
  std::atomic<State> state_{State::pending};
  std::atomic<bool> awaited_{false};  // a waiter sleeps until it is done (Transport::set_wake_on_awaited)
  hpuStatus_t status_ = HPU_SUCCESS;
  std::string message_;
};
using RequestPtr = std::shared_ptr<Request>;

class Transport {
 public:
  Transport(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Transport() = default;
  Transport(const Transport &) = delete;
  Transport &operator=(const Transport &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual const char *name() const = 0;
  // True when every rank is a thread of this process, so that one rank's
  // buffer addresses are valid on every other (an algorithm may then read and
  // write its peers' buffers directly, between messages that order it).
  virtual bool shares_address_space() const { return false; }

  virtual MemoryRegionPtr register_memory(void *base, size_t bytes) = 0;

  // Post a message; throw the sticky error if the endpoint has failed.
  virtual RequestPtr isend(const SendDesc &desc) = 0;
  virtual RequestPtr irecv(const RecvDesc &desc) = 0;

  // Declares the collective this rank runs from now on (see the header check).
  virtual void begin(const OpHeader &header) = 0;

  // Waits until every request is done (null entries are skipped). Throws the first failed request's error
  // (after failing the endpoint with it, so that the peers hear), the endpoint's sticky error, HPU_ERROR_TIMEOUT at the deadline (and then
  // fails the endpoint, naming what it waited for) or HPU_ERROR_ABORTED.
  void wait(std::initializer_list<Request *> requests, Deadline deadline);
  void wait(const std::vector<RequestPtr> &requests, Deadline deadline);
  void wait(const std::vector<Request *> &requests, Deadline deadline);
  // True when done; throws like wait() on failure. Never blocks.
  bool test(Request &request);

  // Waits until ready() is true, as wait() waits for requests (polling, then
  // asleep on the doorbell, which a peer rings), with the same errors;
  // at the deadline the timeout names what(). ready() may be called often.
  void wait_until(const std::function<bool()> &ready, Deadline deadline, const std::function<std::string()> &what);

  // Sticky failure (see above). The first call wins; later ones are ignored.
  // (Named fail_all so that it does not hide hpu::fail(status, fmt, ...).)
  void fail_all(hpuStatus_t status, const std::string &message);
  // fail_all(HPU_ERROR_ABORTED, ...) on behalf of hpuCommAbort or process exit.
  void abort(const std::string &why) { fail_all(HPU_ERROR_ABORTED, why); }
  // The sticky error, HPU_SUCCESS if none.
  hpuStatus_t error(std::string *message = nullptr) const;
  void throw_if_failed() const;

  // The capability C (capability.hpp) when this transport offers it, else nullptr.
  template <class C>
  C *find() {
    return static_cast<C *>(find_capability(typeid(C)));
  }

 protected:
  // The transport's side of find<C>(): this transport as a C (the pointer
  // converted to C *, then to void *) when it offers C now; nullptr otherwise.
  virtual void *find_capability(const std::type_info &capability) { return nullptr; }

  // The doorbell: `word` is bumped by every ring, `sleepers` counts the
  // threads asleep on it. `shared`: the words live in memory shared between
  // processes (a process-shared futex). Set before any thread waits; the
  // words must outlive every ring (use_own_doorbell() before they go).
  void use_doorbell(std::atomic<uint32_t> *word, std::atomic<uint32_t> *sleepers, bool shared);
  void use_own_doorbell() { use_doorbell(&own_word_, &own_sleepers_, false); }

  // How a waiter polls before it sleeps: first `busy` spinning without system
  // calls (for ranks that each have a CPU of their own: an answer is seen the
  // moment it lands), then until `total` yielding the CPU between looks (the
  // peer it waits for may need this core). Default: 0 and 50 us. Set before
  // any thread waits.
  void set_polling(Clock::duration busy, Clock::duration total) {
    busy_spin_ = busy;
    spin_ = total;
  }
  // Whether a completion wakes a sleeping waiter only when it is the request
  // the waiter named (the last one of its list still pending), not for every
  // request (default: every one). For transports that complete requests on
  // threads of their own, where a collective's many steps would otherwise
  // wake the waiter once each. Set before any thread waits.
  void set_wake_on_awaited(bool on) { wake_on_awaited_ = on; }

  // Called by fail_all() once, after the sticky error is set: cancel what is in
  // flight and tell the peers. Must not block on a peer.
  virtual void on_fail(hpuStatus_t status, const std::string &message) = 0;
  // Makes progress in the waiting thread; returns quickly. Default: nothing.
  virtual void progress() {}

  // Completion, from any thread.
  void complete(Request &request);
  void complete_with_error(Request &request, hpuStatus_t status, const std::string &message);
  // Wakes waiters without completing anything (new work for progress()).
  void notify() { ring(); }


 private:
  void ring();
  bool poll_until(const std::function<bool()> &ready, Deadline deadline);
  void wait_all(Request *const *requests, size_t n, Deadline deadline);
  void throw_request_error(const Request &request);
  void time_out(const std::string &what);

  const int rank_, size_;
  mutable std::mutex mu_;  // the error texts
  std::atomic<bool> failed_{false};
  hpuStatus_t error_ = HPU_SUCCESS;
  std::string error_message_;
  std::atomic<uint32_t> own_word_{0}, own_sleepers_{0};
  std::atomic<std::atomic<uint32_t> *> word_{&own_word_}, sleepers_{&own_sleepers_};
  std::atomic<bool> shared_{false};
  Clock::duration busy_spin_ = Clock::duration::zero();
  Clock::duration spin_ = std::chrono::microseconds(50);
  bool wake_on_awaited_ = false;
};

}  // namespace hpu::comm
