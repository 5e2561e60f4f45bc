// tcp: links to ranks on other hosts over libuv. Each pair of ranks has
// several connections ("lanes", HPU_TCP_LANES, default 2): control frames go
// on lane 0 in order, large messages are cut into chunks striped over all
// lanes, and chunks without a reduction are read straight into the receive
// buffer; those with one are reduced a piece at a time as they arrive. One
// libuv loop thread per endpoint does the reads and the writes that wait;
// a frame sent from another thread (the rank's worker) while its stream has
// nothing queued is written at once by that thread, with a non-blocking
// sendmsg(2), instead of being handed to the loop thread (a wake-up of another
// thread per message, which with more ranks than CPUs is a context switch).
//
// Setup (collective over the bootstrap): each rank listens on the interface
// its bootstrap connection uses, the addresses are exchanged, every rank
// connects to the ranks below it and accepts the ranks above it; every
// connection runs the authenticated handshake (socket/handshake.hpp), strangers are
// dropped. The listener closes once the links are up.
#include <pthread.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <uv.h>

#include <cerrno>
#include <condition_variable>
#include <future>
#include <mutex>
#include <cstring>
#include <thread>

#include "comm/bootstrap/socket.hpp"
#include "comm/socket/acceptor.hpp"
#include "comm/transports/tcp/tcp.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"

namespace hpu::comm {

namespace {

constexpr size_t kChunk = 512 << 10;
// A payload that is reduced on arrival is read this much at a time: pieces
// that stay in the L2 cache until they are reduced, in few reads (larger
// messages are faster with 256 than with 64 KiB pieces).
constexpr size_t kPiece = 256 << 10;
constexpr auto kFlushTime = std::chrono::seconds(1);  // goodbye's patience with a stuck peer
constexpr auto kLoopSpin = std::chrono::microseconds(20);  // see TcpEngine::run_loop

size_t payload_bytes(const Frame &f) {
  return f.type == Frame::eager || f.type == Frame::data || f.type == Frame::error ? f.size : 0;
}

// A connection whose two ends have one address runs over the loopback
// device, which loses nothing: congestion control has nothing to control
// there, but BBR (the default on some systems) still paces every burst with
// timers. Such links use reno, which sends at once.
void unpaced_if_loopback(int fd) {
  Address here = Address::local_of(fd), there = Address::peer_of(fd);
  here.set_port(0);
  there.set_port(0);
  if (!here.valid() || here.str() != there.str()) return;
  static const char reno[] = "reno";
  setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, reno, sizeof reno - 1);  // best effort
}

class TcpEngine;

thread_local TcpEngine *t_loop_engine = nullptr;  // the engine whose loop runs on this thread

struct Stream {
  uv_tcp_t handle;
  TcpEngine *engine = nullptr;
  int peer = -1, lane = 0;
  bool open = false;
  // Reading: a frame header, then its payload into `target`.
  Frame frame;
  size_t have = 0;
  bool in_payload = false;
  uint8_t *target = nullptr;
  std::vector<uint8_t> staging;
  // A payload that a receive reduces (NetTransport::absorber): read into
  // staging a piece at a time, each reduced while it is hot in the cache.
  std::shared_ptr<void> sink;
  size_t elem = 1;      // the reduction's element size
  size_t absorbed = 0;  // payload bytes reduced so far
  size_t fill = 0;      // bytes in staging not reduced yet (less than elem after each read)
  // Writing, under write_mu (TcpEngine::send): the loop thread's writes and
  // those of other threads (direct) must not interleave within a frame.
  std::mutex write_mu;
  bool writable = false;  // open: a thread other than the loop's may write (direct)
  size_t pending = 0;     // frames handed to the loop thread and not yet all in the socket
  bool split = false;     // one of them is the rest of a frame written in part directly
};

// Staging only grows (up to the largest payload it held; see on_read): a
// vector that shrank would zero the bytes again on every regrowth, and frames
// reduced on arrival (a 256 KiB piece) alternate with plain ones.
void grow(std::vector<uint8_t> &staging, size_t bytes) {
  if (staging.size() < bytes) staging.resize(bytes);
}

struct WriteReq {
  uv_write_t req;
  Frame frame;
  std::function<void(bool)> done;
};

class TcpLink final : public Link {
 public:
  TcpLink(TcpEngine *e, int peer) : engine(e), peer(peer) {}
  void send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) override;
  int lanes() const override { return static_cast<int>(streams.size()); }
  size_t max_chunk() const override { return kChunk; }
  const char *kind() const override { return "tcp"; }

