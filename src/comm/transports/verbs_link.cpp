// verbs: links between hosts over RDMA reliable-connected queue pairs, one QP
// per peer, every verbs call through the VerbsApi table (verbs_api.hpp).
//
// Frames of the net protocol (net_transport.hpp) travel as RDMA writes with
// immediate into the receiver's slots: each rank registers, per peer, a ring
// of kRecvSlots receive slots (remote-writable; address and rkey published
// through the bootstrap) and keeps as many zero-length receives posted. The
// sender copies a frame and its payload into one of kSendSlots registered send
// buffers (or posts it inline when it fits the QP's inline size) and writes it
// into the next slot, the immediate naming the slot; up to kSendSlots writes
// are in flight per peer, and never more than the receiver's free slots (its
// credits). The receiver hands the frame to the transport, reposts the
// receive and, every kRecvSlots / 4 frames, RDMA-writes how many it has
// consumed into a word of the sender's registered memory: the credits come
// back without a message. The protocol's DATA chunks are at most kChunk bytes,
// so every frame fits a slot. (Zero-copy writes straight into the receiver's
// destination buffer are not done: every byte passes through the slots.)
//
// Faults: a work completion with an error fails the endpoint —
//   retry exceeded (the peer does not answer: dead, or the path is gone) and a
//   QP in the error state: HPU_ERROR_REMOTE naming the peer; a remote access
//   error: HPU_ERROR_REMOTE naming it; a port that went down:
//   HPU_ERROR_NOT_AVAILABLE. A keepalive frame goes to each idle peer every
//   kKeepalive, so that a dead peer is noticed through retry exceeded even when
//   nothing else is sent to it.
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "comm/transports/net_transport.hpp"
#include "comm/transports/verbs_api.hpp"
#include "comm/transports/verbs_engine.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kChunk = kVerbsMaxPayload;  // largest payload of one frame
constexpr size_t kSlot = sizeof(Frame) + kChunk;
constexpr uint32_t kSendSlots = 32;
constexpr uint32_t kRecvSlots = 64;
constexpr uint32_t kCreditWrites = 4;  // credit updates in flight per peer (send queue entries beyond the slots)
constexpr uint64_t kCreditBit = 1ull << 30;  // wr_id: a credit update
constexpr uint32_t kInline = 128;
constexpr uint32_t kKeepaliveFlag = 0x4b41;  // a pad frame with this flag: keepalive, not for the transport
constexpr auto kKeepalive = std::chrono::milliseconds(100);
constexpr auto kFlushTime = std::chrono::seconds(1);
constexpr auto kFlushGrace = std::chrono::milliseconds(200);

size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}

uint64_t wr_id(int peer, bool recv, uint32_t slot) {
  return (static_cast<uint64_t>(peer) << 32) | (recv ? 1ull << 31 : 0) | slot;
}

struct Outgoing {
  Frame frame;
  const void *payload;
  size_t bytes;
  std::function<void(bool)> done;
};

class VerbsEngine;

