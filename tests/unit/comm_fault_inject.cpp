// HPU_FAULT_INJECT's transport faults through the public API: forked processes
// form a group over shm or tcp (hpuCommInitFromEnv) with the fault set before
// their first libhpu call. A connection dropped after N bytes fails the
// allreduce on every rank with HPU_ERROR_REMOTE and a message (the dropping
// rank's names the fault); every process survives, destroys the communicator
// in error and joins a new group whose allreduce works. A delayed peer only
// slows the job; a stalled one makes every rank return by its deadline. And
// without injection: a rank SIGKILLed or SIGSTOPped while the others wait in
// hpuBarrier (comm_wire covers the exchange and the bootstrap).
#include <hpu/hpu.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ports.hpp"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

namespace {

// A rank's exit code: 4 when LeakSanitizer (ASan builds) finds a leak, which
// _exit would otherwise skip.
int leak_code() {
#ifdef __SANITIZE_ADDRESS__
  return __lsan_do_recoverable_leak_check() ? 4 : 0;
#else
  return 0;
#endif
}

constexpr int kRanks = 3;

struct Outcome {
  int status;          // of the faulty allreduce
  char message[512];
  double seconds;      // how long it took to return
  double started;      // when it was called, on the host's steady clock (s)
  double ended;        // when it returned
  int destroy_status;  // of hpuCommDestroy on the communicator in error
  int again_status;    // of an allreduce in a new group (-1: not tried)
  int again_correct;
  char again_message[512];
};

struct Shared {
  Outcome rank[kRanks];
};

// The first failure of `status` steps, with the thread's message.
struct Step {
  hpuStatus_t status = HPU_SUCCESS;
  std::string message;
  void operator()(hpuStatus_t s) {
    if (status == HPU_SUCCESS && s != HPU_SUCCESS) {
      status = s;
      message = hpuGetLastErrorMessage();
    }
  }
};

// One allreduce (sum) of `count` floats, each rank contributing rank + 1.
Step allreduce(hpuComm_t comm, hpuDevice_t dev, size_t count, bool *correct) {
  Step step;
  std::vector<float> host(count, 0.0f);
  int rank = -1;
  step(hpuCommUserRank(comm, &rank));
  for (float &v : host) v = float(rank + 1);
  void *buf = nullptr;
  hpuStream_t stream = nullptr;
  // A stream of its own: a failed collective stays its stream's sticky error.
  step(hpuStreamCreate(&stream, dev));
  step(hpuMemAlloc(&buf, dev, count * sizeof(float)));
  if (step.status == HPU_SUCCESS) {
    step(hpuMemcpy(buf, host.data(), count * sizeof(float), HPU_MEMCPY_HOST_TO_DEVICE));
    step(hpuAllreduce(stream, comm, buf, buf, count, HPU_FLOAT32, HPU_SUM));
    step(hpuStreamSynchronize(stream));
    hpuStatus_t async = HPU_SUCCESS;
    step(hpuCommGetAsyncError(comm, &async));
    step(async);
    step(hpuMemcpy(host.data(), buf, count * sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST));
  }
  hpuMemFree(buf);
  hpuStreamDestroy(stream);
  if (correct) {
    const float sum = float(kRanks * (kRanks + 1) / 2);
    *correct = step.status == HPU_SUCCESS;
    for (float v : host) *correct = *correct && v == sum;
  }
  return step;
}

// Rank r of kRanks on one host, over `transport`, with a `timeout` in seconds.
void set_rank_env(const std::string &transport, int r, double timeout) {
  setenv("HPU_TRANSPORT", transport.c_str(), 1);
  setenv("HPU_RANK", std::to_string(r).c_str(), 1);
  setenv("HPU_LOCAL_RANK", std::to_string(r).c_str(), 1);
  setenv("HPU_WORLD_SIZE", std::to_string(kRanks).c_str(), 1);
  setenv("HPU_COMM_TIMEOUT", std::to_string(timeout).c_str(), 1);
  setenv("HPU_LOG_LEVEL", "error", 1);
}

hpuStatus_t join(hpuComm_t *comm, hpuDevice_t dev, int port) {
  setenv("HPU_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  return hpuCommInitFromEnv(comm, 1, &dev);
}

// Runs kRanks processes; each sets the fault and the transport, joins the group
// on a free port, runs an allreduce of `count` floats, destroys the communicator and,
// when `again`, joins a second group for a small allreduce.
Shared *run(const std::string &transport, const std::string &fault, size_t count, double timeout, bool again) {
  auto *sh = static_cast<Shared *>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(sh, 0, sizeof *sh);
  const std::vector<int> ports = hpu_test::free_ports(2);
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("HPU_FAULT_INJECT", fault.c_str(), 1);
      set_rank_env(transport, r, timeout);
      Outcome &o = sh->rank[r];
      o.again_status = -1;
      hpuDevice_t dev = nullptr;
      hpuComm_t comm = nullptr;
      if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || join(&comm, dev, ports[0]) != HPU_SUCCESS) _exit(3);
      auto t0 = std::chrono::steady_clock::now();
      Step s = allreduce(comm, dev, count, nullptr);
      auto t1 = std::chrono::steady_clock::now();
      o.seconds = std::chrono::duration<double>(t1 - t0).count();
      o.started = std::chrono::duration<double>(t0.time_since_epoch()).count();
      o.ended = std::chrono::duration<double>(t1.time_since_epoch()).count();
      o.status = s.status;
      snprintf(o.message, sizeof o.message, "%s", s.message.c_str());
      o.destroy_status = hpuCommDestroy(comm);
      if (again) {
        hpuComm_t comm2 = nullptr;
        bool correct = false;
        o.again_status = join(&comm2, dev, ports[1]);
        Step s2;
        s2(hpuStatus_t(o.again_status));
        if (o.again_status == HPU_SUCCESS) s2 = allreduce(comm2, dev, 256, &correct);
        o.again_status = s2.status;
        snprintf(o.again_message, sizeof o.again_message, "%s", s2.message.c_str());
        o.again_correct = correct;
        hpuCommDestroy(comm2);
      }
      hpuDeviceClose(dev);
      _exit(leak_code());
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a rank did not survive: status " << st;
  }
  return sh;
}

