// The verbs transport over the FAKE libibverbs of tests/support/fake_ibverbs
// (there is no RDMA hardware here), loaded through HPU_IB_LIBRARY's dlopen,
// ranks as threads of this process: zero-copy transfers into
// registered device memory (the registration cache, stale segments), striping
// over ports and queue pairs, RoCE GID selection and a GID mismatch between
// ranks, many operations in flight, inline writes, a device fatal error as an
// asynchronous event; and the HPU_IB_* settings through the config layer.
// Device memory is stood in for by an arena of "segments" this test hands to
// the registration cache's lookup. Measures nothing.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "comm/socket/acceptor.hpp"
#include "comm/transports/net/transport.hpp"
#include "comm/transports/verbs/api.hpp"
#include "comm/transports/verbs/verbs.hpp"
#include "comm/transports/verbs/reg_cache.hpp"
#include "core/config.hpp"
#include "core/error.hpp"

using namespace hpu::comm;
using hpu::Error;
using hpu::IbConfig;

namespace {

Deadline in(double s) { return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// "Device memory": 8 segments of 8 MiB; a segment's generation changes when the
// test says it was unmapped and mapped again.
constexpr size_t kSegment = 8 << 20;
constexpr int kSegments = 8;
uint8_t *g_arena = nullptr;
std::atomic<uint64_t> g_generation[kSegments];

bool arena_lookup(const void *ptr, size_t bytes, MemorySegment *out) {
  auto p = reinterpret_cast<uintptr_t>(ptr), base = reinterpret_cast<uintptr_t>(g_arena);
  if (!g_arena || p < base || p - base >= kSegment * kSegments) return false;
  size_t s = (p - base) / kSegment;
  if (bytes > kSegment * (s + 1) - (p - base)) return false;
  *out = {base + s * kSegment, kSegment, g_generation[s].load()};
  return true;
}

struct Arena {
  Arena() {
    g_arena = static_cast<uint8_t *>(mmap(nullptr, kSegment * kSegments, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    for (auto &g : g_generation) g = 1;
    set_verbs_segment_lookup(arena_lookup);
  }
  ~Arena() {
    set_verbs_segment_lookup(nullptr);
    munmap(g_arena, kSegment * kSegments);
    g_arena = nullptr;
  }
  // Segment s of the arena (rank r uses segments 2r and 2r + 1).
  uint8_t *segment(int s) { return g_arena + kSegment * static_cast<size_t>(s); }
};

// One rank: bootstrap, verbs probe, a transport whose every peer is over verbs.
struct Rank {
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<NetTransport> t;
  const Engine *engine = nullptr;
  Rank(const UniqueId &id, int rank, int n, const IbConfig &cfg) {
    Deadline d = in(20);
    bootstrap = socket_bootstrap(id, rank, n, d);
    verbs_ports(*bootstrap, true, true, cfg, d);
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != rank) peers.push_back(p);
    t = std::make_unique<NetTransport>(rank, n);
    auto e = make_verbs_engine(*t, *bootstrap, peers, cfg, d);
    engine = e.get();
    t->add_engine(std::move(e), peers, 32 << 10);
    t->set_name("verbs");
  }
  VerbsStats stats() const { return verbs_stats(*engine); }
};

// Runs body(rank) on n threads; per-rank configuration from cfg_of(rank).
// Returns each rank's result ("" when fine, else what went wrong).
std::vector<std::string> run_ranks(int n, const std::function<IbConfig(int)> &cfg_of,
                                   const std::function<std::string(Rank &)> &body) {
  UniqueId id = UniqueId::make();
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  socket_root_start(id, &lo);
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Rank rank(id, r, n, cfg_of(r));
        out[static_cast<size_t>(r)] = body(rank);
      } catch (const std::exception &e) {
        out[static_cast<size_t>(r)] = std::string("exception: ") + e.what();
      }
    });
  for (auto &t : threads) t.join();
  return out;
}

