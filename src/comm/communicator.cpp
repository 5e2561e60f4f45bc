#include "comm/communicator.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "comm/bootstrap/connect.hpp"
#include "comm/collectives.hpp"
#include "comm/reduce.hpp"
#include "comm/transports/select.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/profiler.hpp"
#include "core/runtime.hpp"

namespace hpu::comm {

namespace {

constexpr uint64_t kP2PTag = uint64_t(1) << 63;  // collective tags are seq << 24 | step, below it

// At exit and dlclose, before the devices stop their streams (shutdown hooks
// run from the highest priority down; devices are 10): abort every live
// communicator so that no stream worker stays blocked on a peer.
void abort_all() {
  for (auto &c : comm_registry().all()) c->abort("the process is exiting");
}

void check_config(const Config &c) {
  const std::string &a = c.comm.algo;
  if (!a.empty() && !algo_known(a))
    fail(HPU_ERROR_CONFIG, "HPU_ALGO (comm.algo) is \"%s\"; known: %s", a.c_str(), algo_names().c_str());
  const std::string &t = c.comm.transport;
  if (!t.empty() && !transport_known(t))
    fail(HPU_ERROR_CONFIG, "HPU_TRANSPORT (comm.transport) is \"%s\"; known: %s", t.c_str(),
         transport_names(", ").c_str());
}

const bool registered = (on_init(30, check_config), on_shutdown(30, abort_all), true);

// A small number per group of this process (the ranks of one group share it),
// naming the group's track in profiles. The last communicator of a group in
// this process gives it back and the next group takes the lowest free one, so
// the profiler's tables grow with the groups alive at once, not with every
// group ever made.
struct GroupNumbers {
  std::mutex mu;
  std::map<std::string, std::pair<int, int>> live;  // secret -> number, communicators
};

GroupNumbers &group_numbers() {
  static auto *g = new GroupNumbers();  // never destroyed: communicators may outlive statics
  return *g;
}

int take_group_number(const UniqueId &id) {
  GroupNumbers &g = group_numbers();
  std::lock_guard<std::mutex> lock(g.mu);
  std::string key(reinterpret_cast<const char *>(id.secret), sizeof id.secret);
  auto it = g.live.find(key);
  if (it == g.live.end()) {
    std::vector<bool> used(g.live.size(), false);
    for (auto &kv : g.live)
      if (static_cast<size_t>(kv.second.first) < used.size()) used[static_cast<size_t>(kv.second.first)] = true;
    int n = static_cast<int>(std::find(used.begin(), used.end(), false) - used.begin());
    it = g.live.emplace(key, std::make_pair(n, 0)).first;
  }
  ++it->second.second;
  return it->second.first;
}

void give_back_group_number(int number) {
  GroupNumbers &g = group_numbers();
  std::lock_guard<std::mutex> lock(g.mu);
  for (auto it = g.live.begin(); it != g.live.end(); ++it)
    if (it->second.first == number) {
      if (--it->second.second == 0) g.live.erase(it);
      return;
    }
}

}  // namespace

Registry<Communicator> &comm_registry() {
  static auto *r = new Registry<Communicator>(HandleKind::comm, "comm");
  return *r;
}

std::shared_ptr<Communicator> comm_from_handle(hpuComm_t comm) { return comm_registry().get(comm); }

Communicator::Communicator(Device &device, int nranks, const UniqueId &id, int rank)
    : device_(device),
      rank_(rank),
      size_(nranks),
      p2p_sent_(static_cast<size_t>(nranks), 0),
      p2p_received_(static_cast<size_t>(nranks), 0) {
  (void)registered;
  LogRankScope log_rank(rank);
  Deadline d = deadline_in(timeout());
  bootstrap_ = bootstrap_connect(id, rank, nranks, d);
  transport_ = make_transport(*bootstrap_, this_process(device.ordinal()), config().comm.transport, d);
  HPU_LOG(info, "comm", "rank %d of %d on device %d joined group %s (transport %s)", rank, nranks, device.ordinal(),
          id.short_name().c_str(), transport_->name());
  group_ = take_group_number(id);
  prof::name_comm(group_, nranks);
  prof::name_track({prof::TrackKind::comm, group_, rank}, strf("rank %d of %d", rank, nranks));
  device_.comm_opened();
}

std::vector<Joined> join_all(const std::vector<Device *> &devices, int nranks, const UniqueId &id, int first_rank) {
  std::vector<Joined> joined(devices.size());
  auto join = [&](size_t i) {
    try {
      joined[i].comm = std::make_shared<Communicator>(*devices[i], nranks, id, first_rank + static_cast<int>(i));
    } catch (const Error &e) {
      joined[i].error = e;
    } catch (const std::bad_alloc &) {
      joined[i].error = Error(HPU_ERROR_OUT_OF_MEMORY, "host memory exhausted");
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < devices.size(); ++i) threads.emplace_back(join, i);
  if (!devices.empty()) join(0);
  for (auto &t : threads) t.join();
  return joined;
}

Communicator::~Communicator() {
  give_back_group_number(group_);
  device_.comm_closed();
}

double Communicator::timeout() const {
  double t = timeout_.load(std::memory_order_relaxed);
  return t > 0 ? t : config().comm.timeout_seconds;
}

void Communicator::set_timeout(double seconds) { timeout_.store(seconds, std::memory_order_relaxed); }

void Communicator::add_pending(int delta) {
  std::lock_guard<std::mutex> lock(idle_mu_);
  pending_ += delta;
  if (pending_ == 0) idle_cv_.notify_all();
}

Communicator::Queued Communicator::queue_one() {
  throw_if_failed();
  return Queued(shared_from_this());
}

void Communicator::enqueue(Stream &stream, OpHeader header, const void *send, void *recv) {
  stream.enqueue(
      [self = queue_one(), header, send, recv]() mutable {
        Communicator &c = *self;
        LogRankScope log_rank(c.rank_);
        std::lock_guard<std::mutex> lock(c.run_mu_);
        header.seq = ++c.seq_;
        try {
          c.transport_->throw_if_failed();
          c.transport_->begin(header);
          Ctx ctx(*c.transport_, header, c.timeout(), c.scratch_);
          uint64_t start = prof::on() ? prof::now_ns() : 0;
          run(ctx, send, recv);
          if (start)
            prof::record({prof::TrackKind::comm, c.group_, c.rank_}, coll_name(static_cast<CollKind>(header.coll)),
                         start, prof::now_ns(), header.count * dtype_bytes(static_cast<hpuDataType_t>(header.dtype)));
        } catch (const Error &e) {
          throw Error(e.status(), strf("%s on rank %d: %s", describe(header).c_str(), c.rank_, e.what()));
        }
      },
      OpKind::wait);
}

void Communicator::enqueue_p2p(Stream &stream, std::vector<P2POp> ops) {
  stream.enqueue([self = queue_one(), ops = std::move(ops)] { self->run_p2p(ops); }, OpKind::wait);
}

void Communicator::run_p2p(const std::vector<P2POp> &ops) {
  LogRankScope log_rank(rank_);
  std::lock_guard<std::mutex> lock(run_mu_);
  throw_if_failed();
  std::vector<OpHeader> headers(ops.size());
  std::vector<RequestPtr> reqs;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp &op = ops[i];
    auto peer = static_cast<size_t>(op.peer);
    OpHeader &h = headers[i];
    h.seq = op.is_send ? ++p2p_sent_[peer] : ++p2p_received_[peer];
    h.coll = static_cast<uint32_t>(op.is_send ? CollKind::send : CollKind::recv);
    h.dtype = static_cast<uint32_t>(op.dtype);
    h.count = op.count;
    h.root = op.is_send ? rank_ : op.peer;
    size_t bytes = op.count * dtype_bytes(op.dtype);
    if (op.is_send) {
      SendDesc d;
      d.peer = op.peer;
      d.tag = kP2PTag | h.seq;
      d.data = op.buf;
      d.bytes = bytes;
      d.header = &h;
      reqs.push_back(transport_->isend(d));
    } else {
      RecvDesc d;
      d.peer = op.peer;
      d.tag = kP2PTag | h.seq;
      d.data = op.buf;
      d.bytes = bytes;
      d.expect = &h;
      reqs.push_back(transport_->irecv(d));
    }
  }
  try {
    transport_->wait(reqs, deadline_in(timeout()));
  } catch (const Error &e) {
    throw Error(e.status(), strf("%zu send/receive%s on rank %d: %s", ops.size(), ops.size() == 1 ? "" : "s", rank_,
                                 e.what()));
  }
}

void Communicator::wait_idle() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace hpu::comm
