// Helpers of the collective tests: a group of ranks on the devices of this
// process, device buffers, inputs made of small integers (so that every
// reduction order gives exact results), and the reference results computed
// here, element by element, independently of the library. And, for the
// white-box tests of the process transports (comm_wire, comm_verbs): ranks
// forked from the test process, the job's unique id shared between them, and
// the exchange and the strikes they run.
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <signal.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/socket.hpp"
#include "comm/transports/transport.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"
#include "kernels/convert.hpp"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

namespace comm_test {

#define HPU_OK(call) ASSERT_EQ((call), HPU_SUCCESS) << #call << ": " << hpuGetLastErrorMessage()

inline bool full_matrix() {
  const char *v = std::getenv("HPU_TEST_FULL");
  return v && *v && std::strcmp(v, "0") != 0;
}

inline size_t dtype_size(hpuDataType_t t) {
  switch (t) {
    case HPU_BOOL: case HPU_UINT8: case HPU_INT8: return 1;
    case HPU_FLOAT16: case HPU_BFLOAT16: return 2;
    case HPU_INT32: case HPU_UINT32: case HPU_FLOAT32: return 4;
    default: return 8;
  }
}

inline const char *dtype_name(hpuDataType_t t) {
  static const char *n[] = {"bool", "u8", "i8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64"};
  return n[t];
}

inline const char *op_name(hpuRedOp_t op) {
  static const char *n[] = {"sum", "prod", "min", "max", "avg"};
  return n[op];
}

inline bool is_unsigned(hpuDataType_t t) { return t == HPU_UINT8 || t == HPU_UINT32 || t == HPU_UINT64; }

// Element i of rank r's input, as an exact small integer.
inline double input(hpuDataType_t t, hpuRedOp_t op, int r, size_t i) {
  if (t == HPU_BOOL) return (i * 3 + static_cast<size_t>(r)) % 4 == 0 ? 1 : 0;
  if (op == HPU_PROD) {
    double v = (i + static_cast<size_t>(r)) % 3 == 0 ? 2 : 1;
    if (!is_unsigned(t) && (i + 2 * static_cast<size_t>(r)) % 5 == 0) v = -v;
    return v;
  }
  double v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 13 + 3) % 9);
  return is_unsigned(t) ? v : v - 4;
}

// The bytes of value v in type t (integers wrap around, as the library's do).
inline void store(hpuDataType_t t, double v, void *out) {
  auto i = static_cast<int64_t>(v);
  switch (t) {
    case HPU_BOOL: *static_cast<uint8_t *>(out) = v != 0; break;
    case HPU_UINT8: *static_cast<uint8_t *>(out) = static_cast<uint8_t>(i); break;
    case HPU_INT8: *static_cast<int8_t *>(out) = static_cast<int8_t>(i); break;
    case HPU_INT32: *static_cast<int32_t *>(out) = static_cast<int32_t>(i); break;
    case HPU_UINT32: *static_cast<uint32_t *>(out) = static_cast<uint32_t>(i); break;
    case HPU_INT64: *static_cast<int64_t *>(out) = i; break;
    case HPU_UINT64: *static_cast<uint64_t *>(out) = static_cast<uint64_t>(i); break;
    case HPU_FLOAT16: *static_cast<uint16_t *>(out) = hpu::kernels::f32_to_f16(static_cast<float>(v)); break;
    case HPU_BFLOAT16: *static_cast<uint16_t *>(out) = hpu::kernels::f32_to_bf16(static_cast<float>(v)); break;
    case HPU_FLOAT32: *static_cast<float *>(out) = static_cast<float>(v); break;
    case HPU_FLOAT64: *static_cast<double *>(out) = v; break;
  }
}

inline std::vector<uint8_t> encode(hpuDataType_t t, const std::vector<double> &v) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) store(t, v[i], out.data() + i * dtype_size(t));
  return out;
}

// Rank r's input: elements [first, first + count) of its sequence.
inline std::vector<double> inputs(hpuDataType_t t, hpuRedOp_t op, int r, size_t count, size_t first = 0) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input(t, op, r, first + i);
  return v;
}

