// verbs: links between hosts over RDMA reliable-connected queue pairs, every
// verbs call through the VerbsApi table (api.hpp).
//
// Lanes. Each peer is reached over L queue pairs ("lanes"): HPU_IB_QPS_PER_PORT
// on each active port this rank uses (verbs_find_ports), at most kMaxLanes, the
// smaller count of the two ends. Lane 0 carries the ordered frames of the net
// protocol (net/link.hpp); DATA frames and zero-copy writes are striped
// over all lanes.
//
// Frames. Each lane has a ring of kRecvSlots receive slots at the receiver
// (remote-writable; addresses and rkey published through the bootstrap) and
// keeps as many zero-length receives posted. The sender copies a frame and
// its payload into one of kSendSlots registered send buffers (or posts it
// inline when it fits the QP's inline size) and RDMA-writes it with immediate
// into the next slot, the immediate naming the slot; never more than the
// receiver's free slots (its credits). The receiver hands the frame to the
// transport, reposts the receive and, every kRecvSlots / 4 frames, RDMA-writes
// how many it has consumed into a word of the sender's registered memory: the
// credits come back without a message.
//
// Zero copy (receiver-driven). For a large message into device memory the
// receiver's clear-to-send is DIRECT (DirectWrite::offer): it carries the address and
// rkey of the receive buffer, registered through the registration cache
// (reg_cache.hpp: one memory region per device memory segment, kept),
// and a handle. The sender RDMA-writes the message straight from its own
// registered buffer into the receiver's, in pieces of up to kPiece bytes
// striped over the lanes; the last piece on each lane is a write with
// immediate carrying the handle and the number of lanes used, so that the
// receiver knows the message has landed once every lane's immediate has come
// (writes on one RC queue pair land in order). A send buffer the cache cannot
// register (host memory) is copied through the send buffers on the way; a
// receive buffer it cannot register, or a receive that reduces as it arrives,
// gets the DATA frames of the protocol instead.
//
// Faults: a work completion with an error fails the endpoint —
//   retry exceeded (the peer does not answer: dead, or the path is gone) and a
//   QP in the error state: HPU_ERROR_REMOTE naming the peer; a remote access
//   error: HPU_ERROR_REMOTE naming it; a port that went down:
//   HPU_ERROR_NOT_AVAILABLE. Asynchronous events (the context's async_fd, read
//   by the engine's thread) fail it too: a port error on a port in use or a
//   device fatal error with HPU_ERROR_NOT_AVAILABLE, a QP fatal or access
//   error with HPU_ERROR_REMOTE. A keepalive frame goes to each idle peer every
//   kKeepalive, so that a dead peer is noticed through retry exceeded even
//   when nothing else is sent to it. When the endpoint fails while a peer may
//   still be writing into a receive buffer (a direct receive in flight), the
//   queue pairs to that peer go to the error state before the waiters return:
//   nothing lands in user memory afterwards.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "comm/transports/net/transport.hpp"
#include "comm/transports/verbs/api.hpp"
#include "comm/transports/verbs/verbs.hpp"
#include "comm/transports/verbs/reg_cache.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kChunk = kVerbsMaxPayload;  // largest payload of one frame
constexpr size_t kSlot = sizeof(Frame) + kChunk;
constexpr uint32_t kSendSlots = 16;
constexpr uint32_t kRecvSlots = 32;
constexpr uint32_t kCreditWrites = 4;  // credit updates in flight per lane (send queue entries beyond the slots)
constexpr uint32_t kPieceWrites = 32;  // zero-copy pieces in flight per lane
constexpr size_t kPiece = 1 << 20;     // largest zero-copy piece
constexpr uint32_t kInline = 128;
constexpr int kMaxLanes = 16;
constexpr int kMaxPorts = 4;
constexpr uint32_t kKeepaliveFlag = 0x4b41;  // a pad frame with this flag: keepalive, not for the transport
constexpr uint32_t kDirectImm = 1u << 31;    // an immediate that ends a zero-copy write on its lane
constexpr uint32_t kHandleMask = 0xffffff;
constexpr auto kKeepalive = std::chrono::milliseconds(100);
constexpr auto kFlushTime = std::chrono::seconds(1);
constexpr auto kFlushGrace = std::chrono::milliseconds(200);

// Receive slots and send buffers of one lane, then the two credit words.
constexpr size_t kLaneBytes = (kSendSlots + kRecvSlots) * kSlot + 128;

size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}