// Settings that load the fake libibverbs.
IbConfig fake(const char *hca = "") {
  IbConfig c;
  c.library = HPU_FAKE_IBVERBS;
  c.hca = hca;
  return c;
}

const VerbsApi &fake_api() {
  std::string why;
  const VerbsApi *api = verbs_load(HPU_FAKE_IBVERBS, &why);
  if (!api) throw std::runtime_error(why);
  return *api;
}

uint8_t pattern(int rank, uint64_t tag, size_t i) { return static_cast<uint8_t>(rank * 31 + tag * 7 + i * 13 + (i >> 9)); }

// Every rank sends `bytes` from `send` to every other rank with tag `tag`, and
// receives each peer's into recv[peer]; checks what arrived.
std::string exchange(Rank &rank, uint8_t *send, const std::vector<uint8_t *> &recv, size_t bytes, uint64_t tag) {
  Transport &t = *rank.t;
  int me = t.rank(), n = t.size();
  for (size_t i = 0; i < bytes; ++i) send[i] = pattern(me, tag, i);
  std::vector<RequestPtr> reqs;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    RecvDesc r;
    r.peer = p;
    r.tag = tag;
    r.data = recv[static_cast<size_t>(p)];
    r.bytes = bytes;
    reqs.push_back(t.irecv(r));
    SendDesc s;
    s.peer = p;
    s.tag = tag;
    s.data = send;
    s.bytes = bytes;
    reqs.push_back(t.isend(s));
  }
  t.wait(reqs, in(20));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; p != me && i < bytes; ++i)
      if (recv[static_cast<size_t>(p)][i] != pattern(p, tag, i))
        return hpu::strf("rank %d: byte %zu from rank %d is %u, expected %u", me, i, p, recv[static_cast<size_t>(p)][i],
                         pattern(p, tag, i));
  return "";
}

}  // namespace

// Large messages between device segments land by RDMA write straight in the
// receiver's buffer: every byte direct, the segments registered once each.
TEST(VerbsTransport, ZeroCopyIntoRegisteredDeviceMemory) {
  Arena arena;
  const size_t bytes = 3 << 20;
  auto results = run_ranks(2, [](int) { return fake(); }, [&](Rank &rank) -> std::string {
    int me = rank.t->rank(), peer = 1 - me;
    uint8_t *send = arena.segment(2 * me), *recv = arena.segment(2 * me + 1);
    std::vector<uint8_t *> into(2);
    into[static_cast<size_t>(peer)] = recv;
    for (uint64_t tag = 1; tag <= 4; ++tag)
      if (auto err = exchange(rank, send, into, bytes - tag * 4096, tag); !err.empty()) return err;
    VerbsStats s = rank.stats();
    if (s.direct_bytes < 4 * (bytes - 4 * 4096)) return hpu::strf("only %llu bytes direct", (unsigned long long)s.direct_bytes);
    if (s.direct_copied_bytes != 0) return "a registered send buffer was copied";
    if (s.slot_bytes >= 64 << 10) return hpu::strf("%llu bytes through the slots", (unsigned long long)s.slot_bytes);
    if (s.registrations != 2) return hpu::strf("%llu registrations, expected 2 (one per segment)", (unsigned long long)s.registrations);
    if (s.cache_hits < 6) return hpu::strf("%llu cache hits", (unsigned long long)s.cache_hits);
    return "";
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], "") << "rank " << r;
}

