// shm: links between processes of one host through POSIX shared memory; no
// socket on the data path. Each rank owns a segment holding one ring per
// sender; a sender copies frames into its ring in the receiver's segment, the
// receiver copies (or reduces) them out.
//
// Progress happens in the thread that waits for requests (progress(): drain
// the rings, push queued frames). The segment's "bell" is that rank's
// transport doorbell (Transport::use_doorbell): a sender rings it after each
// write, and a receiver after it made room for a sender that waits, so a
// sleeping waiter is woken by the peer process itself, and a ring costs a
// system call only when the waiter sleeps. A small thread per endpoint only
// watches the peers (a pidfd each: a peer that dies is seen at once; one that
// stops is left to the deadline) and pushes frames queued for a full ring
// when no one waits (error reports, goodbyes).
//
// Rank 0's segment ends with the group's shared area (SharedMemory),
// which every rank maps with it when all ranks are on this host
// (shared_area_bytes: algorithms/shared_memory.cpp). Pages cost memory only
// once touched.
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <thread>

#include "comm/transports/shm/shm.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kRing = 2 << 20;      // bytes of one sender's ring
constexpr size_t kChunk = 256 << 10;   // largest DATA payload
constexpr size_t kFrame = sizeof(Frame);
constexpr auto kFlushTime = std::chrono::seconds(1);

struct alignas(64) Ring {
  alignas(64) std::atomic<uint64_t> head{0};  // bytes written, by the sender
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes consumed, by the receiver
  alignas(64) std::atomic<uint32_t> sender_waiting{0};
  alignas(64) uint8_t data[kRing];
};

struct alignas(64) Segment {
  alignas(64) std::atomic<uint32_t> bell{0};      // the owner's transport doorbell
  alignas(64) std::atomic<uint32_t> sleeping{0};  // threads of the owner asleep on it
  // Ring rings[size] follows, one per possible sender.
};

size_t rings_bytes(int size) { return sizeof(Segment) + static_cast<size_t>(size) * sizeof(Ring); }
// The shared area starts on a page of its own, so that a slot of a few KiB
// spans as few pages as it can.
size_t area_offset(int size) { return (rings_bytes(size) + 4095) & ~size_t(4095); }
size_t area_bytes(int size) { return shared_area_bytes(size); }
// The segment of rank `owner`: rank 0's ends with the shared area.
size_t segment_bytes(int size, int owner) { return owner == 0 ? area_offset(size) + area_bytes(size) : rings_bytes(size); }
Ring *ring_of(Segment *s, int sender) { return reinterpret_cast<Ring *>(s + 1) + sender; }

size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}
size_t record_bytes(size_t payload) { return (kFrame + payload + 7) & ~size_t(7); }

// Wakes the owner's threads asleep on its bell. The caller has made what it
// rings for visible; the fence orders that before the look at `sleeping`, as
// the sleeper counts itself in before it looks for it (Transport::poll_until):
// either the sleeper sees it, or this sees the sleeper. So a ring costs one
// read of a line that rarely changes while no one sleeps (the bell's line
// would move to this CPU and back with every ring).
void ring_bell(Segment *s) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!s->sleeping.load(std::memory_order_seq_cst)) return;
  s->bell.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&s->bell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

std::string segment_name(const uint8_t secret[16], int rank) {
  return strf("/hpu-comm-%02x%02x%02x%02x%02x%02x%02x%02x-%d", secret[0], secret[1], secret[2], secret[3], secret[4],
              secret[5], secret[6], secret[7], rank);
}

Segment *map_segment(const std::string &name, int size, int owner, bool create) {
  int fd = shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) fail(HPU_ERROR_IO, "shm: cannot %s %s: %s", create ? "create" : "open", name.c_str(), strerror(errno));
  size_t bytes = segment_bytes(size, owner);
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    fail(HPU_ERROR_OUT_OF_MEMORY, "shm: cannot size %s to %zu bytes: %s", name.c_str(), bytes, strerror(e));
  }
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) fail(HPU_ERROR_IO, "shm: cannot map %s: %s", name.c_str(), strerror(errno));
  return static_cast<Segment *>(p);
}