// The reduction of the ranks' inputs, as the bytes the library must produce.
inline std::vector<uint8_t> reference(hpuDataType_t t, hpuRedOp_t op, int nranks, size_t count, size_t first = 0) {
  std::vector<uint8_t> out(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    double acc = input(t, op, 0, first + i);
    for (int r = 1; r < nranks; ++r) {
      double x = input(t, op, r, first + i);
      if (t == HPU_BOOL)
        acc = (op == HPU_PROD || op == HPU_MIN) ? (acc != 0 && x != 0) : (acc != 0 || x != 0);
      else if (op == HPU_SUM || op == HPU_AVG)
        acc += x;
      else if (op == HPU_PROD)
        acc *= x;
      else if (op == HPU_MIN)
        acc = x < acc ? x : acc;
      else
        acc = x > acc ? x : acc;
    }
    void *o = out.data() + i * dtype_size(t);
    if (op == HPU_AVG && t != HPU_BOOL) {
      switch (t) {
        case HPU_FLOAT32: *static_cast<float *>(o) = static_cast<float>(acc) / static_cast<float>(nranks); continue;
        case HPU_FLOAT64: *static_cast<double *>(o) = acc / nranks; continue;
        case HPU_FLOAT16:
        case HPU_BFLOAT16: store(t, static_cast<float>(acc) / static_cast<float>(nranks), o); continue;
        default: acc = static_cast<double>(static_cast<int64_t>(acc) / nranks); break;  // toward zero
      }
    }
    store(t, acc, o);
  }
  return out;
}

// Random floats for n ranks (bf16: values bf16 holds exactly), count each,
// whose sum depends on the order of the additions.
inline std::vector<std::vector<float>> random_floats(hpuDataType_t t, int n, size_t count, std::mt19937 &gen) {
  using hpu::kernels::bf16_to_f32;
  using hpu::kernels::f32_to_bf16;
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<std::vector<float>> x(static_cast<size_t>(n), std::vector<float>(count));
  for (auto &v : x)
    for (auto &f : v) f = t == HPU_BFLOAT16 ? bf16_to_f32(f32_to_bf16(dist(gen))) : dist(gen);
  return x;
}

// The bytes of v as f32 or bf16.
inline std::vector<uint8_t> encode_floats(hpuDataType_t t, const std::vector<float> &v) {
  const size_t e = dtype_size(t);
  std::vector<uint8_t> out(v.size() * e);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = hpu::kernels::f32_to_bf16(v[i]);
    std::memcpy(&out[i * e], t == HPU_FLOAT32 ? static_cast<const void *>(&v[i]) : &h, e);
  }
  return out;
}

// The f32 or bf16 sum of the ranks' values x[rank][i] in rank order,
// ((x[0] + x[1]) + x[2]) + ... (bf16 rounds each step): the bits of every
// layout (hpuAllreduce(3)).
inline std::vector<uint8_t> rank_order_sum(hpuDataType_t t, const std::vector<std::vector<float>> &x) {
  using hpu::kernels::bf16_to_f32;
  using hpu::kernels::f32_to_bf16;
  auto add = [t](float a, float b) { return t == HPU_FLOAT32 ? a + b : bf16_to_f32(f32_to_bf16(a + b)); };
  std::vector<float> sum(x[0]);
  for (size_t q = 1; q < x.size(); ++q)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = add(sum[i], x[q][i]);
  return encode_floats(t, sum);
}

