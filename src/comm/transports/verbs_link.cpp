// verbs: links between hosts over RDMA reliable-connected queue pairs, one QP
// per peer, every verbs call through the VerbsApi table (verbs_api.hpp).
//
// Frames of the net protocol (net_transport.hpp) travel as SENDs: the receiver
// keeps kRecvSlots registered receive buffers posted per peer (its credits);
// the sender copies a frame and its payload into one of kSendSlots registered
// send buffers and posts it (inline when it fits the QP's inline size), with
// up to kSendSlots in flight per peer. The protocol's DATA chunks are at most
// kChunk bytes, so every frame fits a receive buffer. The receiver reposts a
// buffer as soon as the transport has taken its frame. (Zero-copy writes
// straight into a registered destination are not done: every byte passes
// through the bounce buffers.)
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
#include "core/log.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kChunk = kVerbsMaxPayload;  // largest payload of one frame
constexpr size_t kSlot = sizeof(Frame) + kChunk;
constexpr uint32_t kSendSlots = 32;
constexpr uint32_t kRecvSlots = 64;
constexpr uint32_t kInline = 128;
constexpr uint32_t kKeepaliveFlag = 0x4b41;  // a pad frame with this flag: keepalive, not for the transport
constexpr auto kKeepalive = std::chrono::milliseconds(100);
constexpr auto kFlushTime = std::chrono::seconds(1);

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
  uint8_t *buffers = nullptr;  // kSendSlots send buffers, then kRecvSlots receive buffers
  ibv_mr *mr = nullptr;
  std::mutex mu;
  std::vector<uint32_t> free_slots;
  std::deque<Outgoing> queue;
  bool dead = false;
  Clock::time_point last_send = Clock::now();
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

  void post_recv(VerbsLink &l, uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(l.buffers + (kSendSlots + slot) * kSlot), static_cast<uint32_t>(kSlot),
                l.mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id(l.peer, true, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
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
        uint32_t slot = static_cast<uint32_t>(wc.wr_id & 0x7fffffff);
        if (!(wc.wr_id & (1ull << 31))) {
          std::lock_guard<std::mutex> lock(l.mu);
          l.free_slots.push_back(slot);
          continue;
        }
        const uint8_t *buf = l.buffers + (kSendSlots + slot) * kSlot;
        Frame f;
        std::memcpy(&f, buf, sizeof f);
        size_t bytes = payload_bytes(f);
        if (wc.byte_len < sizeof f || bytes != wc.byte_len - sizeof f || bytes > t_.frame_limit(l.peer, f)) {
          link_failed(l, HPU_ERROR_REMOTE, strf("rank %d sent a malformed frame (type %u, %u bytes)", l.peer, f.type,
                                                wc.byte_len));
          continue;
        }
        if (!(f.type == Frame::pad && f.flags == kKeepaliveFlag)) t_.on_frame(l.peer, f, buf + sizeof f);
        post_recv(l, slot);
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
  if (free_slots.empty()) return false;
  uint32_t slot = free_slots.back();
  uint8_t *buf = buffers + slot * kSlot;
  std::memcpy(buf, &f, sizeof f);
  if (bytes) std::memcpy(buf + sizeof f, payload, bytes);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(sizeof f + bytes), mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(peer, false, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (sge.length <= kInline ? IBV_SEND_INLINE : 0);
  int e = engine->api().post_send(qp, &wr, &bad);
  if (e == ENOMEM) return false;  // the send queue is full: later
  free_slots.pop_back();
  last_send = Clock::now();
  if (e) {
    free_slots.push_back(slot);
    dead = true;
  }
  return true;
}

bool VerbsLink::flush() {
  std::vector<std::function<void(bool)>> finished;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lock(mu);
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

// The address a rank publishes: its port, and its QP number for each peer.
struct Published {
  ibv_gid gid;
  uint16_t lid;
  uint8_t mtu;
  uint8_t ok;
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
  size_t rec = sizeof(Published) + sizeof(uint32_t) * static_cast<size_t>(size);
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
      int depth = static_cast<int>(peers.size() * (kSendSlots + kRecvSlots));
      e->cq_ = e->pd_ ? api->create_cq(e->ctx_, depth, nullptr, nullptr, 0) : nullptr;
      if (!e->cq_) fail(HPU_ERROR_NOT_AVAILABLE, "cannot create a protection domain or CQ on %s: %s",
                        e->port_.device.c_str(), strerror(errno));
      for (int p : peers) {
        auto l = std::make_unique<VerbsLink>(e.get(), p);
        size_t bytes = (kSendSlots + kRecvSlots) * kSlot;
        l->buffers = static_cast<uint8_t *>(aligned_alloc(4096, bytes));
        if (!l->buffers) fail(HPU_ERROR_OUT_OF_MEMORY, "verbs: cannot allocate %zu bytes of buffers", bytes);
        l->mr = api->reg_mr(e->pd_, l->buffers, bytes, IBV_ACCESS_LOCAL_WRITE);
        if (!l->mr) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot register %zu bytes: %s", bytes, strerror(errno));
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = e->cq_;
        qa.qp_type = IBV_QPT_RC;
        qa.cap.max_send_wr = kSendSlots;
        qa.cap.max_recv_wr = kRecvSlots;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        qa.cap.max_inline_data = kInline;
        l->qp = api->create_qp(e->pd_, &qa);
        if (!l->qp) fail(HPU_ERROR_NOT_AVAILABLE, "verbs: cannot create a queue pair: %s", strerror(errno));
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = static_cast<uint8_t>(e->port_.port);
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
        if (int err = api->modify_qp(l->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
          fail(HPU_ERROR_NOT_AVAILABLE, "verbs: queue pair to INIT failed: %s", strerror(err));
        for (uint32_t s = 0; s < kSendSlots; ++s) l->free_slots.push_back(s);
        uint32_t qpn = l->qp->qp_num;
        std::memcpy(mine.data() + sizeof(Published) + sizeof(uint32_t) * static_cast<size_t>(p), &qpn, 4);
        e->links_[static_cast<size_t>(p)] = std::move(l);
      }
      for (int p : peers)
        for (uint32_t s = 0; s < kRecvSlots; ++s) e->post_recv(*e->links_[static_cast<size_t>(p)], s);
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
  auto published = [&](int r) {
    Published p;
    std::memcpy(&p, all.data() + rec * static_cast<size_t>(r), sizeof p);
    return p;
  };
  auto qpn_of = [&](int r, int peer) {
    uint32_t q;
    std::memcpy(&q, all.data() + rec * static_cast<size_t>(r) + sizeof(Published) + 4 * static_cast<size_t>(peer), 4);
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
        a.dest_qp_num = qpn_of(p, rank);
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
