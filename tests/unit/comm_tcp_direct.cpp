// The tcp link's direct writes: a frame sent from a rank's own thread while
// its stream has nothing queued is written by that thread (tcp/link.cpp),
// the rest of it, and every frame behind it, by the loop thread. Ranks forked
// before any thread starts (comm_harness.hpp), driven through the Transport
// interface; this test links libhpu's objects (comm_tcp_direct.cmake).
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "comm/transports/net/transport.hpp"
#include "comm/transports/select.hpp"
#include "comm_harness.hpp"
#include "core/error.hpp"

using namespace hpu::comm;
using namespace comm_test;
using hpu::Error;
using Ms = std::chrono::milliseconds;

namespace {

// Runs body(transport) on two ranks forked, joined over tcp; their exit
// codes. With `stay`, each rank then stays until both got there: a rank that
// leaves closes its links, which fails a peer still at work.
std::vector<int> two_ranks(const std::function<int(Transport &)> &body, bool stay = true) {
  auto s = shared_page();
  auto pids = fork_ranks(2, [&](int r) {
    Endpoint e;
    Deadline d = in(30);
    e.bootstrap = socket_bootstrap(job_id(*s, r, d), r, 2, d);
    e.transport = make_net_transport(*e.bootstrap, this_process(r), "tcp", d);
    int code = body(*e.transport);
    s->reported.fetch_add(1);
    while (stay && s->reported.load() < 2 && Clock::now() < d) std::this_thread::sleep_for(Ms(1));
    return code;
  });
  return reap(pids);
}

// Gives every tcp socket of this process a send buffer of `bytes`, so that a
// large frame is more than a socket takes at once. The tcp sockets: those
// whose congestion control can be read. (Receive buffers stay: one made
// smaller than the window already offered stalls the connection.)
int shrink_socket_buffers(int bytes) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent *x = readdir(d)) {
    const int fd = atoi(x->d_name);
    char cc[16] = {};
    socklen_t len = sizeof cc - 1;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len) != 0) continue;
    n += setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) == 0;
  }
  closedir(d);
  return n;
}

RequestPtr send_floats(Transport &t, int peer, uint64_t tag, const std::vector<float> &v) {
  SendDesc d;
  d.peer = peer;
  d.tag = tag;
  d.data = v.data();
  d.bytes = v.size() * sizeof(float);
  return t.isend(d);
}

RequestPtr recv_floats(Transport &t, int peer, uint64_t tag, std::vector<float> &v) {
  RecvDesc d;
  d.peer = peer;
  d.tag = tag;
  d.data = v.data();
  d.bytes = v.size() * sizeof(float);
  return t.irecv(d);
}

// Message k's values, from rank r.
std::vector<float> message(int r, size_t k, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = wire_value(r, i + k * 7);
  return v;
}

}  // namespace

// On a link with nothing queued, a small send is written by the thread that
// posts it: the request is done when isend returns, and the message arrives.
TEST(CommTcpDirect, SmallSendOnAnIdleLinkIsDoneWhenPosted) {
  auto codes = two_ranks([](Transport &t) {
    int code = 0;
    if (t.rank() == 0) {
      std::vector<float> v = message(0, 0, 1000);
      RequestPtr sent = send_floats(t, 1, 5, v);
      if (!sent->done()) code = 10;
      t.wait({sent.get()}, in(30));
    } else {
      std::vector<float> got(1000, -1.0f);
      RequestPtr recv = recv_floats(t, 0, 5, got);
      t.wait({recv.get()}, in(30));
      if (got != message(0, 0, 1000)) code = 11;
    }
    return code;
  });
  EXPECT_EQ(codes[0], 0) << "10: the send was not done when posted";
  EXPECT_EQ(codes[1], 0);
}