// A segment unmapped and mapped again (a new generation) is registered anew;
// a host send buffer (not device memory) is copied once on the way; a
// receive that reduces as it arrives goes through the slots.
TEST(VerbsTransport, StaleSegmentsHostBuffersAndReducingReceives) {
  Arena arena;
  const size_t bytes = 1 << 20;
  std::atomic<int> phase{0};
  auto results = run_ranks(2, [](int) { return fake(); }, [&](Rank &rank) -> std::string {
    int me = rank.t->rank(), peer = 1 - me;
    std::vector<uint8_t *> into(2);
    into[static_cast<size_t>(peer)] = arena.segment(2 * me + 1);
    if (auto err = exchange(rank, arena.segment(2 * me), into, bytes, 1); !err.empty()) return err;
    // Both ranks' segments "remapped" between two transfers.
    if (++phase == 2) {
      for (auto &g : g_generation) g++;
      phase = 3;
    }
    while (phase < 3) std::this_thread::yield();
    if (auto err = exchange(rank, arena.segment(2 * me), into, bytes, 2); !err.empty()) return err;
    VerbsStats s = rank.stats();
    if (s.stale != 2 || s.registrations != 4)
      return hpu::strf("stale %llu, registrations %llu; expected 2 and 4", (unsigned long long)s.stale,
                       (unsigned long long)s.registrations);
    std::vector<uint8_t> host(bytes);
    if (auto err = exchange(rank, host.data(), into, bytes, 3); !err.empty()) return err;
    if (rank.stats().direct_copied_bytes != bytes) return "the host send buffer was not copied through the send buffers";
    // A reducing receive: out = in + local, float by float.
    std::vector<float> mine(bytes / 4, 1.5f + me), out(bytes / 4);
    Combine add;
    add.fn = [](void *o, const void *a, const void *b, size_t n, const void *) {
      for (size_t i = 0; i < n; ++i)
        static_cast<float *>(o)[i] = static_cast<const float *>(a)[i] + static_cast<const float *>(b)[i];
    };
    add.local = mine.data();
    add.elem_size = 4;
    uint64_t slot_before = rank.stats().slot_bytes;
    RecvDesc r;
    r.peer = peer;
    r.tag = 4;
    r.data = out.data();
    r.bytes = bytes;
    r.combine = &add;
    SendDesc sd;
    sd.peer = peer;
    sd.tag = 4;
    sd.data = mine.data();
    sd.bytes = bytes;
    auto a = rank.t->irecv(r), b = rank.t->isend(sd);
    rank.t->wait({a.get(), b.get()}, in(20));
    for (float v : out)
      if (v != 4.0f) return hpu::strf("reduced %g, expected 4", v);
    if (rank.stats().slot_bytes - slot_before < bytes) return "the reducing receive did not go through the slots";
    return "";
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], "") << "rank " << r;
}

// Two ports x HPU_IB_QPS_PER_PORT=2: four queue pairs per peer, data striped
// over them; 48 operations of mixed sizes in flight at once, every one right.
TEST(VerbsTransport, StripedOverPortsAndQueuePairsWithManyOperationsInFlight) {
  Arena arena;
  auto results = run_ranks(3, [](int) {
    IbConfig c = fake();
    c.qps_per_port = 2;
    return c;
  }, [&](Rank &rank) -> std::string {
    int me = rank.t->rank(), n = 3;
    if (rank.stats().lanes != 4 || rank.stats().ports != 2)
      return hpu::strf("%d ports, %d lanes; expected 2 and 4", rank.stats().ports, rank.stats().lanes);
    const size_t sizes[] = {8, 100, 5000, 40000, 300000, 2500000};
    struct Op {
      int peer;
      uint64_t tag;
      size_t bytes;
      uint8_t *recv;
    };
    std::vector<Op> ops;
    std::vector<RequestPtr> reqs;
    uint8_t *send = arena.segment(2 * me), *recv = arena.segment(2 * me + 1);
    for (size_t i = 0; i < 2500000; ++i) send[i] = pattern(me, 0, i);
    size_t at = 0;
    for (int round = 0; round < 4; ++round)
      for (size_t bytes : sizes)
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          uint64_t tag = static_cast<uint64_t>(round * 100) + bytes % 97;
          RecvDesc r;
          r.peer = p;
          r.tag = tag;
          r.bytes = bytes;
          r.data = recv + at;
          at += (bytes + 63) & ~size_t(63);
          if (at > kSegment) r.data = new uint8_t[bytes];  // beyond the segment: host memory
          ops.push_back({p, tag, bytes, static_cast<uint8_t *>(r.data)});
          reqs.push_back(rank.t->irecv(r));
          SendDesc s;
          s.peer = p;
          s.tag = tag;
          s.data = send;
          s.bytes = bytes;
          reqs.push_back(rank.t->isend(s));
        }
    rank.t->wait(reqs, in(30));
    std::string err;
    for (auto &o : ops) {
      for (size_t i = 0; i < o.bytes && err.empty(); ++i)
        if (o.recv[i] != pattern(o.peer, 0, i)) err = hpu::strf("tag %llu from %d: byte %zu wrong", (unsigned long long)o.tag, o.peer, i);
      if (o.recv < recv || o.recv >= recv + kSegment) delete[] o.recv;
    }
    if (err.empty() && rank.stats().inline_sends == 0) err = "no small write went inline";
    return err;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], "") << "rank " << r;
}