void dropped_connection(const std::string &transport) {
  // 1 MiB per rank goes in chunks: well past 64 KiB on every link of rank 1.
  Shared *sh = run(transport, "conn_drop_after_bytes=65536,fault_rank=1", 256 << 10, 20, true);
  for (int r = 0; r < kRanks; ++r) {
    const Outcome &o = sh->rank[r];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.message);
    EXPECT_EQ(o.status, HPU_ERROR_REMOTE);
    EXPECT_NE(std::string(o.message), "");
    if (r == 1) {
      EXPECT_NE(std::string(o.message).find("conn_drop_after_bytes=65536"), std::string::npos);
    }
    EXPECT_LT(o.seconds, 15.0);  // noticed, not waited out
    EXPECT_EQ(o.destroy_status, HPU_SUCCESS);
    // The new group's traffic stays under the limit: it works.
    EXPECT_EQ(o.again_status, HPU_SUCCESS) << o.again_message;
    EXPECT_TRUE(o.again_correct);
  }
  munmap(sh, sizeof *sh);
}

}  // namespace

TEST(CommFaultInject, ShmDroppedConnectionFailsEveryRankAndANewGroupWorks) { dropped_connection("shm"); }
TEST(CommFaultInject, TcpDroppedConnectionFailsEveryRankAndANewGroupWorks) { dropped_connection("tcp"); }

// Every rank's result needs rank 2's input, which rank 2 sends no sooner than
// 20 ms after its own call: each rank returns at least that late (timed on the
// host's steady clock, which all processes share, since the ranks' calls do
// not start at the same instant).
TEST(CommFaultInject, ADelayedPeerOnlySlowsTheJob) {
  Shared *sh = run("tcp", "peer_delay_ms=20,fault_rank=2", 1 << 10, 20, true);
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + sh->rank[r].message);
    EXPECT_EQ(sh->rank[r].status, HPU_SUCCESS);
    EXPECT_GE(sh->rank[r].ended - sh->rank[2].started, 0.02);
    EXPECT_EQ(sh->rank[r].again_status, HPU_SUCCESS);
    EXPECT_TRUE(sh->rank[r].again_correct);
  }
  munmap(sh, sizeof *sh);
}

