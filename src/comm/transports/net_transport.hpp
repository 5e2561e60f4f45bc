// The transport of ranks in different processes: one message protocol, and per
// peer a Link that moves its frames (tcp_link.cpp: libuv sockets across hosts;
// shm_link.cpp: shared-memory rings within a host). A communicator that mixes
// peers on this host and on others gets one of each, chosen per peer.
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
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transport.hpp"

namespace hpu::comm {

struct Frame {
  enum Type : uint32_t { eager = 1, rts = 2, cts = 3, data = 4, error = 5, bye = 6, pad = 7 };
  static constexpr uint32_t kHasHeader = 1;
  static constexpr uint32_t kDirect = 2;  // CTS: the link wrote where to write (Link::offer)
  uint32_t type = 0;
  uint32_t flags = 0;
  uint64_t tag = 0;
  uint64_t size = 0;  // eager, data, error: payload bytes; rts: message bytes
  uint64_t a = 0;     // rts, cts: send id; error: status
  uint64_t b = 0;     // cts, data: recv id
  uint64_t c = 0;     // cts: chunk bytes; data: offset
  OpHeader header;
};
static_assert(sizeof(Frame) == 80, "Frame is a wire format");

constexpr size_t kMaxErrorText = 4096;

class NetTransport;

// Moves one peer's frames. send() may be called from any thread; `done` runs
// once the payload is no longer needed (true) or the link broke (false).
class Link {
 public:
  virtual ~Link() = default;
  virtual void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) = 0;
  virtual int lanes() const { return 1; }
  // Zero copy, for links that can write straight into the receiver's memory
  // (verbs): offer() may turn a clear-to-send for [dst, dst + bytes) into a
  // direct one (kDirect, with what the sender's link needs); the sender's
  // transport then calls write() for the whole message instead of sending
  // DATA, and the receiver's link delivers one DATA frame whose payload is dst.
  virtual void offer(Frame &cts, void *dst, size_t bytes) {}
  virtual void write(const Frame &cts, const void *src, size_t bytes, std::function<void(bool)> done) { done(false); }
  virtual size_t max_chunk() const = 0;
  virtual const char *kind() const = 0;
};

// A set of links that share threads (one libuv loop, one shm poller).
class Engine {
 public:
  virtual ~Engine() = default;
  virtual Link *link(int peer) = 0;
  // Starts delivering frames (after the transport knows the links).
  virtual void start() = 0;
  // Progress from a thread waiting for requests; true if anything moved.
  virtual bool poll() { return false; }
  // Memory every rank of the group maps (Transport::shared_area), when this
  // engine links this rank to every other; and waking the peers waiting on it.
  virtual SharedArea shared_area() const { return {}; }
  virtual void wake_peers() {}
  // After a failure: returns once no thread of the engine writes into user
  // memory any more (the waiters are about to return it to the caller).
  virtual void quiesce() = 0;
  // Stops the threads after sending what is queued (BYE included), bounded.
  virtual void shutdown() = 0;
};

class NetTransport final : public Transport {
 public:
  NetTransport(int rank, int size);
  ~NetTransport() override;

  const char *name() const override { return name_.c_str(); }
  size_t few_steps_bytes() const override { return few_steps_bytes_; }
  MemoryRegionPtr register_memory(void *base, size_t bytes) override;
  RequestPtr isend(const SendDesc &desc) override;
  RequestPtr irecv(const RecvDesc &desc) override;
  bool chains() const override { return chains_; }
  RequestPtr isend_after(const SendDesc &desc, const std::vector<Request *> &after, Deadline deadline) override;
  RequestPtr irecv_after(const RecvDesc &desc, const std::vector<Request *> &after, Deadline deadline) override;
  void begin(const OpHeader &header) override;
  SharedArea shared_area() const override { return area_; }
  void wake_peers() override {
    if (area_engine_) area_engine_->wake_peers();
  }

  // Set up by make_net_transport.
  void add_engine(std::unique_ptr<Engine> engine, const std::vector<int> &peers, size_t eager_limit);
  void set_name(std::string name) { name_ = std::move(name); }
  void set_few_steps_bytes(size_t bytes) { few_steps_bytes_ = bytes; }
  // isend_after/irecv_after post from the thread that completes a chain's last
  // step (else they wait in the caller, as Transport's do). Before add_engine.
  void set_chains(bool on) { chains_ = on; }

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

  std::string name_ = "net";
  size_t few_steps_bytes_ = 0;
  bool chains_ = false;
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

// The transport for a group some of whose ranks live in other processes: shm
// for peers on this host (network namespace included), tcp for the others;
// `forced` ("shm" or "tcp") uses one for every peer. Collective over the
// bootstrap. Logs the choice.
std::unique_ptr<Transport> make_net_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                              Deadline deadline);

// Engines (tcp_link.cpp, shm_link.cpp). Each is collective over the bootstrap
// (every rank calls it, with or without peers of its kind). `spin`: the tcp
// loop thread may poll a while before it blocks (when it mostly has a CPU to itself).
std::unique_ptr<Engine> make_tcp_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                        const uint8_t secret[16], bool spin, Deadline deadline);
std::unique_ptr<Engine> make_shm_engine(NetTransport &t, Bootstrap &bootstrap, const std::vector<int> &peers,
                                        const uint8_t secret[16], const std::vector<int32_t> &pids,
                                        Deadline deadline);

}  // namespace hpu::comm
