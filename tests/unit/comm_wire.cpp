// The process transports from the inside: the socket bootstrap and the shm and
// tcp links, driven through the Transport interface by ranks forked before any
// thread starts (the fork harness of comm_harness.hpp). This test links
// libhpu's objects (comm_wire.cmake), so it can reach the internal classes;
// the public API over them is tested in comm_proc.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "comm/socket/acceptor.hpp"
#include "comm/transports/net/transport.hpp"
#include "comm/transports/select.hpp"
#include "comm_collectives.hpp"
#include "comm_harness.hpp"
#include "core/error.hpp"

using namespace hpu::comm;
using namespace comm_test;
using hpu::Error;
using Ms = std::chrono::milliseconds;

namespace {

// Over the named transport ("" picks by locality).
Connect net(const char *transport) {
  return [transport](const UniqueId &id, int rank, int n, Deadline d) {
    Endpoint e;
    e.bootstrap = socket_bootstrap(id, rank, n, d);
    e.transport = make_net_transport(*e.bootstrap, this_process(rank), transport, d);
    return e;
  };
}

void run_exchange(const char *transport, int n) { expect_exchanges(net(transport), n, transport); }

// Begins operation 1, an allreduce of `count` floats, on t.
OpHeader begin_allreduce(Transport &t, size_t count) {
  OpHeader h;
  h.seq = 1;
  h.coll = static_cast<uint32_t>(CollKind::allreduce);
  h.dtype = HPU_FLOAT32;
  h.count = count;
  t.begin(h);
  return h;
}

// Receives that add `local` (floats) to what arrives.
Combine adding(const float *local) {
  Combine add;
  add.fn = add_f32;
  add.local = local;
  add.elem_size = 4;
  return add;
}

// Two ranks send each other, all at once, messages of sizes around the
// transport's thresholds (tcp: pieces of 256 KiB reduced as they arrive, 512 KiB
// data chunks, 1 MiB eager limit; and 64 KiB), each twice on one tag (matched in posting
// order), into plain and reducing receives. Rank 0 posts its receives before
// rank 1 sends; rank 1 posts its receives only after rank 0's messages have
// arrived (eager ones wait in the queue, large ones at the sender). The first
// message carries the operation's header. 0 when every byte is right.
int many_in_flight(Transport &t) {
  const int me = t.rank(), peer = 1 - me;
  const std::vector<size_t> counts = {16383, 16384, 16385, 65535, 65536, 65537, 131071, 131072, 131073,
                                      262143, 262144, 262145, 393219};
  std::vector<float> mine(counts.back() + 2), theirs(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    mine[i] = wire_value(me, i);
    theirs[i] = wire_value(peer, i);
  }
  const OpHeader h = begin_allreduce(t, counts.back());
  Combine add = adding(mine.data());
  // Message k of size i goes on tag 2i (plain) or 2i + 1 (reduced), starting
  // at element k of the data (so the two on one tag differ).
  struct Msg {
    size_t count, start;
    uint64_t tag;
    bool reduced;
    std::vector<float> out;
  };
  std::vector<Msg> msgs;
  for (size_t i = 0; i < counts.size(); ++i)
    for (size_t k = 0; k < 2; ++k)
      for (bool reduced : {false, true}) msgs.push_back({counts[i], k, 2 * i + (reduced ? 1 : 0), reduced, {}});
  std::vector<RequestPtr> reqs;
  auto post_receives = [&] {
    for (Msg &m : msgs) {
      m.out.assign(m.count, -1.0f);
      RecvDesc d;
      d.peer = peer;
      d.tag = m.tag;
      d.data = m.out.data();
      d.bytes = m.count * 4;
      add.local = mine.data() + m.start;
      if (m.reduced) d.combine = &add;
      reqs.push_back(t.irecv(d));
    }
  };
  auto send_all = [&] {
    for (size_t j = 0; j < msgs.size(); ++j) {
      SendDesc d;
      d.peer = peer;
      d.tag = msgs[j].tag;
      d.data = mine.data() + msgs[j].start;
      d.bytes = msgs[j].count * 4;
      if (j == 1) d.header = &h;
      reqs.push_back(t.isend(d));
    }
  };
  if (me == 0) {
    post_receives();
    std::this_thread::sleep_for(Ms(100));  // rank 1's messages arrive to posted receives
    send_all();
  } else {
    send_all();
    std::this_thread::sleep_for(Ms(400));  // rank 0's messages wait for their receives
    post_receives();
  }
  t.wait(reqs, in(30));
  for (const Msg &m : msgs)
    for (size_t i = 0; i < m.count; ++i) {
      float want = theirs[m.start + i] + (m.reduced ? mine[m.start + i] : 0.0f);
      if (m.out[i] != want) return m.reduced ? 11 : 10;
    }
  return 0;
}

// Each rank passes values around the ring in chains of kSteps steps, one
// chain per size (sizes around the thresholds, as above), all in flight at
// once: step k receives from the left, adding this rank's data, and step
// k + 1 sends that on to the right. Every receive and send but the first
// sends is chained after the receive before it (Chaining), and
// the first sends leave only once every rank has posted all the rest: were
// posting to wait for a chained request, no rank would get past it. After
// step k rank r holds the sum of the data of ranks r, r - 1, ..., r - k - 1.
// 0 when every element is right.
int ring_chains(Transport &t, JobPage &s) {
  constexpr int kSteps = 6;
  const int me = t.rank(), n = t.size(), right = (me + 1) % n, left = (me + n - 1) % n;
  const std::vector<size_t> counts = {1000, 16385, 65535, 65537, 131073, 262143, 262145, 393219};
  const Deadline deadline = in(30);
  std::vector<float> mine(counts.back());
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = wire_value(me, i);
  Chaining *chains = t.find<Chaining>();
  if (!chains) return 13;
  const OpHeader h = begin_allreduce(t, counts.back());
  Combine add = adding(mine.data());
  std::vector<std::vector<std::vector<float>>> got(counts.size());  // [size][step]
  std::vector<RequestPtr> all;
  for (size_t c = 0; c < counts.size(); ++c) {
    got[c].assign(kSteps, std::vector<float>(counts[c], -1.0f));
    RequestPtr before;
    for (int k = 0; k < kSteps; ++k) {
      RecvDesc rd;
      rd.peer = left;
      rd.tag = c * 100 + static_cast<uint64_t>(k);
      rd.data = got[c][static_cast<size_t>(k)].data();
      rd.bytes = counts[c] * 4;
      rd.combine = &add;
      RequestPtr recv = chains->irecv_after(rd, {before.get()});
      all.push_back(recv);
      if (k + 1 < kSteps) {
        SendDesc sd;
        sd.peer = right;
        sd.tag = rd.tag + 1;
        sd.data = rd.data;
        sd.bytes = rd.bytes;
        all.push_back(chains->isend_after(sd, {recv.get()}));
      }
      before = recv;
    }
  }
  s.ready.fetch_add(1);
  while (s.ready.load() < n)
    if (Clock::now() > deadline) return 12;
    else std::this_thread::sleep_for(Ms(1));
  for (size_t c = 0; c < counts.size(); ++c) {
    SendDesc sd;
    sd.peer = right;
    sd.tag = c * 100;
    sd.data = mine.data();
    sd.bytes = counts[c] * 4;
    if (c == 0) sd.header = &h;
    all.push_back(t.isend(sd));
  }
  t.wait(all, deadline);
  for (size_t c = 0; c < counts.size(); ++c)
    for (int k = 0; k < kSteps; ++k)
      for (size_t i = 0; i < counts[c]; ++i) {
        float want = 0;
        for (int j = 0; j <= k + 1; ++j) want += wire_value(((me - j) % n + n) % n, i);
        if (got[c][static_cast<size_t>(k)][i] != want) return 10;
      }
  return 0;
}

void run_chains(const char *transport, int n) {
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = net(transport)(job_id(*s, r, in(30)), r, n, in(30));
    return ring_chains(*e.transport, *s);
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n;
}

void run_collectives(const char *transport, int n) {
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = net(transport)(job_id(*s, r, in(30)), r, n, in(30));
    return collectives(*e.transport);
  });
  // Each rank's collectives have deadlines of their own, which catch a hang;
  // the whole list runs long under TSan, so reap's guard is wider than usual.
  auto codes = reap(pids, 240);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n;
}

}  // namespace

