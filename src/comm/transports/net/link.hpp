// The net protocol's frames, and what each kind of the net transport
// (transport.hpp) implements: a Link per peer that moves its frames, and an
// Engine, the links that share threads (shm/, tcp/, verbs/).
//
// The protocol (one ordered stream of frames per peer; DATA may use any lane):
//   EAGER  tag, size, [OpHeader] + payload      small messages, inline
//   RTS    tag, size, send id, [OpHeader]       large ones: ready to send...
//   CTS    send id, recv id, chunk              ...the receiver has posted where
//   DATA   recv id, offset + payload            the data goes; it moves in chunks
//                                               (or, on a link that can write into the
//                                               receiver's memory, a DIRECT CTS says
//                                               where, and the link moves it all)
//   ERROR  status + message                     the sender failed (sticky)
//   BYE                                         the sender leaves cleanly
// Receives match by (peer, tag) in posting order; eager messages that arrive
// before their receive wait in a queue, large ones wait at the sender.
// A link that closes without BYE fails the endpoint with HPU_ERROR_REMOTE.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/transports/capability.hpp"
#include "comm/wire.hpp"

namespace hpu::comm {

struct Frame {
  enum Type : uint32_t { eager = 1, rts = 2, cts = 3, data = 4, error = 5, bye = 6, pad = 7 };
  static constexpr uint32_t kHasHeader = 1;
  static constexpr uint32_t kDirect = 2;  // CTS: the link wrote where to write (DirectWrite::offer)
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t tag = 0;
  uint64_t size = 0;  // eager, data, error: payload bytes; rts: message bytes
  uint64_t a = 0;     // rts, cts: send id; error: status
  uint64_t b = 0;     // cts, data: recv id
  uint64_t c = 0;     // cts: chunk bytes; data: offset
  OpHeader header;
};
static_assert(sizeof(Frame) == 80, "Frame is a wire format");

constexpr size_t kMaxErrorText = 4096;

// Moves one peer's frames. send() may be called from any thread; `done` runs
// once the payload is no longer needed (true) or the link broke (false).
class Link {
 public:
  virtual ~Link() = default;
  virtual void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) = 0;
  virtual int lanes() const { return 1; }
  virtual size_t max_chunk() const = 0;
  virtual const char *kind() const = 0;
};

// An engine's goodbye: a bye frame on each of `links` that is still alive
// (not `dead`), the first step of its shutdown.
template <class L>
void send_bye(const std::vector<std::unique_ptr<L>> &links) {
  Frame bye;
  bye.type = Frame::bye;
  for (auto &l : links)
    if (l && !l->dead) l->send(bye, nullptr, 0, 0, nullptr);
}

// Zero copy, a capability of links that can write straight into the
// receiver's memory (verbs), which the transport finds with dynamic_cast:
// offer() may turn a clear-to-send for [dst, dst + bytes) into a direct one
// (kDirect, with what the sender's link needs); the sender's transport then
// calls write() for the whole message instead of sending DATA, and the
// receiver's link delivers one DATA frame whose payload is dst.
class DirectWrite {
 public:
  virtual void offer(Frame &cts, void *dst, size_t bytes) = 0;
  virtual void write(const Frame &cts, const void *src, size_t bytes, std::function<void(bool)> done) = 0;

 protected:
  ~DirectWrite() = default;
};

// A set of links that share threads (one libuv loop, one shm poller).
class Engine {
 public:
  virtual ~Engine() = default;
  virtual Link *link(int peer) = 0;
  // Starts delivering frames (after the transport knows the links).
  virtual void start() = 0;
  // Progress from a thread waiting for requests; true if anything moved.
  virtual bool poll() { return false; }
  // Memory every rank of the group maps (SharedMemory), when this engine
  // links this rank to every other; and waking the peers waiting on it.
  virtual SharedArea shared_area() const { return {}; }
  virtual void wake_peers() {}
  // After a failure: returns once no thread of the engine writes into user
  // memory any more (the waiters are about to return it to the caller).
  virtual void quiesce() = 0;
  // Stops the threads after sending what is queued (BYE included), bounded.
  virtual void shutdown() = 0;
};

}  // namespace hpu::comm
