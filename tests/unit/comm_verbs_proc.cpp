// The collectives through the public API between forked processes over the
// verbs transport, run on the FAKE libibverbs of tests/support/fake_ibverbs
// (HPU_TRANSPORT=verbs, HPU_IB_LIBRARY names the fake; there is no RDMA
// hardware here): every collective, a sample of data types and operations,
// small and chunked sizes, against references computed here; and a fault the
// fake injects failing every rank's next collective with its status. Measures
// nothing.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"

using namespace comm_test;

namespace {

constexpr int kRanks = 3;

struct Shared {
  hpuUniqueId_t id;
  volatile int ready;
  int status[kRanks];
  char message[kRanks][512];
};

Shared *shared() {
  auto *s = static_cast<Shared *>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(s, 0, sizeof *s);
  return s;
}

// One rank's process: the library is first used here, after the fork.
struct Rank {
  int r;
  Shared *sh;
  hpuDevice_t dev = nullptr;
  hpuStream_t stream = nullptr;
  hpuComm_t comm = nullptr;
  std::string error;

  bool check(hpuStatus_t s, const char *what) {
    if (s == HPU_SUCCESS) return true;
    if (error.empty()) error = std::string(what) + ": " + hpuGetErrorName(s) + ": " + hpuGetLastErrorMessage();
    return false;
  }
  bool init() {
    if (!check(hpuDeviceOpen(&dev, 0), "hpuDeviceOpen") || !check(hpuDeviceGetDefaultStream(dev, &stream), "stream"))
      return false;
    if (r == 0) {
      if (!check(hpuGetUniqueId(&sh->id), "hpuGetUniqueId")) return false;
      __sync_synchronize();
      sh->ready = 1;
    }
    while (!sh->ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    hpuUniqueId_t id = sh->id;
    return check(hpuCommInitRank(&comm, dev, kRanks, &id, r), "hpuCommInitRank");
  }
  void *alloc(size_t bytes) {
    void *p = nullptr;
    check(hpuMemAlloc(&p, dev, bytes ? bytes : 1), "hpuMemAlloc");
    return p;
  }
  void put(void *dst, const std::vector<uint8_t> &v) {
    if (!v.empty()) check(hpuMemcpy(dst, v.data(), v.size(), HPU_MEMCPY_HOST_TO_DEVICE), "upload");
  }
  std::vector<uint8_t> get(const void *src, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    if (bytes) check(hpuMemcpy(v.data(), src, bytes, HPU_MEMCPY_DEVICE_TO_HOST), "download");
    return v;
  }
  bool same(const std::vector<uint8_t> &got, const std::vector<uint8_t> &want, const std::string &what) {
    if (got == want) return true;
    if (error.empty()) error = what + ": wrong result";
    return false;
  }
};

// Every rank's inputs [first, first + count), one after the other.
std::vector<uint8_t> concat_inputs(hpuDataType_t t, hpuRedOp_t op, int n, size_t count, size_t first) {
  std::vector<uint8_t> out;
  for (int q = 0; q < n; ++q) {
    auto part = encode(t, inputs(t, op, q, count, first));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// Every collective on rank `k`; false (and k.error) on the first problem.
bool run_collectives(Rank &k) {
  const int n = kRanks, r = k.r;
  struct Case {
    hpuDataType_t t;
    hpuRedOp_t op;
  };
  std::vector<Case> cases = {{HPU_FLOAT32, HPU_SUM}, {HPU_BFLOAT16, HPU_SUM}, {HPU_INT32, HPU_MAX},
                             {HPU_FLOAT64, HPU_AVG}, {HPU_UINT8, HPU_MIN},   {HPU_INT64, HPU_PROD}};
  std::vector<size_t> counts = {1, 4099, 300007};
  for (auto c : cases)
    for (size_t count : counts) {
      size_t es = dtype_size(c.t), bytes = count * es;
      std::string what = std::string("allreduce ") + dtype_name(c.t) + " " + op_name(c.op) + " x" + std::to_string(count);
      void *in = k.alloc(bytes), *out = k.alloc(bytes);
      k.put(in, encode(c.t, inputs(c.t, c.op, r, count)));
      bool ok = k.check(hpuAllreduce(k.stream, k.comm, in, out, count, c.t, c.op), what.c_str()) &&
                k.check(hpuStreamSynchronize(k.stream), what.c_str()) &&
                k.same(k.get(out, bytes), reference(c.t, c.op, n, count), what);
      hpuMemFree(in);
      hpuMemFree(out);
      if (!ok) return false;
    }
  const hpuDataType_t t = HPU_FLOAT32;
  const hpuRedOp_t op = HPU_SUM;
  for (size_t count : {size_t(7), size_t(200003)}) {
    size_t bytes = count * 4;
    void *in = k.alloc(bytes * n), *out = k.alloc(bytes * n);
    auto sync = [&](hpuStatus_t s, const char *what) { return k.check(s, what) && k.check(hpuStreamSynchronize(k.stream), what); };
    // broadcast from rank 1
    k.put(in, encode(t, inputs(t, op, r, count)));
    if (!sync(hpuBroadcast(k.stream, k.comm, in, out, count, t, 1), "broadcast") ||
        !k.same(k.get(out, bytes), encode(t, inputs(t, op, 1, count)), "broadcast"))
      return false;
    // reduce to rank 2
    if (!sync(hpuReduce(k.stream, k.comm, in, out, count, t, op, 2), "reduce") ||
        (r == 2 && !k.same(k.get(out, bytes), reference(t, op, n, count), "reduce")))
      return false;
    // allgather
    if (!sync(hpuAllgather(k.stream, k.comm, in, out, count, t), "allgather") ||
        !k.same(k.get(out, bytes * n), concat_inputs(t, op, n, count, 0), "allgather"))
      return false;
    // reduce-scatter: rank r gets its part of the sum of everyone's n * count inputs
    k.put(in, encode(t, inputs(t, op, r, count * n)));
    if (!sync(hpuReduceScatter(k.stream, k.comm, in, out, count, t, op), "reducescatter") ||
        !k.same(k.get(out, bytes), reference(t, op, n, count, static_cast<size_t>(r) * count), "reducescatter"))
      return false;
    // all-to-all: block q of rank r's input goes to rank q
    if (!sync(hpuAlltoall(k.stream, k.comm, in, out, count, t), "alltoall")) return false;
    if (!k.same(k.get(out, bytes * n), concat_inputs(t, op, n, count, static_cast<size_t>(r) * count), "alltoall"))
      return false;
    // a ring of sends and receives
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    k.put(in, encode(t, inputs(t, op, r, count)));
    bool ok = k.check(hpuGroupStart(), "group") && k.check(hpuSend(k.stream, k.comm, in, count, t, next), "send") &&
              k.check(hpuRecv(k.stream, k.comm, out, count, t, prev), "recv") && sync(hpuGroupEnd(), "group end");
    if (!ok || !k.same(k.get(out, bytes), encode(t, inputs(t, op, prev, count)), "send/recv")) return false;
    if (!sync(hpuBarrier(k.stream, k.comm), "barrier")) return false;
    hpuMemFree(in);
    hpuMemFree(out);
  }
  return true;
}

// `before_init(r)` runs in rank r's process before the library initialises
// (the fake reads its fault setting when a communicator is made).
std::vector<int> run(Shared *sh, const std::function<int(Rank &)> &body,
                     const std::function<void(int)> &before_init = nullptr) {
  auto pids = fork_ranks(kRanks, [&](int r) {
    if (before_init) before_init(r);
    Rank k{r, sh, nullptr, nullptr, nullptr, {}};
    int code = k.init() ? body(k) : 3;
    sh->status[r] = code;
    snprintf(sh->message[r], sizeof sh->message[r], "%s", k.error.c_str());
    if (k.comm) hpuCommDestroy(k.comm);
    return code;
  });
  return reap(pids, 90);
}

// The ranks forked from here use verbs over the fake libibverbs.
void over_the_fake_libibverbs() {
  setenv("HPU_TRANSPORT", "verbs", 1);
  setenv("HPU_IB_LIBRARY", HPU_FAKE_IBVERBS, 1);
}

}  // namespace

TEST(CommVerbsProc, CollectivesOverTheFakeLibibverbs) {
  over_the_fake_libibverbs();
  Shared *sh = shared();
  auto codes = run(sh, [](Rank &k) { return run_collectives(k) ? 0 : 4; });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << ": " << sh->message[r];
  munmap(sh, sizeof *sh);
}

// Rank 1's fake libibverbs fails its 30th send with a remote access error: every
// rank's collective fails with HPU_ERROR_REMOTE, and the communicator stays failed.
TEST(CommVerbsProc, InjectedFaultFailsEveryRank) {
  over_the_fake_libibverbs();
  Shared *sh = shared();
  auto codes = run(
      sh,
      [](Rank &k) {
    size_t count = 100000;
    void *buf = k.alloc(count * 4);
    hpuStatus_t first = HPU_SUCCESS;
    for (int i = 0; i < 50 && first == HPU_SUCCESS; ++i) {
      first = hpuAllreduce(k.stream, k.comm, buf, buf, count, HPU_FLOAT32, HPU_SUM);
      if (first == HPU_SUCCESS) first = hpuStreamSynchronize(k.stream);
    }
    k.error = std::string(hpuGetErrorName(first)) + ": " + hpuGetLastErrorMessage();
    if (first != HPU_ERROR_REMOTE) return 5;
    hpuStatus_t again = hpuAllreduce(k.stream, k.comm, buf, buf, count, HPU_FLOAT32, HPU_SUM);
    if (again == HPU_SUCCESS) again = hpuStreamSynchronize(k.stream);
    if (again != HPU_ERROR_REMOTE) return 6;
    return 0;
      },
      [](int r) {
        if (r == 1) setenv("HPU_FAKE_IBV_FAULT", "remote_access:30", 1);
      });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << ": " << sh->message[r];
  // Rank 1's own completion says "remote access error"; the responder's queue
  // pair fails with a local access violation, which may reach rank 1 first.
  const std::string message = sh->message[1];
  EXPECT_TRUE(message.find("remote access error") != std::string::npos ||
              message.find("local access violation") != std::string::npos)
      << message;
  munmap(sh, sizeof *sh);
}

namespace {
// The verbs engine's summary line, caught through the log callback.
char g_summary[512];
void catch_summary(hpuLogLevel_t, const char *line, void *) {
  if (std::strstr(line, "written into receive buffers directly")) snprintf(g_summary, sizeof g_summary, "%s", line);
}
}  // namespace

// Through the public API, large transfers between device buffers are
// zero-copy: the engine's summary at hpuCommDestroy counts the bytes RDMA-written
// straight into receive buffers, and the registration cache registered each
// device segment once and then found it again.
TEST(CommVerbsProc, LargeTransfersIntoDeviceMemoryAreZeroCopy) {
  over_the_fake_libibverbs();
  setenv("HPU_LOG_LEVEL", "debug", 1);
  Shared *sh = shared();
  auto codes = run(
      sh,
      [](Rank &k) {
        const size_t count = 1 << 20;  // 4 MiB of f32
        void *in = k.alloc(count * 4 * kRanks), *out = k.alloc(count * 4 * kRanks);
        k.put(in, encode(HPU_FLOAT32, inputs(HPU_FLOAT32, HPU_SUM, k.r, count)));
        for (int i = 0; i < 3; ++i) {
          if (!k.check(hpuBroadcast(k.stream, k.comm, in, out, count, HPU_FLOAT32, 0), "broadcast") ||
              !k.check(hpuStreamSynchronize(k.stream), "broadcast") ||
              !k.same(k.get(out, count * 4), encode(HPU_FLOAT32, inputs(HPU_FLOAT32, HPU_SUM, 0, count)), "broadcast"))
            return 4;
          if (!k.check(hpuAllgather(k.stream, k.comm, in, out, count, HPU_FLOAT32), "allgather") ||
              !k.check(hpuStreamSynchronize(k.stream), "allgather") ||
              !k.same(k.get(out, count * 4 * kRanks), concat_inputs(HPU_FLOAT32, HPU_SUM, kRanks, count, 0),
                      "allgather"))
            return 4;
        }
        hpuCommDestroy(k.comm);
        k.comm = nullptr;
        hpuMemFree(in);
        hpuMemFree(out);
        unsigned long long direct = 0, copied = 0, slots = 0, inl = 0, regs = 0, hits = 0, stale = 0;
        if (std::sscanf(std::strstr(g_summary, ": ") ? std::strstr(g_summary, "verbs transport") : "",
                        "verbs transport of rank %*d: %llu bytes written into receive buffers directly (%llu of them "
                        "copied from unregistered send buffers), %llu through receive slots, %llu inline writes; "
                        "registration cache: %llu registrations, %llu hits, %llu stale",
                        &direct, &copied, &slots, &inl, &regs, &hits, &stale) != 7) {
          k.error = std::string("no summary line: ") + g_summary;
          return 5;
        }
        k.error = g_summary;
        // Rank 0 only sends in the broadcasts; every rank sends 2 x 4 MiB per allgather step.
        if (direct < 3ull * 4 * count * 2 / 2 || copied != 0 || regs == 0 || regs > 4 || hits < 6) return 6;
        return 0;
      },
      [](int) { hpuSetLogCallback(catch_summary, nullptr); });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << ": " << sh->message[r];
  unsetenv("HPU_LOG_LEVEL");
  munmap(sh, sizeof *sh);
}