// wr_id: peer (24 bits), lane (8), kind (2), slot (30).
enum Kind : uint64_t { kFrameWr = 0, kRecvWr = 1, kCreditWr = 2, kPieceWr = 3 };
uint64_t wr_id(int peer, int lane, Kind kind, uint32_t slot = 0) {
  return static_cast<uint64_t>(peer) << 40 | static_cast<uint64_t>(lane) << 32 | static_cast<uint64_t>(kind) << 30 | slot;
}
int wr_peer(uint64_t id) { return static_cast<int>(id >> 40); }
int wr_lane(uint64_t id) { return static_cast<int>((id >> 32) & 0xff); }
Kind wr_kind(uint64_t id) { return static_cast<Kind>((id >> 30) & 3); }
uint32_t wr_slot(uint64_t id) { return static_cast<uint32_t>(id & 0x3fffffff); }

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
  VerbsEngine(NetTransport &t, const VerbsApi &api, int rank, int size)
      : t_(t), api_(api), rank_(rank), size_(size) {
    links_.resize(static_cast<size_t>(size));
  }

  ~VerbsEngine() override {
    shutdown();
    for (auto &l : links_) {
      if (!l) continue;
      l->direct.clear();
      for (auto &ln : l->lane) {
        ln.queue.clear();
        ln.pieces.clear();
        if (ln.qp) api_.destroy_qp(ln.qp);
      }
      if (l->mr) api_.dereg_mr(l->mr);
      free(l->buffers);
    }
    cache_.reset();
    if (cq_) api_.destroy_cq(cq_);
    if (pd_) api_.dealloc_pd(pd_);
    if (ctx_) api_.close_device(ctx_);
  }

  Link *link(int peer) override { return links_[static_cast<size_t>(peer)].get(); }

  void start() override { thread_ = std::thread([this] { run(); }); }

  bool poll() override {
    std::unique_lock<std::mutex> lock(drain_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    drainer_ = std::this_thread::get_id();
    bool did = drain();
    drainer_ = std::thread::id();
    return did;
  }

  void quiesce() override {
    if (drainer_.load() != std::this_thread::get_id()) std::lock_guard<std::mutex> lock(drain_mu_);
    for (auto &l : links_)
      if (l) l->stop_receiving();
  }

  void shutdown() override {
    if (!thread_.joinable()) return;
    Frame bye;
    bye.type = Frame::bye;
    for (auto &l : links_)
      if (l && !l->dead) l->send(bye, nullptr, 0, 0, nullptr);
    flush_until_ = Clock::now() + kFlushTime;
    closing_ = true;
    thread_.join();
    for (auto &l : links_) {
      if (!l) continue;
      std::vector<std::function<void(bool)>> left;
      {
        std::lock_guard<std::mutex> lock(l->mu);
        for (auto &ln : l->lane) {
          for (auto &o : ln.queue) {
            if (o.done) left.push_back(std::move(o.done));
            if (o.write && o.write->done) left.push_back(std::move(o.write->done));
          }
          ln.queue.clear();
          for (auto &p : ln.pieces)
            if (p.first->done) left.push_back(std::move(p.first->done));
        }
      }
      for (auto &d : left) d(false);
    }
    VerbsStats s = stats();
    if (s.lanes)
      HPU_LOG(debug, "comm",
              "verbs transport of rank %d: %llu bytes written into receive buffers directly (%llu of them copied "
              "from unregistered send buffers), %llu through receive slots, %llu inline writes; registration cache: "
              "%llu registrations, %llu hits, %llu stale",
              rank_, static_cast<unsigned long long>(s.direct_bytes), static_cast<unsigned long long>(s.direct_copied_bytes),
              static_cast<unsigned long long>(s.slot_bytes), static_cast<unsigned long long>(s.inline_sends),
              static_cast<unsigned long long>(s.registrations), static_cast<unsigned long long>(s.cache_hits),
              static_cast<unsigned long long>(s.stale));
  }

  VerbsStats stats() const {
    VerbsStats s;
    s.ports = static_cast<int>(ports_.size());
    for (auto &l : links_)
      if (l) s.lanes = l->lanes();
    s.direct_bytes = direct_bytes_;
    s.direct_copied_bytes = direct_copied_bytes_;
    s.slot_bytes = slot_bytes_;
    s.inline_sends = inline_sends_;
    if (cache_) {
      auto c = cache_->stats();
      s.registrations = c.registrations;
      s.cache_hits = c.hits;
      s.stale = c.stale;
    }
    return s;
  }

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
  void post_recv(VerbsLink &l, int lane) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id(l.peer, lane, kRecvWr);
    if (int e = api_.post_recv(l.lane[static_cast<size_t>(lane)].qp, &wr, &bad))
      link_failed(l, HPU_ERROR_REMOTE, strf("posting a receive failed: %s", strerror(e)));
  }

  void link_failed(VerbsLink &l, hpuStatus_t status, const std::string &why) {
    {
      std::lock_guard<std::mutex> lock(l.mu);
      if (l.dead) return;
      l.dead = true;
    }
    if (closing_) return;
    if (status == HPU_ERROR_REMOTE) t_.on_link_closed(l.peer, why);
    else t_.fail_all(status, strf("rank %d: the RDMA link to rank %d failed: %s", rank_, l.peer, why.c_str()));
  }

 private:
  const VerbsPort *port_down() {
    for (auto &p : ports_) {
      ibv_port_attr pa{};
      if (api_.query_port(ctx_, static_cast<uint8_t>(p.port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) return &p;
    }
    return nullptr;
  }

  void on_error(const ibv_wc &wc) {
    if (wr_peer(wc.wr_id) >= size_) return;
    VerbsLink *l = links_[static_cast<size_t>(wr_peer(wc.wr_id))].get();
    if (!l) return;
    const VerbsPort &via = ports_[static_cast<size_t>(l->lane[static_cast<size_t>(wr_lane(wc.wr_id)) % l->lane.size()].port)];
    std::string what = strf("%s (verbs status %d) on %s %s:%d", api_.wc_status_str(wc.status), wc.status,
                            api_.name, via.device.c_str(), via.port);
    if (const VerbsPort *down = port_down()) {
      link_failed(*l, HPU_ERROR_NOT_AVAILABLE, strf("port %d of %s is down (%s)", down->port, down->device.c_str(),
                                                    api_.wc_status_str(wc.status)));
    } else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      // Flushed: the QP went to error, and another completion says why (the
      // first error here, or the peer's: a remote access error it made, say).
      // Give that failure time to reach us through the other ranks first.
      if (l->fail_at == Clock::time_point{}) {
        l->fail_at = Clock::now() + kFlushGrace;
        l->fail_why = "the RDMA queue pair failed: " + what;
      }
    } else if (wc.status == IBV_WC_REM_ACCESS_ERR) {
      link_failed(*l, HPU_ERROR_REMOTE, "RDMA remote access error: " + what);
    } else if (wc.status == IBV_WC_RETRY_EXC_ERR) {
      link_failed(*l, HPU_ERROR_REMOTE, "RDMA retries exhausted, the peer does not answer: " + what);
    } else {
      link_failed(*l, HPU_ERROR_REMOTE, "the RDMA queue pair failed: " + what);
    }
  }

  // A completion of one of our writes.
  void on_sent(VerbsLink &l, const ibv_wc &wc) {
    Lane &ln = l.lane[static_cast<size_t>(wr_lane(wc.wr_id))];
    std::function<void(bool)> finished;
    {
      std::lock_guard<std::mutex> lock(l.mu);
      switch (wr_kind(wc.wr_id)) {
        case kCreditWr: ln.credit_writes--; break;
        case kFrameWr: ln.free_slots.push_back(wr_slot(wc.wr_id)); break;
        default: {
          if (ln.pieces.empty()) break;
          auto [w, slot] = ln.pieces.front();
          ln.pieces.pop_front();
          if (slot >= 0) ln.free_slots.push_back(static_cast<uint32_t>(slot));
          if (--w->left == 0) finished = std::move(w->done);
        }
      }
    }
    if (finished) finished(true);
  }

  // A write with immediate from the peer: a frame in a slot, or the end of a zero-copy write on this lane.
  void on_received(VerbsLink &l, const ibv_wc &wc) {
    int lane = wr_lane(wc.wr_id);
    Lane &ln = l.lane[static_cast<size_t>(lane)];
    uint32_t imm = wc.imm_data;
    if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
      link_failed(l, HPU_ERROR_REMOTE, strf("rank %d wrote without an immediate", l.peer));
      return;
    }
    if (imm & kDirectImm) {
      uint32_t used = (imm >> 24) & 0x7f;
      Direct done{};
      bool complete = false, known;
      {
        std::lock_guard<std::mutex> lock(l.mu);
        auto it = l.direct.find(imm & kHandleMask);
        known = it != l.direct.end() && used >= 1 && used <= l.lane.size();
        if (known && ++it->second.seen == used) {
          done = std::move(it->second);
          l.direct.erase(it);
          complete = true;
        }
      }
      if (!known) {
        link_failed(l, HPU_ERROR_REMOTE, strf("rank %d ended a direct write %u nobody waits for", l.peer, imm & kHandleMask));
        return;
      }
      if (complete) {
        Frame f;
        f.type = Frame::data;
        f.b = done.recv_id;
        f.size = done.bytes;
        t_.on_frame(l.peer, f, done.dst);
      }
    } else {
      const uint8_t *buf = ln.recv_slot(imm % kRecvSlots);
      Frame f;
      std::memcpy(&f, buf, sizeof f);
      size_t bytes = payload_bytes(f);
      if (imm >= kRecvSlots || wc.byte_len < sizeof f || bytes != wc.byte_len - sizeof f ||
          bytes > t_.frame_limit(l.peer, f)) {
        link_failed(l, HPU_ERROR_REMOTE, strf("rank %d sent a malformed frame (type %u, %u bytes)", l.peer, f.type,
                                              wc.byte_len));
        return;
      }
      if (!(f.type == Frame::pad && f.flags == kKeepaliveFlag)) t_.on_frame(l.peer, f, buf + sizeof f);
    }
    post_recv(l, lane);
    std::lock_guard<std::mutex> lock(l.mu);
    ln.consumed++;
    l.report_credits(ln, lane, false);
  }

  bool drain() {
    ibv_wc wcs[32];
    bool did = false;
    if (!cq_) return false;
    for (;;) {
      int n = api_.poll_cq(cq_, 32, wcs);
      if (n <= 0) return did;
      did = true;
      for (int i = 0; i < n; ++i) {
        const ibv_wc &wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          on_error(wc);
          continue;
        }
        if (wr_peer(wc.wr_id) >= size_ || !links_[static_cast<size_t>(wr_peer(wc.wr_id))]) continue;
        VerbsLink &l = *links_[static_cast<size_t>(wr_peer(wc.wr_id))];
        if (wr_kind(wc.wr_id) == kRecvWr) on_received(l, wc);
        else on_sent(l, wc);
      }
    }
  }

  // Asynchronous events: port and device errors fail the endpoint; QP errors the link.
  void events() {
    ibv_async_event ev;
    while (ctx_ && api_.get_async_event(ctx_, &ev) == 0) {
      std::string what = strf("%s (asynchronous event %d)", api_.event_type_str(ev.event_type), ev.event_type);
      switch (ev.event_type) {
        case IBV_EVENT_PORT_ERR:
          for (auto &p : ports_)
            if (p.port == ev.element.port_num && !closing_)
              t_.fail_all(HPU_ERROR_NOT_AVAILABLE, strf("rank %d: RDMA port %d of %s is down: %s", rank_, p.port,
                                                        p.device.c_str(), what.c_str()));
          break;
        case IBV_EVENT_DEVICE_FATAL:
          if (!closing_)
            t_.fail_all(HPU_ERROR_NOT_AVAILABLE, strf("rank %d: RDMA device %s failed: %s", rank_,
                                                      ports_.front().device.c_str(), what.c_str()));
          break;
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
          for (auto &l : links_)
            if (l)
              for (auto &ln : l->lane)
                if (ln.qp == ev.element.qp) link_failed(*l, HPU_ERROR_REMOTE, "the RDMA queue pair failed: " + what);
          break;
        default:
          HPU_LOG(info, "comm", "rank %d: RDMA %s on %s", rank_, what.c_str(), ports_.front().device.c_str());
      }
      api_.ack_async_event(&ev);
    }
  }

  void run() {
    int idle = 0;
    for (;;) {
      bool did = poll();
      auto now = Clock::now();
      if (now - events_at_ > std::chrono::milliseconds(1)) {
        events();
        events_at_ = now;
      }
      for (auto &l : links_) {
        if (!l || l->dead) continue;
        if (l->fail_at != Clock::time_point{} && now >= l->fail_at) link_failed(*l, HPU_ERROR_REMOTE, l->fail_why);
        if (l->post_error) link_failed(*l, HPU_ERROR_REMOTE, strf("posting an RDMA write failed: %s", strerror(l->post_error)));
        did |= l->flush();
        if (!closing_ && now - l->last_send > kKeepalive) {
          Frame k;
          k.type = Frame::pad;
          k.flags = kKeepaliveFlag;
          l->send(k, nullptr, 0, 0, nullptr);
        }
      }
      if (closing_) {
        bool empty = true;
        for (auto &l : links_)
          if (l && !l->dead) {
            std::lock_guard<std::mutex> lock(l->mu);
            for (auto &ln : l->lane) empty = empty && ln.queue.empty() && ln.free_slots.size() == kSendSlots && ln.pieces.empty();
          }
        if (empty || now >= flush_until_) return;
      }
      if (did) {
        idle = 0;
        continue;
      }
      // Busy-poll briefly, then nap (no completion channel: the table stays small).
      if (++idle < 256) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

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

bool VerbsLink::post(Lane &l, int index, Outgoing &o) {
  bool piece = o.write != nullptr;
  bool copy = !piece || !o.write->source;  // through one of our send buffers
  bool consumes = !piece || o.with_imm;    // takes one of the peer's posted receives
  if (copy && l.free_slots.empty()) return false;
  if (consumes && l.sent - l.freed() >= kRecvSlots) return false;  // no credit
  uint32_t slot = copy ? l.free_slots.back() : 0;
  uint32_t target = static_cast<uint32_t>(l.sent % kRecvSlots);
  ibv_sge sge{};
  if (copy) {
    uint8_t *buf = l.send_slot(slot);
    size_t at = 0;
    if (!piece) {
      std::memcpy(buf, &o.frame, sizeof o.frame);
      at = sizeof o.frame;
    }
    if (o.bytes) std::memcpy(buf + at, o.payload, o.bytes);
    sge = {reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(at + o.bytes), mr->lkey};
  } else {
    sge = {reinterpret_cast<uintptr_t>(o.payload), static_cast<uint32_t>(o.bytes), o.write->source->mr().lkey};
  }
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = consumes ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (piece) {
    wr.wr_id = wr_id(peer, index, kPieceWr);
    wr.imm_data = o.imm;
    wr.wr.rdma.remote_addr = o.remote_addr;
    wr.wr.rdma.rkey = o.rkey;
  } else {
    wr.wr_id = wr_id(peer, index, kFrameWr, slot);
    wr.imm_data = target;
    wr.wr.rdma.remote_addr = l.remote_slots + target * kSlot;
    wr.wr.rdma.rkey = remote_rkey;
  }
  bool inline_ok = sge.length <= kInline;
  wr.send_flags = IBV_SEND_SIGNALED | (inline_ok ? IBV_SEND_INLINE : 0);
  int e = engine->api().post_send(l.qp, &wr, &bad);
  if (e) {
    if (e != ENOMEM) post_error = e;  // the engine's thread fails the link; ENOMEM: the send queue is full, later
    return false;
  }
  last_send = Clock::now();
  if (copy) l.free_slots.pop_back();
  if (consumes) l.sent++;
  if (inline_ok) engine->inline_sends_++;
  if (piece) {
    l.pieces.emplace_back(o.write, copy ? static_cast<int>(slot) : -1);
    engine->direct_bytes_ += o.bytes;
    if (copy) engine->direct_copied_bytes_ += o.bytes;
  } else {
    engine->slot_bytes_ += o.bytes;
  }
  return true;
}

void VerbsLink::report_credits(Lane &l, int index, bool force) {
  if (dead || l.credit_writes >= kCreditWrites || l.consumed == l.reported) return;
  if (!force && l.consumed - l.reported < kRecvSlots / 4) return;
  *l.consumed_word() = l.consumed;
  ibv_sge sge{reinterpret_cast<uintptr_t>(l.consumed_word()), 8, mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(peer, index, kCreditWr);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = l.remote_credit;
  wr.wr.rdma.rkey = remote_rkey;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  int e = engine->api().post_send(l.qp, &wr, &bad);
  if (e == ENOMEM) return;  // later
  if (e) {
    dead = true;
    return;
  }
  l.credit_writes++;
  l.reported = l.consumed;
}

void VerbsLink::queue_or_post(int index, Outgoing o) {
  Lane &l = lane[static_cast<size_t>(index)];
  if (!l.queue.empty() || dead || !post(l, index, o)) l.queue.push_back(std::move(o));
}

bool VerbsLink::flush() {
  std::vector<std::function<void(bool)>> finished;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < lane.size(); ++i) {
      Lane &l = lane[i];
      report_credits(l, static_cast<int>(i), true);  // idle: whatever is unreported
      while (!l.queue.empty() && !dead && post(l, static_cast<int>(i), l.queue.front())) {
        if (l.queue.front().done) finished.push_back(std::move(l.queue.front().done));
        l.queue.pop_front();
        moved = true;
      }
    }
  }
  for (auto &d : finished) d(!dead);
  return moved;
}

void VerbsLink::send(const Frame &f, const void *payload, size_t bytes, int lane_index, std::function<void(bool)> done) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!dead) {
      int index = lane_index % static_cast<int>(lane.size());
      Lane &l = lane[static_cast<size_t>(index)];
      Outgoing o{f, payload, bytes, std::move(done), nullptr};
      if (!l.queue.empty() || !post(l, index, o)) {
        l.queue.push_back(std::move(o));
        return;
      }
      done = std::move(o.done);
    }
  }
  if (done) done(!dead);
}

