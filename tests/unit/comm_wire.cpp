// The process transports from the inside: the socket bootstrap and the shm and
// tcp links, driven through the Transport interface by forked ranks. This test
// compiles the comm sources it needs into itself (comm_wire.cmake), so it can
// reach the internal classes; the public API over them is tested in comm_proc.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "comm/bootstrap_socket.hpp"
#include "comm/socket.hpp"
#include "comm/transports/net_transport.hpp"
#include "core/error.hpp"

using namespace hpu::comm;
using hpu::Error;
using Ms = std::chrono::milliseconds;

namespace {

Deadline in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Shared between the forked ranks and the test: what each rank reports.
struct Report {
  int status[16];
  double seconds[16];
  char message[16][256];
  volatile int ready;  // ranks at the point where the test may strike
};

Report *shared_report() {
  void *p = mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto *r = static_cast<Report *>(p);
  std::memset(r, 0, sizeof *r);
  for (auto &s : r->status) s = -1;
  return r;
}

// Forks n ranks running body(rank); returns their pids.
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

// Waits for every pid (killing stragglers after `seconds`); exit codes, or 128 + signal.
std::vector<int> reap(const std::vector<pid_t> &pids, double seconds = 60) {
  std::vector<int> codes(pids.size(), -1);
  auto until = in(seconds);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      pid_t got = waitpid(pids[i], &st, WNOHANG);
      if (got == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left && Clock::now() > until) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) kill(pids[i], SIGKILL);
      until = in(5);
    }
    std::this_thread::sleep_for(Ms(5));
  }
  return codes;
}

float value(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 977)); }

