// Collectives against references computed here: every collective x data type
// x reduction x rank count {1,2,3,4,8} x count (0, 1, primes, up to 64 MiB) x
// in place / out of place. The default suite samples the cross-product so that
// every value of every axis is covered; HPU_TEST_FULL=1 runs all of it.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <thread>
#include <type_traits>
#include <memory>

#include "comm_harness.hpp"

using namespace comm_test;

namespace {

enum class Coll { allreduce, broadcast, reduce, allgather, reducescatter, alltoall };
const char *coll_name(Coll c) {
  static const char *n[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"};
  return n[static_cast<int>(c)];
}
bool reduces(Coll c) { return c == Coll::allreduce || c == Coll::reduce || c == Coll::reducescatter; }

const Coll kColls[] = {Coll::allreduce, Coll::broadcast, Coll::reduce, Coll::allgather, Coll::reducescatter,
                       Coll::alltoall};
const int kRanks[] = {1, 2, 3, 4, 8};
const size_t kCounts[] = {0, 1, 2, 7, 13, 97, 1021, 4099, 65537, 262147};

struct Case {
  Coll coll;
  hpuDataType_t t;
  hpuRedOp_t op;
  int n;
  size_t count;
  bool in_place;
  int root;
};

std::string describe(const Case &c) {
  return std::string(coll_name(c.coll)) + " " + dtype_name(c.t) + " " + op_name(c.op) + " n=" + std::to_string(c.n) +
         " count=" + std::to_string(c.count) + (c.in_place ? " in-place" : " out-of-place") +
         " root=" + std::to_string(c.root);
}

// Where two byte strings first differ, for a readable failure.
void expect_bytes(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want, size_t esize, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      FAIL() << what << ": first difference at element " << i / esize << " (byte " << i << ": got " << int(got[i])
             << ", want " << int(want[i]) << ")";
    }
}

std::vector<uint8_t> concat(const std::vector<std::vector<uint8_t>> &parts) {
  std::vector<uint8_t> all;
  for (auto &p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

class Groups {
 public:
  Group &get(int n) {
    auto &g = groups_[n];
    if (!g) g = std::make_unique<Group>(n);
    return *g;
  }

 private:
  std::map<int, std::unique_ptr<Group>> groups_;
};

void run_case(Group &g, const Case &c) {
  SCOPED_TRACE(describe(c));
  const int n = g.size();
  const size_t e = dtype_size(c.t), cb = c.count * e, nb = cb * static_cast<size_t>(n);
  const hpuRedOp_t gen_op = reduces(c.coll) ? c.op : HPU_SUM;
  std::vector<std::unique_ptr<Buffer>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<const void *> sp(static_cast<size_t>(n));
  std::vector<void *> rp(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto R = static_cast<size_t>(r);
    hpuDevice_t d = g.dev(r);
    switch (c.coll) {
      case Coll::allreduce:
      case Coll::broadcast:
      case Coll::reduce: {
        bool uses_recv = c.coll != Coll::reduce || r == c.root;
        bool has_input = c.coll != Coll::broadcast || r == c.root;
        auto in = encode(c.t, inputs(c.t, gen_op, r, c.count));
        if (uses_recv) {
          recv[R] = std::make_unique<Buffer>(d, cb);
          recv[R]->fill(0xCD);
          rp[R] = recv[R]->ptr();
        }
        if (c.in_place && uses_recv) {
          if (has_input) recv[R]->upload(in);
          sp[R] = rp[R];
        } else if (has_input) {
          send[R] = std::make_unique<Buffer>(d, cb);
          send[R]->upload(in);
          sp[R] = send[R]->ptr();
        }
        break;
      }
      case Coll::allgather:
        recv[R] = std::make_unique<Buffer>(d, nb);
        recv[R]->fill(0xCD);
        rp[R] = recv[R]->ptr();
        if (c.in_place) {
          recv[R]->upload(encode(c.t, inputs(c.t, gen_op, r, c.count)), R * cb);
          sp[R] = recv[R]->ptr() + R * cb;
        } else {
          send[R] = std::make_unique<Buffer>(d, cb);
          send[R]->upload(encode(c.t, inputs(c.t, gen_op, r, c.count)));
          sp[R] = send[R]->ptr();
        }
        break;
      case Coll::reducescatter:
        send[R] = std::make_unique<Buffer>(d, nb);
        send[R]->upload(encode(c.t, inputs(c.t, gen_op, r, c.count * static_cast<size_t>(n))));
        sp[R] = send[R]->ptr();
        if (c.in_place) {
          rp[R] = send[R]->ptr() + R * cb;
        } else {
          recv[R] = std::make_unique<Buffer>(d, cb);
          recv[R]->fill(0xCD);
          rp[R] = recv[R]->ptr();
        }
        break;
      case Coll::alltoall:
        recv[R] = std::make_unique<Buffer>(d, nb);
        recv[R]->fill(0xCD);
        rp[R] = recv[R]->ptr();
        if (c.in_place) {
          recv[R]->upload(encode(c.t, inputs(c.t, gen_op, r, c.count * static_cast<size_t>(n))));
          sp[R] = rp[R];
        } else {
          send[R] = std::make_unique<Buffer>(d, nb);
          send[R]->upload(encode(c.t, inputs(c.t, gen_op, r, c.count * static_cast<size_t>(n))));
          sp[R] = send[R]->ptr();
        }
        break;
    }
  }
  for (int r = 0; r < n; ++r) {
    auto R = static_cast<size_t>(r);
    hpuStatus_t s = HPU_SUCCESS;
    switch (c.coll) {
      case Coll::allreduce:
        s = hpuAllreduce(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t, c.op);
        break;
      case Coll::broadcast:
        s = hpuBroadcast(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t, c.root);
        break;
      case Coll::reduce:
        s = hpuReduce(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t, c.op, c.root);
        break;
      case Coll::allgather:
        s = hpuAllgather(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t);
        break;
      case Coll::reducescatter:
        s = hpuReduceScatter(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t, c.op);
        break;
      case Coll::alltoall:
        s = hpuAlltoall(g.stream(r), g.comm(r), sp[R], rp[R], c.count, c.t);
        break;
    }
    ASSERT_EQ(s, HPU_SUCCESS) << "rank " << r << ": " << hpuGetLastErrorMessage();
  }
  auto st = g.sync();
  for (int r = 0; r < n; ++r) ASSERT_EQ(st[static_cast<size_t>(r)], HPU_SUCCESS) << "rank " << r << ": " << hpuGetLastErrorMessage();

  for (int r = 0; r < n; ++r) {
    auto R = static_cast<size_t>(r);
    std::string who = "rank " + std::to_string(r);
    switch (c.coll) {
      case Coll::allreduce:
        expect_bytes(recv[R]->download(), reference(c.t, c.op, n, c.count), e, who);
        break;
      case Coll::broadcast:
        expect_bytes(recv[R]->download(), encode(c.t, inputs(c.t, gen_op, c.root, c.count)), e, who);
        break;
      case Coll::reduce:
        if (r == c.root) expect_bytes(recv[R]->download(), reference(c.t, c.op, n, c.count), e, who);
        break;
      case Coll::allgather: {
        std::vector<std::vector<uint8_t>> parts;
        for (int q = 0; q < n; ++q) parts.push_back(encode(c.t, inputs(c.t, gen_op, q, c.count)));
        expect_bytes(recv[R]->download(), concat(parts), e, who);
        break;
      }
      case Coll::reducescatter: {
        auto got = c.in_place ? send[R]->download(R * cb, cb) : recv[R]->download();
        expect_bytes(got, reference(c.t, c.op, n, c.count, R * c.count), e, who);
        break;
      }
      case Coll::alltoall: {
        std::vector<std::vector<uint8_t>> parts;
        for (int q = 0; q < n; ++q) parts.push_back(encode(c.t, inputs(c.t, gen_op, q, c.count, R * c.count)));
        expect_bytes(recv[R]->download(), concat(parts), e, who);
        break;
      }
    }
  }
}

// The sample: for each collective x type x reduction, one case whose rank
// count, count, placement and root rotate through their values, so that
// every value of every axis meets every collective.
std::vector<Case> sampled() {
  std::vector<Case> cases;
  size_t k = 0;
  for (Coll coll : kColls)
    for (int t = 0; t < HPU_NUM_DATA_TYPES; ++t)
      for (int o = 0; o < (reduces(coll) ? HPU_NUM_RED_OPS : 1); ++o, ++k) {
        auto dt = static_cast<hpuDataType_t>(t);
        auto op = static_cast<hpuRedOp_t>(o);
        if (dt == HPU_BOOL && op == HPU_AVG) continue;
        int n = kRanks[k % 5];
        size_t count = kCounts[(k * 7 + k / 5) % (sizeof kCounts / sizeof kCounts[0])];
        cases.push_back({coll, dt, op, n, count, (k / 3) % 2 == 1, static_cast<int>(k % static_cast<size_t>(n))});
      }
  return cases;
}

std::vector<Case> everything() {
  std::vector<Case> cases;
  for (Coll coll : kColls)
    for (int t = 0; t < HPU_NUM_DATA_TYPES; ++t)
      for (int o = 0; o < (reduces(coll) ? HPU_NUM_RED_OPS : 1); ++o)
        for (int n : kRanks)
          for (size_t count : kCounts)
            for (int in_place = 0; in_place < 2; ++in_place) {
              auto dt = static_cast<hpuDataType_t>(t);
              auto op = static_cast<hpuRedOp_t>(o);
              if (dt == HPU_BOOL && op == HPU_AVG) continue;
              cases.push_back({coll, dt, op, n, count, in_place == 1, static_cast<int>((count + 1) % static_cast<size_t>(n))});
            }
  return cases;
}

void run_all(const std::vector<Case> &cases) {
  Groups groups;
  for (const Case &c : cases) {
    run_case(groups.get(c.n), c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace

TEST(Comm, Matrix) { run_all(full_matrix() ? everything() : sampled()); }

// Large messages through the ring and the chains: 64 MiB buffers in the full
// run; in the default suite one 64 MiB allreduce and a few 8 MiB ones.
TEST(Comm, LargeMessages) {
  const size_t mib64 = size_t(64) << 20, mib8 = size_t(8) << 20;
  std::vector<Case> cases = {
      {Coll::allreduce, HPU_FLOAT32, HPU_SUM, 2, mib64 / 4, true, 0},
      {Coll::allreduce, HPU_BFLOAT16, HPU_PROD, 3, mib8 / 2, false, 0},
      {Coll::reducescatter, HPU_FLOAT64, HPU_MAX, 8, mib8 / 8 / 8, false, 0},
      {Coll::allgather, HPU_UINT8, HPU_SUM, 4, mib8 / 4, true, 0},
      {Coll::broadcast, HPU_INT32, HPU_SUM, 3, mib8 / 4, false, 1},
  };
  if (full_matrix())
    cases = {
        {Coll::allreduce, HPU_FLOAT32, HPU_SUM, 8, mib64 / 4, true, 0},
        {Coll::allreduce, HPU_BFLOAT16, HPU_PROD, 3, mib64 / 2, false, 0},
        {Coll::reducescatter, HPU_FLOAT64, HPU_MAX, 4, mib64 / 8 / 4, false, 0},
        {Coll::allgather, HPU_UINT8, HPU_SUM, 2, mib64 / 2, true, 0},
        {Coll::broadcast, HPU_INT32, HPU_SUM, 8, mib64 / 4, false, 5},
        {Coll::reduce, HPU_FLOAT32, HPU_AVG, 3, mib64 / 4, false, 2},
        {Coll::alltoall, HPU_FLOAT16, HPU_SUM, 4, mib64 / 2 / 4, false, 0},
    };
  run_all(cases);
}

// Each algorithm forced on every rank count (HPU_ALGO), with sizes on both
// sides of the rule's threshold.
void forced_algo(const char *algo) {
  setenv("HPU_ALGO", algo, 1);
  std::vector<Case> cases;
  size_t k = 0;
  for (int n : kRanks)
    for (Coll coll : {Coll::allreduce, Coll::broadcast, Coll::reduce, Coll::allgather, Coll::reducescatter})
      for (size_t count : {size_t(5), size_t(3001), size_t(100003)}) {
        auto dt = static_cast<hpuDataType_t>((k * 3) % HPU_NUM_DATA_TYPES);
        auto op = static_cast<hpuRedOp_t>(k % (dt == HPU_BOOL ? 4 : 5));
        cases.push_back({coll, dt, op, n, count, k % 2 == 0, static_cast<int>(k % static_cast<size_t>(n))});
        ++k;
      }
  run_all(cases);
}

TEST(Comm, AlgoRing) { forced_algo("ring"); }
TEST(Comm, AlgoTree) { forced_algo("tree"); }
TEST(Comm, AlgoRecursiveDoubling) { forced_algo("recursive_doubling"); }
TEST(Comm, AlgoHalvingDoubling) { forced_algo("halving_doubling"); }
TEST(Comm, AlgoDirect) { forced_algo("direct"); }
TEST(Comm, AlgoPairwise) { forced_algo("pairwise"); }

// Operations queued back to back without synchronising, each using the last
// one's result: the stream keeps their order on every rank.
TEST(Comm, QueuedBackToBack) {
  Group g(4);
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int r = 0; r < 4; ++r) {
    buf.push_back(std::make_unique<Buffer>(g.dev(r), 1000 * sizeof(double)));
    buf.back()->upload(encode(HPU_FLOAT64, std::vector<double>(1000, 1.0)));
  }
  for (int i = 0; i < 10; ++i)
    for (int r = 0; r < 4; ++r)
      HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), 1000, HPU_FLOAT64, HPU_SUM));
  for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
  for (int r = 0; r < 4; ++r) expect_bytes(buf[r]->download(), encode(HPU_FLOAT64, std::vector<double>(1000, 1048576.0)), 8, "rank");
}

TEST(Comm, Barrier) {
  for (int n : kRanks) {
    Group g(n);
    for (int i = 0; i < 3; ++i)
      for (int r = 0; r < n; ++r) HPU_OK(hpuBarrier(g.stream(r), g.comm(r)));
    for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
  }
}

// Every rank sends to its right neighbour and to itself, and receives from its
// left and from itself, all inside one group.
TEST(Comm, SendRecvRing) {
  const int n = 3;
  const size_t count = 1000;
  Group g(n);
  std::vector<std::unique_ptr<Buffer>> out, in_left, in_self;
  for (int r = 0; r < n; ++r) {
    out.push_back(std::make_unique<Buffer>(g.dev(r), count * 4));
    out.back()->upload(encode(HPU_INT32, inputs(HPU_INT32, HPU_SUM, r, count)));
    in_left.push_back(std::make_unique<Buffer>(g.dev(r), count * 4));
    in_self.push_back(std::make_unique<Buffer>(g.dev(r), count * 4));
  }
  HPU_OK(hpuGroupStart());
  for (int r = 0; r < n; ++r) {
    HPU_OK(hpuSend(g.stream(r), g.comm(r), out[r]->ptr(), count, HPU_INT32, (r + 1) % n));
    HPU_OK(hpuSend(g.stream(r), g.comm(r), out[r]->ptr(), count, HPU_INT32, r));
    HPU_OK(hpuRecv(g.stream(r), g.comm(r), in_left[r]->ptr(), count, HPU_INT32, (r + n - 1) % n));
    HPU_OK(hpuRecv(g.stream(r), g.comm(r), in_self[r]->ptr(), count, HPU_INT32, r));
  }
  HPU_OK(hpuGroupEnd());
  for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
  for (int r = 0; r < n; ++r) {
    expect_bytes(in_left[r]->download(), encode(HPU_INT32, inputs(HPU_INT32, HPU_SUM, (r + n - 1) % n, count)), 4, "left");
    expect_bytes(in_self[r]->download(), encode(HPU_INT32, inputs(HPU_INT32, HPU_SUM, r, count)), 4, "self");
  }
}

// Collectives recorded in a group run at hpuGroupEnd, in call order.
TEST(Comm, CollectivesInGroup) {
  Group g(2);
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int r = 0; r < 2; ++r) {
    buf.push_back(std::make_unique<Buffer>(g.dev(r), 16 * 4));
    buf.back()->upload(encode(HPU_FLOAT32, std::vector<double>(16, 3.0)));
  }
  HPU_OK(hpuGroupStart());
  for (int r = 0; r < 2; ++r) {
    HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), 16, HPU_FLOAT32, HPU_SUM));
    HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), 16, HPU_FLOAT32, HPU_PROD));
  }
  HPU_OK(hpuGroupEnd());
  for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
  for (int r = 0; r < 2; ++r) expect_bytes(buf[r]->download(), encode(HPU_FLOAT32, std::vector<double>(16, 36.0)), 4, "rank");
}