TEST(CommFaultInject, AStalledPeerMakesEveryRankReturnByItsDeadline) {
  for (const char *transport : {"shm", "tcp"}) {
    Shared *sh = run(transport, "peer_stall=1,fault_rank=0", 1 << 10, 1.0, false);
    for (int r = 0; r < kRanks; ++r) {
      const Outcome &o = sh->rank[r];
      SCOPED_TRACE(std::string(transport) + " rank " + std::to_string(r) + ": " + o.message);
      EXPECT_TRUE(o.status == HPU_ERROR_TIMEOUT || o.status == HPU_ERROR_REMOTE) << o.status;
      EXPECT_NE(std::string(o.message), "");
      EXPECT_LT(o.seconds, 10.0);  // the 1 s deadline, with room for sanitizer builds
      EXPECT_EQ(o.destroy_status, HPU_SUCCESS);
    }
    munmap(sh, sizeof *sh);
  }
}

namespace {

// SIGKILL or SIGSTOP of rank 2 while ranks 0 and 1 wait in hpuBarrier: both
// return by their deadline with a status and a message.
void strike_during_barrier(const std::string &transport, int sig) {
  auto *sh = static_cast<Shared *>(
      mmap(nullptr, sizeof(Shared) + sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(sh, 0, sizeof *sh);
  volatile int *joined = reinterpret_cast<volatile int *>(sh + 1);
  const int port = hpu_test::free_port();
  const double timeout = sig == SIGSTOP ? 1.5 : 20.0;
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      set_rank_env(transport, r, timeout);
      hpuDevice_t dev = nullptr;
      hpuComm_t comm = nullptr;
      hpuStream_t stream = nullptr;
      if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || join(&comm, dev, port) != HPU_SUCCESS ||
          hpuStreamCreate(&stream, dev) != HPU_SUCCESS)
        _exit(3);
      __sync_fetch_and_add(joined, 1);
      if (r == 2) pause();  // the victim never reaches the barrier
      Outcome &o = sh->rank[r];
      auto t0 = std::chrono::steady_clock::now();
      Step s;
      s(hpuBarrier(stream, comm));
      s(hpuStreamSynchronize(stream));
      o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      o.status = s.status;
      snprintf(o.message, sizeof o.message, "%s", s.message.c_str());
      hpuStreamDestroy(stream);
      o.destroy_status = hpuCommDestroy(comm);
      hpuDeviceClose(dev);
      _exit(leak_code());
    }
    pids.push_back(pid);
  }
  for (int i = 0; i < 2000 && *joined < kRanks; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(*joined, kRanks);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ranks 0 and 1 are in the barrier
  kill(pids[2], sig);
  for (int r = 0; r < 2; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    const Outcome &o = sh->rank[r];
    SCOPED_TRACE(transport + " rank " + std::to_string(r) + ": " + o.message);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    if (sig == SIGKILL) {
      EXPECT_EQ(o.status, HPU_ERROR_REMOTE);
      EXPECT_LT(o.seconds, 10.0);  // noticed, far before the 20 s deadline
    } else {
      EXPECT_TRUE(o.status == HPU_ERROR_TIMEOUT || o.status == HPU_ERROR_REMOTE) << o.status;
      EXPECT_LT(o.seconds, 1.5 + 8.0);  // the deadline, with room for sanitizer builds
    }
    EXPECT_NE(std::string(o.message), "");
    EXPECT_EQ(o.destroy_status, HPU_SUCCESS);
  }
  kill(pids[2], SIGKILL);
  waitpid(pids[2], nullptr, 0);
  munmap(sh, sizeof(Shared) + sizeof(int));
}

}  // namespace

TEST(CommFaultInject, ShmPeerKilledDuringBarrier) { strike_during_barrier("shm", SIGKILL); }
TEST(CommFaultInject, TcpPeerKilledDuringBarrier) { strike_during_barrier("tcp", SIGKILL); }
TEST(CommFaultInject, ShmPeerStoppedDuringBarrier) { strike_during_barrier("shm", SIGSTOP); }
TEST(CommFaultInject, TcpPeerStoppedDuringBarrier) { strike_during_barrier("tcp", SIGSTOP); }
