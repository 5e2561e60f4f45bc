// The rendezvous misused (issue 21): ids nobody joins and inits that fail must
// give back their threads and sockets, communicator and stream cycles must not
// grow the process, and a stranger who knows the job's public parameters (host,
// port, process count) must not get in. Each case runs the library in forked
// processes with their own environment (a short HPU_COMM_TIMEOUT, a private
// secret folder); this process only plays the stranger, with the handshake
// code compiled in (misuse_rendezvous.cmake). HPU_TEST_FULL=1 runs the large
// counts of the issue (10,000 ids, 1,000 failed inits, 100,000 cycles).
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef __SANITIZE_ADDRESS__
extern "C" size_t __sanitizer_get_current_allocated_bytes();  // GCC ships no header for it
#endif

#include "child.hpp"
#include "comm/socket/acceptor.hpp"
#include "core/error.hpp"
#include "ports.hpp"

using hpu_test::Env;
using hpu_test::run_child;

namespace {

bool full_run() {
  const char *v = std::getenv("HPU_TEST_FULL");
  return v && *v && std::strcmp(v, "0") != 0;
}

int entries(const char *dir) {
  int n = 0;
  if (DIR *d = opendir(dir)) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}
int threads() { return entries("/proc/self/task"); }
int fds() { return entries("/proc/self/fd"); }

// What the process keeps, in KiB: its resident size; under AddressSanitizer,
// whose quarantine holds freed memory resident for a while, the bytes its
// allocator has handed out and not had back.
long rss_kib() {
#ifdef __SANITIZE_ADDRESS__
  return static_cast<long>(__sanitizer_get_current_allocated_bytes() / 1024);
#else
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
#endif
}

// In a child: prints why to stderr (the parent shows it) and gives exit code 1.
int why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int why(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

// Waits up to `seconds` for the threads and descriptors to come back to what
// they were; 0 when they did.
int back_to(int threads0, int fds0, double seconds, const char *after) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (threads() > threads0 || fds() > fds0) {
    if (std::chrono::steady_clock::now() > until)
      return why("%s: %d threads and %d descriptors %.1f s later (before: %d and %d)", after, threads(), fds(),
                 seconds, threads0, fds0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

int finish(pid_t pid, double seconds);
std::vector<std::string> listeners_at(int port);

// A folder for one test's secret file, removed with it.
struct TempDir {
  std::string path;
  TempDir() {
    char p[] = "/tmp/hpu-misuse-rdv-XXXXXX";
    if (!mkdtemp(p)) std::abort();
    path = p;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string secret() const { return path + "/hpu/secret"; }
};

std::string port_text() { return std::to_string(hpu_test::free_port()); }

// The launch variables of process `rank` of `size` on loopback.
Env launch(int rank, int size, const std::string &port, const TempDir &dir) {
  return {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(size)}, {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", port}, {"XDG_CONFIG_HOME", dir.path}, {"HPU_COMM_TIMEOUT", "20"}};
}

// hpuCommInitFromEnv with one device, in a child; its status, and the message
// on stderr.
hpuStatus_t init_from_env(std::string *message) {
  hpuDevice_t dev;
  hpuComm_t comm;
  if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) return HPU_ERROR_INTERNAL;
  hpuStatus_t s = hpuCommInitFromEnv(&comm, 1, &dev);
  if (s != HPU_SUCCESS) {
    *message = hpuGetLastErrorMessage();
    return s;
  }
  hpuCommDestroy(comm);
  hpuDeviceClose(dev);
  return s;
}

int init_status_child() {
  std::string message;
  hpuStatus_t s = init_from_env(&message);
  fprintf(stderr, "%s %s\n", hpuGetErrorName(s), message.c_str());
  return 0;
}

// The inodes of this process's sockets.
std::vector<std::string> own_sockets() {
  std::vector<std::string> inodes;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (dirent *e = readdir(d)) {
      char target[64] = {};
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(link.c_str(), target, sizeof target - 1) > 0 && std::strncmp(target, "socket:[", 8) == 0)
        inodes.push_back(std::string(target + 8, std::strlen(target) - 9));
    }
    closedir(d);
  }
  return inodes;
}

// The listening sockets at `port` in /proc/net/tcp (-1: this process's, at
// any port): their local addresses ("0100007F" is 127.0.0.1, "00000000"
// every interface).
std::vector<std::string> listeners_at(int port) {
  std::vector<std::string> mine = own_sockets();
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::vector<std::string> found;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeouts, inode;
    row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeouts >> inode;
    int p = static_cast<int>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
    bool wanted = port < 0 ? std::find(mine.begin(), mine.end(), inode) != mine.end() : p == port;
    if (state == "0A" && wanted) found.push_back(local.substr(0, local.find(':')));
  }
  return found;
}

// An IPv4 address of this host that is not loopback ("" if none is up).
std::string own_address() {
  ifaddrs *list = nullptr;
  std::string found;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs *i = list; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
        (i->ifa_flags & IFF_LOOPBACK))
      continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

// ---- leaks ----------------------------------------------------------------

// Ids that no rank joins: each listens for HPU_COMM_TIMEOUT, then its thread
// and socket go; a second batch leaves the process no larger than the first.
TEST(Misuse, UnusedUniqueIdsGiveBackTheirThreadsAndSockets) {
  const int n = full_run() ? 10000 : 300;
  auto r = run_child({{"HPU_COMM_TIMEOUT", "0.5"}}, [n] {
    hpuUniqueId_t id;
    if (hpuGetUniqueId(&id) != HPU_SUCCESS) return why("hpuGetUniqueId: %s", hpuGetLastErrorMessage());
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the library's own threads have started
    const int threads0 = threads(), fds0 = fds();
    long rss_first = 0;
    for (int batch = 0; batch < 2; ++batch) {
      for (int i = 0; i < n; ++i)
        if (hpuGetUniqueId(&id) != HPU_SUCCESS) return why("id %d: %s", i, hpuGetLastErrorMessage());
      if (fds() <= fds0) return why("the ids do not listen: %d descriptors, as before", fds());
      if (int rc = back_to(threads0, fds0, 0.5 + 10, "unused ids")) return rc;
      if (batch == 0) rss_first = rss_kib();
    }
    long grew = rss_kib() - rss_first;
    if (grew > 4096) return why("the second batch of %d ids grew the process by %ld KiB", n, grew);
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Inits that time out (the other rank never comes): the rendezvous each one
// joined stops with it, and a second batch leaves the process no larger than
// the first.
TEST(Misuse, FailedInitsGiveBackTheRendezvous) {
  const int n = full_run() ? 1000 : 12;
  auto r = run_child({{"HPU_COMM_TIMEOUT", "0.25"}}, [n] {
    hpuDevice_t dev;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) return why("hpuDeviceOpen: %s", hpuGetLastErrorMessage());
    auto fail_once = [&] {
      hpuUniqueId_t id;
      hpuComm_t comm;
      if (hpuGetUniqueId(&id) != HPU_SUCCESS) return why("hpuGetUniqueId: %s", hpuGetLastErrorMessage());
      hpuStatus_t s = hpuCommInitRank(&comm, dev, 2, &id, 0);
      if (s != HPU_ERROR_TIMEOUT) return why("hpuCommInitRank alone of 2: %s", hpuGetErrorName(s));
      return 0;
    };
    if (int rc = fail_once()) return rc;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int threads0 = threads(), fds0 = fds();
    long rss_first = 0;
    for (int batch = 0; batch < 2; ++batch) {
      for (int i = 0; i < n / 2; ++i)
        if (int rc = fail_once()) return rc;
      if (int rc = back_to(threads0, fds0, 5, "failed inits")) return rc;
      if (batch == 0) rss_first = rss_kib();
    }
    long grew = rss_kib() - rss_first;
    if (grew > 4096) return why("the second batch of %d failed inits grew the process by %ld KiB", n / 2, grew);
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A rank that comes after its id expired finds nobody listening: it times out.
TEST(Misuse, ExpiredIdTimesOut) {
  auto r = run_child({{"HPU_COMM_TIMEOUT", "0.3"}}, [] {
    hpuDevice_t dev;
    hpuUniqueId_t id;
    hpuComm_t comm;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuGetUniqueId(&id) != HPU_SUCCESS)
      return why("setup: %s", hpuGetLastErrorMessage());
    std::this_thread::sleep_for(std::chrono::seconds(1));
    hpuStatus_t s = hpuCommInitRank(&comm, dev, 1, &id, 0);
    if (s != HPU_ERROR_TIMEOUT) return why("a rank after the id expired: %s", hpuGetErrorName(s));
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A rank whose init fails (here: its own deadline, 0.5 s, passes) leaves the
// group before it could form: the rank waiting beside it (deadline 20 s) fails
// at once with HPU_ERROR_REMOTE, and the rendezvous stops.
TEST(Misuse, RankLeavingBeforeAllJoinedFailsTheOthers) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  auto rank = [&](int r, const char *timeout) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    setenv("HPU_COMM_TIMEOUT", timeout, 1);
    hpuDevice_t dev;
    hpuUniqueId_t id;
    hpuComm_t comm;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) _exit(2);
    if (r == 0) {
      if (hpuGetUniqueId(&id) != HPU_SUCCESS || write(pipe_fds[1], &id, sizeof id) != sizeof id) _exit(2);
    } else if (read(pipe_fds[0], &id, sizeof id) != sizeof id) {
      _exit(2);
    }
    auto t0 = std::chrono::steady_clock::now();
    hpuStatus_t s = hpuCommInitRank(&comm, dev, 3, &id, r);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fprintf(stderr, "rank %d: %s after %.1f s: %s\n", r, hpuGetErrorName(s), took, hpuGetLastErrorMessage());
    if (r == 0) _exit(s == HPU_ERROR_REMOTE && took < 5 ? 0 : 3);
    _exit(s == HPU_ERROR_TIMEOUT ? 0 : 3);
  };
  pid_t waiting = rank(0, "20"), leaving = rank(1, "0.5");
  EXPECT_EQ(finish(leaving, 30), 0);
  EXPECT_EQ(finish(waiting, 30), 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// HPU_SOCKET_IFNAME=lo keeps an id's listener on loopback.
TEST(Misuse, UniqueIdListensOnTheInterfaceNamed) {
  auto r = run_child({{"HPU_SOCKET_IFNAME", "lo"}}, [] {
    hpuUniqueId_t id;
    if (hpuGetUniqueId(&id) != HPU_SUCCESS) return why("hpuGetUniqueId: %s", hpuGetLastErrorMessage());
    std::vector<std::string> all = listeners_at(-1);
    if (all.empty()) return why("no listener");
    for (auto &l : all)
      if (l != "0100007F") return why("a listener at %s", l.c_str());
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// hpuCommInitAll/hpuCommDestroy cycles: each used to keep ~320 bytes (the
// group's number and the profiler's names for it), 9.6 MB over 30,000 cycles.
TEST(Misuse, CommunicatorCyclesKeepTheProcessSize) {
  const int n = full_run() ? 100000 : 30000;
  auto r = run_child({}, [n] {
    hpuDevice_t devs[2];
    hpuComm_t comms[2];
    for (int i = 0; i < 2; ++i)
      if (hpuDeviceOpen(&devs[i], i) != HPU_SUCCESS) return why("hpuDeviceOpen: %s", hpuGetLastErrorMessage());
    long rss0 = 0;
    for (int i = -1000; i < n; ++i) {
      if (i == 0) rss0 = rss_kib();
      if (hpuCommInitAll(comms, 2, devs) != HPU_SUCCESS) return why("cycle %d: %s", i, hpuGetLastErrorMessage());
      hpuCommDestroy(comms[0]);
      hpuCommDestroy(comms[1]);
    }
    long grew = rss_kib() - rss0;
    if (grew > 4096) return why("%d communicator cycles grew the process by %ld KiB", n, grew);
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// hpuStreamCreate/hpuStreamDestroy cycles: each used to keep ~78 bytes (the
// profiler's name of a new stream number), 7.8 MB over 100,000 cycles; a
// stream that ran work, ~165 bytes more (the list of streams kept it).
TEST(Misuse, StreamCyclesKeepTheProcessSize) {
  const int n = 100000, with_work = full_run() ? 100000 : 8000;
  auto r = run_child({}, [&] {
    hpuDevice_t dev;
    void *buf = nullptr;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuMemAlloc(&buf, dev, 256) != HPU_SUCCESS)
      return why("setup: %s", hpuGetLastErrorMessage());
    auto cycles = [&](int count, bool work, long limit_kib) {
      long rss0 = 0;
      for (int i = -1000; i < count; ++i) {
        if (i == 0) rss0 = rss_kib();
        hpuStream_t s;
        if (hpuStreamCreate(&s, dev) != HPU_SUCCESS) return why("cycle %d: %s", i, hpuGetLastErrorMessage());
        if (work && hpuMemsetAsync(s, buf, 1, 256) != HPU_SUCCESS)
          return why("cycle %d: %s", i, hpuGetLastErrorMessage());
        hpuStreamDestroy(s);
      }
      long grew = rss_kib() - rss0;
      if (grew > limit_kib)
        return why("%d stream cycles%s grew the process by %ld KiB", count, work ? " with work" : "", grew);
      return 0;
    };
    if (int rc = cycles(n, false, 2048)) return rc;
    return cycles(with_work, true, 512);
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// ---- strangers --------------------------------------------------------------

namespace {

// Process `rank` of a job of two on loopback: joins, allreduces rank + 1 and
// exits 0 when the sum is 3.
pid_t start_rank(int rank, const std::string &port, const TempDir &dir) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  for (auto &[k, v] : launch(rank, 2, port, dir)) setenv(k.c_str(), v.c_str(), 1);
  hpuDevice_t dev;
  hpuComm_t comm;
  hpuStream_t stream;
  void *buf;
  float value = static_cast<float>(rank + 1);
  if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuCommInitFromEnv(&comm, 1, &dev) != HPU_SUCCESS ||
      hpuDeviceGetDefaultStream(dev, &stream) != HPU_SUCCESS || hpuMemAlloc(&buf, dev, sizeof value) != HPU_SUCCESS ||
      hpuMemcpy(buf, &value, sizeof value, HPU_MEMCPY_HOST_TO_DEVICE) != HPU_SUCCESS ||
      hpuAllreduce(stream, comm, buf, buf, 1, HPU_FLOAT32, HPU_SUM) != HPU_SUCCESS ||
      hpuStreamSynchronize(stream) != HPU_SUCCESS ||
      hpuMemcpy(&value, buf, sizeof value, HPU_MEMCPY_DEVICE_TO_HOST) != HPU_SUCCESS) {
    fprintf(stderr, "rank %d: %s\n", rank, hpuGetLastErrorMessage());
    _exit(2);
  }
  hpuCommDestroy(comm);
  _exit(value == 3.0f ? 0 : 3);
}

// The exit code of `pid`, killing it after `seconds`.
int finish(pid_t pid, double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The secret libhpu 0.1 derived without HPU_COMM_SECRET, from what every
// process of the job (and anyone who can see the job) knows.
void old_derived_secret(const std::string &host, int port, int size, uint8_t secret[16]) {
  std::string material = "hpu-launch/" + host + "/" + std::to_string(port) + "/" + std::to_string(size);
  static const uint8_t k0[16] = {'h', 'p', 'u', '-', 'l', 'a', 'u', 'n', 'c', 'h', '-', 'k', 'e', 'y', '-', '0'};
  static const uint8_t k1[16] = {'h', 'p', 'u', '-', 'l', 'a', 'u', 'n', 'c', 'h', '-', 'k', 'e', 'y', '-', '1'};
  uint64_t a = hpu::comm::siphash(k0, material.data(), material.size());
  uint64_t b = hpu::comm::siphash(k1, material.data(), material.size());
  std::memcpy(secret, &a, 8);
  std::memcpy(secret + 8, &b, 8);
}

}  // namespace

// A stranger who knows the host, the port and the process count tries to join
// as rank 1 before the real one, with the secret derived the old way and with
// no secret at all: refused both times, and the job completes.
TEST(Misuse, StrangerWithTheJobsPublicParametersIsRefused) {
  using namespace hpu::comm;
  TempDir dir;
  std::string port = port_text();
  pid_t rank0 = start_rank(0, port, dir);
  Address root = Address::resolve("127.0.0.1", static_cast<uint16_t>(std::stoi(port)), "test");
  auto in = [](int s) { return Clock::now() + std::chrono::seconds(s); };
  uint8_t derived[16], zero[16] = {};
  old_derived_secret("127.0.0.1", std::stoi(port), 2, derived);
  int32_t hello[3] = {1, 2, 0};  // rank, nranks, pid
  for (const uint8_t *guess : {static_cast<const uint8_t *>(derived), static_cast<const uint8_t *>(zero)}) {
    Fd stranger = connect_retry(root, in(20), nullptr, "stranger");
    EXPECT_THROW(handshake_client(stranger.get(), guess, Purpose::bootstrap, hello, sizeof hello, in(10), nullptr,
                                  "stranger"),
                 hpu::Error);
  }
  pid_t rank1 = start_rank(1, port, dir);
  EXPECT_EQ(finish(rank0, 60), 0);
  EXPECT_EQ(finish(rank1, 60), 0);
}

// Without HPU_COMM_SECRET the first process makes the secret file: 0600, in
// a 0700 folder, 32 random hex digits; another user's folder gets another.
TEST(Misuse, SecretFileIsMadePrivateWithRandomContent) {
  TempDir a, b;
  std::string port = port_text();
  for (const TempDir *dir : {&a, &b}) {
    auto r = run_child(launch(0, 1, port, *dir), init_status_child);
    EXPECT_EQ(r.output.rfind("HPU_SUCCESS", 0), 0u) << r.output;
  }
  struct stat st, folder;
  ASSERT_EQ(stat(a.secret().c_str(), &st), 0);
  ASSERT_EQ(stat((a.path + "/hpu").c_str(), &folder), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(folder.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  auto read = [](const std::string &path) {
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
  };
  std::string one = read(a.secret()), two = read(b.secret());
  EXPECT_EQ(one.size(), 32u);
  EXPECT_EQ(one.find_first_not_of("0123456789abcdef"), std::string::npos) << one;
  EXPECT_NE(one, two);
  auto r = run_child(launch(0, 1, port, a), init_status_child);  // read again, not remade
  EXPECT_EQ(r.output.rfind("HPU_SUCCESS", 0), 0u) << r.output;
  EXPECT_EQ(read(a.secret()), one);
}

// Processes that make the file at once agree on one secret: eight processes of
// one job start together in a fresh folder and the job completes.
TEST(Misuse, SecretFileMadeByManyProcessesAtOnceIsOne) {
  TempDir dir;
  std::string port = port_text();
  const int n = 8;
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      for (auto &[k, v] : launch(r, n, port, dir)) setenv(k.c_str(), v.c_str(), 1);
      std::string message;
      if (init_from_env(&message) == HPU_SUCCESS) _exit(0);
      std::fprintf(stderr, "process %d: %s\n", r, message.c_str());
      _exit(2);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(finish(pids[static_cast<size_t>(r)], 60), 0) << "process " << r;
}

// A secret file that others may read, or that another user owns, is refused
// with HPU_ERROR_CONFIG naming it (and its mode); HPU_COMM_SECRET wins over it.
TEST(Misuse, SecretFileOthersCanReadIsRefused) {
  TempDir dir;
  std::string port = port_text();
  std::filesystem::create_directories(dir.path + "/hpu");
  std::ofstream(dir.secret()) << "00112233445566778899aabbccddeeff\n";
  chmod(dir.secret().c_str(), 0644);
  auto r = run_child(launch(0, 1, port, dir), init_status_child);
  EXPECT_EQ(r.output.rfind("HPU_ERROR_CONFIG", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(dir.secret()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mode 0644"), std::string::npos) << r.output;

  Env with_secret = launch(0, 1, port, dir);
  with_secret.push_back({"HPU_COMM_SECRET", "ffeeddccbbaa99887766554433221100"});
  r = run_child(with_secret, init_status_child);
  EXPECT_EQ(r.output.rfind("HPU_SUCCESS", 0), 0u) << r.output;

  chmod(dir.secret().c_str(), 0600);
  ASSERT_EQ(chown(dir.secret().c_str(), 65534, 65534), 0) << "the tests run as root (the network tests need it)";
  r = run_child(launch(0, 1, port, dir), init_status_child);
  EXPECT_EQ(r.output.rfind("HPU_ERROR_CONFIG", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("owned by user 65534"), std::string::npos) << r.output;

  ASSERT_EQ(chown(dir.secret().c_str(), geteuid(), getegid()), 0);
  std::ofstream(dir.secret()) << "not a secret\n";
  r = run_child(launch(0, 1, port, dir), init_status_child);
  EXPECT_EQ(r.output.rfind("HPU_ERROR_CONFIG", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("expected 32 hex digits"), std::string::npos) << r.output;
}

// ---- where the rendezvous listens ---------------------------------------------

namespace {

// In a child: hpuCommInitFromEnv with one device, then prints the local
// addresses of the listeners at `port` while the communicator lives.
std::string listeners_in_child(const Env &env, int port, std::string *log) {
  auto r = run_child(env, [port] {
    hpuDevice_t dev;
    hpuComm_t comm;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuCommInitFromEnv(&comm, 1, &dev) != HPU_SUCCESS) {
      fprintf(stderr, "INIT %s\n", hpuGetLastErrorMessage());
      return 0;
    }
    std::string all;
    for (auto &l : listeners_at(port)) all += l + " ";
    fprintf(stderr, "listeners: %s\n", all.c_str());
    hpuCommDestroy(comm);
    return 0;
  });
  *log = r.output;
  size_t at = r.output.find("listeners: ");
  if (at == std::string::npos) return r.output.substr(std::min(r.output.size(), r.output.find("INIT")));
  at += strlen("listeners: ");
  return r.output.substr(at, r.output.find('\n', at) - at);
}

}  // namespace

// A loopback rendezvous address: the listener binds 127.0.0.1 only.
TEST(Misuse, LoopbackRendezvousListensOnLoopbackOnly) {
  TempDir dir;
  int port = hpu_test::free_port();
  std::string log;
  EXPECT_EQ(listeners_in_child(launch(0, 1, std::to_string(port), dir), port, &log), "0100007F ") << log;
}

// The launcher says every process is on this host (LOCAL_WORLD_SIZE equals
// WORLD_SIZE): the rendezvous goes to loopback even when MASTER_ADDR names
// one of this host's network addresses, and the log says so.
TEST(Misuse, AllProcessesOnThisHostListenOnLoopback) {
  TempDir dir;
  int port = hpu_test::free_port();
  std::string own = own_address();
  ASSERT_FALSE(own.empty()) << "this host has no network address besides loopback";
  Env env = launch(0, 1, std::to_string(port), dir);
  env.push_back({"MASTER_ADDR", own});  // setenv in order: the last wins
  env.push_back({"LOCAL_WORLD_SIZE", "1"});
  env.push_back({"HPU_LOG_LEVEL", "info"});
  std::string log;
  EXPECT_EQ(listeners_in_child(env, port, &log), "0100007F ") << log;
  EXPECT_NE(log.find("listens on loopback only"), std::string::npos) << log;
}

// An address that is not this host's: no silent fallback to every interface,
// but HPU_ERROR_CONFIG naming HPU_COMM_LISTEN; with HPU_COMM_LISTEN=any it
// listens on every interface and logs it; with an address, there.
TEST(Misuse, EveryInterfaceOnlyWhenAskedFor) {
  TempDir dir;
  int port = hpu_test::free_port();
  std::string log;
  Env env = launch(0, 1, std::to_string(port), dir);
  env.push_back({"MASTER_ADDR", "203.0.113.7"});  // TEST-NET-3: nobody's address
  std::string got = listeners_in_child(env, port, &log);
  EXPECT_NE(got.find("INIT"), std::string::npos) << log;
  EXPECT_NE(got.find("is not an address of this host"), std::string::npos) << log;
  EXPECT_NE(got.find("HPU_COMM_LISTEN"), std::string::npos) << log;

  std::string own = own_address();
  ASSERT_FALSE(own.empty()) << "this host has no network address besides loopback";
  env = launch(0, 1, std::to_string(port), dir);
  env.push_back({"MASTER_ADDR", own});
  env.push_back({"HPU_COMM_LISTEN", "any"});
  env.push_back({"HPU_LOG_LEVEL", "info"});
  EXPECT_EQ(listeners_in_child(env, port, &log), "00000000 ") << log;
  EXPECT_NE(log.find("listens on every interface"), std::string::npos) << log;

  env = launch(0, 1, std::to_string(port), dir);
  env.push_back({"MASTER_ADDR", own});
  env.push_back({"HPU_COMM_LISTEN", "127.0.0.1"});
  EXPECT_EQ(listeners_in_child(env, port, &log), "0100007F ") << log;
}
