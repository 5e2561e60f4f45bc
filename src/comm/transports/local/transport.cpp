// The local transport. Each rank has a mailbox: per peer, the sends that came
// before a matching receive and the receives posted before a matching send.
// The receiver moves the data (receiver-driven): when it posts a receive whose
// send is already there it copies at once; when a large send arrives for a
// posted receive, the sender only hands the pair to the receiver's ready list
// and wakes it, and the receiver copies in progress(). So every rank does the
// work of its own receives and the ring's work stays spread over the ranks.
// Small messages (64 KiB or less) that find their receive posted are moved by
// the sender at once: cheaper than a wake-up.
#include "comm/transports/local/local.hpp"

#include <cstring>
#include <deque>
#include <optional>

#include "core/error.hpp"
#include "device/compute_budget.hpp"

namespace hpu::comm {

namespace {

// Copies this large hold a compute token, so eight ranks on two cores take
// turns instead of thrashing.
constexpr size_t kTokenBytes = size_t(64) << 10;
// Messages this small are moved by the sender when their receive is already
// posted: a copy this size costs less than waking the receiver's thread.
constexpr size_t kSenderMovesBytes = size_t(64) << 10;

class LocalTransport;

struct LocalRequest final : Request {
  using Request::Request;
  std::weak_ptr<LocalTransport> owner;
  const void *src = nullptr;  // send
  void *dst = nullptr;        // receive
  std::optional<OpHeader> header, expect;
  std::optional<Combine> combine;
};
using LocalRequestPtr = std::shared_ptr<LocalRequest>;

class LocalTransport final : public Transport, public std::enable_shared_from_this<LocalTransport> {
 public:
  LocalTransport(int rank, int size) : Transport(rank, size), queues_(static_cast<size_t>(size)) {}

  const char *name() const override { return "local"; }
  bool shares_address_space() const override { return true; }

  void connect(std::vector<std::weak_ptr<LocalTransport>> peers) { peers_ = std::move(peers); }

  MemoryRegionPtr register_memory(void *base, size_t bytes) override {
    auto mr = std::make_unique<MemoryRegion>();
    mr->base = base;
    mr->bytes = bytes;
    return mr;
  }

  RequestPtr isend(const SendDesc &d) override {
    throw_if_failed();
    auto req = std::make_shared<LocalRequest>(true, d.peer, d.tag, d.bytes);
    req->owner = weak_from_this();
    req->src = d.data;
    if (d.header) req->header = *d.header;
    auto peer = peers_[static_cast<size_t>(d.peer)].lock();
    if (!peer) {
      fail_all(HPU_ERROR_REMOTE, strf("rank %d has destroyed its communicator", d.peer));
      throw_if_failed();
    }
    peer->deliver(req, rank());
    return req;
  }

  RequestPtr irecv(const RecvDesc &d) override {
    throw_if_failed();
    auto req = std::make_shared<LocalRequest>(false, d.peer, d.tag, d.bytes);
    req->owner = weak_from_this();
    req->dst = d.data;
    if (d.expect) req->expect = *d.expect;
    if (d.combine) req->combine = *d.combine;
    LocalRequestPtr send;
    {
      std::lock_guard<std::mutex> lock(mbox_mu_);
      if (closed_) return req;  // failed meanwhile: the next wait reports it
      auto &sends = queues_[static_cast<size_t>(d.peer)].sends;
      for (auto it = sends.begin(); it != sends.end(); ++it)
        if ((*it)->tag == d.tag) {
          send = std::move(*it);
          sends.erase(it);
          break;
        }
      if (!send) queues_[static_cast<size_t>(d.peer)].recvs.push_back(req);
    }
    if (send) move(*send, *req);
    return req;
  }

  void begin(const OpHeader &h) override {
    std::string mismatch;
    {
      std::lock_guard<std::mutex> lock(mbox_mu_);
      current_ = h;
      for (size_t p = 0; p < queues_.size() && mismatch.empty(); ++p)
        for (auto &s : queues_[p].sends)
          if (s->header && is_collective(*s->header)) {
            mismatch = arrival_mismatch(*s->header, static_cast<int>(p));
            if (!mismatch.empty()) break;
          }
    }
    if (!mismatch.empty()) fail_all(HPU_ERROR_INVALID_USAGE, mismatch);
    throw_if_failed();
  }

 protected:
  void progress() override {
    std::vector<std::pair<LocalRequestPtr, LocalRequestPtr>> ready;
    {
      std::lock_guard<std::mutex> lock(mbox_mu_);
      if (ready_.empty()) return;
      ready.swap(ready_);
    }
    for (auto &[send, recv] : ready) move(*send, *recv);
  }