class ShmEngine;

struct Outgoing {
  Frame frame;
  const void *payload;
  size_t bytes;
  std::function<void(bool)> done;
};

class ShmLink final : public Link {
 public:
  ShmLink(ShmEngine *e, int peer) : engine(e), peer(peer) {}
  void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) override;
  size_t max_chunk() const override { return kChunk; }
  const char *kind() const override { return "shm"; }

  // Copies one frame into the peer's ring if it has room (under mu).
  bool try_write(const Frame &f, const void *payload, size_t bytes);
  bool flush();  // queued frames that fit; true if any moved

  ShmEngine *engine;
  int peer;
  Segment *remote = nullptr;  // the peer's segment (we write ring_of(remote, our rank))
  Ring *out = nullptr;
  Ring *in = nullptr;  // its ring in our segment
  int pidfd = -1;
  std::atomic<bool> dead{false};  // set by the watcher or a drainer, read by every thread
  std::mutex mu;
  std::deque<Outgoing> queue;       // frames waiting for room in the peer's ring
  std::atomic<bool> queued{false};  // !queue.empty(), readable without mu
};

class ShmEngine final : public Engine {
 public:
  ShmEngine(NetTransport &t, int rank, int size) : t_(t), rank_(rank), size_(size), links_(static_cast<size_t>(size)) {}
  ~ShmEngine() override {
    shutdown();
    for (auto &l : links_) {
      if (!l) continue;
      if (l->pidfd >= 0) close(l->pidfd);
      if (l->remote) munmap(l->remote, segment_bytes(size_, l->peer));
    }
    if (mine_) munmap(mine_, segment_bytes(size_, rank_));
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  Link *link(int peer) override { return links_[static_cast<size_t>(peer)].get(); }

  void start() override {
    started_ = true;
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) fail(HPU_ERROR_IO, "shm: eventfd failed: %s", strerror(errno));
    if (mine_) t_.use_doorbell(&mine_->bell, &mine_->sleeping, true);
    thread_ = std::thread([this] { run(); });
  }

  void shutdown() override {
    if (!thread_.joinable()) return;
    send_bye(links_);
    flush_until_ = Clock::now() + kFlushTime;
    closing_ = true;
    wake();
    thread_.join();
    t_.use_own_doorbell();  // the segment goes with the engine
    for (auto &l : links_) {  // what a stuck peer never took
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

  // Wakes the watcher thread (frames queued for a full ring, or closing).
  void wake() {
    uint64_t one = 1;
    if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);  // fails only when already pending
  }

  // From a waiting thread: drain what has arrived (if no one else is), push
  // what waits for room.
  bool poll() override {
    bool did = false;
    {
      std::unique_lock<std::mutex> lock(drain_mu_, std::try_to_lock);
      if (!lock.owns_lock()) return false;
      drainer_ = std::this_thread::get_id();
      for (auto &l : links_)
        if (l && !l->dead) did |= drain(*l);
      drainer_ = std::thread::id();
    }
    for (auto &l : links_)
      if (l && !l->dead && l->queued.load(std::memory_order_relaxed)) did |= l->flush();
    return did;
  }

  SharedArea shared_area() const override {
    if (size_ < 2) return {};
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && !links_[static_cast<size_t>(p)]) return {};  // a peer on another host
    Segment *zero = rank_ == 0 ? mine_ : links_[0]->remote;
    return {reinterpret_cast<uint8_t *>(zero) + area_offset(size_), area_bytes(size_)};
  }

  void wake_peers() override {
    for (auto &l : links_)
      if (l) ring_bell(l->remote);
  }

  // Waits out a drain in progress in another thread (later ones deliver nothing).
  void quiesce() override {
    if (drainer_.load() == std::this_thread::get_id()) return;
    std::lock_guard<std::mutex> lock(drain_mu_);
  }

  Segment *mine_ = nullptr;
  std::vector<std::unique_ptr<ShmLink>> &links() { return links_; }
  int rank() const { return rank_; }

