#include "comm/transports/net/fault.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

struct Faults {
  int64_t drop_after = -1, delay_ms = -1;
  bool stall = false;
};

class FaultLink final : public Link, public DirectWrite {
 public:
  FaultLink(Link *inner, const Faults &f) : inner_(inner), f_(f) {}

  void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) override {
    if (f_.stall) return;  // a stalled peer: nothing leaves, nothing completes
    if (f_.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f_.delay_ms));
    const bool farewell = f.type == Frame::error || f.type == Frame::bye;
    if (f_.drop_after >= 0 && !farewell &&
        (dropped_ || sent_.fetch_add(sizeof(Frame) + bytes) + sizeof(Frame) + bytes > uint64_t(f_.drop_after))) {
      // The send neither leaves nor completes: poll() reports the drop, naming
      // the fault, before any waiter could see a bare send failure.
      dropped_ = true;
      return;
    }
    inner_->send(f, payload, bytes, lane, std::move(done));
  }
  int lanes() const override { return inner_->lanes(); }
  // Receives here never go direct (every byte passes send(), where the faults
  // are); a peer's direct clear-to-send is honoured.
  void offer(Frame &cts, void *dst, size_t bytes) override {}
  void write(const Frame &cts, const void *src, size_t bytes, std::function<void(bool)> done) override {
    if (f_.stall) return;
    if (auto *direct = dynamic_cast<DirectWrite *>(inner_))
      direct->write(cts, src, bytes, std::move(done));
    else
      done(false);
  }
  size_t max_chunk() const override { return inner_->max_chunk(); }
  const char *kind() const override { return inner_->kind(); }

  // True once, after the connection dropped.
  bool take_drop() { return dropped_ && !reported_.exchange(true); }

 private:
  Link *inner_;
  const Faults f_;
  std::atomic<uint64_t> sent_{0};
  std::atomic<bool> dropped_{false}, reported_{false};
};

// The drop is reported from poll() (a waiting thread): send() may run under the
// transport's lock, which on_link_closed takes.
class FaultEngine final : public Engine {
 public:
  FaultEngine(NetTransport &t, std::unique_ptr<Engine> inner, const Faults &f) : t_(t), inner_(std::move(inner)), f_(f) {}

  Link *link(int peer) override {
    auto &l = links_[peer];
    if (!l) l = std::make_unique<FaultLink>(inner_->link(peer), f_);
    return l.get();
  }
  void start() override { inner_->start(); }
  bool poll() override {
    for (auto &[peer, l] : links_)
      if (l->take_drop())
        t_.on_link_closed(peer, strf("the connection dropped after %lld bytes (injected: HPU_FAULT_INJECT "
                                     "conn_drop_after_bytes=%lld)",
                                     static_cast<long long>(f_.drop_after), static_cast<long long>(f_.drop_after)));
    return inner_->poll();
  }
  void quiesce() override { inner_->quiesce(); }
  void shutdown() override { inner_->shutdown(); }

 private:
  NetTransport &t_;
  std::unique_ptr<Engine> inner_;
  const Faults f_;
  std::map<int, std::unique_ptr<FaultLink>> links_;  // filled before start(), then only read
};

}  // namespace

bool transport_faults_injected() {
  return fault::value("conn_drop_after_bytes") >= 0 || fault::value("peer_delay_ms") > 0 || fault::value("peer_stall") > 0;
}

std::unique_ptr<Engine> wrap_faulty_engine(NetTransport &t, std::unique_ptr<Engine> engine) {
  const int64_t chosen = fault::value("fault_rank");
  if (!transport_faults_injected() || (chosen >= 0 && chosen != t.rank())) return engine;
  Faults f;
  f.drop_after = fault::value("conn_drop_after_bytes");
  f.delay_ms = fault::value("peer_delay_ms");
  f.stall = fault::value("peer_stall") > 0;
  HPU_LOG(warn, "fault", "rank %d: injected transport faults: conn_drop_after_bytes=%lld peer_delay_ms=%lld peer_stall=%d",
          t.rank(), static_cast<long long>(f.drop_after), static_cast<long long>(f.delay_ms), int(f.stall));
  return std::make_unique<FaultEngine>(t, std::move(engine), f);
}

}  // namespace hpu::comm