  TcpEngine *engine;
  int peer;
  std::vector<Stream *> streams;
  bool closed = false;  // loop thread only
  bool bye = false;     // the peer said goodbye (lane 0)
};

class TcpEngine final : public Engine {
 public:
  TcpEngine(NetTransport &t, int size, Clock::duration spin) : t_(t), links_(static_cast<size_t>(size)), spin_(spin) {
    uv_loop_init(&loop_);
    uv_async_init(&loop_, &async_, [](uv_async_t *a) { static_cast<TcpEngine *>(a->data)->drain(); });
    async_.data = this;
  }
  ~TcpEngine() override {
    if (started_) {
      shutdown();
    } else {  // setup failed: close what was opened
      close_all();
      uv_run(&loop_, UV_RUN_DEFAULT);
      uv_loop_close(&loop_);
    }
    for (Stream *s : streams_) delete s;
  }

  Link *link(int peer) override { return links_[static_cast<size_t>(peer)].get(); }

  void add_stream(int peer, int lane, Fd fd) {
    auto &l = links_[static_cast<size_t>(peer)];
    if (!l) l = std::make_unique<TcpLink>(this, peer);
    auto *s = new Stream();
    s->engine = this;
    s->peer = peer;
    s->lane = lane;
    unpaced_if_loopback(fd.get());
    uv_tcp_init(&loop_, &s->handle);
    s->handle.data = s;
    if (uv_tcp_open(&s->handle, fd.get()) != 0) fail(HPU_ERROR_IO, "tcp: cannot adopt the socket to rank %d", peer);
    fd.release();
    s->open = s->writable = true;
    if (l->streams.size() <= static_cast<size_t>(lane)) l->streams.resize(static_cast<size_t>(lane) + 1);
    l->streams[static_cast<size_t>(lane)] = s;
    streams_.push_back(s);
  }

  void start() override {
    started_ = true;
    for (Stream *s : streams_) uv_read_start(reinterpret_cast<uv_stream_t *>(&s->handle), on_alloc, on_read);
    thread_ = std::thread([this] {
      // libuv writes with write(2): a peer gone must give EPIPE here, not kill
      // the process with SIGPIPE (which, blocked, stays pending on this thread).
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      t_loop_engine = this;
      run_loop();
      uv_loop_close(&loop_);
    });
  }

  // On the loop thread (a clear-to-send, data after one) the frame is
  // written at once. From another thread it is written directly when its
  // stream has nothing handed to the loop thread (the order of a stream's
  // frames stays that of their sends); what the socket does not take at
  // once, or all of it when the stream is busy, goes to the loop thread.
  void send(TcpLink &l, const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) {
    if (t_loop_engine == this) {
      write(l, f, payload, bytes, lane, std::move(done), 0, false);
      return;
    }
    // (A link's streams are all added before start(): read-only from here on.)
    Stream *s = l.streams.empty() ? nullptr : l.streams[static_cast<size_t>(lane) % l.streams.size()];
    std::unique_lock<std::mutex> stream_lock;
    size_t wrote = 0;
    if (s) {
      stream_lock = std::unique_lock<std::mutex>(s->write_mu);
      if (s->writable && s->pending == 0) wrote = write_direct(*s, f, payload, bytes);
      if (wrote == sizeof(Frame) + bytes) {
        stream_lock.unlock();
        if (done) done(true);
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);  // (after the stream's lock: the rest queues before anything else)
      if (!stopped_) {
        if (s) {
          ++s->pending;
          s->split = s->split || wrote > 0;
        }
        queue_.push_back([this, &l, f, payload, bytes, lane, wrote, done = std::move(done)]() mutable {
          write(l, f, payload, bytes, lane, std::move(done), wrote, true);
        });
        uv_async_send(&async_);
        return;
      }
    }
    stream_lock = {};
    if (done) done(false);
  }