// RoCE: the Ethernet port's GID is chosen by family and version, and ranks
// work over it; ranks that chose GIDs of different RoCE versions fail to
// connect with a message naming both choices (instead of timing out).
TEST(VerbsTransport, RoceGidSelectionAndMismatch) {
  std::string why;
  std::vector<VerbsPort> ports;
  IbConfig c = fake("hpu_test1");
  ASSERT_TRUE(verbs_find_ports(fake_api(), c, &ports, &why)) << why;
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_TRUE(ports[0].ethernet);
  EXPECT_EQ(ports[0].gid_index, 3);  // RoCE v2, IPv4-mapped
  EXPECT_EQ(ports[0].gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_NE(describe_gid(ports[0]).find("RoCE v2 IPv4 ::ffff:10."), std::string::npos) << describe_gid(ports[0]);
  c.roce_version = 1;
  ASSERT_TRUE(verbs_find_ports(fake_api(), c, &ports, &why));
  EXPECT_EQ(ports[0].gid_index, 2);
  c.roce_version = 2;
  c.addr_family = 6;
  ASSERT_TRUE(verbs_find_ports(fake_api(), c, &ports, &why));
  EXPECT_EQ(ports[0].gid_index, 5);  // IPv6, not the link-local one
  c.gid_index = 0;
  ASSERT_TRUE(verbs_find_ports(fake_api(), c, &ports, &why));
  EXPECT_EQ(ports[0].gid_index, 0);
  EXPECT_EQ(ports[0].gid_type, IBV_GID_TYPE_ROCE_V1);
  c.gid_index = 6;
  try {
    verbs_find_ports(fake_api(), c, &ports, &why);
    ADD_FAILURE() << "HPU_IB_GID_INDEX=6 accepted on a table of 6";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("HPU_IB_GID_INDEX=6"), std::string::npos) << e.what();
  }

  std::vector<uint8_t> bufs(4 << 20);
  auto ok = run_ranks(2, [](int) { return fake("hpu_test1"); }, [&](Rank &rank) {
    int me = rank.t->rank();
    std::vector<uint8_t *> into(2);
    into[static_cast<size_t>(1 - me)] = bufs.data() + (2u << 20) * static_cast<size_t>(me);
    std::vector<uint8_t> send(1 << 20);
    return exchange(rank, send.data(), into, send.size(), 9);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ok[static_cast<size_t>(r)], "") << "rank " << r;

  auto mismatch = run_ranks(2, [](int r) {
    IbConfig m = fake("hpu_test1");
    m.roce_version = r == 0 ? 1 : 2;
    return m;
  }, [](Rank &) { return std::string("connected"); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(mismatch[static_cast<size_t>(r)].find("cannot reach each other"), std::string::npos) << mismatch[static_cast<size_t>(r)];
    EXPECT_NE(mismatch[static_cast<size_t>(r)].find("RoCE v1"), std::string::npos) << mismatch[static_cast<size_t>(r)];
    EXPECT_NE(mismatch[static_cast<size_t>(r)].find("RoCE v2"), std::string::npos) << mismatch[static_cast<size_t>(r)];
  }
}

// A device fatal error arrives as an asynchronous event: every rank on the
// device fails with HPU_ERROR_NOT_AVAILABLE naming it, promptly, stickily.
TEST(VerbsTransport, DeviceFatalEventFailsTheCommunicator) {
  setenv("HPU_FAKE_IBV_FAULT", "device_fatal:40", 1);  // read by the fake when the ranks list its devices
  auto results = run_ranks(2, [](int) { return fake(); }, [](Rank &rank) -> std::string {
    std::vector<uint8_t> send(50000);
    std::vector<std::vector<uint8_t>> recv(2, std::vector<uint8_t>(50000));
    std::vector<uint8_t *> into = {recv[0].data(), recv[1].data()};
    auto t0 = Clock::now();
    try {
      for (uint64_t tag = 1; tag < 1000; ++tag)
        if (auto err = exchange(rank, send.data(), into, send.size(), tag); !err.empty()) return err;
      return "no failure";
    } catch (const Error &e) {
      if (Clock::now() - t0 > std::chrono::seconds(5)) return "noticed late";
      if (e.status() != HPU_ERROR_NOT_AVAILABLE) return std::string("status ") + hpuGetErrorName(e.status()) + ": " + e.what();
      if (std::string(e.what()).find("device hpu_test0 failed") == std::string::npos &&
          std::string(e.what()).find("is down") == std::string::npos)
        return std::string("message: ") + e.what();
    }
    std::string m;
    return rank.t->error(&m) == HPU_ERROR_NOT_AVAILABLE ? "" : "not sticky";
  });
  unsetenv("HPU_FAKE_IBV_FAULT");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], "") << "rank " << r;
}

