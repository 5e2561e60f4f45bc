// The verbs transport from the inside, over the FAKE libibverbs of
// tests/support/fake_ibverbs (HPU_IB_LIBRARY names it; there is no RDMA
// hardware here): forked ranks (the
// fork harness of comm_harness.hpp) build
// the net protocol over verbs links and exchange messages (eager and chunked,
// plain and combined) and run every collective algorithm over them, checked
// against references computed here (comm_harness.hpp); a killed peer fails the others with HPU_ERROR_REMOTE
// within 2 s, a stopped one makes them time out; each fault the fake injects
// fails every rank with its status, stickily; abort never blocks. Compiles the
// comm sources it needs into itself (comm_verbs.cmake). Measures nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/algorithm.hpp"
#include "comm/bootstrap/socket.hpp"
#include "comm/socket/acceptor.hpp"
#include "comm/transports/net/transport.hpp"
#include "comm/transports/verbs/verbs.hpp"
#include "comm_collectives.hpp"
#include "comm_harness.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

using namespace hpu::comm;
using namespace comm_test;
using hpu::Error;
using Ms = std::chrono::milliseconds;

namespace {

// Every peer reached over verbs, through the fake libibverbs.
Endpoint verbs(const UniqueId &id, int rank, int n, Deadline d) {
  setenv("HPU_IB_LIBRARY", HPU_FAKE_IBVERBS, 1);
  Endpoint e;
  e.bootstrap = socket_bootstrap(id, rank, n, d);
  hpu::IbConfig cfg = hpu::load_config().comm.ib;  // HPU_IB_LIBRARY: the fake
  auto ports = verbs_ports(*e.bootstrap, true, true, cfg, d);
  EXPECT_EQ(ports.size(), static_cast<size_t>(n));
  std::vector<int> peers;
  for (int p = 0; p < n; ++p)
    if (p != rank) peers.push_back(p);
  auto t = std::make_unique<NetTransport>(rank, n);
  t->add_engine(make_verbs_engine(*t, *e.bootstrap, peers, cfg, d), peers, 32 << 10);
  t->set_name("verbs");
  e.transport = std::move(t);
  return e;
}

}  // namespace

TEST(CommVerbs, ExchangeOverTheFakeLibibverbs) {
  for (int n : {2, 4}) expect_exchanges(verbs, n, "verbs");
}

TEST(CommVerbs, CollectivesOverTheFakeLibibverbs) {
  const int n = 3;
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = verbs(job_id(*s, r, in(30)), r, n, in(30));
    return collectives(*e.transport);
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(CommVerbs, ForcedWithoutADeviceIsNotAvailable) {
  unsetenv("HPU_IB_LIBRARY");  // the real libibverbs: no device on this machine
  auto b = socket_bootstrap(root_here(), 0, 1, in(10));
  try {
    verbs_ports(*b, true, true, hpu::IbConfig{}, in(10));
    FAIL() << "HPU_TRANSPORT=verbs accepted without a device";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_NOT_AVAILABLE);
    EXPECT_NE(std::string(e.what()).find("no RDMA device found"), std::string::npos) << e.what();
  }
}

// HPU_IB_LIBRARY naming a file that is not there: forced verbs is not
// available, and the message says which library could not be loaded.
TEST(CommVerbs, ForcedWithAMissingLibraryIsNotAvailable) {
  auto b = socket_bootstrap(root_here(), 0, 1, in(10));
  hpu::IbConfig cfg;
  cfg.library = "/nonexistent/libibverbs.so.1";
  try {
    verbs_ports(*b, true, true, cfg, in(10));
    FAIL() << "HPU_TRANSPORT=verbs accepted without its library";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_NOT_AVAILABLE);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libibverbs.so.1 cannot be loaded"), std::string::npos)
        << e.what();
  }
}

