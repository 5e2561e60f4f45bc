// The net protocol's endpoint: matching, rendezvous, chains and failures.
#include "comm/transports/net/transport.hpp"

#include <algorithm>
#include <cstring>

#include "comm/transports/net/fault.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

template <class Arrival>
uint64_t tag_of(const Arrival &a) { return a.tag; }
template <class Request>
uint64_t tag_of(const std::shared_ptr<Request> &r) { return r->tag; }

// The first entry of `list` for `tag` (a posted receive or an arrival), or end.
template <class List>
auto first_with_tag(List &list, uint64_t tag) {
  auto it = list.begin();
  while (it != list.end() && tag_of(*it) != tag) ++it;
  return it;
}

}  // namespace

struct NetTransport::NetReq : Request {
  using Request::Request;
  // Its chain (isend_after, irecv_after), under chain_mu_.
  bool finished = false;  // done: requests chained after it post at once
  int blockers = 0;       // requests it still waits for before it is posted
  std::vector<std::shared_ptr<NetReq>> then;  // the requests waiting for it
};

struct NetTransport::SendReq : NetReq {
  explicit SendReq(const SendDesc &d) : NetReq(true, d.peer, d.tag, d.bytes), desc(d) {
    if (d.header) {  // kept here: a chained send is posted after the caller's header may be gone
      header = *d.header;
      desc.header = &header;
    }
  }
  SendDesc desc;
  OpHeader header;
  uint64_t id = 0;
  std::atomic<size_t> outstanding{0};
};

struct NetTransport::RecvReq : NetReq {
  explicit RecvReq(const RecvDesc &d) : NetReq(false, d.peer, d.tag, d.bytes), desc(d) {
    if (d.combine) combine = *d.combine;
    desc.combine = nullptr;  // (the copy above is the one used)
  }
  RecvDesc desc;
  Combine combine;
  uint64_t id = 0;
  std::atomic<size_t> received{0};
};

NetTransport::NetTransport(int rank, int size) : Transport(rank, size), peers_(static_cast<size_t>(size)) {
  peers_[static_cast<size_t>(rank)].link = &self_;
  peers_[static_cast<size_t>(rank)].eager_limit = SIZE_MAX;
}

NetTransport::~NetTransport() {
  for (auto &e : engines_) e->shutdown();
  engines_.clear();
}

void NetTransport::tune(const Tuning &tuning) {
  tuning_ = tuning;
  set_polling(tuning.busy_poll, tuning.poll);
  set_wake_on_awaited(tuning.wake_on_awaited);
}

void NetTransport::add_engine(std::unique_ptr<Engine> engine, const std::vector<int> &peers, size_t eager_limit) {
  // Injected transport faults act on frames: the group then exchanges
  // messages only (decided alike on every rank, whichever rank is faulty).
  if (engine->shared_area().base && !transport_faults_injected()) {
    area_engine_ = engine.get();
    area_ = engine->shared_area();
  }
  engine = wrap_faulty_engine(*this, std::move(engine));  // HPU_FAULT_INJECT's transport faults, if any
  for (int p : peers) {
    Peer &peer = peers_[static_cast<size_t>(p)];
    peer.link = engine->link(p);
    peer.direct = dynamic_cast<DirectWrite *>(peer.link);
    peer.eager_limit = eager_limit;
  }
  engine->start();
  engines_.push_back(std::move(engine));
}

void NetTransport::progress() {
  for (auto &e : engines_) e->poll();
}

MemoryRegionPtr NetTransport::register_memory(void *base, size_t bytes) {
  auto mr = std::make_unique<MemoryRegion>();
  mr->base = base;
  mr->bytes = bytes;
  return mr;
}

void NetTransport::check_peer(int peer) const {
  if (peer < 0 || peer >= size() || !peers_[static_cast<size_t>(peer)].link)
    hpu::fail(HPU_ERROR_INTERNAL, "%s transport of rank %d: no link to rank %d", name(), rank(), peer);
}

RequestPtr NetTransport::isend(const SendDesc &d) { return start<SendReq>(d, {}); }

RequestPtr NetTransport::isend_after(const SendDesc &d, const std::vector<Request *> &after) {
  check_chains();
  return start<SendReq>(d, after);
}

RequestPtr NetTransport::irecv(const RecvDesc &d) { return start<RecvReq>(d, {}); }

RequestPtr NetTransport::irecv_after(const RecvDesc &d, const std::vector<Request *> &after) {
  check_chains();
  return start<RecvReq>(d, after);
}

void NetTransport::check_chains() const {
  if (!tuning_.chains) hpu::fail(HPU_ERROR_INTERNAL, "%s transport of rank %d does not chain", name(), rank());
}

