// The verbs transport from the inside, over the in-memory TEST ADAPTER
// (HPU_IB_ADAPTER=test; there is no RDMA hardware here): forked ranks build
// the net protocol over verbs links and exchange messages (eager and chunked,
// plain and combined) and run every collective algorithm over them, checked
// against references computed here (comm_harness.hpp); a killed peer fails the others with HPU_ERROR_REMOTE
// within 2 s, a stopped one makes them time out; each injected adapter fault
// fails every rank with its status, stickily; abort never blocks. Compiles the
// comm sources it needs into itself (comm_verbs.cmake). Measures nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "comm/algorithm.hpp"
#include "comm/bootstrap_socket.hpp"
#include "comm/socket.hpp"
#include "comm/transports/net_transport.hpp"
#include "comm/transports/verbs_engine.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "comm_harness.hpp"

using namespace hpu::comm;
using hpu::Error;
using Ms = std::chrono::milliseconds;

namespace {

Deadline in(double s) { return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Report {
  int status[8];
  double seconds[8];
  char message[8][256];
  volatile int ready;
};

Report *shared_report() {
  auto *r = static_cast<Report *>(mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(r, 0, sizeof *r);
  for (auto &s : r->status) s = -1;
  return r;
}

std::vector<pid_t> fork_ranks(int n, const std::function<int(int)> &body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = body(r);
      } catch (const std::exception &e) {
        fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  return pids;
}

std::vector<int> reap(const std::vector<pid_t> &pids, double seconds = 60) {
  std::vector<int> codes;
  auto until = in(seconds);
  for (pid_t p : pids) {
    int st = 0;
    while (waitpid(p, &st, WNOHANG) == 0) {
      if (Clock::now() > until) kill(p, SIGKILL);
      std::this_thread::sleep_for(Ms(5));
    }
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return codes;
}

struct Group {
  UniqueId id;
  Group() {
    setenv("HPU_IB_ADAPTER", "test", 1);
    id = UniqueId::make();
    Address lo = Address::resolve("127.0.0.1", 0, "test");
    socket_root_start(id, &lo);
  }
};

// A rank whose every peer is reached over verbs.
struct Rank {
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<NetTransport> t;
  Rank(const UniqueId &id, int rank, int n, Deadline d) {
    bootstrap = socket_bootstrap(id, rank, n, d);
    auto ports = verbs_ports(*bootstrap, true, true, d);
    EXPECT_EQ(ports.size(), static_cast<size_t>(n));
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != rank) peers.push_back(p);
    t = std::make_unique<NetTransport>(rank, n);
    t->add_engine(make_verbs_engine(*t, *bootstrap, peers, d), peers, 32 << 10);
    t->set_name("verbs");
  }
};

float value(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 977)); }

void add_f32(void *out, const void *in, const void *local, size_t n, const void *) {
  auto *o = static_cast<float *>(out);
  auto *a = static_cast<const float *>(in);
  auto *b = static_cast<const float *>(local);
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

// Every rank sends `count` floats to every other, received plain and added.
int exchange(Transport &t, size_t count, uint64_t seq, Deadline deadline) {
  int me = t.rank(), n = t.size();
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = value(me, i);
  std::vector<std::vector<float>> plain(static_cast<size_t>(n), std::vector<float>(count)), summed = plain;
  OpHeader h;
  h.seq = seq;
  h.coll = static_cast<uint32_t>(CollKind::allreduce);
  h.dtype = HPU_FLOAT32;
  h.count = count;
  t.begin(h);
  Combine add;
  add.fn = add_f32;
  add.local = mine.data();
  add.elem_size = 4;
  std::vector<RequestPtr> reqs;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    RecvDesc r1;
    r1.peer = p;
    r1.tag = seq * 2;
    r1.data = plain[static_cast<size_t>(p)].data();
    r1.bytes = count * 4;
    reqs.push_back(t.irecv(r1));
    RecvDesc r2 = r1;
    r2.tag = seq * 2 + 1;
    r2.data = summed[static_cast<size_t>(p)].data();
    r2.combine = &add;
    reqs.push_back(t.irecv(r2));
    SendDesc s;
    s.peer = p;
    s.tag = seq * 2;
    s.data = mine.data();
    s.bytes = count * 4;
    s.header = &h;
    reqs.push_back(t.isend(s));
    s.tag = seq * 2 + 1;
    s.header = nullptr;
    reqs.push_back(t.isend(s));
  }
  t.wait(reqs, deadline);
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    for (size_t i = 0; i < count; ++i) {
      if (plain[static_cast<size_t>(p)][i] != value(p, i)) return 10;
      if (summed[static_cast<size_t>(p)][i] != value(p, i) + value(me, i)) return 11;
    }
  }
  return 0;
}

}  // namespace

