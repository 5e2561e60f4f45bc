// The verbs engine's parts, shared by its set-up and tear-down (connect.cpp)
// and its data path (link.cpp, where the design is described): the sizes of
// a lane's slots and buffers, the work request ids, and the engine and link
// classes.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/transports/net/transport.hpp"
#include "comm/transports/verbs/api.hpp"
#include "comm/transports/verbs/reg_cache.hpp"
#include "comm/transports/verbs/verbs.hpp"

namespace hpu::comm::verbs {

inline constexpr size_t kChunk = kVerbsMaxPayload;  // largest payload of one frame
inline constexpr size_t kSlot = sizeof(Frame) + kChunk;
inline constexpr uint32_t kSendSlots = 16;
inline constexpr uint32_t kRecvSlots = 32;
inline constexpr uint32_t kCreditWrites = 4;  // credit updates in flight per lane (send queue entries beyond the slots)
inline constexpr uint32_t kPieceWrites = 32;  // zero-copy pieces in flight per lane
inline constexpr size_t kPiece = 1 << 20;     // largest zero-copy piece
inline constexpr uint32_t kInline = 128;
inline constexpr int kMaxLanes = 16;
inline constexpr int kMaxPorts = 4;
inline constexpr uint32_t kKeepaliveFlag = 0x4b41;  // a pad frame with this flag: keepalive, not for the transport
inline constexpr uint32_t kDirectImm = 1u << 31;    // an immediate that ends a zero-copy write on its lane
inline constexpr uint32_t kHandleMask = 0xffffff;
inline constexpr auto kKeepalive = std::chrono::milliseconds(100);
inline constexpr auto kFlushTime = std::chrono::seconds(1);
inline constexpr auto kFlushGrace = std::chrono::milliseconds(200);

// Receive slots and send buffers of one lane, then the two credit words.
inline constexpr size_t kLaneBytes = (kSendSlots + kRecvSlots) * kSlot + 128;

inline size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}

// wr_id: peer (24 bits), lane (8), kind (2), slot (30).
enum Kind : uint64_t { kFrameWr = 0, kRecvWr = 1, kCreditWr = 2, kPieceWr = 3 };
inline uint64_t wr_id(int peer, int lane, Kind kind, uint32_t slot = 0) {
  return static_cast<uint64_t>(peer) << 40 | static_cast<uint64_t>(lane) << 32 | static_cast<uint64_t>(kind) << 30 | slot;
}
inline int wr_peer(uint64_t id) { return static_cast<int>(id >> 40); }
inline int wr_lane(uint64_t id) { return static_cast<int>((id >> 32) & 0xff); }
inline Kind wr_kind(uint64_t id) { return static_cast<Kind>((id >> 30) & 3); }
inline uint32_t wr_slot(uint64_t id) { return static_cast<uint32_t>(id & 0x3fffffff); }

// A zero-copy write in flight at the sender.
struct Write {
  size_t left;  // pieces not yet completed
  std::function<void(bool)> done;
  VerbsRegistrationPtr source;  // the send buffer's registration (nullptr: copied through the send buffers)
};

// A frame, or a piece of a zero-copy write, waiting for room on its lane.
struct Outgoing {
  Frame frame;
  const void *payload;
  size_t bytes;
  std::function<void(bool)> done;  // frames
  std::shared_ptr<Write> write;    // pieces
  uint64_t remote_addr = 0;
  uint32_t rkey = 0, imm = 0;
  bool with_imm = false;
};

struct Lane {
  ibv_qp *qp = nullptr;
  int port = 0;  // index into the engine's ports
  uint8_t *buffers = nullptr;  // this lane's part of the link's buffers
  uint64_t remote_slots = 0, remote_credit = 0;  // the peer's slots for us, its word for our count
  uint64_t sent = 0;                    // writes that consumed one of the peer's receives
  uint64_t consumed = 0, reported = 0;  // the peer's writes we took; the count last written back
  uint32_t credit_writes = 0;           // in flight
  std::vector<uint32_t> free_slots;
  std::deque<Outgoing> queue;
  std::deque<std::pair<std::shared_ptr<Write>, int>> pieces;  // posted, in order: the write and its slot (-1: none)
  uint64_t freed() const {
    return __atomic_load_n(reinterpret_cast<const uint64_t *>(buffers + (kSendSlots + kRecvSlots) * kSlot), __ATOMIC_ACQUIRE);
  }
  uint64_t *consumed_word() { return reinterpret_cast<uint64_t *>(buffers + (kSendSlots + kRecvSlots) * kSlot + 64); }
  uint8_t *send_slot(uint32_t s) { return buffers + s * kSlot; }
  uint8_t *recv_slot(uint32_t s) { return buffers + (kSendSlots + s) * kSlot; }
};