void *NetTransport::find_capability(const std::type_info &capability) {
  if (capability == typeid(Chaining)) return tuning_.chains ? static_cast<Chaining *>(this) : nullptr;
  if (capability == typeid(SharedMemory)) return area_.base ? static_cast<SharedMemory *>(this) : nullptr;
  return nullptr;
}

template <class Req, class Desc>
RequestPtr NetTransport::start(const Desc &d, const std::vector<Request *> &after) {
  throw_if_failed();
  check_peer(d.peer);
  auto r = std::make_shared<Req>(d);
  if (after.empty() || chain(r, after)) post(r);
  post_ready();
  throw_if_failed();  // a receive that met a mismatched message failed the endpoint
  return r;
}

void NetTransport::post(const std::shared_ptr<SendReq> &s) {
  Peer &p = peers_[static_cast<size_t>(s->peer)];
  Frame f;
  f.tag = s->tag;
  f.size = s->bytes;
  if (s->desc.header) {
    f.flags |= Frame::kHasHeader;
    f.header = s->header;
  }
  if (s->bytes <= p.eager_limit) {
    f.type = Frame::eager;
    p.link->send(f, s->desc.data, s->bytes, 0, [this, s](bool ok) {
      if (!ok) return send_failed(*s);
      finish(*s);
      post_ready();
    });
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    s->id = next_id_++;
    sending_[s->id] = s;
  }
  f.type = Frame::rts;
  f.a = s->id;
  p.link->send(f, nullptr, 0, 0, nullptr);
}

void NetTransport::send_failed(SendReq &s) {
  std::string why = strf("the link to rank %d broke while sending", s.peer);
  bool chained;
  {
    std::lock_guard<std::mutex> lock(chain_mu_);
    chained = !s.then.empty();
  }
  complete_with_error(s, HPU_ERROR_REMOTE, why);
  // Nobody may wait for this send itself, only for what is chained after it.
  if (chained) fail_all(HPU_ERROR_REMOTE, why);
}

void NetTransport::post(const std::shared_ptr<RecvReq> &r) {
  std::string err;
  hpuStatus_t status = HPU_ERROR_INVALID_USAGE;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer &p = peers_[static_cast<size_t>(r->peer)];
    auto q = first_with_tag(p.arrived, r->tag);
    if (q != p.arrived.end()) {
      Arrival a = std::move(*q);
      p.arrived.erase(q);
      err = match(p, r->peer, r, a);
      if (a.data.capacity() && spare_.size() < kSpareBuffers) spare_.push_back(std::move(a.data));
    } else if (p.left) {
      err = strf("rank %d has left the group; rank %d cannot receive from it", r->peer, rank());
      status = HPU_ERROR_REMOTE;
    } else {
      p.posted.push_back(r);
    }
  }
  if (!err.empty()) fail_all(status, err);
}

bool NetTransport::chain(const std::shared_ptr<NetReq> &r, const std::vector<Request *> &after) {
  std::lock_guard<std::mutex> lock(chain_mu_);
  for (Request *a : after) {
    auto *before = static_cast<NetReq *>(a);
    if (!before || before->finished) continue;
    before->then.push_back(r);
    ++r->blockers;
  }
  return r->blockers == 0;
}

void NetTransport::finish(NetReq &r) {
  if (tuning_.chains) {
    std::lock_guard<std::mutex> lock(chain_mu_);
    r.finished = true;
    for (auto &next : r.then)
      if (--next->blockers == 0) ready_.push_back(std::move(next));
    r.then.clear();
  }
  complete(r);
}

void NetTransport::post_ready() {
  while (tuning_.chains) {
    std::vector<std::shared_ptr<NetReq>> batch;
    {
      std::lock_guard<std::mutex> lock(chain_mu_);
      if (ready_.empty()) return;
      batch.swap(ready_);
    }
    if (quiet_) return;  // failed: nothing more moves (the waiters see the sticky error)
    for (auto &q : batch) {
      if (q->is_send)
        post(std::static_pointer_cast<SendReq>(q));
      else
        post(std::static_pointer_cast<RecvReq>(q));
    }
  }
}