 private:
  // Frames of one peer's ring, in order.
  bool drain(ShmLink &l) {
    Ring *r = l.in;
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    uint64_t head = r->head.load(std::memory_order_acquire);
    bool did = false;
    while (tail < head) {
      size_t pos = tail % kRing;
      if (kRing - pos < kFrame) {
        tail += kRing - pos;
        continue;
      }
      Frame f;
      std::memcpy(&f, r->data + pos, kFrame);
      if (f.type == Frame::pad) {
        tail += kRing - pos;
        continue;
      }
      size_t bytes = payload_bytes(f);
      if (bytes > t_.frame_limit(l.peer, f) || record_bytes(bytes) > kRing - pos) {
        t_.fail_all(HPU_ERROR_REMOTE, strf("rank %d wrote a frame of type %u with %zu bytes into shared memory "
                                           "(at most %zu)", l.peer, f.type, bytes, t_.frame_limit(l.peer, f)));
        l.dead = true;
        return true;
      }
      t_.on_frame(l.peer, f, r->data + pos + kFrame);
      tail += record_bytes(bytes);
      r->tail.store(tail, std::memory_order_seq_cst);
      did = true;
      if (r->sender_waiting.load(std::memory_order_seq_cst)) ring_bell(l.remote);
    }
    return did;
  }

  // Drains what a peer that died wrote before, then reports it gone.
  void check_deaths() {
    for (auto &l : links_) {
      if (!l || l->dead || l->pidfd < 0) continue;
      pollfd p{l->pidfd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      {
        std::lock_guard<std::mutex> lock(drain_mu_);
        drainer_ = std::this_thread::get_id();
        drain(*l);  // what it wrote before it died
        drainer_ = std::thread::id();
      }
      l->dead = true;
      if (!closing_) t_.on_link_closed(l->peer, "its process exited");
    }
  }

  // The watcher: sleeps on the peers' pidfds and the wake eventfd; pushes
  // queued frames now and then while there are any.
  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      bool queued = false;
      for (auto &l : links_)
        if (l && !l->dead && l->queued.load(std::memory_order_relaxed)) {
          l->flush();
          queued = queued || l->queued.load(std::memory_order_relaxed);
        }
      check_deaths();
      if (closing_ && (!queued || Clock::now() >= flush_until_)) return;
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      for (auto &l : links_)
        if (l && !l->dead && l->pidfd >= 0) fds.push_back(pollfd{l->pidfd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), queued || closing_ ? 1 : 100);
      uint64_t n;
      if (fds[0].revents & POLLIN) (void)!read(wake_fd_, &n, sizeof n);
    }
  }

  NetTransport &t_;
  int rank_, size_;
  std::vector<std::unique_ptr<ShmLink>> links_;
  std::mutex drain_mu_;
  std::atomic<std::thread::id> drainer_{};
  std::thread thread_;
  int wake_fd_ = -1;
  std::atomic<bool> closing_{false};
  bool started_ = false;
  Deadline flush_until_;
};

bool ShmLink::try_write(const Frame &f, const void *payload, size_t bytes) {
  if (dead) return false;
  size_t rec = record_bytes(bytes);
  uint64_t head = out->head.load(std::memory_order_relaxed);
  uint64_t tail = out->tail.load(std::memory_order_acquire);
  size_t pos = head % kRing, waste = kRing - pos < rec ? kRing - pos : 0;
  if (kRing - (head - tail) < waste + rec) return false;
  if (waste >= kFrame) {
    Frame pad;
    pad.type = Frame::pad;
    std::memcpy(out->data + pos, &pad, kFrame);
  }
  head += waste;
  pos = head % kRing;
  std::memcpy(out->data + pos, &f, kFrame);
  if (bytes) std::memcpy(out->data + pos + kFrame, payload, bytes);
  out->head.store(head + rec, std::memory_order_seq_cst);
  return true;
}