void VerbsLink::offer(Frame &cts, void *dst, size_t bytes) {
  VerbsRegistrationPtr reg = engine->cache_ ? engine->cache_->find(dst, bytes) : nullptr;
  if (!reg) return;  // not device memory: DATA frames through the slots
  std::lock_guard<std::mutex> lock(mu);
  if (dead) return;
  uint32_t handle = next_handle++ & kHandleMask;
  direct[handle] = {cts.b, dst, bytes, reg};
  cts.flags |= Frame::kDirect;
  cts.size = reinterpret_cast<uintptr_t>(dst);
  cts.tag = static_cast<uint64_t>(reg->mr().rkey) << 32 | handle;
}

void VerbsLink::write(const Frame &cts, const void *src, size_t bytes, std::function<void(bool)> done) {
  auto w = std::make_shared<Write>();
  w->source = engine->cache_ ? engine->cache_->find(src, bytes) : nullptr;
  // Pieces: a copied one fits a send buffer; else the message is spread over
  // every lane, in pieces of 64 KiB to kPiece.
  size_t piece = w->source ? std::clamp<size_t>((bytes + lane.size() - 1) / lane.size(), kChunk, kPiece) : kChunk;
  size_t n = std::max<size_t>(1, (bytes + piece - 1) / piece);
  w->left = n;
  w->done = std::move(done);
  std::lock_guard<std::mutex> lock(mu);
  size_t used = std::min(n, lane.size()), first = next_lane++;  // messages of one piece take turns
  for (size_t i = 0; i < n; ++i) {
    Outgoing o{};
    o.write = w;
    o.payload = static_cast<const uint8_t *>(src) + i * piece;
    o.bytes = std::min(piece, bytes - i * piece);
    o.remote_addr = cts.size + i * piece;
    o.rkey = static_cast<uint32_t>(cts.tag >> 32);
    o.with_imm = i + used >= n;  // the last piece on its lane
    o.imm = kDirectImm | static_cast<uint32_t>(used) << 24 | (static_cast<uint32_t>(cts.tag) & kHandleMask);
    queue_or_post(static_cast<int>((first + i % used) % lane.size()), std::move(o));
  }
}