void add_f32(void *out, const void *in, const void *local, size_t n, const void *) {
  auto *o = static_cast<float *>(out);
  auto *a = static_cast<const float *>(in);
  auto *b = static_cast<const float *>(local);
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

// Every rank exchanges `count` floats with every other rank: plain receives and
// receives that add the local data, small (eager) and large (chunked) sizes.
int exchange(Transport &t, size_t count, uint64_t seq, Deadline deadline) {
  int me = t.rank(), n = t.size();
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = value(me, i);
  std::vector<std::vector<float>> plain(static_cast<size_t>(n), std::vector<float>(count));
  std::vector<std::vector<float>> summed(static_cast<size_t>(n), std::vector<float>(count));
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

struct Group {
  UniqueId id;
  Group() {
    id = UniqueId::make();
    Address lo = Address::resolve("127.0.0.1", 0, "test");
    socket_root_start(id, &lo);
  }
};

struct Rank {
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<Transport> transport;
  Rank(const UniqueId &id, int rank, int n, const char *transport_name, Deadline d) {
    bootstrap = socket_bootstrap(id, rank, n, d);
    transport = make_net_transport(*bootstrap, this_process(rank), transport_name, d);
  }
};

void run_exchange(const char *transport, int n) {
  Group g;
  auto pids = fork_ranks(n, [&](int r) {
    Rank rank(g.id, r, n, transport, in(30));
    uint64_t seq = 1;
    for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(40000), size_t(300007)})
      if (int rc = exchange(*rank.transport, count, seq++, in(30))) return rc;
    return 0;
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " over " << transport;
}

}  // namespace

TEST(CommWire, TcpExchangeTwoRanks) { run_exchange("tcp", 2); }
TEST(CommWire, TcpExchangeFourRanks) { run_exchange("tcp", 4); }
TEST(CommWire, ShmExchangeTwoRanks) { run_exchange("shm", 2); }
TEST(CommWire, ShmExchangeFourRanks) { run_exchange("shm", 4); }
TEST(CommWire, LocalityPicksShmOnOneHost) { run_exchange("", 3); }

// A stranger at the root: garbage, a wrong secret, a huge hello, silence. The
// root drops each and the job goes on.
TEST(CommWire, StrangersAtTheRootAreDropped) {
  Group g;
  Address root = Address::from_bytes(g.id.address);
  // Strangers first, while the ranks have not joined.
  {
    Fd garbage = connect_retry(root, in(5), nullptr, "stranger");
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901234567890123456789012345678";
    write_all(garbage.get(), junk, sizeof junk, in(5), nullptr, "stranger");
    Fd wrong = connect_retry(root, in(5), nullptr, "stranger");
    uint8_t bad_secret[16] = {1, 2, 3};
    int32_t hello[2] = {0, 2};
    EXPECT_THROW(handshake_client(wrong.get(), bad_secret, Purpose::bootstrap, hello, sizeof hello, in(5), nullptr,
                                  "stranger"),
                 Error);
    Fd huge = connect_retry(root, in(5), nullptr, "stranger");
    uint8_t challenge[32];
    read_all(huge.get(), challenge, sizeof challenge, in(5), nullptr, "stranger");
    uint8_t response[48];
    std::memcpy(response, challenge, 16);  // right magic, version and purpose...
    uint32_t big = 0x7fffffff;           // ...and an absurd hello length
    std::memcpy(response + 16, &big, 4);
    write_all(huge.get(), response, sizeof response, in(5), nullptr, "stranger");
    char c;
    EXPECT_EQ(recv(huge.get(), &c, 1, 0), 0) << "the root closes a connection announcing a huge length";
  }
  Fd silent = connect_retry(root, in(5), nullptr, "stranger");  // stays connected, says nothing
  auto pids = fork_ranks(2, [&](int r) {
    Rank rank(g.id, r, 2, "tcp", in(20));
    return exchange(*rank.transport, 1000, 1, in(20));
  });
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// A replayed handshake: a man in the middle records a rank's genuine response
// and sends it again on a new connection; the root drops it (the mac covers
// the nonce of the first connection).
TEST(CommWire, ReplayedHandshakeIsDropped) {
  Group g;
  Address root = Address::from_bytes(g.id.address);
  Fd upstream = connect_retry(root, in(5), nullptr, "recorder");
  uint8_t challenge[32];
  read_all(upstream.get(), challenge, sizeof challenge, in(5), nullptr, "recorder");
  Fd relay = listen_on(Address::resolve("127.0.0.1", 0, "test"), "relay");
  Address relay_at = Address::local_of(relay.get());
  int32_t hello[2] = {0, 2};
  std::thread client([&] {
    Fd fd = connect_retry(relay_at, in(5), nullptr, "client");
    handshake_client(fd.get(), g.id.secret, Purpose::bootstrap, hello, sizeof hello, in(5), nullptr, "client");
  });
  Fd victim(accept(relay.get(), nullptr, nullptr));
  write_all(victim.get(), challenge, sizeof challenge, in(5), nullptr, "relay");
  uint8_t recorded[48 + sizeof hello];
  read_all(victim.get(), recorded, sizeof recorded, in(5), nullptr, "relay");
  write_all(upstream.get(), recorded, sizeof recorded, in(5), nullptr, "relay");
  uint8_t accept_msg[16];
  read_all(upstream.get(), accept_msg, sizeof accept_msg, in(5), nullptr, "relay");  // the genuine join works
  write_all(victim.get(), accept_msg, sizeof accept_msg, in(5), nullptr, "relay");
  client.join();
  Fd replay = connect_retry(root, in(5), nullptr, "replayer");
  uint8_t fresh[32];
  read_all(replay.get(), fresh, sizeof fresh, in(5), nullptr, "replayer");
  EXPECT_NE(std::memcmp(fresh + 16, challenge + 16, 16), 0) << "each connection gets a fresh nonce";
  write_all(replay.get(), recorded, sizeof recorded, in(5), nullptr, "replayer");
  char c;
  EXPECT_EQ(recv(replay.get(), &c, 1, 0), 0) << "the root drops a replayed response";
}

// SIGKILL of a rank mid-operation: every other rank fails with HPU_ERROR_REMOTE
// within 2 s (plus a margin for sanitizers).
void kill_mid_operation(const char *transport, int sig) {
  const int n = 3;
  Group g;
  Report *rep = shared_report();
  double timeout = sig == SIGSTOP ? 2.0 : 30.0;
  auto pids = fork_ranks(n, [&](int r) {
    Rank rank(g.id, r, n, transport, in(20));
    if (exchange(*rank.transport, 1000, 1, in(20)) != 0) return 5;
    __sync_fetch_and_add(&rep->ready, 1);
    if (r == 2) {
      pause();
      return 0;
    }
    // Wait for a message rank 2 never sends.
    std::vector<float> buf(100000);
    RecvDesc d;
    d.peer = 2;
    d.tag = 99;
    d.data = buf.data();
    d.bytes = buf.size() * 4;
    auto t0 = Clock::now();
    try {
      auto req = rank.transport->irecv(d);
      rank.transport->wait({req.get()}, in(timeout));
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
  std::vector<pid_t> survivors(pids.begin(), pids.begin() + 2);
  auto codes = reap(survivors, 20);
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
      EXPECT_LT(rep->seconds[r], timeout + 3.0) << "rank " << r;
    }
  }
  munmap(rep, sizeof *rep);
}

TEST(CommWire, TcpPeerKilledFailsOthersPromptly) { kill_mid_operation("tcp", SIGKILL); }
TEST(CommWire, ShmPeerKilledFailsOthersPromptly) { kill_mid_operation("shm", SIGKILL); }
TEST(CommWire, TcpPeerStoppedTimesOut) { kill_mid_operation("tcp", SIGSTOP); }
TEST(CommWire, ShmPeerStoppedTimesOut) { kill_mid_operation("shm", SIGSTOP); }

// A rank killed during the bootstrap: the others fail with HPU_ERROR_REMOTE
// at once; a rank stopped there: they time out at their deadline, naming it.
void strike_mid_bootstrap(int sig) {
  const int n = 3;
  Group g;
  Report *rep = shared_report();
  auto pids = fork_ranks(n, [&](int r) {
    auto t0 = Clock::now();
    try {
      if (r == 2) {
        auto b = std::make_unique<SocketBootstrap>(g.id, r, n);
        // Join by hand, then die before the exchange completes.
        Address root = Address::from_bytes(g.id.address);
        Fd fd = connect_retry(root, in(5), nullptr, "rank 2");
        int32_t hello[2] = {2, n};
        handshake_client(fd.get(), g.id.secret, Purpose::bootstrap, hello, sizeof hello, in(5), nullptr, "rank 2");
        __sync_fetch_and_add(&rep->ready, 1);
        pause();
      }
      Rank rank(g.id, r, n, "tcp", in(sig == SIGSTOP ? 2 : 20));
      rep->status[r] = 0;
    } catch (const Error &e) {
      rep->status[r] = e.status();
      snprintf(rep->message[r], sizeof rep->message[r], "%s", e.what());
    }
    rep->seconds[r] = since(t0);
    return 0;
  });
  for (auto until = in(20); rep->ready < 1 && Clock::now() < until;) std::this_thread::sleep_for(Ms(2));
  std::this_thread::sleep_for(Ms(200));
  auto t0 = Clock::now();
  kill(pids[2], sig);
  std::vector<pid_t> survivors(pids.begin(), pids.begin() + 2);
  reap(survivors, 20);
  double took = since(t0);
  kill(pids[2], SIGKILL);
  reap({pids[2]});
  for (int r = 0; r < 2; ++r) {
    if (sig == SIGKILL) {
      EXPECT_EQ(rep->status[r], HPU_ERROR_REMOTE) << "rank " << r << ": " << rep->message[r];
      EXPECT_NE(std::string(rep->message[r]).find("rank 2"), std::string::npos) << rep->message[r];
    } else {
      EXPECT_EQ(rep->status[r], HPU_ERROR_TIMEOUT) << "rank " << r << ": " << rep->message[r];
      EXPECT_NE(std::string(rep->message[r]).find("missing: 2"), std::string::npos) << rep->message[r];
    }
  }
  EXPECT_LT(took, sig == SIGKILL ? 3.0 : 6.0);
  munmap(rep, sizeof *rep);
}

TEST(CommWire, RankKilledMidBootstrapFailsOthers) { strike_mid_bootstrap(SIGKILL); }
TEST(CommWire, RankStoppedMidBootstrapTimesOut) { strike_mid_bootstrap(SIGSTOP); }

// Ranks may start in any order: the root comes up after the ranks.
TEST(CommWire, RanksMayStartBeforeTheRoot) {
  UniqueId id = UniqueId::make();
  // Reserve a port, free it, let the ranks retry against it, then start the root there.
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  Address at;
  {
    Fd probe = listen_on(lo, "probe");
    at = Address::local_of(probe.get());
  }
  at.to_bytes(id.address);
  id.flags |= UniqueId::kHasAddress;
  auto pids = fork_ranks(2, [&](int r) {
    Rank rank(id, r, 2, "tcp", in(20));
    return exchange(*rank.transport, 100, 1, in(20));
  });
  std::this_thread::sleep_for(Ms(300));
  UniqueId started = id;
  socket_root_start(started, &at);
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(CommWire, TakenPortIsAddressInUse) {
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  Fd holder = listen_on(lo, "holder");
  Address at = Address::local_of(holder.get());
  UniqueId id = UniqueId::make();
  try {
    socket_root_start(id, &at, "MASTER_PORT");
    FAIL() << "expected HPU_ERROR_ADDRESS_IN_USE";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_ADDRESS_IN_USE);
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(at.port())), std::string::npos) << e.what();
  }
}

TEST(CommWire, SipHashMatchesTheReferenceVector) {
  // The paper's test vector: key 00..0f, message 00..0e (15 bytes).
  uint8_t key[16], msg[15];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 15; ++i) msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(siphash(key, msg, sizeof msg), 0xa129ca6149be45e5ull);
}