// Unforced, with peers on other hosts: libibverbs.so.1 loads, lists no device,
// and the rank falls back to tcp with a log line that says why.
TEST(CommVerbs, NoDeviceFallsBackToTcpWithALogLine) {
  unsetenv("HPU_IB_LIBRARY");
  auto b = socket_bootstrap(root_here(), 0, 1, in(10));
  static std::vector<std::string> lines;
  hpu::set_log_level(hpu::LogLevel::info);
  hpu::set_log_callback([](int, const char *line, void *) { lines.emplace_back(line); }, nullptr);
  auto have = verbs_ports(*b, true, false, hpu::IbConfig{}, in(10));
  hpu::set_log_callback(nullptr, nullptr);
  EXPECT_EQ(have, std::vector<char>{0});
  bool said = false;
  for (auto &l : lines)
    said = said || l.find("verbs not used, tcp between hosts: no RDMA device found (libibverbs.so.1 lists none)") !=
                       std::string::npos;
  EXPECT_TRUE(said) << (lines.empty() ? std::string("no log line") : lines.back());
}

namespace {

// Rank 1's fake libibverbs injects `fault` on its 20th send; every rank must fail with
// `others` (the faulty rank with `own`) within 5 s, and stay failed; the
// faulty rank's message names the fault, in one of the words given: a fault
// both ends of a queue pair see may reach rank 1 first from the other end.
void inject(const char *fault, hpuStatus_t own, hpuStatus_t others, std::vector<std::string> words) {
  const int n = 3;
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    if (r == 1) setenv("HPU_FAKE_IBV_FAULT", (std::string(fault) + ":20").c_str(), 1);
    Endpoint e = verbs(job_id(*s, r, in(20)), r, n, in(20));
    auto t0 = Clock::now();
    try {
      for (uint64_t seq = 1; seq < 200; ++seq)
        if (exchange(*e.transport, 5000, seq, in(10)) != 0) return 5;
      s->report(r, t0);
    } catch (const Error &err) {
      s->report(r, t0, &err);
    }
    try {  // sticky
      SendDesc d;
      d.peer = (r + 1) % n;
      e.transport->isend(d);
      return 6;
    } catch (const Error &err) {
      if (err.status() != s->status[r]) return 7;
    }
    return 0;
  });
  auto codes = reap(pids, 30);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
    hpuStatus_t want = r == 1 ? own : others;
    EXPECT_EQ(s->status[r], want) << "rank " << r << ": " << s->message[r];
    EXPECT_LT(s->seconds[r], 5.0) << "rank " << r;
  }
  const std::string message = s->message[1];
  EXPECT_TRUE(std::any_of(words.begin(), words.end(), [&](const std::string &w) {
    return message.find(w) != std::string::npos;
  })) << message;
}

}  // namespace

TEST(CommVerbs, PeerKilledFailsOthersPromptly) { strike_waiting_ranks(verbs, SIGKILL); }
TEST(CommVerbs, PeerStoppedTimesOut) { strike_waiting_ranks(verbs, SIGSTOP); }
TEST(CommVerbs, RankKilledMidSetupFailsOthers) { strike_mid_setup(verbs, SIGKILL); }
TEST(CommVerbs, RankStoppedMidSetupTimesOut) { strike_mid_setup(verbs, SIGSTOP); }
TEST(CommVerbs, InjectedRetryExceeded) {
  inject("retry_exceeded", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, {"retries exhausted"});
}
// The requester's write completes with a remote access error; the
// responder's queue pair goes to error with a local access violation, which
// its rank may pass on to rank 1 before rank 1 polls its own completion.
TEST(CommVerbs, InjectedRemoteAccessError) {
  inject("remote_access", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, {"remote access error", "local access violation"});
}
TEST(CommVerbs, InjectedQpError) { inject("qp_error", HPU_ERROR_REMOTE, HPU_ERROR_REMOTE, {"queue pair"}); }
TEST(CommVerbs, InjectedPortDown) { inject("port_down", HPU_ERROR_NOT_AVAILABLE, HPU_ERROR_REMOTE, {"is down"}); }

TEST(CommVerbs, AbortNeverBlocks) {
  const int n = 2;
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = verbs(job_id(*s, r, in(20)), r, n, in(20));
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
    auto req = e.transport->irecv(d);
    std::thread aborter([&] {
      std::this_thread::sleep_for(Ms(100));
      e.transport->abort("test abort");
    });
    auto t0 = Clock::now();
    try {
      e.transport->wait({req.get()}, in(20));
      s->report(0, t0);
    } catch (const Error &err) {
      s->report(0, t0, &err);
    }
    aborter.join();
    return 0;
  });
  auto codes = reap(pids, 30);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(s->status[0], HPU_ERROR_ABORTED);
  EXPECT_LT(s->seconds[0], 1.0);
}