TEST(CommVerbs, ExchangeOverTheTestAdapter) {
  for (int n : {2, 4}) {
    Group g;
    auto pids = fork_ranks(n, [&](int r) {
      Rank rank(g.id, r, n, in(30));
      uint64_t seq = 1;
      for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(40000), size_t(300007)})
        if (int rc = exchange(*rank.t, count, seq++, in(30))) return rc;
      return 0;
    });
    auto codes = reap(pids);
    for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n;
  }
}

namespace {

// Every collective algorithm over this rank's verbs endpoint, host memory; 0 when all results are right.
int collectives(Transport &t) {
  using namespace comm_test;
  const int n = t.size(), r = t.rank();
  Scratch scratch;
  uint64_t seq = 0;
  auto run = [&](CollKind kind, hpuDataType_t dt, size_t count, int root, hpuRedOp_t op,
                 const std::function<void(Ctx &)> &body) {
    OpHeader h;
    h.seq = ++seq;
    h.coll = static_cast<uint32_t>(kind);
    h.dtype = dt;
    h.count = count;
    h.root = root;
    h.redop = op;
    t.begin(h);
    Ctx c(t, h, 20.0, scratch);
    body(c);
  };
  struct Case {
    hpuDataType_t t;
    hpuRedOp_t op;
  };
  const Case cases[] = {{HPU_FLOAT32, HPU_SUM}, {HPU_BFLOAT16, HPU_SUM}, {HPU_INT32, HPU_MAX},
                        {HPU_FLOAT64, HPU_AVG}, {HPU_UINT8, HPU_MIN},   {HPU_INT64, HPU_PROD}};
  for (const Case &k : cases)
    for (size_t count : {size_t(1), size_t(4099), size_t(300007)}) {
      auto in = encode(k.t, inputs(k.t, k.op, r, count));
      std::vector<uint8_t> out(in.size());
      run(CollKind::allreduce, k.t, count, -1, k.op, [&](Ctx &c) {
        if (count < 1000) recursive_doubling_allreduce(c, in.data(), out.data(), count, k.t, k.op);
        else ring_allreduce(c, in.data(), out.data(), count, k.t, k.op);
      });
      if (out != reference(k.t, k.op, n, count)) return 20;
    }
  const hpuDataType_t f32 = HPU_FLOAT32;
  for (size_t count : {size_t(7), size_t(200003)}) {
    size_t bytes = count * 4;
    auto mine = encode(f32, inputs(f32, HPU_SUM, r, count));
    std::vector<uint8_t> out(bytes * static_cast<size_t>(n));
    auto everyone = [&](size_t first) {  // every rank's inputs [first, first + count), in rank order
      std::vector<uint8_t> all;
      for (int q = 0; q < n; ++q) {
        auto part = encode(f32, inputs(f32, HPU_SUM, q, count, first));
        all.insert(all.end(), part.begin(), part.end());
      }
      return all;
    };
    for (bool big : {false, true}) {
      run(CollKind::broadcast, f32, count, 1, HPU_SUM, [&](Ctx &c) {
        if (big) chain_broadcast(c, mine.data(), out.data(), bytes, 1);
        else tree_broadcast(c, mine.data(), out.data(), bytes, 1);
      });
      if (std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)) != encode(f32, inputs(f32, HPU_SUM, 1, count)))
        return 21;
      run(CollKind::reduce, f32, count, 2, HPU_SUM, [&](Ctx &c) {
        if (big) chain_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
        else tree_reduce(c, mine.data(), out.data(), count, f32, HPU_SUM, 2);
      });
      if (r == 2 && std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(bytes)) != reference(f32, HPU_SUM, n, count))
        return 22;
    }
    run(CollKind::allgather, f32, count, -1, HPU_SUM, [&](Ctx &c) { ring_allgather(c, mine.data(), out.data(), count, f32); });
    if (out != everyone(0)) return 23;
    auto wide = encode(f32, inputs(f32, HPU_SUM, r, count * static_cast<size_t>(n)));
    std::vector<uint8_t> part(bytes);
    run(CollKind::reducescatter, f32, count, -1, HPU_SUM,
        [&](Ctx &c) { ring_reducescatter(c, wide.data(), part.data(), count, f32, HPU_SUM); });
    if (part != reference(f32, HPU_SUM, n, count, static_cast<size_t>(r) * count)) return 24;
    run(CollKind::alltoall, f32, count, -1, HPU_SUM, [&](Ctx &c) { pairwise_alltoall(c, wide.data(), out.data(), bytes); });
    if (out != everyone(static_cast<size_t>(r) * count)) return 25;
    run(CollKind::barrier, f32, 0, -1, HPU_SUM, [&](Ctx &c) { dissemination_barrier(c); });
  }
  return 0;
}

}  // namespace