// A receive meets its message (under mu_). "" when fine, else the mismatch.
std::string NetTransport::match(Peer &p, int peer, const std::shared_ptr<RecvReq> &r, Arrival &a) {
  if (a.has_header && a.header.coll == static_cast<uint32_t>(CollKind::send) && r->desc.expect) {
    std::string m = header_mismatch(*r->desc.expect, rank(), a.header, peer);
    if (!m.empty()) return m;
  }
  if (a.size != r->bytes)
    return strf("mismatched sizes: rank %d sent %llu bytes with tag 0x%llx, but rank %d receives %zu", peer,
                static_cast<unsigned long long>(a.size), static_cast<unsigned long long>(r->tag), rank(), r->bytes);
  if (a.eager) {
    deliver(*r, 0, a.data.data(), a.data.size());
    finish(*r);
  } else {
    send_cts(peer, r, a.send_id);
  }
  return "";
}

void NetTransport::send_cts(int peer, const std::shared_ptr<RecvReq> &r, uint64_t send_id) {
  Link *link = peers_[static_cast<size_t>(peer)].link;
  r->id = next_id_++;
  receiving_[r->id] = r;
  size_t chunk = link->max_chunk();
  if (r->combine.fn) chunk -= chunk % r->combine.elem_size;
  Frame f;
  f.type = Frame::cts;
  f.a = send_id;
  f.b = r->id;
  f.c = chunk;
  DirectWrite *direct = peers_[static_cast<size_t>(peer)].direct;
  if (direct && !r->combine.fn) direct->offer(f, r->desc.data, r->bytes);
  link->send(f, nullptr, 0, 0, nullptr);
}

void NetTransport::start_data(const std::shared_ptr<SendReq> &s, const Frame &cts) {
  Link *link = peers_[static_cast<size_t>(s->peer)].link;
  size_t chunk = cts.c;
  size_t n = cts.flags & Frame::kDirect ? 1 : (s->bytes + chunk - 1) / chunk;
  s->outstanding = n;
  auto sent = [this, s](bool ok) {
    if (!ok) return send_failed(*s);
    if (--s->outstanding == 0) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        sending_.erase(s->id);
      }
      finish(*s);
      post_ready();
    }
  };
  if (cts.flags & Frame::kDirect) {
    DirectWrite *direct = peers_[static_cast<size_t>(s->peer)].direct;
    if (direct)
      direct->write(cts, s->desc.data, s->bytes, sent);
    else
      sent(false);  // a direct clear-to-send to a link that cannot write
    return;
  }
  auto *base = static_cast<const uint8_t *>(s->desc.data);
  for (size_t i = 0; i < n; ++i) {
    Frame f;
    f.type = Frame::data;
    f.b = cts.b;
    f.c = i * chunk;
    f.size = std::min(chunk, s->bytes - i * chunk);
    link->send(f, base + f.c, f.size, static_cast<int>(i % static_cast<size_t>(link->lanes())), sent);
  }
}

void NetTransport::deliver(RecvReq &r, size_t offset, const void *data, size_t bytes) {
  if (bytes == 0) return;
  auto *out = static_cast<uint8_t *>(r.desc.data) + offset;
  if (r.combine.fn) {
    auto *local = static_cast<const uint8_t *>(r.combine.local) + offset;
    r.combine.fn(out, data, local, bytes / r.combine.elem_size, r.combine.ctx);
  } else if (out != data) {
    std::memcpy(out, data, bytes);
  }
}

// Whether f's payload may land before on_frame sees f: "" when f has no
// header, or one that matches the operation this rank runs (or the expected
// send of r). Under mu_.
std::string NetTransport::check_header(const RecvReq &r, int peer, const Frame &f) const {
  if (!(f.flags & Frame::kHasHeader)) return "";
  if (f.header.coll == static_cast<uint32_t>(CollKind::send))
    return r.desc.expect ? header_mismatch(*r.desc.expect, rank(), f.header, peer) : "";
  if (!has_current_ || f.header.seq > current_.seq) return "an operation this rank has not begun";
  return header_mismatch(current_, rank(), f.header, peer);
}

std::string NetTransport::check_arrival(int peer, const Frame &f) {
  if (!(f.flags & Frame::kHasHeader) || f.header.coll == static_cast<uint32_t>(CollKind::send)) return "";
  if (!has_current_ || f.header.seq > current_.seq) {
    early_.emplace_back(peer, f.header);
    return "";
  }
  return header_mismatch(current_, rank(), f.header, peer);
}

void NetTransport::begin(const OpHeader &h) {
  if (h.coll == static_cast<uint32_t>(CollKind::send) || h.coll == static_cast<uint32_t>(CollKind::recv)) return;
  std::string err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = h;
    has_current_ = true;
    for (auto it = early_.begin(); it != early_.end();) {
      if (it->second.seq > h.seq) {
        ++it;
        continue;
      }
      if (err.empty()) err = header_mismatch(h, rank(), it->second, it->first);
      it = early_.erase(it);
    }
  }
  if (!err.empty()) fail_all(HPU_ERROR_INVALID_USAGE, err);
  throw_if_failed();
}

