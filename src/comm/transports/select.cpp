// The transports, and the choice of one per pair of ranks.
//
// kTransports lists every transport, most preferred first, as NCCL's
// ncclTransports[] does. A group-wide transport (local) serves a group when it
// connects every pair of its ranks; otherwise the group gets the net transport
// (net/transport.hpp), whose kinds are chosen per pair: the first row that
// connects the two ranks carries their messages. HPU_TRANSPORT names one row
// for every pair.
//
// A new transport: a folder under transports/ with its engine (the Link and
// Engine of net/link.hpp) and a header declaring its factory, and one row
// here. The rest (HPU_TRANSPORT's values, the log, the checks of the
// configuration) follows from the table.
#include "comm/transports/select.hpp"

#include <algorithm>
#include <vector>

#include "comm/transports/local/local.hpp"
#include "comm/transports/net/placement.hpp"
#include "comm/transports/net/transport.hpp"
#include "comm/transports/shm/shm.hpp"
#include "comm/transports/tcp/tcp.hpp"
#include "comm/transports/verbs/verbs.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"
#include "device/compute_budget.hpp"

namespace hpu::comm {

namespace {

// What the choice is made from.
struct Group {
  std::vector<Locality> ranks;     // where every rank runs (the first exchange)
  Placement place;                 // the same in detail, for the net kinds (the second)
  std::vector<std::vector<char>> usable;  // per row with a probe: per rank, whether it found the hardware
};

using EngineFactory = std::unique_ptr<Engine> (*)(NetTransport &t, Bootstrap &bootstrap, const Placement &place,
                                                  const std::vector<int> &peers, Deadline deadline);

struct TransportKind {
  const char *name;  // HPU_TRANSPORT's value
  // Whether it connects ranks i and j (nullptr: every pair, given the probe).
  bool (*connects)(const Group &g, int i, int j);
  // Why a forced transport cannot serve ranks i and j: "ranks i and j <apart>".
  const char *apart;
  // Group-wide: the whole group's endpoint (a transport that serves a group
  // when it connects every pair).
  std::shared_ptr<Transport> (*make_group)(Bootstrap &bootstrap, Deadline deadline);
  // Per pair (a kind of the net transport): whether each rank can use it,
  // asked of the hardware before the choice (collective; nullptr: no need).
  // `wanted`: this rank may use it; `forced`: HPU_TRANSPORT names it.
  std::vector<char> (*probe)(Bootstrap &bootstrap, bool wanted, bool forced, Deadline deadline);
  // The links to `peers` (collective: every rank calls it when any pair of the
  // group uses the kind, with or without peers of its own).
  EngineFactory make_engine;
  // Messages up to this size go at once (EAGER); larger ones after a
  // clear-to-send round trip.
  size_t eager_limit;
  // Its engine moves every frame on a thread of its own: an endpoint whose
  // peers all use such kinds chains the steps of a collective there (Chaining),
  // wakes the waiting thread only for the request it waits for, and lets it
  // sleep at once when the host's CPUs are short.
  bool own_thread;
};

bool same_process(const Group &g, int i, int j) {
  return g.ranks[static_cast<size_t>(i)].process == g.ranks[static_cast<size_t>(j)].process;
}
bool same_host(const Group &g, int i, int j) { return g.place.same_host(i, j); }

std::vector<char> verbs_probe(Bootstrap &bootstrap, bool wanted, bool forced, Deadline deadline) {
  return verbs_ports(bootstrap, wanted, forced, config().comm.ib, deadline);
}
std::unique_ptr<Engine> verbs_engine(NetTransport &t, Bootstrap &bootstrap, const Placement &,
                                     const std::vector<int> &peers, Deadline deadline) {
  return make_verbs_engine(t, bootstrap, peers, config().comm.ib, deadline);
}

// Over tcp a message of up to one segment (1 MiB, kSegmentBytes) goes at
// once: a clear-to-send round trip costs more than copying its payload once
// more out of the link's buffer when its receive is not posted yet.
const TransportKind kTransports[] = {
    // name  connects      apart                          group-wide            probe        engine            eager     own thread
    {"local", same_process, "run in different processes", make_local_transport, nullptr, nullptr, 0, false},
    {"shm", same_host, "are on different hosts", nullptr, nullptr, make_shm_engine, 32 << 10, false},
    {"verbs", nullptr, "cannot both use RDMA", nullptr, verbs_probe, verbs_engine, 32 << 10, false},
    {"tcp", nullptr, nullptr, nullptr, nullptr, make_tcp_engine, 1 << 20, true},
};
constexpr size_t kKinds = sizeof kTransports / sizeof kTransports[0];

const TransportKind *find_kind(const std::string &name) {
  for (const TransportKind &k : kTransports)
    if (name == k.name) return &k;
  return nullptr;
}

bool connects(const Group &g, size_t row, int i, int j) {
  const TransportKind &k = kTransports[row];
  if (k.probe && !(g.usable[row][static_cast<size_t>(i)] && g.usable[row][static_cast<size_t>(j)])) return false;
  return !k.connects || k.connects(g, i, j);
}

std::string rank_list(const std::vector<int> &ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

bool transport_known(const std::string &name) { return find_kind(name) != nullptr; }

std::string transport_names(const char *last) {
  std::vector<std::string> names;
  for (const TransportKind &k : kTransports) names.push_back(k.name);
  std::sort(names.begin(), names.end());
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? last : ", ") + names[i];
  return s;
}

std::shared_ptr<Transport> make_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                          Deadline deadline) {
  Group g;
  g.ranks = bootstrap.allgather(self, deadline);
  // Every rank sees the same localities, so every rank takes the same branch.
  for (const TransportKind &k : kTransports) {
    if (!k.make_group || (!forced.empty() && forced != k.name)) continue;
    int apart_i = -1, apart_j = -1;
    for (int i = 0; i < bootstrap.size() && apart_i < 0; ++i)
      for (int j = 0; j < bootstrap.size() && apart_i < 0; ++j)
        if (!k.connects(g, i, j)) apart_i = i, apart_j = j;
    if (apart_i < 0) {
      HPU_LOG(debug, "comm", "rank %d of %d: transport %s", bootstrap.rank(), bootstrap.size(), k.name);
      return k.make_group(bootstrap, deadline);
    }
    if (forced == k.name)
      fail(HPU_ERROR_NOT_AVAILABLE, "HPU_TRANSPORT is \"%s\", but ranks %d and %d %s", k.name, apart_i, apart_j,
           k.apart);
  }
  return make_net_transport(bootstrap, self, forced, deadline);
}

std::unique_ptr<Transport> make_net_transport(Bootstrap &bootstrap, const Locality &self, const std::string &forced,
                                              Deadline deadline) {
  const TransportKind *force = forced.empty() ? nullptr : find_kind(forced);
  if (!forced.empty() && !force)
    fail(HPU_ERROR_CONFIG, "HPU_TRANSPORT is \"%s\"; expected %s", forced.c_str(), transport_names(" or ").c_str());
  if (force && force->make_group)
    fail(HPU_ERROR_NOT_AVAILABLE, "HPU_TRANSPORT is \"%s\", but the group spans processes", force->name);
  Group g;
  g.place = Placement::gather(bootstrap, self, deadline);
  const int rank = bootstrap.rank(), size = bootstrap.size();
  // The probes, in table order (each collective): a rank wants a kind when a
  // peer is left that no kind before it connects.
  g.usable.resize(kKinds);
  for (size_t row = 0; row < kKinds; ++row) {
    const TransportKind &k = kTransports[row];
    if (!k.probe) continue;
    bool wanted = false;
    for (int j = 0; j < size && !wanted; ++j) {
      bool reached = j == rank;
      for (size_t before = 0; before < row && !reached; ++before)
        reached = !kTransports[before].make_group && connects(g, before, rank, j);
      wanted = !reached;
    }
    g.usable[row] = k.probe(bootstrap, wanted || force == &k, force == &k, deadline);
  }
  // Each pair's kind: the forced one, else the first that connects it.
  std::vector<int> peers[kKinds];
  bool used[kKinds] = {};
  for (int i = 0; i < size; ++i)
    for (int j = 0; j < size; ++j) {
      if (i == j) continue;
      size_t pick = kKinds;
      if (force) {
        pick = static_cast<size_t>(force - kTransports);
        if (!connects(g, pick, i, j))
          fail(HPU_ERROR_NOT_AVAILABLE, "HPU_TRANSPORT is \"%s\", but ranks %d and %d %s", force->name, i, j,
               force->apart);
      } else {
        for (size_t row = 0; row < kKinds && pick == kKinds; ++row)
          if (!kTransports[row].make_group && connects(g, row, i, j)) pick = row;
      }
      if (pick == kKinds) fail(HPU_ERROR_INTERNAL, "no transport connects ranks %d and %d", i, j);
      used[pick] = true;
      if (i == rank) peers[pick].push_back(j);
    }
  // How this rank waits. When every peer's frames move on an engine thread,
  // the steps of a collective go on there (chains), and a sleeping waiter is
  // woken for the request it waits for alone. Ranks that each have a CPU spin
  // briefly before they yield (Transport::set_polling); with only
  // engine-thread peers that holds while the host's ranks are at most half its
  // CPUs. Otherwise a waiter yields the CPU between looks from the start (for
  // 50 us, then sleeps): the threads that move the data get the CPU when they
  // need it, a result that lands within that time needs no wake-up, and the
  // CPU does not go idle between the steps of a collective (waking an idle
  // CPU costs tens of microseconds).
  bool any_peer = false, own_thread_only = true;
  NetTransport::Tuning tuning;
  for (size_t row = 0; row < kKinds; ++row) {
    if (!peers[row].empty()) {
      any_peer = true;
      own_thread_only = own_thread_only && kTransports[row].own_thread;
    }
  }
  own_thread_only = own_thread_only && any_peer;
  const int on_host = static_cast<int>(g.place.on_host(rank).size());
  if (on_host * (own_thread_only ? 2 : 1) <= available_cpus()) {
    tuning.busy_poll = std::chrono::microseconds(2);
    tuning.poll = std::chrono::microseconds(50);
  }
  tuning.chains = tuning.wake_on_awaited = own_thread_only;  // before the engines' threads start
  std::string detail;
  tuning.name.clear();
  for (size_t row = 0; row < kKinds; ++row) {
    const TransportKind &k = kTransports[row];
    if (k.make_group) continue;
    if (!peers[row].empty()) tuning.name += (tuning.name.empty() ? "" : "+") + std::string(k.name);
    detail += strf("%s%s: ranks %s", detail.empty() ? "" : "; ", k.name,
                   peers[row].empty() ? "none" : rank_list(peers[row]).c_str());
  }
  if (tuning.name.empty()) tuning.name = "self";
  auto t = std::make_unique<NetTransport>(rank, size);
  t->tune(tuning);
  for (size_t row = 0; row < kKinds; ++row)
    if (used[row])
      t->add_engine(kTransports[row].make_engine(*t, bootstrap, g.place, peers[row], deadline), peers[row],
                    kTransports[row].eager_limit);
  HPU_LOG(info, "comm", "rank %d of %d: transport %s%s (%s)", rank, size, tuning.name.c_str(),
          forced.empty() ? " by locality" : " forced by HPU_TRANSPORT", detail.c_str());
  return t;
}

}  // namespace hpu::comm