TEST(CommWire, TcpChainsGoOnWithoutThePoster) { run_chains("tcp", 4); }
TEST(CommWire, TcpCollectivesFourRanks) { run_collectives("tcp", 4); }
TEST(CommWire, ShmCollectivesThreeRanks) { run_collectives("shm", 3); }
TEST(CommWire, TcpExchangeTwoRanks) { run_exchange("tcp", 2); }
TEST(CommWire, TcpExchangeFourRanks) { run_exchange("tcp", 4); }
TEST(CommWire, TcpManyLargeMessagesInFlightPostedEarlyAndLate) {
  auto s = shared_page();
  auto pids = fork_ranks(2, [&](int r) {
    Endpoint e = net("tcp")(job_id(*s, r, in(30)), r, 2, in(30));
    return many_in_flight(*e.transport);
  });
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// A waiter sleeps until the last request of its list still pending is done
// (NetTransport::Tuning::wake_on_awaited), and is woken again when earlier ones come
// later: rank 0 waits for receives A and B, rank 1 sends B, then A 30 ms
// later. Rank 0 must see A at once, not at the end of its 100 ms sleep slice.
int wait_out_of_order(Transport &t, JobPage &s) {
  auto seconds = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
  float a = 0, b = 0, one = 1, two = 2;
  if (t.rank() == 0) {
    RecvDesc d;
    d.peer = 1;
    d.tag = 1;
    d.data = &a;
    d.bytes = sizeof a;
    RequestPtr first = t.irecv(d);
    d.tag = 2;
    d.data = &b;
    RequestPtr last = t.irecv(d);
    s.ready.store(1);
    t.wait({first.get(), last.get()}, in(30));
    const double late = seconds() - s.seconds[1];  // after rank 1 sent A
    if (a != 1 || b != 2) return 10;
    return late < 0.05 ? 0 : 11;
  }
  for (auto until = in(30); s.ready.load() == 0;)
    if (Clock::now() > until) return 12;
    else std::this_thread::sleep_for(Ms(1));
  std::this_thread::sleep_for(Ms(20));  // rank 0 is asleep by now
  SendDesc d;
  d.peer = 0;
  d.tag = 2;
  d.data = &two;
  d.bytes = sizeof two;
  RequestPtr sb = t.isend(d);
  std::this_thread::sleep_for(Ms(30));
  s.seconds[1] = seconds();
  d.tag = 1;
  d.data = &one;
  RequestPtr sa = t.isend(d);
  t.wait({sa.get(), sb.get()}, in(30));
  return 0;
}

TEST(CommWire, TcpWaiterWakesForRequestsDoneOutOfOrder) {
  auto s = shared_page();
  auto pids = fork_ranks(2, [&](int r) {
    Endpoint e = net("tcp")(job_id(*s, r, in(30)), r, 2, in(30));
    int code = wait_out_of_order(*e.transport, *s);
    // Stay until both are done: a rank that leaves closes the peer's links.
    s->reported.fetch_add(1);
    for (auto until = in(30); s->reported.load() < 2 && Clock::now() < until;) std::this_thread::sleep_for(Ms(1));
    return code;
  });
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// The tcp links between two ranks of one host (one address at both ends) use
// reno, whatever the system's default congestion control: HPU_TCP_LANES
// connections per rank, found among the process's open sockets.
TEST(CommWire, TcpLinksOnOneHostAreUnpaced) {
  auto s = shared_page();
  auto pids = fork_ranks(2, [&](int r) {
    setenv("HPU_TCP_LANES", "3", 1);
    Endpoint e = net("tcp")(job_id(*s, r, in(30)), r, 2, in(30));
    if (exchange(*e.transport, 1000, 1, in(30)) != 0) return 10;
    int reno = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 11;
    while (dirent *x = readdir(d)) {
      char cc[16] = {};
      socklen_t len = sizeof cc - 1;
      if (getsockopt(atoi(x->d_name), IPPROTO_TCP, TCP_CONGESTION, cc, &len) == 0 && std::strcmp(cc, "reno") == 0)
        ++reno;
    }
    closedir(d);
    // Stay until the peer has counted too: a rank that leaves closes its
    // links, and the peer's ends of them close at once.
    s->ready.fetch_add(1);
    for (auto until = in(30); s->ready.load() < 2 && Clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return reno >= 3 ? 0 : 12;
  });
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(CommWire, ShmExchangeTwoRanks) { run_exchange("shm", 2); }
TEST(CommWire, ShmExchangeFourRanks) { run_exchange("shm", 4); }
TEST(CommWire, LocalityPicksShmOnOneHost) { run_exchange("", 3); }

// A stranger at the root: garbage, a wrong secret, a huge hello, silence. The
// root drops each and the job goes on.
TEST(CommWire, StrangersAtTheRootAreDropped) {
  auto s = shared_page();
  s->held = 1;
  auto pids = fork_ranks(2, [&](int r) {
    Endpoint e = net("tcp")(job_id(*s, r, in(20)), r, 2, in(20));
    return exchange(*e.transport, 1000, 1, in(20));
  });
  Address root = Address::from_bytes(job_id(*s, -1, in(20)).address);
  // Strangers first, while the ranks have not joined.
  {
    Fd garbage = connect_retry(root, in(5), nullptr, "stranger");
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901234567890123456789012345678";
    write_all(garbage.get(), junk, sizeof junk, in(5), nullptr, "stranger");
    Fd wrong = connect_retry(root, in(5), nullptr, "stranger");
    uint8_t bad_secret[16] = {1, 2, 3};
    int32_t hello[3] = {0, 2, 0};  // rank, nranks, pid
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
  s->held = 0;
  auto codes = reap(pids);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

// A replayed handshake: a man in the middle records a rank's genuine response
// and sends it again on a new connection; the root drops it (the mac covers
// the nonce of the first connection).
TEST(CommWire, ReplayedHandshakeIsDropped) {
  UniqueId id = root_here();
  Address root = Address::from_bytes(id.address);
  Fd upstream = connect_retry(root, in(5), nullptr, "recorder");
  uint8_t challenge[32];
  read_all(upstream.get(), challenge, sizeof challenge, in(5), nullptr, "recorder");
  Fd relay = listen_on(Address::resolve("127.0.0.1", 0, "test"), "relay");
  Address relay_at = Address::local_of(relay.get());
  int32_t hello[3] = {0, 2, 0};  // rank, nranks, pid
  std::thread client([&] {
    Fd fd = connect_retry(relay_at, in(5), nullptr, "client");
    handshake_client(fd.get(), id.secret, Purpose::bootstrap, hello, sizeof hello, in(5), nullptr, "client");
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

TEST(CommWire, TcpPeerKilledFailsOthersPromptly) { strike_waiting_ranks(net("tcp"), SIGKILL); }
TEST(CommWire, ShmPeerKilledFailsOthersPromptly) { strike_waiting_ranks(net("shm"), SIGKILL); }
TEST(CommWire, TcpPeerStoppedTimesOut) { strike_waiting_ranks(net("tcp"), SIGSTOP); }
TEST(CommWire, ShmPeerStoppedTimesOut) { strike_waiting_ranks(net("shm"), SIGSTOP); }

// A rank killed during the bootstrap: the others fail with HPU_ERROR_REMOTE
// at once; a rank stopped there: they time out at their deadline, naming it.
namespace {

void strike_mid_bootstrap(int sig) {
  const int n = 3;
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    UniqueId id = job_id(*s, r, in(20));
    auto t0 = Clock::now();
    try {
      if (r == 2) {
        // Join by hand, then die before the exchange completes.
        Address root = Address::from_bytes(id.address);
        Fd fd = connect_retry(root, in(5), nullptr, "rank 2");
        int32_t hello[3] = {2, n, static_cast<int32_t>(getpid())};  // rank, nranks, pid
        handshake_client(fd.get(), id.secret, Purpose::bootstrap, hello, sizeof hello, in(5), nullptr, "rank 2");
        s->ready.fetch_add(1);
        pause();
      }
      net("tcp")(id, r, n, in(sig == SIGSTOP ? 2 : 20));
      s->report(r, t0);
    } catch (const Error &e) {
      s->report(r, t0, &e);
    }
    s->keep_root_until_reported(r, 2, 20);
    return 0;
  });
  for (auto until = in(20); s->ready < 1 && Clock::now() < until;) std::this_thread::sleep_for(Ms(2));
  std::this_thread::sleep_for(Ms(200));
  auto t0 = Clock::now();
  kill(pids[2], sig);
  reap({pids[0], pids[1]}, 20);
  double took = since(t0);
  kill(pids[2], SIGKILL);
  reap({pids[2]});
  for (int r = 0; r < 2; ++r) {
    if (sig == SIGKILL) {
      EXPECT_EQ(s->status[r], HPU_ERROR_REMOTE) << "rank " << r << ": " << s->message[r];
      EXPECT_NE(std::string(s->message[r]).find("rank 2"), std::string::npos) << s->message[r];
    } else {
      EXPECT_EQ(s->status[r], HPU_ERROR_TIMEOUT) << "rank " << r << ": " << s->message[r];
      EXPECT_NE(std::string(s->message[r]).find("missing: 2"), std::string::npos) << s->message[r];
    }
  }
  EXPECT_LT(took, sig == SIGKILL ? 3.0 : 6.0);
}
}  // namespace

TEST(CommWire, RankKilledMidBootstrapFailsOthers) { strike_mid_bootstrap(SIGKILL); }
TEST(CommWire, RankStoppedMidBootstrapTimesOut) { strike_mid_bootstrap(SIGSTOP); }

// The same in the transport's own setup, after the bootstrap.
TEST(CommWire, RankKilledMidShmSetupFailsOthers) { strike_mid_setup(net("shm"), SIGKILL); }
TEST(CommWire, RankStoppedMidShmSetupTimesOut) { strike_mid_setup(net("shm"), SIGSTOP); }
TEST(CommWire, RankKilledMidTcpSetupFailsOthers) { strike_mid_setup(net("tcp"), SIGKILL); }
TEST(CommWire, RankStoppedMidTcpSetupTimesOut) { strike_mid_setup(net("tcp"), SIGSTOP); }

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
    Endpoint e = net("tcp")(id, r, 2, in(20));
    return exchange(*e.transport, 100, 1, in(20));
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