// Device memory of one rank.
class Buffer {
 public:
  Buffer(hpuDevice_t dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    EXPECT_EQ(hpuMemAlloc(&ptr_, dev, bytes), HPU_SUCCESS) << hpuGetLastErrorMessage();
  }
  ~Buffer() { hpuMemFree(ptr_); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *ptr() const { return static_cast<char *>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const std::vector<uint8_t> &host, size_t offset = 0) {
    if (!host.empty()) {
      EXPECT_EQ(hpuMemcpy(ptr() + offset, host.data(), host.size(), HPU_MEMCPY_HOST_TO_DEVICE), HPU_SUCCESS);
    }
  }
  void fill(int byte) {
    if (bytes_) {
      EXPECT_EQ(hpuMemset(ptr_, byte, bytes_), HPU_SUCCESS);
    }
  }
  std::vector<uint8_t> download(size_t offset = 0, size_t bytes = SIZE_MAX) const {
    if (bytes == SIZE_MAX) bytes = bytes_ - offset;
    std::vector<uint8_t> host(bytes);
    if (bytes) {
      EXPECT_EQ(hpuMemcpy(host.data(), ptr() + offset, bytes, HPU_MEMCPY_DEVICE_TO_HOST), HPU_SUCCESS);
    }
    return host;
  }

 private:
  hpuDevice_t dev_;
  void *ptr_ = nullptr;
  size_t bytes_;
};

// n ranks on devices 0..n-1 of this process, made with hpuCommInitAll.
class Group {
 public:
  explicit Group(int n) : n_(n), devs_(static_cast<size_t>(n)), comms_(static_cast<size_t>(n)), streams_(static_cast<size_t>(n)) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(hpuDeviceOpen(&devs_[static_cast<size_t>(i)], i), HPU_SUCCESS) << hpuGetLastErrorMessage();
      EXPECT_EQ(hpuDeviceGetDefaultStream(devs_[static_cast<size_t>(i)], &streams_[static_cast<size_t>(i)]), HPU_SUCCESS);
    }
    EXPECT_EQ(hpuCommInitAll(comms_.data(), n, devs_.data()), HPU_SUCCESS) << hpuGetLastErrorMessage();
  }
  ~Group() {
    for (auto c : comms_) hpuCommDestroy(c);
    for (auto d : devs_) hpuDeviceClose(d);
  }
  Group(const Group &) = delete;
  Group &operator=(const Group &) = delete;

  int size() const { return n_; }
  hpuDevice_t dev(int r) const { return devs_[static_cast<size_t>(r)]; }
  hpuComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  hpuStream_t stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  // Synchronizes every rank's stream; the statuses, rank by rank.
  std::vector<hpuStatus_t> sync() const {
    std::vector<hpuStatus_t> s;
    for (auto st : streams_) s.push_back(hpuStreamSynchronize(st));
    return s;
  }

 private:
  int n_;
  std::vector<hpuDevice_t> devs_;
  std::vector<hpuComm_t> comms_;
  std::vector<hpuStream_t> streams_;
};

// ---- forked ranks (white-box tests of the process transports) -------------
//
// The ranks are children forked from the test process before it starts any
// thread: a child forked after a thread started inherits whatever locks that
// thread held at that instant (GCC 12's ASan allocator lock among them) and
// can deadlock on them. So rank 0 starts the rendezvous root (and its listener
// thread) after the fork and publishes the unique id to the others through a
// page the test maps, shared, before forking.

using hpu::comm::Clock;
using hpu::comm::Deadline;

inline Deadline in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The page shared by the test and its forked ranks: the job's unique id and
// what each rank reports.
struct JobPage {
  static constexpr int kMaxRanks = 16;
  int status[kMaxRanks];  // -1 until the rank reports
  double seconds[kMaxRanks];
  char message[kMaxRanks][256];
  std::atomic<int> ready{0};      // ranks at the point where the test may strike
  std::atomic<int> published{0};  // 1 once rank 0 has written `id`
  std::atomic<int> held{0};       // while 1, the ranks wait after the id is published
  std::atomic<int> reported{0};   // ranks that have reported
  hpu::comm::UniqueId id;