  void on_fail(hpuStatus_t status, const std::string &message) override {
    {
      // Nobody may touch this rank's buffers any more: drop what is queued.
      std::lock_guard<std::mutex> lock(mbox_mu_);
      closed_ = true;
      for (auto &q : queues_) {
        q.sends.clear();
        q.recvs.clear();
      }
      ready_.clear();
    }
    hpuStatus_t theirs = status == HPU_ERROR_ABORTED ? HPU_ERROR_REMOTE : status;
    std::string why = status == HPU_ERROR_ABORTED ? strf("rank %d aborted its communicator (%s)", rank(),
                                                         message.c_str())
                                                  : message;
    for (auto &w : peers_) {
      auto peer = w.lock();
      if (!peer || peer.get() == this) continue;
      peer->withdraw(rank());
      peer->fail_all(theirs, why);
    }
  }

 private:
  struct Queues {
    std::deque<LocalRequestPtr> sends;  // arrived from this peer, not yet received
    std::deque<LocalRequestPtr> recvs;  // posted for this peer, not yet matched
  };

  // In the sender's thread: a send from rank `from` arrives at this rank.
  void deliver(const LocalRequestPtr &send, int from) {
    LocalRequestPtr recv;
    std::string mismatch;
    {
      std::lock_guard<std::mutex> lock(mbox_mu_);
      if (closed_) return;  // this rank failed; the sender hears it from on_fail
      if (send->header && is_collective(*send->header)) mismatch = arrival_mismatch(*send->header, from);
      if (mismatch.empty()) {
        auto &recvs = queues_[static_cast<size_t>(from)].recvs;
        for (auto it = recvs.begin(); it != recvs.end(); ++it)
          if ((*it)->tag == send->tag) {
            recv = std::move(*it);
            recvs.erase(it);
            break;
          }
        if (recv && recv->bytes > kSenderMovesBytes)
          ready_.emplace_back(send, recv);
        else if (!recv)
          queues_[static_cast<size_t>(from)].sends.push_back(send);
      }
    }
    if (!mismatch.empty())
      fail_all(HPU_ERROR_INVALID_USAGE, mismatch);
    else if (recv && recv->bytes <= kSenderMovesBytes)
      move(*send, *recv);  // cheaper here than waking the receiver to do it
    else if (recv)
      notify();
  }

  // Drops the sends of rank `from` queued here (it failed).
  void withdraw(int from) {
    std::lock_guard<std::mutex> lock(mbox_mu_);
    queues_[static_cast<size_t>(from)].sends.clear();
  }

  // The frame header `h` from rank `from` against the operation this rank runs
  // (mbox_mu_ held): "" when it matches or belongs to a later operation.
  std::string arrival_mismatch(const OpHeader &h, int from) const {
    if (h.seq > current_.seq) return "";
    if (h.seq == current_.seq) return header_mismatch(current_, rank(), h, from);
    return strf("mismatched calls: rank %d called %s, which rank %d never matched before it went on to %s", from,
                describe(h).c_str(), rank(), describe(current_).c_str());
  }

  // In the receiver's thread: moves a matched send into its receive.
  void move(LocalRequest &send, LocalRequest &recv) {
    if (recv.expect && send.header) {
      std::string m = header_mismatch(*recv.expect, rank(), *send.header, recv.peer);
      if (!m.empty()) {
        fail_all(HPU_ERROR_INVALID_USAGE, m);
        return;
      }
    }
    if (send.bytes != recv.bytes) {
      fail_all(HPU_ERROR_INVALID_USAGE, strf("rank %d sent %zu bytes but rank %d expected %zu (tag 0x%llx)", recv.peer, send.bytes, rank(), recv.bytes, static_cast<unsigned long long>(recv.tag)));
      return;
    }
    if (recv.bytes > 0) {
      std::optional<ComputeToken> token;
      if (recv.bytes >= kTokenBytes) token.emplace();
      if (recv.combine)
        recv.combine->fn(recv.dst, send.src, recv.combine->local, recv.bytes / recv.combine->elem_size,
                         recv.combine->ctx);
      else
        std::memcpy(recv.dst, send.src, recv.bytes);
    }
    complete(recv);
    if (auto sender = send.owner.lock()) sender->complete(send);
  }

  std::vector<std::weak_ptr<LocalTransport>> peers_;
  std::mutex mbox_mu_;  // the mailbox
  std::vector<Queues> queues_;
  std::vector<std::pair<LocalRequestPtr, LocalRequestPtr>> ready_;  // matched by a sender, to move
  OpHeader current_;
  bool closed_ = false;
};

}  // namespace

std::shared_ptr<Transport> make_local_transport(Bootstrap &bootstrap, Deadline deadline) {
  auto t = std::make_shared<LocalTransport>(bootstrap.rank(), bootstrap.size());
  auto addresses = bootstrap.allgather(reinterpret_cast<uintptr_t>(t.get()), deadline);
  std::vector<std::weak_ptr<LocalTransport>> peers;
  for (uintptr_t a : addresses) peers.push_back(reinterpret_cast<LocalTransport *>(a)->weak_from_this());
  t->connect(std::move(peers));
  // Nobody leaves (and may destroy its endpoint) before all have looked the others up.
  bootstrap.allgather(char(0), deadline);
  return t;
}

}  // namespace hpu::comm