  void quiesce() override {
    if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) {
      redirect_reads();
      return;
    }
    auto done = std::make_shared<std::promise<void>>();
    auto ready = done->get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      queue_.push_back([this, done] {
        redirect_reads();
        done->set_value();
      });
      uv_async_send(&async_);
    }
    ready.wait_for(std::chrono::seconds(1));
  }

  void shutdown() override {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back([this] { say_goodbye(); });
      uv_async_send(&async_);
    }
    thread_.join();
  }

 private:
  // Runs the loop until every handle is closed. After anything happened it
  // keeps looking without blocking for spin_, yielding the CPU between
  // looks (to a waiter that shares it): the next segments of a transfer come
  // microseconds apart, and a thread blocked in epoll needs a wake-up for each,
  // which on a CPU gone idle costs tens of microseconds.
  void run_loop() {
    if (spin_ == Clock::duration::zero()) {
      uv_run(&loop_, UV_RUN_DEFAULT);
      return;
    }
    auto idle_since = Clock::now();
    for (;;) {
      const uint64_t before = activity_;
      if (!uv_run(&loop_, UV_RUN_NOWAIT)) return;
      const auto now = Clock::now();
      if (activity_ != before) {
        idle_since = now;
      } else if (now - idle_since < spin_) {
        sched_yield();
      } else {
        if (!uv_run(&loop_, UV_RUN_ONCE)) return;
        idle_since = Clock::now();
      }
    }
  }

  void drain() {
    ++activity_;
    std::vector<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      work.swap(queue_);
    }
    for (auto &fn : work) fn();
  }

  // Writes what the socket takes at once of a frame and its payload, without
  // blocking (under s.write_mu, from a thread other than the loop's); the
  // bytes written. On an error, none: the loop thread's write meets it too.
  static size_t write_direct(Stream &s, const Frame &f, const void *payload, size_t bytes) {
    iovec iov[2] = {{const_cast<Frame *>(&f), sizeof(Frame)}, {const_cast<void *>(payload), bytes}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = bytes ? 2 : 1;
    uv_os_fd_t fd;
    if (uv_fileno(reinterpret_cast<const uv_handle_t *>(&s.handle), &fd) != 0) return 0;
    ssize_t n;
    do n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }

  // Writes a frame and its payload, but for its first `skip` bytes (written
  // directly by another thread). What the socket takes at once is done at
  // once (`done` runs before this returns, so a chain's next step is posted in
  // this pass of the loop, before the next reads: fewer messages arrive before
  // their receive); the rest is queued. `handed`: the frame came through the
  // queue (send()) and is counted in its stream's `pending`. A frame of the
  // loop thread's own waits in the queue too while the rest of a frame
  // written in part directly is there.
  void write(TcpLink &l, const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done,
             size_t skip, bool handed) {
    Stream *s = l.streams.empty() ? nullptr : l.streams[static_cast<size_t>(lane) % l.streams.size()];
    std::unique_lock<std::mutex> stream_lock;
    if (s) {
      stream_lock = std::unique_lock<std::mutex>(s->write_mu);
      if (handed) {
        --s->pending;
        if (skip) s->split = false;  // (a stream has one split frame at most: see send)
      } else if (s->split && s->writable) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++s->pending;
          queue_.push_back([this, &l, f, payload, bytes, lane, done = std::move(done)]() mutable {
            write(l, f, payload, bytes, lane, std::move(done), 0, true);
          });
        }
        uv_async_send(&async_);
        return;
      }
    }
    if (!s || l.closed || !s->open) {
      stream_lock = {};
      if (done) done(false);
      return;
    }
    auto *stream = reinterpret_cast<uv_stream_t *>(&s->handle);
    auto w = std::make_unique<WriteReq>();
    w->frame = f;
    uv_buf_t bufs[2] = {uv_buf_init(reinterpret_cast<char *>(&w->frame), sizeof(Frame)),
                        uv_buf_init(static_cast<char *>(const_cast<void *>(payload)), static_cast<unsigned>(bytes))};
    uv_buf_t *first = bufs;
    unsigned count = bytes ? 2 : 1;
    auto advance = [&](size_t wrote) {
      while (wrote > 0 && count > 0) {
        const size_t take = std::min<size_t>(wrote, first->len);
        first->base += take;
        first->len -= static_cast<unsigned>(take);
        wrote -= take;
        if (first->len == 0) {
          ++first;
          --count;
        }
      }
    };
    advance(skip);
    int n = uv_try_write(stream, first, count);  // UV_EAGAIN while earlier writes wait in the queue
    advance(n > 0 ? static_cast<size_t>(n) : 0);
    if (count == 0) {
      stream_lock = {};
      ++activity_;
      if (done) done(true);
      return;
    }
    w->done = std::move(done);
    w->req.data = w.get();
    ++writing_;
    ++s->pending;
    if (uv_write(&w->req, stream, first, count, on_written) != 0) {
      --writing_;
      --s->pending;
      stream_lock = {};
      if (w->done) w->done(false);
      return;
    }
    w.release();  // on_written deletes it
  }

  static void on_written(uv_write_t *req, int status) {
    auto *w = static_cast<WriteReq *>(req->data);
    auto *s = static_cast<Stream *>(req->handle->data);
    auto *e = s->engine;
    {
      std::lock_guard<std::mutex> lock(s->write_mu);
      --s->pending;
    }
    ++e->activity_;
    --e->writing_;
    if (w->done) w->done(status == 0);
    delete w;
    if (e->closing_ && e->writing_ == 0) e->close_all();
  }

  static void on_alloc(uv_handle_t *h, size_t, uv_buf_t *buf) {
    auto *s = static_cast<Stream *>(h->data);
    if (!s->in_payload) {
      *buf = uv_buf_init(reinterpret_cast<char *>(&s->frame) + s->have, static_cast<unsigned>(sizeof(Frame) - s->have));
    } else if (s->sink) {
      size_t left = payload_bytes(s->frame) - s->have;
      *buf = uv_buf_init(reinterpret_cast<char *>(s->staging.data()) + s->fill,
                         static_cast<unsigned>(std::min(left, kPiece - s->fill)));
    } else {
      size_t left = payload_bytes(s->frame) - s->have;
      *buf = uv_buf_init(reinterpret_cast<char *>(s->target) + s->have,
                         static_cast<unsigned>(std::min<size_t>(left, 1u << 30)));
    }
  }

  static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *) {
    auto *s = static_cast<Stream *>(h->data);
    TcpEngine *e = s->engine;
    ++e->activity_;
    if (n < 0) {
      if (n == UV_EOF)
        e->lost(*s, "the connection was closed", true);
      else
        e->lost(*s, strf("the connection broke: %s", uv_strerror(static_cast<int>(n))));
      return;
    }
    s->have += static_cast<size_t>(n);
    if (!s->in_payload) {
      if (s->have < sizeof(Frame)) return;
      size_t bytes = payload_bytes(s->frame), limit = e->t_.frame_limit(s->peer, s->frame);
      if (bytes > limit) {
        e->t_.fail_all(HPU_ERROR_REMOTE, strf("rank %d sent a frame of type %u with %zu bytes (at most %zu); dropping its "
                                          "connection", s->peer, s->frame.type, bytes, limit));
        e->lost(*s, "protocol error");
        return;
      }
      s->have = 0;
      if (bytes == 0) {
        if (s->frame.type == Frame::bye) e->links_[static_cast<size_t>(s->peer)]->bye = true;
        e->t_.on_frame(s->peer, s->frame, nullptr);
        return;
      }
      s->target = static_cast<uint8_t *>(e->t_.data_target(s->peer, s->frame));
      if (!s->target) {
        s->sink = e->t_.absorber(s->peer, s->frame, &s->elem);
        s->absorbed = s->fill = 0;
        grow(s->staging, s->sink ? kPiece : bytes);
        s->target = s->staging.data();
      }
      s->in_payload = true;
      return;
    }
    if (s->sink) {
      s->fill += static_cast<size_t>(n);
      size_t ready = s->fill - s->fill % s->elem;
      e->t_.absorb(s->sink, s->frame, s->absorbed, s->staging.data(), ready);
      s->absorbed += ready;
      s->fill -= ready;
      if (s->fill) std::memmove(s->staging.data(), s->staging.data() + ready, s->fill);
    }
    if (s->have < payload_bytes(s->frame)) return;
    s->have = 0;
    s->in_payload = false;
    if (s->sink) {
      auto sink = std::move(s->sink);  // leaves s->sink empty
      e->t_.on_absorbed(s->peer, s->frame, sink);
      return;
    }
    e->t_.on_frame(s->peer, s->frame, s->target);
    if (s->staging.size() > (1u << 20)) std::vector<uint8_t>().swap(s->staging);
  }

  // Payloads being read into user memory go on into staging instead.
  void redirect_reads() {
    for (Stream *s : streams_) {
      if (!s->in_payload) continue;
      if (s->sink) s->sink = nullptr;  // (its reads land at staging + have from now on)
      else if (s->target == s->staging.data()) continue;
      grow(s->staging, payload_bytes(s->frame));
      s->target = s->staging.data();
    }
  }

  // A connection of `s->peer` ended. A broken one means the peer is gone: close
  // every lane and fail at once. An orderly end (EOF) may come before the
  // goodbye, which travels on lane 0 while other lanes carry the peer's last
  // data: the link closes when its last lane has ended, and only then is a
  // missing goodbye a failure. (A killed peer's lanes all end at once.)
  void lost(Stream &s, const std::string &why, bool orderly = false) {
    TcpLink &l = *links_[static_cast<size_t>(s.peer)];
    if (l.closed) return;
    close_stream(&s);
    bool all = true;
    for (Stream *x : l.streams) all = all && !x->open;
    if ((l.bye || orderly) && !all) return;
    l.closed = true;
    for (Stream *x : l.streams) close_stream(x);
    if (!closing_) t_.on_link_closed(s.peer, why);
  }

  void close_stream(Stream *s) {
    if (!s || !s->open) return;
    s->open = false;
    {
      std::lock_guard<std::mutex> lock(s->write_mu);  // no direct write from here on: uv_close closes the socket
      s->writable = false;
    }
    uv_read_stop(reinterpret_cast<uv_stream_t *>(&s->handle));
    uv_close(reinterpret_cast<uv_handle_t *>(&s->handle), nullptr);
  }

  void say_goodbye() {
    closing_ = true;
    Frame bye;
    bye.type = Frame::bye;
    for (auto &l : links_)
      if (l && !l->closed) write(*l, bye, nullptr, 0, 0, nullptr, 0, false);
    if (writing_ == 0) {
      close_all();
      return;
    }
    uv_timer_init(&loop_, &flush_timer_);  // a stopped peer must not hold us
    flush_timer_.data = this;
    timer_used_ = true;
    uv_timer_start(&flush_timer_, [](uv_timer_t *t) { static_cast<TcpEngine *>(t->data)->close_all(); },
                   std::chrono::duration_cast<std::chrono::milliseconds>(kFlushTime).count(), 0);
  }

  void close_all() {
    if (all_closed_) return;
    all_closed_ = true;
    for (Stream *s : streams_) close_stream(s);
    if (timer_used_) uv_close(reinterpret_cast<uv_handle_t *>(&flush_timer_), nullptr);
    std::vector<std::function<void()>> rest;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      rest.swap(queue_);
    }
    for (auto &fn : rest) fn();  // writes among them fail: the streams are closed
    uv_close(reinterpret_cast<uv_handle_t *>(&async_), nullptr);
  }

  NetTransport &t_;
  std::vector<std::unique_ptr<TcpLink>> links_;
  std::vector<Stream *> streams_;
  uv_loop_t loop_;
  uv_async_t async_;
  uv_timer_t flush_timer_;
  bool started_ = false, timer_used_ = false, closing_ = false, all_closed_ = false;
  size_t writing_ = 0;
  uint64_t activity_ = 0;  // callbacks that ran (loop thread only; see run_loop)
  const Clock::duration spin_;  // kLoopSpin or zero (see run_loop)
  std::thread thread_;
  std::mutex mu_;
  bool stopped_ = false;
  std::vector<std::function<void()>> queue_;
};