  JobPage() {
    for (auto &s : status) s = -1;
    std::memset(seconds, 0, sizeof seconds);
    std::memset(message, 0, sizeof message);
  }
  // Rank r's outcome: the error it caught (or success) after t0.
  void report(int r, Clock::time_point t0, const hpu::Error *e = nullptr) {
    status[r] = e ? e->status() : HPU_SUCCESS;
    if (e) snprintf(message[r], sizeof message[r], "%s", e->what());
    seconds[r] = since(t0);
    reported.fetch_add(1);
  }
  // Rank 0 runs the root: it waits (up to `seconds`) for `count` ranks to
  // report before its process ends and takes the root along, which would fail
  // a rank still waiting with "the peer closed the connection".
  void keep_root_until_reported(int rank, int count, double seconds) {
    for (auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
         rank == 0 && reported < count && Clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
};

// Maps a fresh JobPage, shared with the children forked after; unmapped when
// the pointer goes.
struct Unmap {
  void operator()(JobPage *s) const {
    s->~JobPage();
    munmap(s, sizeof(JobPage));
  }
};
using JobPagePtr = std::unique_ptr<JobPage, Unmap>;
inline JobPagePtr shared_page() {
  void *p = mmap(nullptr, sizeof(JobPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  return JobPagePtr(new (p) JobPage);
}

// A fresh unique id whose rendezvous root runs in this process, on loopback.
inline hpu::comm::UniqueId root_here() {
  using namespace hpu::comm;
  UniqueId id = UniqueId::make();
  Address lo = Address::resolve("127.0.0.1", 0, "test");
  socket_root_start(id, &lo);
  return id;
}

// The job's unique id as `rank` sees it: rank 0 makes it, starts the root on
// loopback and publishes it; anyone else (a rank, or the test itself with
// rank -1) waits for it until `deadline`. Then every rank waits while the test
// holds the job.
inline hpu::comm::UniqueId job_id(JobPage &s, int rank, Deadline deadline) {
  using namespace hpu::comm;
  if (rank == 0) {
    s.id = root_here();
    s.published.store(1, std::memory_order_release);
  }
  while (!s.published.load(std::memory_order_acquire)) {
    if (Clock::now() > deadline) throw std::runtime_error("rank 0 never published the unique id");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  while (rank >= 0 && s.held.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s.id;
}

// Forks n ranks running body(rank), each exiting with its return value (1 if
// it threw; 4 if LeakSanitizer finds a leak in an ASan build, which _exit
// would otherwise skip). Call it before this process starts any thread.
inline std::vector<pid_t> fork_ranks(int n, const std::function<int(int)> &body) {
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
#ifdef __SANITIZE_ADDRESS__
      if (code == 0 && __lsan_do_recoverable_leak_check()) code = 4;
#endif
      _exit(code);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Waits for every pid (killing stragglers after `seconds`); exit codes, or 128 + signal.
inline std::vector<int> reap(const std::vector<pid_t> &pids, double seconds = 60) {
  std::vector<int> codes(pids.size(), -1);
  auto until = in(seconds);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left && Clock::now() > until) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) kill(pids[i], SIGKILL);
      until = in(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

// One rank's end of a job: its bootstrap and its transport (destroyed first).
struct Endpoint {
  std::unique_ptr<hpu::comm::Bootstrap> bootstrap;
  std::unique_ptr<hpu::comm::Transport> transport;
};
// Joins the job named by the id as `rank` of n.
using Connect = std::function<Endpoint(const hpu::comm::UniqueId &id, int rank, int n, Deadline deadline)>;

inline float wire_value(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 977)); }

inline void add_f32(void *out, const void *in, const void *local, size_t n, const void *) {
  auto *o = static_cast<float *>(out);
  auto *a = static_cast<const float *>(in);
  auto *b = static_cast<const float *>(local);
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

// Every rank exchanges `count` floats with every other rank: plain receives and
// receives that add the local data, small (eager) and large (chunked) sizes.
// 0 when every byte is right.
inline int exchange(hpu::comm::Transport &t, size_t count, uint64_t seq, Deadline deadline) {
  using namespace hpu::comm;
  int me = t.rank(), n = t.size();
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = wire_value(me, i);
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
      if (plain[static_cast<size_t>(p)][i] != wire_value(p, i)) return 10;
      if (summed[static_cast<size_t>(p)][i] != wire_value(p, i) + wire_value(me, i)) return 11;
    }
  }
  return 0;
}

// n ranks exchange every size from empty to chunked; each must exit 0.
inline void expect_exchanges(const Connect &connect, int n, const std::string &what) {
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = connect(job_id(*s, r, in(30)), r, n, in(30));
    uint64_t seq = 1;
    for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(40000), size_t(300007)})
      if (int rc = exchange(*e.transport, count, seq++, in(30))) return rc;
    return 0;
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n << ", " << what;
}

// Rank 2 of 3 is killed or stopped (sig) while ranks 0 and 1 wait for a
// message from it: after SIGKILL they fail with HPU_ERROR_REMOTE within 2 s
// (with a margin for sanitizers); after SIGSTOP they time out at their deadline.
inline void strike_waiting_ranks(const Connect &connect, int sig) {
  using namespace hpu::comm;
  const int n = 3;
  auto s = shared_page();
  double timeout = sig == SIGSTOP ? 2.0 : 30.0;
  auto pids = fork_ranks(n, [&](int r) {
    Endpoint e = connect(job_id(*s, r, in(20)), r, n, in(20));
    if (exchange(*e.transport, 1000, 1, in(20)) != 0) return 5;
    s->ready.fetch_add(1);
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
      auto req = e.transport->irecv(d);
      e.transport->wait({req.get()}, in(timeout));
      s->report(r, t0);
    } catch (const hpu::Error &err) {
      s->report(r, t0, &err);
    }
    return 0;
  });
  for (auto until = in(20); s->ready < n && Clock::now() < until;) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(pids[2], sig);
  auto codes = reap({pids[0], pids[1]}, 20);
  kill(pids[2], SIGKILL);
  reap({pids[2]});
  ASSERT_EQ(s->ready, n) << "the ranks did not connect";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0);
    if (sig == SIGKILL) {
      EXPECT_EQ(s->status[r], HPU_ERROR_REMOTE) << "rank " << r << ": " << s->message[r];
      EXPECT_LT(s->seconds[r], 2.0 * 1.5) << "rank " << r;
    } else {
      EXPECT_EQ(s->status[r], HPU_ERROR_TIMEOUT) << "rank " << r << ": " << s->message[r];
      EXPECT_GE(s->seconds[r], timeout * 0.9) << "rank " << r;
      EXPECT_LT(s->seconds[r], timeout + 3.0) << "rank " << r;
    }
  }
}