class VerbsLink final : public Link {
 public:
  VerbsLink(VerbsEngine *e, int peer) : engine(e), peer(peer) {}
  void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) override;
  size_t max_chunk() const override { return kChunk; }
  const char *kind() const override { return "verbs"; }

  bool post(const Frame &f, const void *payload, size_t bytes);  // under mu; false: no slot (or dead)
  bool flush();

  VerbsEngine *engine;
  int peer;
  ibv_qp *qp = nullptr;
  // kSendSlots send buffers, kRecvSlots receive slots, then two words: the
  // count of our frames the peer has consumed (it writes it) and ours of its.
  uint8_t *buffers = nullptr;
  ibv_mr *mr = nullptr;
  uint64_t remote_slots = 0, remote_credit = 0;  // the peer's slots for us, its word for our count
  uint32_t remote_rkey = 0;
  uint64_t freed() const {
    return __atomic_load_n(reinterpret_cast<const uint64_t *>(buffers + (kSendSlots + kRecvSlots) * kSlot), __ATOMIC_ACQUIRE);
  }
  uint64_t *consumed_word() { return reinterpret_cast<uint64_t *>(buffers + (kSendSlots + kRecvSlots) * kSlot + 64); }
  uint64_t sent = 0;                     // frames written into the peer's slots
  uint64_t consumed = 0, reported = 0;   // the peer's frames we took; the count last written back
  uint32_t credit_writes = 0;            // in flight
  void report_credits(bool force);       // under mu
  std::mutex mu;
  std::vector<uint32_t> free_slots;
  std::deque<Outgoing> queue;
  bool dead = false;
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
      if (l->qp) api_.destroy_qp(l->qp);
      if (l->mr) api_.dereg_mr(l->mr);
      free(l->buffers);
    }
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
    if (drainer_.load() == std::this_thread::get_id()) return;
    std::lock_guard<std::mutex> lock(drain_mu_);
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
      std::deque<Outgoing> left;
      {
        std::lock_guard<std::mutex> lock(l->mu);
        left.swap(l->queue);
      }
      for (auto &o : left)
        if (o.done) o.done(false);
    }
  }

  // Set up by make_verbs_engine.
  VerbsPort port_;
  ibv_context *ctx_ = nullptr;
  ibv_pd *pd_ = nullptr;
  ibv_cq *cq_ = nullptr;
  std::vector<std::unique_ptr<VerbsLink>> links_;
  const VerbsApi &api() const { return api_; }
  int rank() const { return rank_; }

  // A zero-length receive: the slot's data arrives by RDMA write, the completion names it.
  void post_recv(VerbsLink &l) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id(l.peer, true, 0);
    if (int e = api_.post_recv(l.qp, &wr, &bad)) link_failed(l, HPU_ERROR_REMOTE, strf("posting a receive failed: %s", strerror(e)));
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
  bool port_down() {
    ibv_port_attr pa{};
    return api_.query_port(ctx_, static_cast<uint8_t>(port_.port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE;
  }

  void on_error(const ibv_wc &wc) {
    VerbsLink *l = links_[static_cast<size_t>(wc.wr_id >> 32)].get();
    if (!l) return;
    std::string what = strf("%s (verbs status %d) on %s %s:%d", api_.wc_status_str(wc.status), wc.status,
                            api_.name, port_.device.c_str(), port_.port);
    if (port_down()) {
      link_failed(*l, HPU_ERROR_NOT_AVAILABLE, strf("port %d of %s is down (%s)", port_.port, port_.device.c_str(),
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
        VerbsLink &l = *links_[static_cast<size_t>(wc.wr_id >> 32)];
        uint32_t slot = static_cast<uint32_t>(wc.wr_id & 0x3fffffff);
        if (!(wc.wr_id & (1ull << 31))) {
          std::lock_guard<std::mutex> lock(l.mu);
          if (wc.wr_id & kCreditBit) l.credit_writes--;
          else l.free_slots.push_back(slot);
          continue;
        }
        slot = wc.imm_data;
        const uint8_t *buf = l.buffers + (kSendSlots + slot % kRecvSlots) * kSlot;
        Frame f;
        std::memcpy(&f, buf, sizeof f);
        size_t bytes = payload_bytes(f);
        if (!(wc.wc_flags & IBV_WC_WITH_IMM) || slot >= kRecvSlots || wc.byte_len < sizeof f ||
            bytes != wc.byte_len - sizeof f || bytes > t_.frame_limit(l.peer, f)) {
          link_failed(l, HPU_ERROR_REMOTE, strf("rank %d sent a malformed frame (type %u, %u bytes)", l.peer, f.type,
                                                wc.byte_len));
          continue;
        }
        if (!(f.type == Frame::pad && f.flags == kKeepaliveFlag)) t_.on_frame(l.peer, f, buf + sizeof f);
        post_recv(l);
        std::lock_guard<std::mutex> lock(l.mu);
        l.consumed++;
        l.report_credits(false);
      }
    }
  }

  void run() {
    int idle = 0;
    for (;;) {
      bool did = poll();
      auto now = Clock::now();
      for (auto &l : links_) {
        if (!l || l->dead) continue;
        if (l->fail_at != Clock::time_point{} && now >= l->fail_at) link_failed(*l, HPU_ERROR_REMOTE, l->fail_why);
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
            empty = empty && l->queue.empty() && l->free_slots.size() == kSendSlots;
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
};

bool VerbsLink::post(const Frame &f, const void *payload, size_t bytes) {
  if (free_slots.empty() || sent - freed() >= kRecvSlots) return false;  // no buffer, or no credit
  uint32_t slot = free_slots.back();
  uint32_t target = static_cast<uint32_t>(sent % kRecvSlots);
  uint8_t *buf = buffers + slot * kSlot;
  std::memcpy(buf, &f, sizeof f);
  if (bytes) std::memcpy(buf + sizeof f, payload, bytes);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(sizeof f + bytes), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(peer, false, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = target;
  wr.wr.rdma.remote_addr = remote_slots + target * kSlot;
  wr.wr.rdma.rkey = remote_rkey;
  wr.send_flags = IBV_SEND_SIGNALED | (sge.length <= kInline ? IBV_SEND_INLINE : 0);
  int e = engine->api().post_send(qp, &wr, &bad);
  if (e == ENOMEM) return false;  // the send queue is full: later
  free_slots.pop_back();
  last_send = Clock::now();
  if (e) {
    free_slots.push_back(slot);
    dead = true;
  } else {
    sent++;
  }
  return true;
}

void VerbsLink::report_credits(bool force) {
  if (dead || credit_writes >= kCreditWrites || consumed == reported) return;
  if (!force && consumed - reported < kRecvSlots / 4) return;
  *consumed_word() = consumed;
  ibv_sge sge{reinterpret_cast<uintptr_t>(consumed_word()), 8, mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(peer, false, 0) | kCreditBit;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = remote_credit;
  wr.wr.rdma.rkey = remote_rkey;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  int e = engine->api().post_send(qp, &wr, &bad);
  if (e == ENOMEM) return;  // later
  if (e) {
    dead = true;
    return;
  }
  credit_writes++;
  reported = consumed;
}

bool VerbsLink::flush() {
  std::vector<std::function<void(bool)>> finished;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    report_credits(true);  // idle: whatever is unreported
    while (!queue.empty() && !dead && post(queue.front().frame, queue.front().payload, queue.front().bytes)) {
      if (queue.front().done) finished.push_back(std::move(queue.front().done));
      queue.pop_front();
      moved = true;
    }
  }
  for (auto &d : finished) d(!dead);
  return moved;
}

void VerbsLink::send(const Frame &f, const void *payload, size_t bytes, int, std::function<void(bool)> done) {
  bool ok;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!dead && !queue.empty()) {
      queue.push_back({f, payload, bytes, std::move(done)});
      return;
    }
    ok = !dead && post(f, payload, bytes);
    if (!dead && !ok) {
      queue.push_back({f, payload, bytes, std::move(done)});
      return;
    }
    ok = ok && !dead;
  }
  if (done) done(ok);
}

// The address a rank publishes: its port, and for each peer its QP number
// and where that peer writes (slots, then its credit word).
struct Published {
  ibv_gid gid;
  uint16_t lid;
  uint8_t mtu;
  uint8_t ok;
};
struct PerPeer {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t slots;
};

}  // namespace

std::unique_ptr<Engine> make_verbs_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                          Deadline deadline) {
  int rank = bootstrap.rank(), size = bootstrap.size();
  std::string why;
  const VerbsApi *api = verbs_api(&why);
  std::unique_ptr<VerbsEngine> e;
  std::string error;
  if (!api) error = why;
  // Published, then one QP number per rank.
  size_t rec = sizeof(Published) + sizeof(PerPeer) * static_cast<size_t>(size);
  std::vector<uint8_t> mine(rec, 0), all(rec * static_cast<size_t>(size));
  Published pub{};
  try {
    // A rank without verbs peers still takes part (and gets an engine with no links).
    e = std::make_unique<VerbsEngine>(t, api ? *api : *verbs_test_api(), rank, size);
    if (api && !peers.empty()) {
      const char *hca = std::getenv("HPU_IB_HCA");
      if (!verbs_find_port(*api, hca, &e->port_, &why)) fail(HPU_ERROR_NOT_AVAILABLE, "%s", why.c_str());
      int n = 0;
      ibv_device **list = api->get_device_list(&n);
      for (int d = 0; d < n && !e->ctx_; ++d)
        if (e->port_.device == api->get_device_name(list[d])) e->ctx_ = api->open_device(list[d]);
      api->free_device_list(list);
      if (!e->ctx_) fail(HPU_ERROR_NOT_AVAILABLE, "cannot open %s: %s", e->port_.device.c_str(), strerror(errno));
      e->pd_ = api->alloc_pd(e->ctx_);
      int depth = static_cast<int>(peers.size() * (kSendSlots + kCreditWrites + kRecvSlots));
      e->cq_ = e->pd_ ? api->create_cq(e->ctx_, depth, nullptr, nullptr, 0) : nullptr;
      if (!e->cq_) fail(HPU_ERROR_NOT_AVAILABLE, "cannot create a protection domain or CQ on %s: %s",
                        e->port_.device.c_str(), strerror(errno));
      for (int p : peers) {
        auto l = std::make_unique<VerbsLink>(e.get(), p);
        size_t bytes = ((kSendSlots + kRecvSlots) * kSlot + 128 + 4095) & ~size_t(4095);  // aligned_alloc wants whole pages
        l->buffers = static_cast<uint8_t *>(aligned_alloc(4096, bytes));
        if (!l->buffers) fail(HPU_ERROR_OUT_OF_MEMORY, "verbs: cannot allocate %zu bytes of buffers", bytes);
        std::memset(l->buffers + (kSendSlots + kRecvSlots) * kSlot, 0, 128);  // the two credit words
        l->mr = api->reg_mr(e->pd_, l->buffers, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!l->mr) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot register %zu bytes: %s", bytes, strerror(errno));
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = e->cq_;
        qa.qp_type = IBV_QPT_RC;
        qa.cap.max_send_wr = kSendSlots + kCreditWrites;
        qa.cap.max_recv_wr = kRecvSlots;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        qa.cap.max_inline_data = kInline;
        l->qp = api->create_qp(e->pd_, &qa);
        if (!l->qp) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot create a queue pair: %s", strerror(errno));
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = static_cast<uint8_t>(e->port_.port);
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (int err = api->modify_qp(l->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
          fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair to INIT failed: %s", strerror(err));
        for (uint32_t s = 0; s < kSendSlots; ++s) l->free_slots.push_back(s);
        PerPeer pp{l->qp->qp_num, l->mr->rkey, reinterpret_cast<uintptr_t>(l->buffers + kSendSlots * kSlot)};
        std::memcpy(mine.data() + sizeof(Published) + sizeof(PerPeer) * static_cast<size_t>(p), &pp, sizeof pp);
        e->links_[static_cast<size_t>(p)] = std::move(l);
      }
      for (int p : peers)
        for (uint32_t s = 0; s < kRecvSlots; ++s) e->post_recv(*e->links_[static_cast<size_t>(p)]);
      pub.gid = e->port_.gid;
      pub.lid = e->port_.lid;
      pub.mtu = static_cast<uint8_t>(e->port_.mtu);
      pub.ok = 1;
    } else if (api || peers.empty()) {
      pub.ok = 1;
    }
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
      for (int p : peers) {
        VerbsLink &l = *e->links_[static_cast<size_t>(p)];
        Published them = published(p);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = static_cast<ibv_mtu>(std::min<int>(them.mtu, e->port_.mtu));
        PerPeer theirs = per_peer(p, rank);
        l.remote_slots = theirs.slots;
        l.remote_credit = theirs.slots + kRecvSlots * kSlot;
        l.remote_rkey = theirs.rkey;
        a.dest_qp_num = theirs.qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = them.lid;
        a.ah_attr.port_num = static_cast<uint8_t>(e->port_.port);
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = them.gid;
        a.ah_attr.grh.hop_limit = 1;
        if (int err = api->modify_qp(l.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
          fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair to rank %d: RTR failed: %s", p, strerror(err));
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;   // 4.096 us * 2^14 = 67 ms per retry
        a.retry_cnt = 7;
        a.rnr_retry = 7;  // infinite: a receiver out of buffers only delays
        a.sq_psn = 0;
        a.max_rd_atomic = 1;
        if (int err = api->modify_qp(l.qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
          fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair to rank %d: RTS failed: %s", p, strerror(err));
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
  if (!peers.empty())
    HPU_LOG(debug, "comm", "verbs transport of rank %d: %zu peer(s) over %s %s:%d", rank, peers.size(), e->api().name,
            e->port_.device.c_str(), e->port_.port);
  return e;
}

std::vector<char> verbs_ports(Bootstrap &bootstrap, bool wanted, bool forced, Deadline deadline) {
  struct Have {
    int32_t ok;
  };
  std::string why;
  bool ok = false;
  if (wanted || forced) {
    const VerbsApi *api = verbs_api(&why);
    VerbsPort port;
    ok = api && verbs_find_port(*api, std::getenv("HPU_IB_HCA"), &port, &why);
    if (ok)
      HPU_LOG(debug, "comm", "rank %d: RDMA port %s:%d through %s", bootstrap.rank(), port.device.c_str(), port.port,
              api->name);
  }
  auto all = bootstrap.allgather(Have{ok ? 1 : 0}, deadline);
  std::vector<char> out;
  for (auto &h : all) out.push_back(h.ok ? 1 : 0);
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
