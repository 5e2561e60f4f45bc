// One combining order whatever the layout (hpuAllreduce(3)): the same
// allreduces (sum and average), reduce-scatters and reduces of 3, 4 and 5
// ranks, laid out as threads of one process, processes over shm, tcp and verbs
// (the fake libibverbs), processes with several devices each (by locality and
// over tcp) and processes on two hosts (network namespaces: shm within a host,
// tcp between them), give bitwise the result computed here in rank order, on
// every rank. The inputs are floats of very different magnitudes, so that any
// other order gives other bits; the sizes lie on both sides of every size
// that changes a path (16, 46, 64 and 128 KiB, 128 KiB over the rank count,
// 1 and 2 MiB), f32 and bf16. Through the public API, with every process
// forked before the library starts; each rank reports a hash of every result.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"
#include "netns.hpp"

using namespace comm_test;

namespace {

enum class Coll { allreduce, reducescatter, reduce };
constexpr int kRoot = 1;  // of the reduces

struct Case {
  Coll coll;
  hpuDataType_t t;
  hpuRedOp_t op;
  size_t count;  // reduce-scatter: per rank
  bool in_place;
};

std::string describe(const Case &k) {
  static const char *names[] = {"allreduce", "reduce-scatter", "reduce"};
  return std::string(names[static_cast<int>(k.coll)]) + " " + dtype_name(k.t) + " " + op_name(k.op) + " of " +
         std::to_string(k.count * dtype_size(k.t)) + " bytes" + (k.in_place ? " in place" : "");
}

// The cases of n ranks, in the order every rank runs them.
std::vector<Case> cases(int n) {
  const size_t direct = (size_t(128) << 10) / static_cast<size_t>(n) & ~size_t(63);  // threads: direct above it
  std::vector<size_t> bytes = {12, 4096};
  for (size_t edge : {size_t(16) << 10, size_t(46) << 10, size_t(64) << 10, direct, size_t(128) << 10,
                      size_t(1) << 20, size_t(2) << 20}) {
    bytes.push_back(edge - 256);
    bytes.push_back(edge + 256);
  }
  bytes.push_back((size_t(3) << 20) + 768);  // two 1 MiB segments of a piece at 3 ranks
  std::vector<Case> out;
  bool in_place = false;
  for (hpuDataType_t t : {HPU_FLOAT32, HPU_BFLOAT16}) {
    const size_t e = dtype_size(t);
    for (size_t b : bytes) out.push_back({Coll::allreduce, t, HPU_SUM, b / e, in_place = !in_place});
    for (size_t b : {size_t(4096), (size_t(64) << 10) + 256, (size_t(1) << 20) + 256})
      out.push_back({Coll::allreduce, t, HPU_AVG, b / e, in_place = !in_place});
    for (size_t b : {size_t(12), direct / static_cast<size_t>(n), (size_t(64) << 10) + 256, (size_t(1) << 20) + 256})
      out.push_back({Coll::reducescatter, t, HPU_SUM, b / e, in_place = !in_place});
    for (size_t b : {size_t(4096), (size_t(64) << 10) - 256, (size_t(64) << 10) + 256, (size_t(2) << 20) + 256})
      out.push_back({Coll::reduce, t, HPU_SUM, b / e, in_place = !in_place});
  }
  return out;
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of rank r's input of case k: a random sign and mantissa times
// 2^-20 to 2^20 (bf16: a value bf16 holds exactly).
float value(size_t k, int r, size_t i, hpuDataType_t t) {
  const uint64_t h = mix((k << 48) ^ (static_cast<uint64_t>(r) << 40) ^ i);
  const float v = std::ldexp(static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f, static_cast<int>((h >> 24) % 41) - 20);
  return t == HPU_BFLOAT16 ? hpu::kernels::bf16_to_f32(hpu::kernels::f32_to_bf16(v)) : v;
}

size_t input_count(const Case &k, int n) { return k.coll == Coll::reducescatter ? k.count * static_cast<size_t>(n) : k.count; }

std::vector<float> input_of(size_t k, const Case &c, int n, int r) {
  std::vector<float> v(input_count(c, n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(k, r, i, c.t);
  return v;
}

uint64_t fnv(const uint8_t *p, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// The hash of rank r's result of case k in rank order (0 where a rank gets none).
std::vector<uint64_t> reference_hashes(size_t k, const Case &c, int n) {
  std::vector<std::vector<float>> x;
  for (int r = 0; r < n; ++r) x.push_back(input_of(k, c, n, r));
  std::vector<uint8_t> sum = rank_order_sum(c.t, x);
  if (c.op == HPU_AVG) {
    std::vector<float> f(x[0].size());
    for (size_t i = 0; i < f.size(); ++i) {
      float s;
      if (c.t == HPU_FLOAT32) {
        std::memcpy(&s, &sum[i * 4], 4);
      } else {
        uint16_t h;
        std::memcpy(&h, &sum[i * 2], 2);
        s = hpu::kernels::bf16_to_f32(h);
      }
      f[i] = s / static_cast<float>(n);
    }
    sum = encode_floats(c.t, f);
  }
  const size_t bytes = c.count * dtype_size(c.t);
  std::vector<uint64_t> h(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    if (c.coll == Coll::reduce && r != kRoot) continue;
    const size_t at = c.coll == Coll::reducescatter ? static_cast<size_t>(r) * bytes : 0;
    h[static_cast<size_t>(r)] = fnv(sum.data() + at, bytes);
  }
  return h;
}

constexpr int kMaxRanks = 5;
constexpr int kMaxCases = 64;

// What the ranks of one layout report, in memory shared with the test.
struct Page {
  hpuUniqueId_t id;
  std::atomic<int> published{0};
  uint64_t hash[kMaxRanks][kMaxCases];
  char error[kMaxRanks][256];
};

struct Layout {
  const char *name;
  std::vector<int> devices;  // per process, ranks in order
  const char *transport;     // HPU_TRANSPORT ("": by locality)
  bool hosts;                // the processes split between two hosts
};

std::vector<Layout> layouts(int n) {
  std::vector<int> one(static_cast<size_t>(n), 1), two = {(n + 1) / 2, n / 2};
  return {{"threads", {n}, "", false},
          {"shm", one, "shm", false},
          {"tcp", one, "tcp", false},
          {"verbs", one, "verbs", false},
          {"2 processes by locality", two, "", false},
          {"2 processes over tcp", two, "tcp", false},
          {"processes on 2 hosts", one, "", true},
          {"2 processes on 2 hosts", two, "", true}};
}

// Rank `rank` of n on device `dev`: every case, each result's hash into the page.
void run_rank(Page *page, int n, int rank, int dev_index, const std::vector<Case> &all) {
  auto fail = [&](const std::string &what) {
    snprintf(page->error[rank], sizeof page->error[0], "%s: %s", what.c_str(), hpuGetLastErrorMessage());
  };
  hpuDevice_t dev = nullptr;
  hpuComm_t comm = nullptr;
  hpuStream_t stream = nullptr;
  if (hpuDeviceOpen(&dev, dev_index) != HPU_SUCCESS || hpuDeviceGetDefaultStream(dev, &stream) != HPU_SUCCESS)
    return fail("device");
  hpuUniqueId_t id = page->id;
  if (hpuCommInitRank(&comm, dev, n, &id, rank) != HPU_SUCCESS) {
    hpuDeviceClose(dev);
    return fail("hpuCommInitRank");
  }
  for (size_t k = 0; k < all.size() && !page->error[rank][0]; ++k) {
    const Case &c = all[k];
    const size_t e = dtype_size(c.t), in_bytes = input_count(c, n) * e, out_bytes = c.count * e;
    const std::vector<uint8_t> in = encode_floats(c.t, input_of(k, c, n, rank));
    void *send = nullptr, *recv = nullptr;
    if (hpuMemAlloc(&send, dev, in_bytes) != HPU_SUCCESS || hpuMemAlloc(&recv, dev, in_bytes) != HPU_SUCCESS ||
        hpuMemcpy(send, in.data(), in_bytes, HPU_MEMCPY_HOST_TO_DEVICE) != HPU_SUCCESS) {
      fail(describe(c) + ": setup");
      break;
    }
    const size_t at = c.coll == Coll::reducescatter ? static_cast<size_t>(rank) * out_bytes : 0;
    char *out = c.in_place ? static_cast<char *>(send) + at : static_cast<char *>(recv);
    hpuStatus_t s = c.coll == Coll::allreduce       ? hpuAllreduce(stream, comm, send, out, c.count, c.t, c.op)
                    : c.coll == Coll::reducescatter ? hpuReduceScatter(stream, comm, send, out, c.count, c.t, c.op)
                                                    : hpuReduce(stream, comm, send, out, c.count, c.t, c.op, kRoot);
    if (s == HPU_SUCCESS) s = hpuStreamSynchronize(stream);
    std::vector<uint8_t> got(out_bytes);
    if (s != HPU_SUCCESS || hpuMemcpy(got.data(), out, out_bytes, HPU_MEMCPY_DEVICE_TO_HOST) != HPU_SUCCESS)
      fail(describe(c));
    else
      page->hash[rank][k] = c.coll == Coll::reduce && rank != kRoot ? 0 : fnv(got.data(), out_bytes);
    hpuMemFree(send);
    hpuMemFree(recv);
  }
  hpuCommDestroy(comm);
  hpuDeviceClose(dev);
}

// Runs every case of n ranks in each layout; every rank's every result must
// hash as the rank-order result does.
void expect_rank_order_everywhere(int n) {
  const std::vector<Case> all = cases(n);
  ASSERT_LE(all.size(), static_cast<size_t>(kMaxCases));
  std::vector<std::vector<uint64_t>> want;
  for (size_t k = 0; k < all.size(); ++k) want.push_back(reference_hashes(k, all[k], n));
  hpu_test::Hosts hosts;
  ASSERT_TRUE(hosts.ok) << hosts.why;
  for (const Layout &l : layouts(n)) {
    SCOPED_TRACE(std::string(l.name) + ", " + std::to_string(n) + " ranks");
    auto *page = static_cast<Page *>(mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(page, MAP_FAILED);
    new (page) Page;
    std::memset(page->hash, 0xff, sizeof page->hash);
    std::memset(page->error, 0, sizeof page->error);
    const int procs = static_cast<int>(l.devices.size());
    auto pids = fork_ranks(procs, [&](int p) {
      if (l.hosts) {  // the first half of the processes on host 0, the others on host 1
        const std::string ns = "/var/run/netns/" + hosts.ns[p * 2 / procs];
        const int fd = open(ns.c_str(), O_RDONLY);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) return 5;
        close(fd);
      } else {
        setenv("HPU_SOCKET_IFNAME", "lo", 1);
      }
      if (*l.transport) setenv("HPU_TRANSPORT", l.transport, 1);
      if (std::strcmp(l.transport, "verbs") == 0) setenv("HPU_IB_LIBRARY", HPU_FAKE_IBVERBS, 1);
      setenv("HPU_COMM_TIMEOUT", "30", 1);
      unsetenv("HPU_ALGO");
      int first = 0;
      for (int q = 0; q < p; ++q) first += l.devices[static_cast<size_t>(q)];
      if (p == 0) {
        if (hpuGetUniqueId(&page->id) != HPU_SUCCESS) return 6;
        page->published.store(1, std::memory_order_release);
      }
      while (!page->published.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<std::thread> ranks;
      for (int d = 0; d < l.devices[static_cast<size_t>(p)]; ++d)
        ranks.emplace_back(run_rank, page, n, first + d, d, std::cref(all));
      for (auto &t : ranks) t.join();
      return 0;
    });
    auto codes = reap(pids, 120);
    for (int p = 0; p < procs; ++p) EXPECT_EQ(codes[static_cast<size_t>(p)], 0) << "process " << p;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(page->error[r][0], 0) << "rank " << r << ": " << page->error[r];
      for (size_t k = 0; k < all.size() && !page->error[r][0]; ++k)
        EXPECT_EQ(page->hash[r][k], want[k][static_cast<size_t>(r)])
            << "rank " << r << ", " << describe(all[k]) << ": not the bits of rank order";
    }
    page->~Page();
    munmap(page, sizeof(Page));
  }
}

TEST(CommLayouts, ThreeRanksGiveTheBitsOfRankOrder) { expect_rank_order_everywhere(3); }
TEST(CommLayouts, FourRanksGiveTheBitsOfRankOrder) { expect_rank_order_everywhere(4); }
TEST(CommLayouts, FiveRanksGiveTheBitsOfRankOrder) { expect_rank_order_everywhere(5); }

}  // namespace