TEST(Comm, CountRankAndTimeout) {
  Group g(3);
  for (int r = 0; r < 3; ++r) {
    int count = 0, rank = -1;
    HPU_OK(hpuCommCount(g.comm(r), &count));
    HPU_OK(hpuCommUserRank(g.comm(r), &rank));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, r);
  }
  double t = 0;
  HPU_OK(hpuCommGetTimeout(g.comm(0), &t));
  EXPECT_EQ(t, 30.0);
  HPU_OK(hpuCommSetTimeout(g.comm(0), 2.5));
  HPU_OK(hpuCommGetTimeout(g.comm(0), &t));
  EXPECT_EQ(t, 2.5);
  HPU_OK(hpuCommSetTimeout(g.comm(0), 0));
  HPU_OK(hpuCommGetTimeout(g.comm(0), &t));
  EXPECT_EQ(t, 30.0);
  hpuStatus_t err = HPU_ERROR_INTERNAL;
  HPU_OK(hpuCommGetAsyncError(g.comm(1), &err));
  EXPECT_EQ(err, HPU_SUCCESS);
}

// hpuCommInitRank from one thread per rank, with an id handed around.
TEST(Comm, InitRankFromThreads) {
  const int n = 4;
  hpuUniqueId_t id;
  HPU_OK(hpuGetUniqueId(&id));
  std::vector<hpuDevice_t> devs(n);
  std::vector<hpuComm_t> comms(n);
  std::vector<hpuStatus_t> st(n);
  for (int r = 0; r < n; ++r) HPU_OK(hpuDeviceOpen(&devs[r], r));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { st[r] = hpuCommInitRank(&comms[r], devs[r], n, &id, r); });
  for (auto &t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_EQ(st[r], HPU_SUCCESS) << r;
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    HPU_OK(hpuCommUserRank(comms[r], &rank));
    EXPECT_EQ(rank, r);
    HPU_OK(hpuCommDestroy(comms[r]));
    HPU_OK(hpuDeviceClose(devs[r]));
  }
}