// The shared-memory segments of the shm transport now in /dev/shm.
inline std::set<std::string> shm_segments() {
  std::set<std::string> out;
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, "hpu-comm-", 9) == 0) out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

// Rank 2 of 3 stops itself midway through its transport setup
// (HPU_FAULT_INJECT stop_in_setup), where its side exists and the others wait
// for it. Killed there (sig = SIGKILL), the others fail with HPU_ERROR_REMOTE
// within 2 s (with a margin for sanitizers); left stopped, they fail with
// HPU_ERROR_TIMEOUT at their deadline. Either way the job leaves no segment
// in /dev/shm.
inline void strike_mid_setup(const Connect &connect, int sig) {
  const int n = 3;
  const double deadline = sig == SIGSTOP ? 3.0 : 30.0;
  auto before = shm_segments();
  auto s = shared_page();
  auto pids = fork_ranks(n, [&](int r) {
    if (r == 2) hpu::fault::configure("stop_in_setup=1");
    hpu::comm::UniqueId id = job_id(*s, r, in(20));
    auto t0 = Clock::now();
    try {
      connect(id, r, n, in(deadline));
      s->report(r, t0);
    } catch (const hpu::Error &e) {
      s->report(r, t0, &e);
    }
    s->keep_root_until_reported(r, 2, deadline + 10);
    return 0;
  });
  int st = 0;
  bool stopped = false;
  for (auto until = in(30); !stopped && Clock::now() < until;) {
    stopped = waitpid(pids[2], &st, WNOHANG | WUNTRACED) == pids[2] && WIFSTOPPED(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto t0 = Clock::now();
  if (sig == SIGKILL) kill(pids[2], SIGKILL);
  auto codes = reap({pids[0], pids[1]}, deadline + 20);
  double took = since(t0);
  kill(pids[2], SIGKILL);
  reap({pids[2]});
  ASSERT_TRUE(stopped) << "rank 2 never reached its setup point";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
    if (sig == SIGKILL) {
      EXPECT_EQ(s->status[r], HPU_ERROR_REMOTE) << "rank " << r << ": " << s->message[r];
      EXPECT_LT(took, 2.0 * 1.5) << "rank " << r << ": " << s->message[r];
    } else {
      EXPECT_EQ(s->status[r], HPU_ERROR_TIMEOUT) << "rank " << r << ": " << s->message[r];
      EXPECT_GE(s->seconds[r], deadline * 0.9) << "rank " << r;
      EXPECT_LT(s->seconds[r], deadline + 3.0) << "rank " << r;
    }
  }
  // Segments that other tests running meanwhile make come and go within
  // seconds; this job's must be gone already, so every new one must go soon.
  std::set<std::string> left;
  for (auto &name : shm_segments())
    if (!before.count(name)) left.insert(name);
  for (auto until = in(10); !left.empty() && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now = shm_segments();
    for (auto it = left.begin(); it != left.end();) it = now.count(*it) ? std::next(it) : left.erase(it);
  }
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << *left.begin();
}

}  // namespace comm_test