// The HPU_IB_* variables and the "comm.ib" object of HPU_CONFIG, through the
// config layer: environment beats file beats defaults; bad values name themselves.
TEST(VerbsTransport, SettingsThroughTheConfigLayer) {
  const char *vars[] = {"HPU_IB_HCA",         "HPU_IB_LIBRARY",  "HPU_IB_GID_INDEX", "HPU_IB_ROCE_VERSION",
                        "HPU_IB_ADDR_FAMILY", "HPU_IB_QPS_PER_PORT", "HPU_IB_TIMEOUT", "HPU_IB_RETRY_CNT",
                        "HPU_IB_ADAPTER",     "HPU_IB_TEST_FAULT",   "HPU_CONFIG"};
  for (const char *v : vars) unsetenv(v);
  IbConfig d = hpu::load_config().comm.ib;
  EXPECT_EQ(d.library, "libibverbs.so.1");
  EXPECT_EQ(d.gid_index, -1);
  EXPECT_EQ(d.roce_version, 2);
  EXPECT_EQ(d.addr_family, 4);
  EXPECT_EQ(d.qps_per_port, 1);
  EXPECT_EQ(d.timeout, 14);
  EXPECT_EQ(d.retry_cnt, 7);
  char path[] = "/tmp/hpu-verbs-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << R"({"comm": {"ib": {"hca": "mlx5_0:1", "library": "/opt/rdma/lib/libibverbs.so.1",
    "gid_index": 3, "roce_version": 1, "addr_family": "AF_INET6", "qps_per_port": 4, "timeout": 20, "retry_cnt": 5}}})";
  setenv("HPU_CONFIG", path, 1);
  IbConfig f = hpu::load_config().comm.ib;
  EXPECT_EQ(f.hca, "mlx5_0:1");
  EXPECT_EQ(f.library, "/opt/rdma/lib/libibverbs.so.1");
  EXPECT_EQ(f.gid_index, 3);
  EXPECT_EQ(f.roce_version, 1);
  EXPECT_EQ(f.addr_family, 6);
  EXPECT_EQ(f.qps_per_port, 4);
  EXPECT_EQ(f.timeout, 20);
  EXPECT_EQ(f.retry_cnt, 5);
  setenv("HPU_IB_QPS_PER_PORT", "2", 1);
  setenv("HPU_IB_HCA", "^mlx5_1", 1);
  setenv("HPU_IB_LIBRARY", "libibverbs.so.1", 1);
  IbConfig e = hpu::load_config().comm.ib;
  EXPECT_EQ(e.qps_per_port, 2);
  EXPECT_EQ(e.hca, "^mlx5_1");
  EXPECT_EQ(e.library, "libibverbs.so.1");
  EXPECT_EQ(e.timeout, 20);
  unsetenv("HPU_IB_QPS_PER_PORT");
  unsetenv("HPU_IB_HCA");
  unsetenv("HPU_IB_LIBRARY");
  struct Bad {
    const char *var, *value, *words;
  };
  // HPU_IB_ADAPTER and HPU_IB_TEST_FAULT selected and configured a test
  // adapter inside libhpu; they are gone, and setting one says so.
  const Bad bad[] = {{"HPU_IB_ADAPTER", "test", "HPU_IB_ADAPTER=\"test\" is invalid: the setting no longer exists"},
                     {"HPU_IB_ADAPTER", "libibverbs", "HPU_IB_ADAPTER=\"libibverbs\" is invalid: the setting no"},
                     {"HPU_IB_TEST_FAULT", "port_down", "HPU_IB_TEST_FAULT=\"port_down\" is invalid: the setting no"},
                     {"HPU_IB_GID_INDEX", "x", "HPU_IB_GID_INDEX=\"x\""},
                     {"HPU_IB_ROCE_VERSION", "3", "HPU_IB_ROCE_VERSION=\"3\""},
                     {"HPU_IB_ADDR_FAMILY", "AF_UNIX", "HPU_IB_ADDR_FAMILY=\"AF_UNIX\""},
                     {"HPU_IB_QPS_PER_PORT", "0", "HPU_IB_QPS_PER_PORT=\"0\""},
                     {"HPU_IB_TIMEOUT", "32", "HPU_IB_TIMEOUT=\"32\""},
                     {"HPU_IB_RETRY_CNT", "8", "HPU_IB_RETRY_CNT=\"8\""}};
  for (const Bad &b : bad) {
    setenv(b.var, b.value, 1);
    try {
      hpu::load_config();
      ADD_FAILURE() << b.var << "=" << b.value << " accepted";
    } catch (const Error &x) {
      EXPECT_EQ(x.status(), HPU_ERROR_CONFIG);
      EXPECT_NE(std::string(x.what()).find(b.words), std::string::npos) << x.what();
    }
    unsetenv(b.var);
  }
  struct BadFile {
    const char *json, *words;
  };
  const BadFile bad_files[] = {
      {R"({"comm": {"ib": {"gid": 3}}})", "unknown key \"comm.ib.gid\""},
      {R"({"comm": {"ib": {"library": ""}}})", "comm.ib.library=\"\" is invalid: expected a libibverbs file name"},
      {R"({"comm": {"ib": {"adapter": "test"}}})", "comm.ib.adapter=\"test\" is invalid: the setting no longer exists"},
      {R"({"comm": {"ib": {"test_fault": "qp_error"}}})", "comm.ib.test_fault=\"qp_error\" is invalid: the setting"}};
  for (const BadFile &b : bad_files) {
    std::ofstream(path) << b.json;
    try {
      hpu::load_config();
      ADD_FAILURE() << b.json << " accepted";
    } catch (const Error &x) {
      EXPECT_EQ(x.status(), HPU_ERROR_CONFIG);
      EXPECT_NE(std::string(x.what()).find(b.words), std::string::npos) << x.what();
    }
  }
  unsetenv("HPU_CONFIG");
  unlink(path);
}