TEST(CommVerbs, CollectivesOverTheTestAdapter) {
  const int n = 3;
  Group g;
  auto pids = fork_ranks(n, [&](int r) {
    Rank rank(g.id, r, n, in(30));
    return collectives(*rank.t);
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(CommVerbs, ForcedWithoutADeviceIsNotAvailable) {
  unsetenv("HPU_IB_ADAPTER");  // the real libibverbs: no device on this machine
  UniqueId id = UniqueId::make();
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  socket_root_start(id, &lo);
  auto b = socket_bootstrap(id, 0, 1, in(10));
  try {
    verbs_ports(*b, true, true, in(10));
    FAIL() << "HPU_TRANSPORT=verbs accepted without a device";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_NOT_AVAILABLE);
    EXPECT_NE(std::string(e.what()).find("no RDMA device found"), std::string::npos) << e.what();
  }
}

// Unforced, with peers on other hosts: libibverbs.so.1 loads, lists no device,
// and the rank falls back to tcp with a log line that says why.
TEST(CommVerbs, NoDeviceFallsBackToTcpWithALogLine) {
  unsetenv("HPU_IB_ADAPTER");
  UniqueId id = UniqueId::make();
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  socket_root_start(id, &lo);
  auto b = socket_bootstrap(id, 0, 1, in(10));
  static std::vector<std::string> lines;
  hpu::set_log_level(hpu::LogLevel::info);
  hpu::set_log_callback([](int, const char *line, void *) { lines.emplace_back(line); }, nullptr);
  auto have = verbs_ports(*b, true, false, in(10));
  hpu::set_log_callback(nullptr, nullptr);
  EXPECT_EQ(have, std::vector<char>{0});
  bool said = false;
  for (auto &l : lines)
    said = said || l.find("verbs not used, tcp between hosts: no RDMA device found (libibverbs.so.1 lists none)") !=
                       std::string::npos;
  EXPECT_TRUE(said) << (lines.empty() ? std::string("no log line") : lines.back());
}

namespace {

// Rank 2 is killed or stopped while ranks 0 and 1 wait for it.
void strike(int sig) {
  const int n = 3;
  Group g;
  Report *rep = shared_report();
  double timeout = sig == SIGSTOP ? 2.0 : 30.0;
  auto pids = fork_ranks(n, [&](int r) {
    Rank rank(g.id, r, n, in(20));
    if (exchange(*rank.t, 1000, 1, in(20)) != 0) return 5;
    __sync_fetch_and_add(&rep->ready, 1);
    if (r == 2) {
      pause();
      return 0;
    }
    std::vector<float> buf(100000);
    RecvDesc d;
    d.peer = 2;
    d.tag = 99;
    d.data = buf.data();
    d.bytes = buf.size() * 4;
    auto t0 = Clock::now();
    try {
      auto req = rank.t->irecv(d);
      rank.t->wait({req.get()}, in(timeout));
      rep->status[r] = 0;
    } catch (const Error &e) {
      rep->status[r] = e.status();
      snprintf(rep->message[r], sizeof rep->message[r], "%s", e.what());
    }
    rep->seconds[r] = since(t0);
    return 0;
  });
  for (auto until = in(20); rep->ready < n && Clock::now() < until;) std::this_thread::sleep_for(Ms(2));
  ASSERT_EQ(rep->ready, n) << "the ranks did not connect";
  std::this_thread::sleep_for(Ms(100));
  kill(pids[2], sig);
  auto codes = reap({pids[0], pids[1]}, 20);
  kill(pids[2], SIGKILL);
  reap({pids[2]});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0);
    if (sig == SIGKILL) {
      EXPECT_EQ(rep->status[r], HPU_ERROR_REMOTE) << "rank " << r << ": " << rep->message[r];
      EXPECT_LT(rep->seconds[r], 2.0 * 1.5) << "rank " << r;
    } else {
      EXPECT_EQ(rep->status[r], HPU_ERROR_TIMEOUT) << "rank " << r << ": " << rep->message[r];
      EXPECT_GE(rep->seconds[r], timeout * 0.9) << "rank " << r;
    }
  }
  munmap(rep, sizeof *rep);
}

// Rank 1's adapter injects `fault` on its 20th send; every rank must fail with
// `others` (the faulty rank with `own`) within 5 s, and stay failed; the
// faulty rank's message names the fault.
void inject(const char *fault, hpuStatus_t own, hpuStatus_t others, const char *words) {
  const int n = 3;
  Group g;
  Report *rep = shared_report();
  auto pids = fork_ranks(n, [&](int r) {
    if (r == 1) setenv("HPU_IB_TEST_FAULT", (std::string(fault) + ":20").c_str(), 1);
    Rank rank(g.id, r, n, in(20));
    auto t0 = Clock::now();
    try {
      for (uint64_t seq = 1; seq < 200; ++seq)
        if (exchange(*rank.t, 5000, seq, in(10)) != 0) return 5;
      rep->status[r] = 0;
    } catch (const Error &e) {
      rep->status[r] = e.status();
      snprintf(rep->message[r], sizeof rep->message[r], "%s", e.what());
    }
    rep->seconds[r] = since(t0);
    try {  // sticky
      SendDesc s;
      s.peer = (r + 1) % n;
      rank.t->isend(s);
      return 6;
    } catch (const Error &e) {
      if (e.status() != rep->status[r]) return 7;
    }
    return 0;
  });
  auto codes = reap(pids, 30);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
    hpuStatus_t want = r == 1 ? own : others;
    EXPECT_EQ(rep->status[r], want) << "rank " << r << ": " << rep->message[r];
    EXPECT_LT(rep->seconds[r], 5.0) << "rank " << r;
  }
  EXPECT_NE(std::string(rep->message[1]).find(words), std::string::npos) << rep->message[1];
  munmap(rep, sizeof *rep);
}

}  // namespace

