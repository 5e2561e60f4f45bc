// The socket bootstrap: the rendezvous root and the ranks' side of it.
#include "comm/bootstrap/socket.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/socket/acceptor.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

// Frames between a rank and the root, after the handshake.
struct Frame {
  uint32_t bytes;  // payload bytes that follow
  uint32_t type;
  uint64_t round;
};
enum FrameType : uint32_t { kContribution = 1, kResult = 2, kError = 3, kGoodbye = 4, kQuery = 5, kStatus = 6 };
constexpr uint32_t kMaxRecord = 1u << 20;  // one rank's record in one allgather
constexpr uint32_t kMaxError = 4096;
constexpr auto kRootIo = std::chrono::seconds(10);  // the root's patience with one rank

struct Hello {
  int32_t rank;
  int32_t nranks;
  int32_t pid;  // the rank's process, so that the root can tell its own process's ranks
};

class Root;
void retire(Root *root);

Clock::duration timeout_duration() {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config().comm.timeout_seconds));
}

// One group's root: a thread with a poll loop over the listener and the ranks.
// It stops, closing its sockets, when every rank has left, when the group
// fails (a rank left before all had joined, or broke the protocol), at exit,
// or when its id expires: HPU_COMM_TIMEOUT after it was made, or after the
// last rank joined, with ranks still missing (a rank's own wait is as long).
class Root {
 public:
  Root(Fd listener, const UniqueId &id, std::string where)
      : acceptor_(std::make_unique<Acceptor>(std::move(listener), id.secret, Purpose::bootstrap, "rendezvous root")),
        name_(id.short_name()),
        where_(std::move(where)),
        patience_(timeout_duration()),
        expires_(Clock::now() + patience_) {}

