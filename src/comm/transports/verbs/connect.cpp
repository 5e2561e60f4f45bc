// The verbs engine's set-up and tear-down: the probe of the ports, the
// protection domain, completion queue, buffers and queue pairs, their
// exchange through the bootstrap and their connection (RTR, RTS), and at the
// end the goodbyes and the release of it all.
#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "comm/transports/verbs/engine.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace verbs {

VerbsEngine::VerbsEngine(NetTransport &t, const VerbsApi &api, int rank, int size)
    : t_(t), api_(api), rank_(rank), size_(size) {
  links_.resize(static_cast<size_t>(size));
}

VerbsEngine::~VerbsEngine() {
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

void VerbsEngine::shutdown() {
  if (!thread_.joinable()) return;
  send_bye(links_);
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

VerbsStats VerbsEngine::stats() const {
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

}  // namespace verbs

using namespace verbs;

namespace {

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
