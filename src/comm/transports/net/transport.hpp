// The transport of ranks in different processes: one message protocol, and per
// peer a Link that moves its frames (link.hpp; shm/: shared-memory rings within
// a host, tcp/: libuv sockets across hosts, verbs/: RDMA). A group whose peers
// are on this host and on others gets one of each, chosen per peer
// (select.cpp).
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

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/transports/capability.hpp"
#include "comm/transports/net/link.hpp"
#include "comm/transports/transport.hpp"

namespace hpu::comm {

// Capabilities (capability.hpp): Chaining when tuned so (the steps then go
// on on the engines' threads), SharedMemory when an engine links this rank to
// every other through memory they all map (shm on one host).
class NetTransport final : public Transport, public Chaining, public SharedMemory {
 public:
  NetTransport(int rank, int size);
  ~NetTransport() override;

  const char *name() const override { return tuning_.name.c_str(); }
  MemoryRegionPtr register_memory(void *base, size_t bytes) override;
  RequestPtr isend(const SendDesc &desc) override;
  RequestPtr irecv(const RecvDesc &desc) override;
  void begin(const OpHeader &header) override;

  RequestPtr isend_after(const SendDesc &desc, const std::vector<Request *> &after) override;
  RequestPtr irecv_after(const RecvDesc &desc, const std::vector<Request *> &after) override;
  SharedArea shared_area() const override { return area_; }
  void wake_peers() override {
    if (area_engine_) area_engine_->wake_peers();
  }

  // How the endpoint works with the engines it gets (make_net_transport
  // derives it from the kinds of its peers; select.cpp).
  struct Tuning {
    std::string name = "net";
    bool chains = false;         // offer Chaining
    bool wake_on_awaited = false;  // Transport::set_wake_on_awaited
    Clock::duration busy_poll = Clock::duration::zero(), poll = std::chrono::microseconds(50);  // set_polling
  };
  // Before add_engine.
  void tune(const Tuning &tuning);
  void set_name(std::string name) { tuning_.name = std::move(name); }
  void add_engine(std::unique_ptr<Engine> engine, const std::vector<int> &peers, size_t eager_limit);
  // For engines whose peers ring this endpoint's doorbell themselves (shm).
  using Transport::use_doorbell;
  using Transport::use_own_doorbell;

  // From the links' threads.
  void on_frame(int peer, const Frame &f, const void *payload);
  // Where the payload of DATA, or of an eager message whose receive is
  // posted, may be read directly (nullptr: give it to on_frame).
  void *data_target(int peer, const Frame &f);
  // A payload that a link reads in pieces (tcp) and a posted receive combines:
  // the receive (opaque; nullptr when f's payload is not such), its element
  // size in *elem. absorb() combines the next element-aligned piece of the
  // payload, at byte `at`, into the receive's buffer as it arrives, so the
  // reduction overlaps the transfer; on_absorbed() then ends the frame in place
  // of on_frame().
  std::shared_ptr<void> absorber(int peer, const Frame &f, size_t *elem);
  void absorb(const std::shared_ptr<void> &sink, const Frame &f, size_t at, const void *piece, size_t bytes);
  void on_absorbed(int peer, const Frame &f, const std::shared_ptr<void> &sink);
  void on_link_closed(int peer, const std::string &why);
  size_t frame_limit(int peer, const Frame &f) const;  // the largest payload allowed for f

 protected:
  void *find_capability(const std::type_info &capability) override;
  void on_fail(hpuStatus_t status, const std::string &message) override;
  void progress() override;

 private:
  struct NetReq;
  struct SendReq;
  struct RecvReq;
  struct Arrival {
    uint64_t tag = 0;
    bool eager = false;
    std::vector<uint8_t> data;  // eager payload
    uint64_t size = 0, send_id = 0;
    bool has_header = false;
    OpHeader header;
  };
  struct Peer {
    Link *link = nullptr;
    DirectWrite *direct = nullptr;  // the link's, if it can
    size_t eager_limit = 0;
    bool left = false;  // said BYE
    // Few at a time, so flat lists (their capacity is reused: no allocation
    // per message), in posting / arrival order; a message matches the first
    // entry with its tag.
    std::vector<std::shared_ptr<RecvReq>> posted;
    std::vector<Arrival> arrived;  // messages that came before their receive
  };

  std::string check_arrival(int peer, const Frame &f);  // header check; "" when fine
  std::string check_header(const RecvReq &r, int peer, const Frame &f) const;  // the same, for a frame in hand
  std::string match(Peer &p, int peer, const std::shared_ptr<RecvReq> &r, Arrival &a);
  void check_peer(int peer) const;
  void check_chains() const;
  // isend, irecv and their *_after: a request of type Req posted now, or
  // chained after `after` (chain()).
  template <class Req, class Desc>
  RequestPtr start(const Desc &d, const std::vector<Request *> &after);
  void post(const std::shared_ptr<SendReq> &s);
  void post(const std::shared_ptr<RecvReq> &r);  // fails the endpoint on a mismatch
  // Chains (isend_after): chain() makes r wait for the unfinished requests of
  // `after` (true: none is left, post r now); finish() completes a request and
  // readies the requests that waited for it last; post_ready() posts what is
  // ready. Every path that finishes requests calls post_ready() once it holds
  // no lock, so a chain goes on on the thread that finished its last step.
  bool chain(const std::shared_ptr<NetReq> &r, const std::vector<Request *> &after);
  void finish(NetReq &r);
  void post_ready();
  void send_failed(SendReq &s);
  void send_cts(int peer, const std::shared_ptr<RecvReq> &r, uint64_t send_id);
  void start_data(const std::shared_ptr<SendReq> &s, const Frame &cts);
  void deliver(RecvReq &r, size_t offset, const void *data, size_t bytes);
  void received(const std::shared_ptr<RecvReq> &r, size_t bytes);
  void tell_peers(const Frame &f, const std::string &text);

  // Messages to this rank itself: every one eager, delivered by the sender.
  struct SelfLink final : Link {
    explicit SelfLink(NetTransport &t) : t(t) {}
    void send(const Frame &f, const void *payload, size_t bytes, int, std::function<void(bool)> done) override {
      t.on_frame(t.rank(), f, payload);
      if (done) done(true);
    }
    size_t max_chunk() const override { return SIZE_MAX; }
    const char *kind() const override { return "self"; }
    NetTransport &t;
  };

  Tuning tuning_;
  SelfLink self_{*this};
  std::atomic<bool> quiet_{false};  // failed: deliver nothing more into user memory
  std::vector<std::unique_ptr<Engine>> engines_;
  Engine *area_engine_ = nullptr;  // the engine whose shared area the group uses
  SharedArea area_;
  std::mutex mu_;
  std::vector<Peer> peers_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<SendReq>> sending_;  // waiting for CTS, or writing
  std::map<uint64_t, std::shared_ptr<RecvReq>> receiving_;  // CTS sent, DATA arriving
  OpHeader current_;
  bool has_current_ = false;
  std::vector<std::pair<int, OpHeader>> early_;  // headers of operations this rank has not begun
  // The payload buffers of eager messages that came before their receive,
  // kept for the next such (a new one costs a page fault every 4 KiB: 4 ranks
  // on 2 CPUs, 16 MiB allreduce, about one 1 MiB message a call on each rank).
  static constexpr size_t kSpareBuffers = 4;
  std::vector<std::vector<uint8_t>> spare_;
  std::mutex chain_mu_;  // NetReq's chain fields and ready_; taken under mu_, never the other way
  std::vector<std::shared_ptr<NetReq>> ready_;  // chained requests whose wait is over, to post
};

}  // namespace hpu::comm