size_t NetTransport::frame_limit(int peer, const Frame &f) const {
  const Peer &p = peers_[static_cast<size_t>(peer)];
  switch (f.type) {
    case Frame::eager: return p.eager_limit;
    case Frame::data: return p.link ? p.link->max_chunk() : 0;
    case Frame::error: return kMaxErrorText;
    default: return 0;
  }
}

void *NetTransport::data_target(int peer, const Frame &f) {
  if (quiet_) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (f.type == Frame::eager) {
    // The receive on_frame will match, when it is posted already and stores
    // the bytes as they are (a peer's frames arrive in order, and only
    // on_frame takes a posted receive away). Frames with a header are checked
    // before anything lands.
    if (f.flags & Frame::kHasHeader) return nullptr;
    Peer &p = peers_[static_cast<size_t>(peer)];
    auto q = first_with_tag(p.posted, f.tag);
    if (q == p.posted.end() || (*q)->combine.fn || (*q)->bytes != f.size) return nullptr;
    return (*q)->desc.data;
  }
  if (f.type != Frame::data) return nullptr;
  auto it = receiving_.find(f.b);
  if (it == receiving_.end()) return nullptr;
  RecvReq &r = *it->second;
  if (r.peer != peer || f.c > r.bytes || f.size > r.bytes - f.c || r.combine.fn) return nullptr;
  return static_cast<uint8_t *>(r.desc.data) + f.c;
}

std::shared_ptr<void> NetTransport::absorber(int peer, const Frame &f, size_t *elem) {
  if (quiet_) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<RecvReq> r;
  if (f.type == Frame::eager) {
    // The receive on_absorbed will take: the first posted with the tag (a
    // peer's eager frames come in order, and only they take posted receives).
    Peer &p = peers_[static_cast<size_t>(peer)];
    auto q = first_with_tag(p.posted, f.tag);
    if (q == p.posted.end() || (*q)->bytes != f.size || !check_header(**q, peer, f).empty()) return nullptr;
    r = *q;
  } else if (f.type == Frame::data) {
    auto it = receiving_.find(f.b);
    if (it == receiving_.end()) return nullptr;
    r = it->second;
    if (r->peer != peer || f.c > r->bytes || f.size > r->bytes - f.c) return nullptr;
  }
  if (!r || !r->combine.fn) return nullptr;
  *elem = r->combine.elem_size;
  return r;
}

void NetTransport::absorb(const std::shared_ptr<void> &sink, const Frame &f, size_t at, const void *piece,
                          size_t bytes) {
  if (quiet_) return;
  deliver(*static_cast<RecvReq *>(sink.get()), (f.type == Frame::data ? f.c : 0) + at, piece, bytes);
}

void NetTransport::on_absorbed(int peer, const Frame &f, const std::shared_ptr<void> &sink) {
  if (quiet_) return;
  auto r = std::static_pointer_cast<RecvReq>(sink);
  if (f.type == Frame::data) return received(r, f.size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto &posted = peers_[static_cast<size_t>(peer)].posted;
    auto q = std::find(posted.begin(), posted.end(), r);
    if (q == posted.end()) return;
    posted.erase(q);
  }
  finish(*r);
  post_ready();
}

// `bytes` more of a receive's data landed.
void NetTransport::received(const std::shared_ptr<RecvReq> &r, size_t bytes) {
  if (r->received.fetch_add(bytes) + bytes != r->bytes) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    receiving_.erase(r->id);
  }
  finish(*r);
  post_ready();
}