// op(a, b) by the scalar rules of comm/reduce.hpp.
template <class F>
F scalar_op(hpuRedOp_t op, F a, F b) {
  switch (op) {
    case HPU_SUM: return a + b;
    case HPU_PROD: return a * b;
    case HPU_MIN: return (a < b || a != a) ? a : b;
    default: return (a > b || a != a) ? a : b;
  }
}

// Two ranks allreduce x[0] and x[1] in place; both must end with `want`.
template <class U>
void expect_two_rank_allreduce(Group &g, hpuDataType_t t, hpuRedOp_t op, const std::vector<U> (&x)[2],
                               const std::vector<uint8_t> &want) {
  const size_t count = x[0].size(), bytes = count * sizeof(U);
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int r = 0; r < 2; ++r) {
    buf.push_back(std::make_unique<Buffer>(g.dev(r), bytes));
    std::vector<uint8_t> in(bytes);
    std::memcpy(in.data(), x[r].data(), bytes);
    buf.back()->upload(in);
  }
  for (int r = 0; r < 2; ++r) HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), count, t, op));
  for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
  for (int r = 0; r < 2; ++r) expect_bytes(buf[r]->download(), want, sizeof(U), "rank " + std::to_string(r));
}

// bf16 and f16 reductions of arbitrary bit patterns (subnormals, infinities,
// NaN on one side) give exactly the bits of the scalar conversions of
// kernels/convert.hpp around an f32 operation, whichever vector path runs.
TEST(Comm, HalfPrecisionBitsMatchScalar) {
  using hpu::kernels::bf16_to_f32;
  using hpu::kernels::f16_to_f32;
  using hpu::kernels::f32_to_bf16;
  using hpu::kernels::f32_to_f16;
  Group g(2);
  std::mt19937 gen(7);
  for (hpuDataType_t t : {HPU_BFLOAT16, HPU_FLOAT16})
    for (int o = 0; o < 4; ++o)
      for (size_t count : {size_t(1003), size_t(200003)}) {
        auto op = static_cast<hpuRedOp_t>(o);
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + op_name(op) + " count " + std::to_string(count));
        auto widen = [&](uint16_t h) { return t == HPU_BFLOAT16 ? bf16_to_f32(h) : f16_to_f32(h); };
        auto is_nan = [&](uint16_t h) { return std::isnan(widen(h)); };
        std::vector<uint16_t> x[2];
        for (auto &v : x) v.resize(count);
        for (size_t i = 0; i < count; ++i) {
          x[0][i] = static_cast<uint16_t>(gen());
          // At most one NaN (its payload wins in any order), and no +0/-0 pair
          // (min and max of equal values keep one operand, order-dependent).
          do x[1][i] = static_cast<uint16_t>(gen());
          while ((is_nan(x[0][i]) && is_nan(x[1][i])) || (widen(x[0][i]) == widen(x[1][i]) && x[0][i] != x[1][i]));
        }
        std::vector<uint8_t> want(count * 2);
        for (size_t i = 0; i < count; ++i) {
          float r = scalar_op(op, widen(x[0][i]), widen(x[1][i]));
          uint16_t h = t == HPU_BFLOAT16 ? f32_to_bf16(r) : f32_to_f16(r);
          std::memcpy(&want[i * 2], &h, 2);
        }
        expect_two_rank_allreduce(g, t, op, x, want);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// f32 and f64 reductions of arbitrary bit patterns (subnormals, infinities,
// NaN on one side) give exactly the bits of the scalar operation, whichever
// vector path runs: a short allreduce (gather_allreduce) and a long one
// (direct between threads, pairwise elsewhere).
template <class F, class U>
void float_bits_match_scalar(hpuDataType_t t) {
  Group g(2);
  std::mt19937_64 gen(11);
  auto value = [](U u) {
    F f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  for (int o = 0; o < 4; ++o)
    for (size_t count : {size_t(1003), size_t(100003)}) {
      auto op = static_cast<hpuRedOp_t>(o);
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + op_name(op) + " count " + std::to_string(count));
      std::vector<U> x[2];
      for (auto &v : x) v.resize(count);
      for (size_t i = 0; i < count; ++i) {
        x[0][i] = static_cast<U>(gen());
        // At most one NaN, and no +0/-0 pair (as for the 16-bit floats).
        do x[1][i] = static_cast<U>(gen());
        while ((std::isnan(value(x[0][i])) && std::isnan(value(x[1][i]))) ||
               (value(x[0][i]) == value(x[1][i]) && x[0][i] != x[1][i]));
      }
      std::vector<uint8_t> want(count * sizeof(F));
      for (size_t i = 0; i < count; ++i) {
        F r = scalar_op(op, value(x[0][i]), value(x[1][i]));
        std::memcpy(&want[i * sizeof(F)], &r, sizeof(F));
      }
      expect_two_rank_allreduce(g, t, op, x, want);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Comm, FloatBitsMatchScalar) {
  float_bits_match_scalar<float, uint32_t>(HPU_FLOAT32);
  float_bits_match_scalar<double, uint64_t>(HPU_FLOAT64);
}

// Integer reductions of full-range values wrap around and give the scalar
// results on the vector paths too, bool included; avg of two ranks is the
// wrapped sum halved toward zero.
template <class I>
void integer_bits_match_scalar(hpuDataType_t t) {
  Group g(2);
  std::mt19937_64 gen(13);
  for (int o = 0; o < HPU_NUM_RED_OPS; ++o)
    for (size_t count : {size_t(1003), size_t(100003)}) {
      auto op = static_cast<hpuRedOp_t>(o);
      if (t == HPU_BOOL && op == HPU_AVG) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + op_name(op) + " count " + std::to_string(count));
      std::vector<I> x[2];
      for (auto &v : x) {
        v.resize(count);
        for (auto &e : v) e = t == HPU_BOOL ? static_cast<I>(gen() % 2) : static_cast<I>(gen());
      }
      std::vector<uint8_t> want(count * sizeof(I));
      for (size_t i = 0; i < count; ++i) {
        using U = std::make_unsigned_t<I>;
        const I a = x[0][i], b = x[1][i];
        const auto wrapped = [](auto v) { return static_cast<I>(static_cast<U>(v)); };
        I r;
        if (t == HPU_BOOL)
          r = static_cast<I>(op == HPU_PROD || op == HPU_MIN ? (a && b) : (a || b));
        else if (op == HPU_SUM || op == HPU_AVG)
          r = wrapped(static_cast<uint64_t>(static_cast<U>(a)) + static_cast<U>(b));
        else if (op == HPU_PROD)
          r = wrapped(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b));
        else
          r = op == HPU_MIN ? std::min(a, b) : std::max(a, b);
        if (op == HPU_AVG) r = static_cast<I>(r / 2);
        std::memcpy(&want[i * sizeof(I)], &r, sizeof(I));
      }
      expect_two_rank_allreduce(g, t, op, x, want);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(Comm, IntegerBitsMatchScalar) {
  integer_bits_match_scalar<uint8_t>(HPU_BOOL);
  integer_bits_match_scalar<uint8_t>(HPU_UINT8);
  integer_bits_match_scalar<int8_t>(HPU_INT8);
  integer_bits_match_scalar<int32_t>(HPU_INT32);
  integer_bits_match_scalar<uint32_t>(HPU_UINT32);
  integer_bits_match_scalar<int64_t>(HPU_INT64);
  integer_bits_match_scalar<uint64_t>(HPU_UINT64);
}

// Small allreduces of more than 2 ranks (gather_allreduce) give every rank
// the bits of rank order (rank_order_sum), as every other layout does.
TEST(Comm, SmallAllreduceBitsFollowRankOrder) {
  using hpu::kernels::bf16_to_f32;
  using hpu::kernels::f32_to_bf16;
  std::mt19937 gen(5);
  for (int n : {3, 4, 5, 8}) {
    Group g(n);
    // 1000 elements, and 128 KiB / n bytes (the most that stays below the
    // direct algorithm of ranks that are threads, kDirectMinBytes).
    for (hpuDataType_t t : {HPU_FLOAT32, HPU_BFLOAT16})
      for (size_t count : {size_t(1000), (size_t(128) << 10) / static_cast<size_t>(n) / dtype_size(t)}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " n=" + std::to_string(n) + " count=" + std::to_string(count));
        const size_t e = dtype_size(t);
        auto x = random_floats(t, n, count, gen);
        std::vector<uint8_t> want = rank_order_sum(t, x);
        std::vector<std::unique_ptr<Buffer>> buf;
        for (int r = 0; r < n; ++r) {
          buf.push_back(std::make_unique<Buffer>(g.dev(r), count * e));
          buf.back()->upload(encode_floats(t, x[static_cast<size_t>(r)]));
        }
        for (int r = 0; r < n; ++r)
          HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), count, t, HPU_SUM));
        for (auto s : g.sync()) ASSERT_EQ(s, HPU_SUCCESS) << hpuGetLastErrorMessage();
        for (int r = 0; r < n; ++r) expect_bytes(buf[r]->download(), want, e, "rank " + std::to_string(r));
      }
  }
}