  void start() { thread_ = std::thread([this] { run(); }); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // False in a fork() child for its parent's roots: their threads are not here.
  bool ours() const { return pid_ == getpid(); }

 private:
  struct Rank {
    Fd fd;
    std::string from;
    bool goodbye = false;
    bool here = false;  // a rank of the root's own process
  };
  struct Round {
    uint32_t bytes = 0;
    int have = 0;
    std::vector<bool> present;
    std::vector<uint8_t> data;
  };

  void run() {
    try {
      loop();
    } catch (const std::exception &e) {
      HPU_LOG(warn, "comm", "rendezvous root of group %s at %s stopped: %s", name_.c_str(), where_.c_str(), e.what());
    }
    ranks_.clear();
    rounds_.clear();
    acceptor_.reset();  // the listening socket
    retire(this);       // the last use of this object on this thread
  }

  // Every rank has joined: the group exists, and its ranks leave one by one.
  bool formed() const { return nranks_ > 0 && joined_ == nranks_; }

  void loop() {
    while (!stop_ && !shutting_down()) {
      std::vector<int> watch, who;
      for (auto &[r, rk] : ranks_)
        if (rk.fd) {
          watch.push_back(rk.fd.get());
          who.push_back(r);
        }
      if (formed() && watch.empty()) return;  // everyone has left
      if (!formed() && Clock::now() >= expires_) {
        expire();
        return;
      }
      Acceptor::Peer peer;
      int ev = acceptor_->poll(watch, &peer, 100);
      if (ev == Acceptor::kNewPeer) admit(std::move(peer));
      else if (ev >= 0 && !serve(who[static_cast<size_t>(ev)])) return;
    }
  }

  void admit(Acceptor::Peer peer) {
    Hello h{};
    if (peer.hello.size() != sizeof h) {
      HPU_LOG(warn, "comm", "rendezvous root %s: dropped %s: a hello of %zu bytes", name_.c_str(), peer.from.c_str(),
              peer.hello.size());
      return;
    }
    std::memcpy(&h, peer.hello.data(), sizeof h);
    std::string why;
    if (nranks_ > 0 && h.nranks != nranks_)
      why = strf("rank %d says the group has nranks %d, but rank(s) before it said nranks %d", h.rank, h.nranks, nranks_);
    else if (h.nranks < 1 || h.rank < 0 || h.rank >= h.nranks)
      why = strf("rank %d of %d is out of range", h.rank, h.nranks);
    else if (ranks_.count(h.rank))
      why = strf("rank %d has already joined", h.rank);
    if (!why.empty()) {
      HPU_LOG(warn, "comm", "rendezvous root %s: refused %s: %s", name_.c_str(), peer.from.c_str(), why.c_str());
      send_error(peer.fd.get(), HPU_ERROR_INVALID_USAGE, why);
      return;
    }
    nranks_ = h.nranks;
    ++joined_;
    expires_ = std::max(expires_, Clock::now() + patience_);
    HPU_LOG(debug, "comm", "rendezvous root %s: rank %d of %d joined from %s", name_.c_str(), h.rank, h.nranks,
            peer.from.c_str());
    ranks_[h.rank] = Rank{std::move(peer.fd), peer.from, false, h.pid == pid_};
  }

  // One frame from rank r; false when the group is over.
  bool serve(int r) {
    Rank &rk = ranks_[r];
    Frame f{};
    std::vector<uint8_t> payload;
    try {
      read_all(rk.fd.get(), &f, sizeof f, Clock::now() + kRootIo, &stop_, "rendezvous root");
      if (f.type == kGoodbye) {
        rk.goodbye = true;
        return true;
      }
      if (f.type == kQuery) {  // a rank timed out: tell it who is missing
        answer_query(rk, f.round);
        return true;
      }
      if (f.type != kContribution || f.bytes > kMaxRecord) {
        fail(HPU_ERROR_INVALID_USAGE, "sent a frame of type %u with %u bytes (at most %u)", f.type, f.bytes,
             kMaxRecord);
      }
      payload.resize(f.bytes);
      read_all(rk.fd.get(), payload.data(), f.bytes, Clock::now() + kRootIo, &stop_, "rendezvous root");
    } catch (const Error &e) {
      if (rk.goodbye && formed()) {  // a clean exit
        rk.fd.reset();
        return true;
      }
      // Before every rank has joined, a rank that leaves (its init failed)
      // leaves a group that can never form.
      fail_group(strf("rank %d (%s) left the rendezvous%s: %s", r, rk.from.c_str(),
                      formed() ? "" : " before every rank had joined", e.what()),
                 e.status() == HPU_ERROR_INVALID_USAGE ? HPU_ERROR_INVALID_USAGE : HPU_ERROR_REMOTE);
      return false;
    }
    Round &round = rounds_[f.round];
    if (round.present.empty()) {
      round.bytes = f.bytes;
      round.present.assign(static_cast<size_t>(nranks_), false);
      round.data.resize(static_cast<size_t>(nranks_) * f.bytes);
    }
    if (round.bytes != f.bytes || round.present[static_cast<size_t>(r)]) {
      fail_group(strf("rank %d sent %u bytes in bootstrap exchange %llu where others sent %u", r, f.bytes,
                      static_cast<unsigned long long>(f.round), round.bytes),
                 HPU_ERROR_INVALID_USAGE);
      return false;
    }
    if (f.bytes) std::memcpy(round.data.data() + static_cast<size_t>(r) * f.bytes, payload.data(), f.bytes);
    round.present[static_cast<size_t>(r)] = true;
    if (++round.have < nranks_) return true;
    // The ranks of other processes first: once a rank of this process has its
    // result, its init may end and the process exit, this thread with it.
    Frame out{static_cast<uint32_t>(round.data.size()), kResult, f.round};
    for (bool here : {false, true})
      for (auto &[q, other] : ranks_) {
        if (!other.fd || other.here != here) continue;
        try {
          write_all(other.fd.get(), &out, sizeof out, Clock::now() + kRootIo, &stop_, "rendezvous root");
          write_all(other.fd.get(), round.data.data(), round.data.size(), Clock::now() + kRootIo, &stop_,
                    "rendezvous root");
        } catch (const Error &e) {
          fail_group(strf("rank %d (%s) stopped taking bootstrap results: %s", q, other.from.c_str(), e.what()),
                     HPU_ERROR_REMOTE);
          return false;
        }
      }
    rounds_.erase(f.round);
    return true;
  }

  void answer_query(Rank &rk, uint64_t round) {
    auto it = rounds_.find(round);
    std::string missing;
    int arrived = 0;
    for (int q = 0; q < nranks_; ++q) {
      bool here = it != rounds_.end() && it->second.present[static_cast<size_t>(q)];
      if (here) ++arrived;
      else missing += (missing.empty() ? "" : ", ") + std::to_string(q);
    }
    std::string text = strf("%d of %d ranks arrived (missing: %s)", arrived, nranks_, missing.c_str());
    Frame f{static_cast<uint32_t>(text.size()), kStatus, round};
    std::vector<uint8_t> out(sizeof f + text.size());
    std::memcpy(out.data(), &f, sizeof f);
    std::memcpy(out.data() + sizeof f, text.data(), text.size());
    ::send(rk.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  static void send_error(int fd, hpuStatus_t status, const std::string &message) {
    std::string text = strf("%d ", static_cast<int>(status)) + message;
    if (text.size() > kMaxError) text.resize(kMaxError);
    Frame f{static_cast<uint32_t>(text.size()), kError, 0};
    std::vector<uint8_t> out(sizeof f + text.size());
    std::memcpy(out.data(), &f, sizeof f);
    std::memcpy(out.data() + sizeof f, text.data(), text.size());
    ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);  // best effort, never blocks
  }

  // Gives up on the missing ranks. The waiting ranks give up at their own
  // HPU_COMM_TIMEOUT too, whichever comes first, so both messages name them.
  void expire() {
    std::string missing;
    for (int q = 0; q < nranks_; ++q)
      if (!ranks_.count(q)) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
    std::string why = strf("unique id %s expired: %d of %s ranks joined within HPU_COMM_TIMEOUT (%.3g s)%s",
                           name_.c_str(), joined_, nranks_ ? std::to_string(nranks_).c_str() : "its",
                           std::chrono::duration<double>(patience_).count(),
                           missing.empty() ? "" : (" (missing: " + missing + ")").c_str());
    HPU_LOG(info, "comm", "rendezvous root at %s: %s; it stops listening", where_.c_str(), why.c_str());
    for (auto &[q, other] : ranks_)
      if (other.fd) send_error(other.fd.get(), HPU_ERROR_TIMEOUT, why);
  }

  void fail_group(const std::string &why, hpuStatus_t status) {
    HPU_LOG(warn, "comm", "rendezvous root %s: %s; telling the other ranks", name_.c_str(), why.c_str());
    for (auto &[q, other] : ranks_)
      if (other.fd) send_error(other.fd.get(), status, why);
    ranks_.clear();
  }

  std::unique_ptr<Acceptor> acceptor_;
  std::string name_, where_;
  const Clock::duration patience_;
  Deadline expires_;  // while ranks are missing: the time to give up
  std::thread thread_;
  const pid_t pid_ = getpid();
  std::atomic<bool> stop_{false};
  int nranks_ = 0, joined_ = 0;
  std::map<int, Rank> ranks_;
  std::map<uint64_t, Round> rounds_;
};

struct Roots {
  std::mutex mu;
  std::vector<std::unique_ptr<Root>> running;
  std::unique_ptr<Root> finished;  // its thread has ended or is ending; not joined yet
};

Roots &roots() {
  static auto *r = new Roots();  // never destroyed; the shutdown hook stops the threads
  return *r;
}

// A root's thread, as its last act, moves its root from `running` to
// `finished` and joins the root that was there (a thread cannot join itself):
// finished roots cost nothing but the one waiting to be joined.
void retire(Root *root) {
  Roots &all = roots();
  std::unique_ptr<Root> previous;
  {
    std::lock_guard<std::mutex> lock(all.mu);
    auto it = std::find_if(all.running.begin(), all.running.end(), [&](auto &r) { return r.get() == root; });
    if (it == all.running.end()) return;  // the shutdown hook has taken it and joins it
    previous = std::move(all.finished);
    all.finished = std::move(*it);
    all.running.erase(it);
  }
  if (previous && !previous->ours()) (void)previous.release();  // a copy from the parent: nothing to join
  if (previous) previous->stop();
}

// At exit and dlclose: stop every root and join its thread.
void stop_all_roots() {
  std::vector<std::unique_ptr<Root>> stopping;
  {
    std::lock_guard<std::mutex> lock(roots().mu);
    stopping = std::move(roots().running);
    roots().running.clear();
    if (roots().finished) stopping.push_back(std::move(roots().finished));
  }
  for (auto &r : stopping) r->stop();
}

const bool registered = (on_shutdown(35, stop_all_roots), true);

}  // namespace

void socket_root_start(UniqueId &id, const Address *at, const char *what) {
  Address bind = at ? *at : default_interface_address();
  Fd listener = listen_on(bind, what);
  Address bound = Address::local_of(listener.get());
  (void)registered;
  auto root = std::make_unique<Root>(std::move(listener), id, bound.str());
  bound.to_bytes(id.address);
  id.flags |= UniqueId::kHasAddress;
  HPU_LOG(info, "comm", "rendezvous root of group %s listens at %s", id.short_name().c_str(), bound.str().c_str());
  std::lock_guard<std::mutex> lock(roots().mu);  // listed before its thread can retire it
  roots().running.push_back(std::move(root));
  roots().running.back()->start();
}

SocketBootstrap::SocketBootstrap(const UniqueId &id, int rank, int nranks) : Bootstrap(rank, nranks), id_(id) {}

SocketBootstrap::~SocketBootstrap() {
  if (!fd_) return;
  Frame f{0, kGoodbye, 0};
  ::send(fd_.get(), &f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT);  // best effort, never blocks
}

void SocketBootstrap::join(Deadline deadline) {
  Address root = Address::from_bytes(id_.address);
  std::string what = strf("rank %d joining group %s at %s", rank(), id_.short_name().c_str(), root.str().c_str());
  fd_ = connect_retry(root, deadline, &aborted_, what.c_str());
  local_ = Address::local_of(fd_.get());
  local_.set_port(0);
  Hello h{rank(), size(), static_cast<int32_t>(getpid())};
  handshake_client(fd_.get(), id_.secret, Purpose::bootstrap, &h, sizeof h, deadline, &aborted_, what.c_str());
  HPU_LOG(debug, "comm", "rank %d of %d joined group %s at %s from %s", rank(), size(), id_.short_name().c_str(),
          root.str().c_str(), local_.str().c_str());
  char nothing = 0;
  std::vector<char> all(static_cast<size_t>(size()));
  allgather(&nothing, 1, all.data(), deadline);  // everyone present
}

void SocketBootstrap::allgather(const void *mine, size_t bytes, void *all, Deadline deadline) {
  if (aborted_) fail(HPU_ERROR_ABORTED, "bootstrap of rank %d was aborted", rank());
  if (bytes > kMaxRecord) fail(HPU_ERROR_INTERNAL, "bootstrap record of %zu bytes is too large", bytes);
  std::string what = strf("bootstrap of rank %d (group %s)", rank(), id_.short_name().c_str());
  Frame f{static_cast<uint32_t>(bytes), kContribution, round_++};
  std::vector<uint8_t> out(sizeof f + bytes);
  std::memcpy(out.data(), &f, sizeof f);
  if (bytes) std::memcpy(out.data() + sizeof f, mine, bytes);
  write_all(fd_.get(), out.data(), out.size(), deadline, &aborted_, what.c_str());
  Frame in{};
  try {
    read_all(fd_.get(), &in, sizeof in, deadline, &aborted_, what.c_str());
  } catch (const Error &e) {
    if (e.status() != HPU_ERROR_TIMEOUT) throw;
    // Ask the root who is missing, briefly; the round may also complete now.
    std::string missing = "not every rank arrived";
    try {
      Frame q{0, kQuery, f.round};
      auto brief = Clock::now() + std::chrono::milliseconds(1000);
      write_all(fd_.get(), &q, sizeof q, brief, &aborted_, what.c_str());
      read_all(fd_.get(), &in, sizeof in, brief, &aborted_, what.c_str());
      if (in.type == kStatus && in.bytes <= kMaxError) {
        missing.assign(in.bytes, '\0');
        read_all(fd_.get(), missing.data(), in.bytes, brief, &aborted_, what.c_str());
      }
    } catch (const Error &) {
      in.type = 0;
    }
    if (in.type != kResult) fail(HPU_ERROR_TIMEOUT, "%s timed out: %s", what.c_str(), missing.c_str());
  }
  if (in.type == kError && in.bytes <= kMaxError) raise_root_error(in.bytes, deadline, what);
  if (in.type != kResult || in.round != f.round || in.bytes != bytes * static_cast<size_t>(size()))
    fail(HPU_ERROR_REMOTE, "%s: the root sent a frame of type %u, round %llu, %u bytes (expected %zu)", what.c_str(),
         in.type, static_cast<unsigned long long>(in.round), in.bytes, bytes * static_cast<size_t>(size()));
  read_all(fd_.get(), all, in.bytes, deadline, &aborted_, what.c_str());
}

void SocketBootstrap::raise_root_error(uint32_t bytes, Deadline deadline, const std::string &what) {
  std::string text(bytes, '\0');
  read_all(fd_.get(), text.data(), bytes, deadline, &aborted_, what.c_str());
  int status = atoi(text.c_str());
  std::string message = text.substr(std::min(text.size(), text.find(' ') + 1));
  bool passed_on = status == HPU_ERROR_INVALID_USAGE || status == HPU_ERROR_TIMEOUT;
  fail(passed_on ? static_cast<hpuStatus_t>(status) : HPU_ERROR_REMOTE, "%s: %s", what.c_str(), message.c_str());
}

void SocketBootstrap::fail_from_root(Deadline deadline) {
  std::string what = strf("bootstrap of rank %d (group %s)", rank(), id_.short_name().c_str());
  Frame in{};
  read_all(fd_.get(), &in, sizeof in, deadline, &aborted_, what.c_str());  // the root gone: HPU_ERROR_REMOTE
  if (in.type == kError && in.bytes <= kMaxError) raise_root_error(in.bytes, deadline, what);
  fail(HPU_ERROR_REMOTE, "%s: the root sent a frame of type %u between exchanges", what.c_str(), in.type);
}

void SocketBootstrap::abort() {
  aborted_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);  // the root tells the others; never blocks
}

std::unique_ptr<Bootstrap> socket_bootstrap(const UniqueId &id, int rank, int nranks, Deadline deadline) {
  auto b = std::make_unique<SocketBootstrap>(id, rank, nranks);
  b->join(deadline);
  return b;
}

}  // namespace hpu::comm