void VerbsLink::stop_receiving() {
  std::lock_guard<std::mutex> lock(mu);
  if (direct.empty()) return;
  direct.clear();
  for (auto &l : lane) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    engine->api().modify_qp(l.qp, &a, IBV_QP_STATE);
  }
  dead = true;
}

// What a rank publishes: its ports, and for each peer where that peer writes
// and the queue pairs it connects to.
struct PublishedPort {
  ibv_gid gid;
  uint16_t lid;
  uint8_t mtu;
  uint8_t ethernet;
  uint32_t gid_type;
  int32_t gid_index;
};
struct Published {
  PublishedPort ports[kMaxPorts];
  int32_t nports;
  int32_t lanes;
  int32_t ok;
  int32_t reserved;
};
struct PerPeer {
  uint64_t buffers;  // lane i's receive slots at buffers + i * kLaneBytes + kSendSlots * kSlot
  uint32_t rkey;
  uint32_t qpn[kMaxLanes];
};

const char *family(const ibv_gid &g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return "IPv6";
  return g.raw[10] == 0xff && g.raw[11] == 0xff ? "IPv4" : "IPv6";
}

}  // namespace

VerbsStats verbs_stats(const Engine &engine) {
  auto *e = dynamic_cast<const VerbsEngine *>(&engine);
  return e ? e->stats() : VerbsStats{};
}