TEST(CommVerbs, PeerKilledFailsOthersPromptly) { strike(SIGKILL); }
TEST(CommVerbs, PeerStoppedTimesOut) { strike(SIGSTOP); }
TEST(CommVerbs, InjectedRetryExceeded) {
  inject("retry_exceeded", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, "retries exhausted");
}
TEST(CommVerbs, InjectedRemoteAccessError) {
  inject("remote_access", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, "remote access error");
}
TEST(CommVerbs, InjectedQpError) { inject("qp_error", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, "queue pair"); }
TEST(CommVerbs, InjectedPortDown) { inject("port_down", HPU_ERROR_NOT_AVAILABLE, HPU_ERROR_REMOTE, "is down"); }

TEST(CommVerbs, AbortNeverBlocks) {
  const int n = 2;
  Group g;
  Report *rep = shared_report();
  auto pids = fork_ranks(n, [&](int r) {
    Rank rank(g.id, r, n, in(20));
    if (r == 1) {
      std::this_thread::sleep_for(Ms(1500));
      return 0;
    }
    std::vector<float> buf(1000);
    RecvDesc d;
    d.peer = 1;
    d.tag = 5;
    d.data = buf.data();
    d.bytes = buf.size() * 4;
    auto req = rank.t->irecv(d);
    std::thread aborter([&] {
      std::this_thread::sleep_for(Ms(100));
      rank.t->abort("test abort");
    });
    auto t0 = Clock::now();
    try {
      rank.t->wait({req.get()}, in(20));
    } catch (const Error &e) {
      rep->status[0] = e.status();
    }
    rep->seconds[0] = since(t0);
    aborter.join();
    return 0;
  });
  auto codes = reap(pids, 30);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(rep->status[0], HPU_ERROR_ABORTED);
  EXPECT_LT(rep->seconds[0], 1.0);
  munmap(rep, sizeof *rep);
}
