// verbs: links between hosts over RDMA reliable-connected queue pairs, every
// verbs call through the VerbsApi table (api.hpp). This file is the data
// path: posting frames and zero-copy writes, credits, completions and
// asynchronous events; connect.cpp sets the queue pairs up and tears them down.
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
#include "comm/transports/verbs/engine.hpp"

#include <poll.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::comm::verbs {

bool VerbsEngine::poll() {
  std::unique_lock<std::mutex> lock(drain_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  drainer_ = std::this_thread::get_id();
  bool did = drain();
  drainer_ = std::thread::id();
  return did;
}

void VerbsEngine::quiesce() {
  if (drainer_.load() != std::this_thread::get_id()) std::lock_guard<std::mutex> lock(drain_mu_);
  for (auto &l : links_)
    if (l) l->stop_receiving();
}

void VerbsEngine::post_recv(VerbsLink &l, int lane) {
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(l.peer, lane, kRecvWr);
  if (int e = api_.post_recv(l.lane[static_cast<size_t>(lane)].qp, &wr, &bad))
    link_failed(l, HPU_ERROR_REMOTE, strf("posting a receive failed: %s", strerror(e)));
}

void VerbsEngine::link_failed(VerbsLink &l, hpuStatus_t status, const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.dead) return;
    l.dead = true;
  }
  if (closing_) return;
  if (status == HPU_ERROR_REMOTE) t_.on_link_closed(l.peer, why);
  else t_.fail_all(status, strf("rank %d: the RDMA link to rank %d failed: %s", rank_, l.peer, why.c_str()));
}

const VerbsPort *VerbsEngine::port_down() {
  for (auto &p : ports_) {
    ibv_port_attr pa{};
    if (api_.query_port(ctx_, static_cast<uint8_t>(p.port), &pa) != 0 || pa.state != IBV_PORT_ACTIVE) return &p;
  }
  return nullptr;
}

void VerbsEngine::on_error(const ibv_wc &wc) {
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

void VerbsEngine::on_sent(VerbsLink &l, const ibv_wc &wc) {
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

void VerbsEngine::on_received(VerbsLink &l, const ibv_wc &wc) {
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

bool VerbsEngine::drain() {
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

void VerbsEngine::events() {
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

void VerbsEngine::run() {
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

}  // namespace hpu::comm::verbs