// A zero-copy receive at the receiver: where the data lands, and the
// immediates still to come.
struct Direct {
  uint64_t recv_id;
  void *dst;
  size_t bytes;
  VerbsRegistrationPtr reg;
  uint32_t seen = 0;
};

class VerbsEngine;

class VerbsLink final : public Link, public DirectWrite {
 public:
  VerbsLink(VerbsEngine *e, int peer) : engine(e), peer(peer) {}
  void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) override;
  int lanes() const override { return static_cast<int>(lane.size()); }
  size_t max_chunk() const override { return kChunk; }
  const char *kind() const override { return "verbs"; }
  void offer(Frame &cts, void *dst, size_t bytes) override;
  void write(const Frame &cts, const void *src, size_t bytes, std::function<void(bool)> done) override;

  bool post(Lane &l, int index, Outgoing &o);  // under mu; false: no room now
  void report_credits(Lane &l, int index, bool force);  // under mu
  void queue_or_post(int index, Outgoing o);  // under mu
  bool flush();
  // Sets every lane's queue pair to the error state: nothing the peer sends lands any more.
  void stop_receiving();

  VerbsEngine *engine;
  int peer;
  std::vector<Lane> lane;
  uint8_t *buffers = nullptr;  // every lane's, one registration
  ibv_mr *mr = nullptr;
  uint32_t remote_rkey = 0;
  std::mutex mu;
  std::map<uint32_t, Direct> direct;  // zero-copy receives by handle
  uint32_t next_handle = 0;
  size_t next_lane = 0;  // where the next zero-copy write starts
  bool dead = false;
  int post_error = 0;  // a post failed with this
  Clock::time_point last_send = Clock::now();
  Clock::time_point fail_at{};  // a flushed receive: fail then (see on_error)
  std::string fail_why;
};

class VerbsEngine final : public Engine {
 public:
  VerbsEngine(NetTransport &t, const VerbsApi &api, int rank, int size);
  ~VerbsEngine() override;  // connect.cpp, with the constructor, shutdown and stats

  Link *link(int peer) override { return links_[static_cast<size_t>(peer)].get(); }
  void start() override { thread_ = std::thread([this] { run(); }); }
  bool poll() override;
  void quiesce() override;
  void shutdown() override;
  VerbsStats stats() const;

  // Set up by make_verbs_engine.
  std::vector<VerbsPort> ports_;
  ibv_context *ctx_ = nullptr;
  ibv_pd *pd_ = nullptr;
  ibv_cq *cq_ = nullptr;
  std::unique_ptr<VerbsRegCache> cache_;
  std::vector<std::unique_ptr<VerbsLink>> links_;
  std::atomic<uint64_t> direct_bytes_{0}, direct_copied_bytes_{0}, slot_bytes_{0}, inline_sends_{0};
  const VerbsApi &api() const { return api_; }
  int rank() const { return rank_; }

  // A zero-length receive: the data arrives by RDMA write, the completion names the slot or the write.
  void post_recv(VerbsLink &l, int lane);
  void link_failed(VerbsLink &l, hpuStatus_t status, const std::string &why);

 private:
  const VerbsPort *port_down();
  void on_error(const ibv_wc &wc);
  // A completion of one of our writes.
  void on_sent(VerbsLink &l, const ibv_wc &wc);

  // A write with immediate from the peer: a frame in a slot, or the end of a zero-copy write on this lane.
  void on_received(VerbsLink &l, const ibv_wc &wc);
  bool drain();
  // Asynchronous events: port and device errors fail the endpoint; QP errors the link.
  void events();
  void run();

  NetTransport &t_;
  const VerbsApi &api_;
  int rank_, size_;
  std::mutex drain_mu_;
  std::atomic<std::thread::id> drainer_{};
  std::thread thread_;
  std::atomic<bool> closing_{false};
  Clock::time_point flush_until_;
  Clock::time_point events_at_{};
};

}  // namespace hpu::comm::verbs