void TcpLink::send(const Frame &f, const void *payload, size_t bytes, int lane, std::function<void(bool)> done) {
  engine->send(*this, f, payload, bytes, lane, std::move(done));
}

struct Listing {
  uint8_t address[64];
  int32_t lanes;
  int32_t reserved;
};

struct LinkHello {
  int32_t rank;
  int32_t lane;
  int32_t nranks;
};

}  // namespace

std::unique_ptr<Engine> make_tcp_engine(NetTransport &t, Bootstrap &bootstrap, const Placement &place,
                                        const std::vector<int> &peers, Deadline deadline) {
  int rank = bootstrap.rank(), size = bootstrap.size();
  const uint8_t *secret = place.secret();
  // The loop thread polls a while before it blocks (run_loop) while the host's
  // ranks are at most twice the CPUs they may use together: the waiting
  // threads sleep through a collective (chains), so the loop threads have the
  // CPUs to themselves; with more ranks they would take the CPU from each other.
  const std::vector<int> here = place.on_host(rank);
  const bool spin = static_cast<int>(here.size()) <= 2 * place.cpus_together(here);
  auto engine = std::make_unique<TcpEngine>(t, size, spin ? kLoopSpin : Clock::duration::zero());
  Listing me{};
  Fd listener;
  auto *sb = dynamic_cast<SocketBootstrap *>(&bootstrap);
  if (!peers.empty()) {
    Address at = sb ? sb->local_address() : default_interface_address();
    listener = listen_on(at, "tcp transport listener");
    Address::local_of(listener.get()).to_bytes(me.address);
  }
  me.lanes = config_now().comm.tcp_lanes;
  std::vector<Listing> all = bootstrap.allgather(me, deadline);
  fault::setup_point("tcp", rank);
  int lanes = all[0].lanes;
  std::vector<bool> wanted(static_cast<size_t>(size), false);
  for (int p : peers) wanted[static_cast<size_t>(p)] = true;
  std::string what = strf("tcp transport of rank %d", rank);
  // Connect down...
  for (int p : peers) {
    if (p > rank) continue;
    Address to = Address::from_bytes(all[static_cast<size_t>(p)].address);
    for (int lane = 0; lane < lanes; ++lane) {
      Fd fd = connect_retry(to, deadline, nullptr, what.c_str());
      LinkHello h{rank, lane, size};
      handshake_client(fd.get(), secret, Purpose::tcp_link, &h, sizeof h, deadline, nullptr, what.c_str());
      engine->add_stream(p, lane, std::move(fd));
    }
  }
  // ...and accept up.
  size_t expect = 0;
  for (int p : peers) expect += p > rank ? static_cast<size_t>(lanes) : 0;
  if (expect) {
    Acceptor acceptor(std::move(listener), secret, Purpose::tcp_link, what.c_str());
    std::vector<std::vector<bool>> seen(static_cast<size_t>(size), std::vector<bool>(static_cast<size_t>(lanes)));
    while (expect > 0) {
      if (Clock::now() >= deadline)
        fail(HPU_ERROR_TIMEOUT, "%s: %zu connection(s) from higher ranks did not arrive", what.c_str(), expect);
      Acceptor::Peer peer;
      // The root tells of a higher rank that died before connecting.
      int ev = acceptor.poll(sb ? std::vector<int>{sb->root_fd()} : std::vector<int>{}, &peer, 100);
      if (ev == 0) sb->fail_from_root(deadline);
      if (ev != Acceptor::kNewPeer) continue;
      LinkHello h{};
      bool ok = peer.hello.size() == sizeof h;
      if (ok) std::memcpy(&h, peer.hello.data(), sizeof h);
      ok = ok && h.nranks == size && h.rank > rank && h.rank < size && wanted[static_cast<size_t>(h.rank)] &&
           h.lane >= 0 && h.lane < lanes && !seen[static_cast<size_t>(h.rank)][static_cast<size_t>(h.lane)];
      if (!ok) {
        HPU_LOG(warn, "comm", "%s: dropped a connection from %s: unexpected hello (rank %d, lane %d)", what.c_str(),
                peer.from.c_str(), h.rank, h.lane);
        continue;
      }
      seen[static_cast<size_t>(h.rank)][static_cast<size_t>(h.lane)] = true;
      engine->add_stream(h.rank, h.lane, std::move(peer.fd));
      --expect;
    }
  }
  if (!peers.empty())
    HPU_LOG(debug, "comm", "%s: %zu peer(s), %d lane(s) each, from %s", what.c_str(), peers.size(), lanes,
            Address::from_bytes(me.address).str().c_str());
  return engine;
}

}  // namespace hpu::comm