std::unique_ptr<Engine> make_verbs_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                          const IbConfig &cfg, Deadline deadline) {
  int rank = bootstrap.rank(), size = bootstrap.size();
  std::string why;
  const VerbsApi *api = nullptr;
  std::unique_ptr<VerbsEngine> e;
  std::string error;
  size_t rec = sizeof(Published) + sizeof(PerPeer) * static_cast<size_t>(size);
  std::vector<uint8_t> mine(rec, 0), all(rec * static_cast<size_t>(size));
  Published pub{};
  int lanes = 0;
  try {
    api = verbs_api(cfg, &why);
    if (!api && !peers.empty()) fail(HPU_ERROR_NOT_AVAILABLE, "%s", why.c_str());
    // A rank without verbs peers still takes part (and gets an engine with no
    // links, which makes no verbs call: without a library, an empty table).
    static const VerbsApi kNoLibrary{};
    e = std::make_unique<VerbsEngine>(t, api ? *api : kNoLibrary, rank, size);
    if (!peers.empty()) {
      if (!verbs_find_ports(*api, cfg, &e->ports_, &why)) fail(HPU_ERROR_NOT_AVAILABLE, "%s", why.c_str());
      if (e->ports_.size() > static_cast<size_t>(kMaxPorts)) e->ports_.resize(kMaxPorts);
      int n = 0;
      ibv_device **list = api->get_device_list(&n);
      for (int d = 0; d < n && !e->ctx_; ++d)
        if (e->ports_.front().device == api->get_device_name(list[d])) e->ctx_ = api->open_device(list[d]);
      api->free_device_list(list);
      if (!e->ctx_)
        fail(HPU_ERROR_NOT_AVAILABLE, "cannot open %s: %s", e->ports_.front().device.c_str(), strerror(errno));
      // Events are read by the engine's thread between polls: never block on them.
      int fl = fcntl(e->ctx_->async_fd, F_GETFL);
      if (fl < 0 || fcntl(e->ctx_->async_fd, F_SETFL, fl | O_NONBLOCK) != 0)
        fail(HPU_ERROR_IO, "verbs: cannot make the asynchronous event descriptor non-blocking: %s", strerror(errno));
      e->pd_ = api->alloc_pd(e->ctx_);
      lanes = std::min<int>(kMaxLanes, static_cast<int>(e->ports_.size()) * cfg.qps_per_port);
      uint32_t send_depth = kSendSlots + kCreditWrites + kPieceWrites;
      int depth = static_cast<int>(peers.size()) * lanes * static_cast<int>(send_depth + kRecvSlots);
      e->cq_ = e->pd_ ? api->create_cq(e->ctx_, depth, nullptr, nullptr, 0) : nullptr;
      if (!e->cq_)
        fail(HPU_ERROR_NOT_AVAILABLE, "cannot create a protection domain or CQ on %s: %s",
             e->ports_.front().device.c_str(), strerror(errno));
      e->cache_ = std::make_unique<VerbsRegCache>(*api, e->pd_);
      for (int p : peers) {
        auto l = std::make_unique<VerbsLink>(e.get(), p);
        size_t bytes = (kLaneBytes * static_cast<size_t>(lanes) + 4095) & ~size_t(4095);  // aligned_alloc wants whole pages
        l->buffers = static_cast<uint8_t *>(aligned_alloc(4096, bytes));
        if (!l->buffers) fail(HPU_ERROR_OUT_OF_MEMORY, "verbs: cannot allocate %zu bytes of buffers", bytes);
        l->mr = api->reg_mr(e->pd_, l->buffers, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!l->mr) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot register %zu bytes: %s", bytes, strerror(errno));
        l->lane.resize(static_cast<size_t>(lanes));
        PerPeer pp{reinterpret_cast<uintptr_t>(l->buffers), l->mr->rkey, {}};
        for (int i = 0; i < lanes; ++i) {
          Lane &ln = l->lane[static_cast<size_t>(i)];
          ln.buffers = l->buffers + kLaneBytes * static_cast<size_t>(i);
          std::memset(ln.buffers + (kSendSlots + kRecvSlots) * kSlot, 0, 128);  // the two credit words
          ln.port = i % static_cast<int>(e->ports_.size());
          ibv_qp_init_attr qa{};
          qa.send_cq = qa.recv_cq = e->cq_;
          qa.qp_type = IBV_QPT_RC;
          qa.cap.max_send_wr = send_depth;
          qa.cap.max_recv_wr = kRecvSlots;
          qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
          qa.cap.max_inline_data = kInline;
          ln.qp = api->create_qp(e->pd_, &qa);
          if (!ln.qp) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot create a queue pair: %s", strerror(errno));
          ibv_qp_attr a{};
          a.qp_state = IBV_QPS_INIT;
          a.port_num = static_cast<uint8_t>(e->ports_[static_cast<size_t>(ln.port)].port);
          a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
          if (int err = api->modify_qp(ln.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair to INIT failed: %s", strerror(err));
          for (uint32_t s = 0; s < kSendSlots; ++s) ln.free_slots.push_back(s);
          pp.qpn[i] = ln.qp->qp_num;
        }
        std::memcpy(mine.data() + sizeof(Published) + sizeof(PerPeer) * static_cast<size_t>(p), &pp, sizeof pp);
        e->links_[static_cast<size_t>(p)] = std::move(l);
      }
      pub.nports = static_cast<int32_t>(e->ports_.size());
      for (size_t i = 0; i < e->ports_.size(); ++i) {
        const VerbsPort &vp = e->ports_[i];
        pub.ports[i] = {vp.gid, vp.lid, static_cast<uint8_t>(vp.mtu), static_cast<uint8_t>(vp.ethernet), vp.gid_type,
                        vp.gid_index};
      }
      pub.lanes = lanes;
    }
    pub.ok = 1;
  } catch (const Error &x) {
    error = x.what();
  }
  if (!error.empty()) pub.ok = 0;
  std::memcpy(mine.data(), &pub, sizeof pub);
  bootstrap.allgather(mine.data(), rec, all.data(), deadline);
  fault::setup_point("verbs", rank);
  auto published = [&](int r) {
    Published p;
    std::memcpy(&p, all.data() + rec * static_cast<size_t>(r), sizeof p);
    return p;
  };
  auto per_peer = [&](int r, int peer) {
    PerPeer q;
    std::memcpy(&q, all.data() + rec * static_cast<size_t>(r) + sizeof(Published) + sizeof(PerPeer) * static_cast<size_t>(peer),
                sizeof q);
    return q;
  };
  for (int r = 0; r < size && error.empty(); ++r)
    if (!published(r).ok) error = strf("verbs: rank %d could not set up its RDMA queue pairs", r);
  if (error.empty()) {
    try {
      const PublishedPort &ours = pub.ports[0];
      for (int p : peers) {
        VerbsLink &l = *e->links_[static_cast<size_t>(p)];
        Published them = published(p);
        const PublishedPort &theirs = them.ports[0];
        // Both ends of a path must speak the same: link layer, and for RoCE the GID's type and family.
        if (theirs.ethernet != ours.ethernet || (ours.ethernet && (theirs.gid_type != ours.gid_type ||
                                                                    std::strcmp(family(theirs.gid), family(ours.gid)))))
          fail(HPU_ERROR_NOT_AVAILABLE,
               "verbs: ranks %d and %d cannot reach each other: rank %d uses %s, rank %d uses %s (set HPU_IB_GID_INDEX "
               "or HPU_IB_ROCE_VERSION and HPU_IB_ADDR_FAMILY alike on every host)",
               rank, p, rank, describe_gid(e->ports_[0]).c_str(), p,
               ours.ethernet == theirs.ethernet ? describe_gid(VerbsPort{"", 0, IBV_MTU_1024, 0, true, theirs.gid_index,
                                                                         theirs.gid, theirs.gid_type})
                                                                   .c_str()
                                                : (theirs.ethernet ? "an Ethernet (RoCE) port" : "an InfiniBand port"));
        PerPeer remote = per_peer(p, rank);
        for (size_t i = static_cast<size_t>(them.lanes); i < l.lane.size(); ++i) api->destroy_qp(l.lane[i].qp);
        l.lane.resize(static_cast<size_t>(std::min(lanes, them.lanes)));
        l.remote_rkey = remote.rkey;
        for (size_t i = 0; i < l.lane.size(); ++i) {
          Lane &ln = l.lane[i];
          const VerbsPort &local = e->ports_[static_cast<size_t>(ln.port)];
          const PublishedPort &far = them.ports[i % static_cast<size_t>(them.nports)];
          ln.remote_slots = remote.buffers + kLaneBytes * i + kSendSlots * kSlot;
          ln.remote_credit = remote.buffers + kLaneBytes * i + (kSendSlots + kRecvSlots) * kSlot;
          ibv_qp_attr a{};
          a.qp_state = IBV_QPS_RTR;
          a.path_mtu = static_cast<ibv_mtu>(std::min<int>(far.mtu, local.mtu));
          a.dest_qp_num = remote.qpn[i];
          a.rq_psn = 0;
          a.max_dest_rd_atomic = 1;
          a.min_rnr_timer = 12;
          a.ah_attr.dlid = far.lid;
          a.ah_attr.port_num = static_cast<uint8_t>(local.port);
          a.ah_attr.is_global = 1;
          a.ah_attr.grh.dgid = far.gid;
          a.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gid_index);
          a.ah_attr.grh.hop_limit = local.ethernet ? 255 : 1;
          if (int err = api->modify_qp(ln.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair %zu to rank %d: RTR failed: %s", i, p, strerror(err));
          a = ibv_qp_attr{};
          a.qp_state = IBV_QPS_RTS;
          a.timeout = static_cast<uint8_t>(cfg.timeout);  // 4.096 us * 2^timeout per try
          a.retry_cnt = static_cast<uint8_t>(cfg.retry_cnt);
          a.rnr_retry = 7;  // infinite: a receiver out of buffers only delays
          a.sq_psn = 0;
          a.max_rd_atomic = 1;
          if (int err = api->modify_qp(ln.qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
            fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair %zu to rank %d: RTS failed: %s", i, p, strerror(err));
          for (uint32_t s = 0; s < kRecvSlots; ++s) e->post_recv(l, static_cast<int>(i));
        }
      }
    } catch (const Error &x) {
      error = x.what();
    }
  }
  struct Flag {
    int32_t ok;
  };
  auto flags = bootstrap.allgather(Flag{error.empty() ? 1 : 0}, deadline);
  if (!error.empty()) throw Error(HPU_ERROR_NOT_AVAILABLE, error);
  for (int r = 0; r < size; ++r)
    if (!flags[static_cast<size_t>(r)].ok) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: rank %d could not connect its queue pairs", r);
  if (!peers.empty()) {
    std::string where;
    for (auto &p : e->ports_)
      where += strf("%s%s:%d%s", where.empty() ? "" : ", ", p.device.c_str(), p.port,
                    p.ethernet ? (" GID " + describe_gid(p)).c_str() : "");
    HPU_LOG(info, "comm", "verbs transport of rank %d: %zu peer(s) over %s %s, %d queue pair(s) per peer", rank,
            peers.size(), e->api().name, where.c_str(), e->links_[static_cast<size_t>(peers.front())]->lanes());
  }
  return e;
}

std::vector<char> verbs_ports(Bootstrap &bootstrap, bool wanted, bool forced, const IbConfig &cfg, Deadline deadline) {
  struct Have {
    int32_t ok;  // 1: has a port; 0: none; -1: a configuration error
  };
  std::string why, config_error;
  bool ok = false;
  if (wanted || forced) {
    try {
      const VerbsApi *api = verbs_api(cfg, &why);
      std::vector<VerbsPort> ports;
      ok = api && verbs_find_ports(*api, cfg, &ports, &why);
      if (ok)
        HPU_LOG(debug, "comm", "rank %d: RDMA port %s:%d through %s", bootstrap.rank(), ports.front().device.c_str(),
                ports.front().port, api->name);
    } catch (const Error &x) {
      config_error = x.what();
    }
  }
  auto all = bootstrap.allgather(Have{!config_error.empty() ? -1 : ok ? 1 : 0}, deadline);
  if (!config_error.empty()) fail(HPU_ERROR_CONFIG, "%s", config_error.c_str());
  std::vector<char> out;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].ok < 0) fail(HPU_ERROR_CONFIG, "rank %zu's RDMA settings are invalid (its log says why)", r);
    out.push_back(all[r].ok ? 1 : 0);
  }
  if (forced) {
    if (!ok) fail(HPU_ERROR_NOT_AVAILABLE, "HPU_TRANSPORT is \"verbs\", but %s", why.c_str());
    for (size_t r = 0; r < out.size(); ++r)
      if (!out[r]) fail(HPU_ERROR_NOT_AVAILABLE, "HPU_TRANSPORT is \"verbs\", but rank %zu has no active RDMA port", r);
  } else if (wanted && !ok) {
    HPU_LOG(info, "comm", "rank %d: verbs not used, tcp between hosts: %s", bootstrap.rank(), why.c_str());
  }
  return out;
}

}  // namespace hpu::comm