void NetTransport::on_frame(int peer, const Frame &f, const void *payload) {
  if (quiet_ && f.type != Frame::error && f.type != Frame::bye) return;
  std::string err;
  hpuStatus_t status = HPU_ERROR_INVALID_USAGE;
  switch (f.type) {
    case Frame::eager:
    case Frame::rts: {
      std::lock_guard<std::mutex> lock(mu_);
      err = check_arrival(peer, f);
      if (!err.empty()) break;
      Arrival a;
      a.tag = f.tag;
      a.eager = f.type == Frame::eager;
      a.size = f.size;
      a.send_id = f.a;
      a.has_header = f.flags & Frame::kHasHeader;
      a.header = f.header;
      Peer &p = peers_[static_cast<size_t>(peer)];
      auto q = first_with_tag(p.posted, f.tag);
      if (q == p.posted.end()) {
        if (a.eager) {
          if (!spare_.empty()) {
            a.data = std::move(spare_.back());
            spare_.pop_back();
          }
          a.data.assign(static_cast<const uint8_t *>(payload), static_cast<const uint8_t *>(payload) + f.size);
        }
        p.arrived.push_back(std::move(a));
        break;
      }
      auto r = std::move(*q);
      p.posted.erase(q);
      if (a.eager) {  // deliver straight from the link's buffer (or it is there already: data_target)
        if (a.has_header && a.header.coll == static_cast<uint32_t>(CollKind::send) && r->desc.expect)
          err = header_mismatch(*r->desc.expect, rank(), a.header, peer);
        if (err.empty() && f.size != r->bytes)
          err = strf("mismatched sizes: rank %d sent %llu bytes with tag 0x%llx, but rank %d receives %zu", peer,
                     static_cast<unsigned long long>(f.size), static_cast<unsigned long long>(f.tag), rank(),
                     r->bytes);
        if (err.empty()) {
          deliver(*r, 0, payload, f.size);
          finish(*r);
        }
      } else {
        err = match(p, peer, r, a);
      }
      break;
    }
    case Frame::cts: {
      std::shared_ptr<SendReq> s;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sending_.find(f.a);
        if (it != sending_.end()) s = it->second;
      }
      if (!s || s->peer != peer || f.c == 0) {
        err = strf("rank %d sent a clear-to-send for unknown send %llu", peer, static_cast<unsigned long long>(f.a));
        status = HPU_ERROR_REMOTE;
        break;
      }
      start_data(s, f);
      break;
    }
    case Frame::data: {
      std::shared_ptr<RecvReq> r;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = receiving_.find(f.b);
        if (it != receiving_.end()) r = it->second;
      }
      if (!r || r->peer != peer || f.c > r->bytes || f.size > r->bytes - f.c) {
        err = strf("rank %d sent data for unknown receive %llu", peer, static_cast<unsigned long long>(f.b));
        status = HPU_ERROR_REMOTE;
        break;
      }
      deliver(*r, f.c, payload, f.size);
      received(r, f.size);
      break;
    }
    case Frame::error: {
      std::string text(static_cast<const char *>(payload), f.size);
      // The status comes off the wire: one this build does not know is REMOTE.
      hpuStatus_t s = HPU_ERROR_REMOTE;
#define HPU_KNOWN_STATUS_(name, value, text) \
  if (f.a == value) s = name;
      HPU_STATUS_MAP(HPU_KNOWN_STATUS_)
#undef HPU_KNOWN_STATUS_
      fail_all(s == HPU_ERROR_ABORTED || s == HPU_SUCCESS ? HPU_ERROR_REMOTE : s,
           strf("rank %d failed: %s", peer, text.c_str()));
      return;
    }
    case Frame::bye: {
      std::lock_guard<std::mutex> lock(mu_);
      peers_[static_cast<size_t>(peer)].left = true;
      break;
    }
    default:
      err = strf("rank %d sent a frame of unknown type %u", peer, f.type);
      status = HPU_ERROR_REMOTE;
  }
  if (!err.empty()) fail_all(status, err);
  post_ready();  // receives it finished under the lock
}

void NetTransport::on_link_closed(int peer, const std::string &why) {
  bool pending = false, left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer &p = peers_[static_cast<size_t>(peer)];
    left = p.left;
    p.left = true;
    pending = !p.posted.empty();
    for (auto &[id, r] : receiving_) pending = pending || r->peer == peer;
    for (auto &[id, s] : sending_) pending = pending || s->peer == peer;
  }
  if (!left) fail_all(HPU_ERROR_REMOTE, strf("rank %d is gone: %s", peer, why.c_str()));
  else if (pending) fail_all(HPU_ERROR_REMOTE, strf("rank %d left with operations of rank %d pending", peer, rank()));
}

void NetTransport::tell_peers(const Frame &f, const std::string &text) {
  auto keep = std::make_shared<std::string>(text);
  std::vector<Link *> links;
  {
    std::lock_guard<std::mutex> lock(mu_);  // `left` changes on the links' threads
    for (size_t i = 0; i < peers_.size(); ++i)
      if (peers_[i].link && !peers_[i].left && static_cast<int>(i) != rank()) links.push_back(peers_[i].link);
  }
  for (Link *l : links) l->send(f, keep->data(), keep->size(), 0, [keep](bool) {});
}

void NetTransport::on_fail(hpuStatus_t status, const std::string &message) {
  quiet_ = true;
  for (auto &e : engines_) e->quiesce();
  Frame f;
  f.type = Frame::error;
  f.a = static_cast<uint64_t>(status);
  std::string text = message.substr(0, kMaxErrorText);
  f.size = text.size();
  tell_peers(f, text);
}

}  // namespace hpu::comm