// Both ranks send each other, on one tag, rounds of an eager message of 1 MiB
// (more than a socket with a 64 KiB send buffer takes at once: written in
// part directly, the rest by the loop thread), small ones right behind it,
// and on another tag a 3 MiB one (ready-to-send from this thread, clear-to-send from the peer's loop
// thread, which must not cut into a frame written in part). Rank 0's
// receives are posted before the messages come, rank 1's after. Messages on
// one tag match in posting order: every one lands whole, in order.
TEST(CommTcpDirect, FramesQueuedBehindALargeOneKeepTheirOrder) {
  auto codes = two_ranks([](Transport &t) {
    if (shrink_socket_buffers(64 << 10) == 0) return 12;
    const int r = t.rank(), peer = 1 - r;
    constexpr size_t kRounds = 3, kSmall = 8;
    const size_t large = (size_t(1) << 20) / sizeof(float), huge = 3 * large, small = 300;
    // Per round: the large one, kSmall small ones (tag 1), the huge one (tag 2).
    auto count_of = [&](size_t k) { return k % (kSmall + 1) == 0 ? large : small; };
    const size_t per_tag = kRounds * (kSmall + 1);
    std::vector<std::vector<float>> out, in_tag1(per_tag), in_tag2(kRounds);
    std::vector<RequestPtr> reqs;
    auto post_receives = [&] {
      for (size_t k = 0; k < per_tag; ++k) {
        in_tag1[k].assign(count_of(k), -1.0f);
        reqs.push_back(recv_floats(t, peer, 1, in_tag1[k]));
      }
      for (size_t k = 0; k < kRounds; ++k) {
        in_tag2[k].assign(huge, -1.0f);
        reqs.push_back(recv_floats(t, peer, 2, in_tag2[k]));
      }
    };
    if (r == 0) post_receives();
    out.reserve(per_tag + kRounds);
    for (size_t round = 0; round < kRounds; ++round) {
      for (size_t j = 0; j <= kSmall; ++j) {
        const size_t k = round * (kSmall + 1) + j;
        out.push_back(message(r, k, count_of(k)));
        reqs.push_back(send_floats(t, peer, 1, out.back()));
      }
      out.push_back(message(r, 1000 + round, huge));
      reqs.push_back(send_floats(t, peer, 2, out.back()));
    }
    if (r == 1) {
      std::this_thread::sleep_for(Ms(200));
      post_receives();
    }
    t.wait(reqs, in(30));
    int code = 0;
    for (size_t k = 0; k < per_tag && !code; ++k)
      if (in_tag1[k] != message(peer, k, count_of(k))) code = 10;
    for (size_t k = 0; k < kRounds && !code; ++k)
      if (in_tag2[k] != message(peer, 1000 + k, huge)) code = 11;
    return code;
  });
  EXPECT_EQ(codes[0], 0) << "10: small messages out of order or cut, 11: a large one";
  EXPECT_EQ(codes[1], 0);
}

// A peer killed while this rank writes to it directly: the sends that follow
// fail with HPU_ERROR_REMOTE (the writing thread is not killed by SIGPIPE, and
// does not go on as if the messages had left).
TEST(CommTcpDirect, PeerKilledWhileWrittenToDirectlyIsReported) {
  auto codes = two_ranks(
      [](Transport &t) {
        std::vector<float> v = message(t.rank(), 0, 500);
        if (t.rank() == 1) {
          RequestPtr recv = recv_floats(t, 0, 1, v);
          t.wait({recv.get()}, in(30));
          raise(SIGKILL);
        }
        try {
          for (auto until = in(10); Clock::now() < until;) {
            RequestPtr sent = send_floats(t, 1, 1, v);
            t.wait({sent.get()}, in(10));
          }
        } catch (const Error &err) {
          fprintf(stderr, "rank 0: %s\n", err.what());
          return err.status() == HPU_ERROR_REMOTE ? 0 : 11;
        }
        return 10;
      },
      /*stay=*/false);
  EXPECT_EQ(codes[0], 0) << "10: the sends went on for 10 s; 11: not HPU_ERROR_REMOTE; 141: killed by SIGPIPE";
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}