bool ShmLink::flush() {
  std::vector<std::function<void(bool)>> finished;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int attempt = 0; attempt < 2 && !queue.empty(); ++attempt) {
      while (!queue.empty() && try_write(queue.front().frame, queue.front().payload, queue.front().bytes)) {
        if (queue.front().done) finished.push_back(std::move(queue.front().done));
        queue.pop_front();
        moved = true;
      }
      // Still full: ask the peer to ring our bell when it makes room, then
      // look again (it may have made room before it saw the request).
      out->sender_waiting.store(queue.empty() ? 0 : 1, std::memory_order_seq_cst);
    }
    queued.store(!queue.empty(), std::memory_order_relaxed);
  }
  if (moved) ring_bell(remote);
  for (auto &d : finished) d(true);
  return moved;
}

void ShmLink::send(const Frame &f, const void *payload, size_t bytes, int, std::function<void(bool)> done) {
  bool written = false, later = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (dead) {
      // fall through to failure below
    } else if (queue.empty() && try_write(f, payload, bytes)) {
      written = true;
    } else {
      // A waiter's progress() or the watcher pushes it (never here: the
      // caller may hold locks that the done callbacks of queued frames take).
      queue.push_back({f, payload, bytes, std::move(done)});
      queued.store(true, std::memory_order_relaxed);
      out->sender_waiting.store(1, std::memory_order_seq_cst);  // ring us when there is room
      later = true;
    }
  }
  if (later) {
    engine->wake();
    return;
  }
  if (written) ring_bell(remote);
  if (done) done(written);
}
}  // namespace

std::unique_ptr<Engine> make_shm_engine(NetTransport &t, Bootstrap &bootstrap, const Placement &place,
                                        const std::vector<int> &peers, Deadline deadline) {
  int rank = bootstrap.rank(), size = bootstrap.size();
  const uint8_t *secret = place.secret();
  const std::vector<int32_t> pids = place.pids();
  auto engine = std::make_unique<ShmEngine>(t, rank, size);
  std::string name = segment_name(secret, rank);
  if (!peers.empty()) {
    shm_unlink(name.c_str());  // a leftover of a crashed job with the same secret is impossible, but harmless
    engine->mine_ = map_segment(name, size, rank, true);
    new (engine->mine_) Segment();
    for (int p : peers) new (ring_of(engine->mine_, p)) Ring();
  }
  struct Flag {
    int32_t ok;
  };
  // Until every rank has mapped every segment, the names stay in /dev/shm. If
  // the group fails before (a peer died or stopped), this rank removes its own
  // name and its peers' (a dead peer cannot).
  auto gather = [&](Flag flag) {
    try {
      return bootstrap.allgather(flag, deadline);
    } catch (const Error &) {
      if (!peers.empty()) shm_unlink(name.c_str());
      for (int p : peers) shm_unlink(segment_name(secret, p).c_str());
      throw;
    }
  };
  gather(Flag{1});  // every segment exists
  fault::setup_point("shm", rank);
  std::string error;
  try {
    for (int p : peers) {
      auto l = std::make_unique<ShmLink>(engine.get(), p);
      l->remote = map_segment(segment_name(secret, p), size, p, false);
      l->out = ring_of(l->remote, rank);
      l->in = ring_of(engine->mine_, p);
      l->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pids[static_cast<size_t>(p)], 0));
      if (l->pidfd < 0)
        HPU_LOG(warn, "comm", "shm: cannot watch process %d of rank %d (%s); its death will show as a timeout",
                pids[static_cast<size_t>(p)], p, strerror(errno));
      engine->links()[static_cast<size_t>(p)] = std::move(l);
    }
  } catch (const Error &e) {
    error = e.what();
  }
  Flag mapped{error.empty() ? 1 : 0};
  auto all = gather(mapped);  // every segment mapped: the names can go
  if (!peers.empty()) shm_unlink(name.c_str());
  if (!error.empty()) throw Error(HPU_ERROR_IO, error);
  for (int r = 0; r < size; ++r)
    if (!all[static_cast<size_t>(r)].ok)
      fail(HPU_ERROR_REMOTE, "shm: rank %d could not map the shared memory of its peers", r);
  if (!peers.empty())
    HPU_LOG(debug, "comm", "shm transport of rank %d: %zu peer(s), %s ring each", rank, peers.size(),
            format_bytes(kRing).c_str());
  return engine;
}

}  // namespace hpu::comm
