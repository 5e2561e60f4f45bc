// Jobs of several processes through the public API: hpu-comm-job (comm_job.c)
// runs hpuCommInitFromEnv and checked collectives in each process, started the
// ways users start them — torchrun-, Open MPI- and Slurm-style variables set by
// hand, real mpirun, one process per network namespace ("host") joined by veth
// pairs — over shm and tcp; and the faults: a process killed or stopped
// mid-allreduce, a cut link, a taken port, missing variables.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "netns.hpp"
#include "ports.hpp"

extern char **environ;

namespace {

using Env = std::map<std::string, std::string>;

const char *const kLaunchVariables[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_JOB_ID", "HPU_RANK", "HPU_WORLD_SIZE", "HPU_LOCAL_RANK", "HPU_COMM_ID",
    "HPU_COMM_SECRET", "HPU_TRANSPORT", "HPU_COMM_TIMEOUT", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_NUM_NODES", "HPU_COMM_LISTEN"};

// The processes' secret file lives in a folder of this test run (every
// "host" of the network namespaces shares the filesystem, so it too).
const std::string &config_home() {
  static const std::string *dir = [] {  // never destroyed: the exit handler reads it
    char path[] = "/tmp/hpu-comm-proc-XXXXXX";
    if (!mkdtemp(path)) abort();
    std::atexit([] { std::filesystem::remove_all(config_home()); });
    return new std::string(path);
  }();
  return *dir;
}

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Sanitizer builds run slower: deadlines asserted get this much slack.
double margin() { return getenv("HPU_SANITIZED") || getenv("ASAN_OPTIONS") ? 3.0 : 1.0; }

struct Proc {
  pid_t pid = -1;
  int out = -1;
  std::string output;
  int code = -1;
};

// Starts argv with the parent's environment minus every launch variable, plus
// the secret file's folder and `env`.
Proc spawn(const std::vector<std::string> &argv, const Env &env) {
  int fds[2];
  if (pipe(fds) != 0) abort();
  const std::string &home = config_home();  // made here, before the fork
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    setpgid(0, 0);
    for (const char *v : kLaunchVariables) unsetenv(v);
    setenv("XDG_CONFIG_HOME", home.c_str(), 1);
    for (auto &[k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char *> args;
    for (auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  p.out = fds[0];
  return p;
}

// Reads a line (blocking up to `seconds`); "" at EOF or timeout.
std::string read_line(Proc &p, double seconds) {
  double until = now() + seconds;
  for (;;) {
    size_t nl = p.output.find('\n');
    if (nl != std::string::npos) {
      std::string line = p.output.substr(0, nl);
      p.output.erase(0, nl + 1);
      return line;
    }
    fcntl(p.out, F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t n = read(p.out, buf, sizeof buf);
    if (n > 0) {
      p.output.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || now() > until) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Waits for the exit (killing the process group after `seconds`); returns the last line.
std::string finish(Proc &p, double seconds = 60) {
  std::string last, line;
  double until = now() + seconds;
  while (!(line = read_line(p, std::max(0.0, until - now()))).empty()) last = line;
  int st = 0;
  if (waitpid(p.pid, &st, WNOHANG) == 0) {
    kill(-p.pid, SIGKILL);
    kill(p.pid, SIGKILL);
    waitpid(p.pid, &st, 0);
  }
  close(p.out);
  p.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return last;
}

std::vector<std::string> job(int ndev, size_t count, bool loop = false) {
  std::vector<std::string> a = {HPU_COMM_JOB, std::to_string(ndev), std::to_string(count)};
  if (loop) a.push_back("loop");
  return a;
}

// Runs one process per env; expects every one to print "OK <first rank> <ranks>".
void expect_job(const std::vector<Env> &envs, int ndev, size_t count, const std::vector<double> &delays = {}) {
  std::vector<Proc> procs;
  for (size_t i = 0; i < envs.size(); ++i) {
    if (i < delays.size() && delays[i] > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delays[i]));
    procs.push_back(spawn(job(ndev, count), envs[i]));
  }
  for (size_t i = 0; i < procs.size(); ++i) {
    std::string last = finish(procs[i]);
    EXPECT_EQ(procs[i].code, 0) << "process " << i << ": " << last;
    std::istringstream in(last);
    std::string ok;
    int first = -1, ranks = -1;
    in >> ok >> first >> ranks;
    EXPECT_EQ(ok, "OK") << last;
    EXPECT_EQ(ranks, static_cast<int>(envs.size()) * ndev) << last;
  }
}

// torchrun's variables for `nproc` processes of `ndev` devices each
// (WORLD_SIZE counts ranks, as torchrun and Lightning mean it).
std::vector<Env> torchrun(int nproc, const std::string &transport, int ndev = 1) {
  std::string port = std::to_string(hpu_test::free_port());
  std::vector<Env> envs;
  for (int p = 0; p < nproc; ++p) {
    Env e = {{"RANK", std::to_string(p)}, {"WORLD_SIZE", std::to_string(nproc * ndev)},
             {"LOCAL_RANK", std::to_string(p)},
             {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}};
    if (!transport.empty()) e["HPU_TRANSPORT"] = transport;
    envs.push_back(e);
  }
  return envs;
}

// Runs a one-process program body in a child and returns its "INIT ..." line.
std::string init_line(const Env &env, int ndev = 1) {
  Proc p = spawn(job(ndev, 10), env);
  std::string last = finish(p, 30);
  return last;
}

// The transport lines of a log file ("rank r of n: transport ...").
std::vector<std::string> transport_lines(const std::string &log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (l.find(": transport ") != std::string::npos) lines.push_back(l);
  return lines;
}

// hpu(7) Transports: a group that spans processes on one host uses shm
// between every pair, the two ranks of one process included (local serves
// only groups within one process). `logs` are the processes' log files, each
// of `ndev` ranks; every rank's line names all the others under shm.
void expect_shm_between_all(const std::vector<std::string> &logs, int ndev) {
  const int n = static_cast<int>(logs.size()) * ndev;
  std::map<int, std::string> line_of;
  for (const std::string &log : logs)
    for (const std::string &l : transport_lines(log)) {
      int rank = -1, of = -1;
      if (sscanf(l.c_str() + l.find("rank "), "rank %d of %d", &rank, &of) == 2 && of == n) line_of[rank] = l;
    }
  ASSERT_EQ(line_of.size(), static_cast<size_t>(n)) << "one transport line per rank expected in the logs";
  for (auto &[rank, l] : line_of) {
    std::string peers;
    for (int j = 0; j < n; ++j)
      if (j != rank) peers += (peers.empty() ? "" : ",") + std::to_string(j);
    EXPECT_NE(l.find("transport shm by locality (shm: ranks " + peers + ";"), std::string::npos) << l;
  }
}

}  // namespace

TEST(CommProc, TorchrunStyleOverTcpTwoProcessesTwoDevicesEach) { expect_job(torchrun(2, "tcp", 2), 2, 100003); }

// Lightning's variables for 2 nodes of 2 devices (one process each): NODE_RANK
// numbers the processes and WORLD_SIZE counts the 4 ranks.
TEST(CommProc, LightningsWorldSizeCountsRanks) {
  std::string port = std::to_string(hpu_test::free_port());
  std::vector<Env> envs;
  for (int node = 0; node < 2; ++node)
    envs.push_back({{"NODE_RANK", std::to_string(node)}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", port}});
  expect_job(envs, 2, 1000);
}

TEST(CommProc, TorchrunStyleOverShmByLocality) {
  std::vector<Env> envs = torchrun(2, "", 2);
  std::vector<std::string> logs;
  for (size_t p = 0; p < envs.size(); ++p) {
    logs.push_back(config_home() + "/locality." + std::to_string(p) + ".log");
    envs[p]["HPU_LOG_LEVEL"] = "info";
    envs[p]["HPU_LOG_FILE"] = logs.back();
  }
  expect_job(envs, 2, 100003);
  expect_shm_between_all(logs, 2);
}

// hpuCommInitRank(3) and hpuGetUniqueId(3): ranks of other processes join the
// group of an id made in one process and handed to the others (here through
// a pipe). Two forked processes of two ranks each, one thread per rank, then
// an allreduce checked in every rank. The test process itself never calls
// libhpu, so the children start it after the fork.
TEST(CommProc, ForkedProcessesJoinAUniqueIdsGroup) {
  constexpr int kProcs = 2, kPerProc = 2, kRanks = kProcs * kPerProc;
  constexpr size_t kCount = 1000;
  int id_pipe[2];
  ASSERT_EQ(pipe(id_pipe), 0);
  std::vector<std::string> logs;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    logs.push_back(config_home() + "/unique-id." + std::to_string(p) + ".log");
    pid_t pid = fork();
    if (pid == 0) {
      setenv("HPU_LOG_LEVEL", "info", 1);
      setenv("HPU_LOG_FILE", logs.back().c_str(), 1);
      setenv("HPU_COMM_TIMEOUT", "30", 1);
      hpuUniqueId_t id;
      if (p == 0) {
        if (hpuGetUniqueId(&id) != HPU_SUCCESS) _exit(2);
        for (int other = 1; other < kProcs; ++other)
          if (write(id_pipe[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(2);
      } else if (read(id_pipe[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
        _exit(2);
      }
      std::atomic<int> failures{0};
      std::vector<std::thread> threads;
      for (int d = 0; d < kPerProc; ++d)
        threads.emplace_back([&, d] {
          const int rank = p * kPerProc + d;
          hpuDevice_t dev = nullptr;
          hpuComm_t comm = nullptr;
          hpuStream_t stream;
          void *buf;
          std::vector<float> host(kCount);
          for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(rank * 10 + static_cast<int>(i % 7));
          bool ok = hpuDeviceOpen(&dev, d) == HPU_SUCCESS &&
                    hpuCommInitRank(&comm, dev, kRanks, &id, rank) == HPU_SUCCESS &&
                    hpuDeviceGetDefaultStream(dev, &stream) == HPU_SUCCESS &&
                    hpuMemAlloc(&buf, dev, kCount * sizeof(float)) == HPU_SUCCESS &&
                    hpuMemcpy(buf, host.data(), kCount * sizeof(float), HPU_MEMCPY_HOST_TO_DEVICE) == HPU_SUCCESS &&
                    hpuAllreduce(stream, comm, buf, buf, kCount, HPU_FLOAT32, HPU_SUM) == HPU_SUCCESS &&
                    hpuStreamSynchronize(stream) == HPU_SUCCESS &&
                    hpuMemcpy(host.data(), buf, kCount * sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST) == HPU_SUCCESS;
          if (!ok) fprintf(stderr, "rank %d: %s\n", rank, hpuGetLastErrorMessage());
          for (size_t i = 0; ok && i < kCount; ++i) {
            float want = 0;
            for (int r = 0; r < kRanks; ++r) want += static_cast<float>(r * 10 + static_cast<int>(i % 7));
            ok = host[i] == want;
            if (!ok) fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, host[i], want);
          }
          if (!ok) ++failures;
          if (comm) hpuCommDestroy(comm);
          if (dev) hpuDeviceClose(dev);
        });
      for (auto &t : threads) t.join();
      _exit(failures == 0 ? 0 : 3);
    }
    pids.push_back(pid);
  }
  for (size_t p = 0; p < pids.size(); ++p) {
    int st = 0;
    for (double until = now() + 60; waitpid(pids[p], &st, WNOHANG) == 0;) {
      if (now() > until) {  // a hung rank: the test fails instead of hanging
        kill(pids[p], SIGKILL);
        waitpid(pids[p], &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "process " << p << ": status " << st;
  }
  close(id_pipe[0]);
  close(id_pipe[1]);
  expect_shm_between_all(logs, kPerProc);
}

TEST(CommProc, OpenMpiStyleVariablesWithHpuCommId) {
  std::string id = "127.0.0.1:" + std::to_string(hpu_test::free_port());
  std::vector<Env> envs;
  for (int p = 0; p < 3; ++p)
    envs.push_back({{"OMPI_COMM_WORLD_RANK", std::to_string(p)}, {"OMPI_COMM_WORLD_SIZE", "3"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(p)}, {"HPU_COMM_ID", id}});
  expect_job(envs, 1, 5000);
}

// Slurm-style, and the processes start in reverse order: rank 0 (the listener) last.
TEST(CommProc, SlurmStyleVariablesAnyStartOrder) {
  std::string port = std::to_string(hpu_test::free_port());
  std::vector<Env> envs;
  for (int p = 2; p >= 0; --p)
    envs.push_back({{"SLURM_PROCID", std::to_string(p)}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", std::to_string(p)},
                    {"SLURM_JOB_ID", "4242"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
                    {"HPU_TRANSPORT", "tcp"}});
  expect_job(envs, 1, 3000, {0, 0.3, 0.3});
}

// Explicit HPU_* variables win over the launcher's: the launcher's ranks are
// swapped and HPU_RANK puts them back.
TEST(CommProc, ExplicitVariablesWin) {
  std::vector<Env> envs = torchrun(2, "");
  envs[0]["RANK"] = "1";
  envs[1]["RANK"] = "0";
  envs[0]["HPU_RANK"] = "0";
  envs[1]["HPU_RANK"] = "1";
  expect_job(envs, 1, 100);
}

TEST(CommProc, MissingVariablesAreNamed) {
  std::string l = init_line({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(l.find("INIT HPU_ERROR_CONFIG"), std::string::npos) << l;
  EXPECT_NE(l.find("MASTER_ADDR"), std::string::npos) << l;
  l = init_line({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_NE(l.find("MASTER_PORT"), std::string::npos) << l;
  l = init_line({{"RANK", "1"}});
  EXPECT_NE(l.find("WORLD_SIZE"), std::string::npos) << l;
  // WORLD_SIZE counts ranks: 3 cannot be processes of 2 devices.
  l = init_line({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}}, 2);
  EXPECT_NE(l.find("INIT HPU_ERROR_CONFIG"), std::string::npos) << l;
  EXPECT_NE(l.find("WORLD_SIZE is 3, not a multiple of the 2 devices"), std::string::npos) << l;
  l = init_line({{"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_NE(l.find("OMPI_COMM_WORLD_SIZE"), std::string::npos) << l;
  l = init_line({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(l.find("HPU_ERROR_CONFIG"), std::string::npos) << l;
  EXPECT_NE(l.find("rank 3"), std::string::npos) << l;
  l = init_line({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "http"}});
  EXPECT_NE(l.find("MASTER_PORT is \"http\""), std::string::npos) << l;
  l = init_line({{"HPU_COMM_ID", "nohostport"}, {"HPU_RANK", "0"}, {"HPU_WORLD_SIZE", "2"}});
  EXPECT_NE(l.find("HPU_COMM_ID is \"nohostport\""), std::string::npos) << l;
  l = init_line({{"HPU_RANK", "0"}, {"HPU_WORLD_SIZE", "2"}, {"HPU_COMM_ID", "127.0.0.1:9"},
                 {"HPU_COMM_SECRET", "xyz"}});
  EXPECT_NE(l.find("HPU_COMM_SECRET"), std::string::npos) << l;
}

TEST(CommProc, NoLauncherIsOneProcess) {
  std::string l = init_line({}, 2);
  EXPECT_EQ(l, "OK 0 2");
}

TEST(CommProc, TakenPortIsAddressInUse) {
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t len = sizeof a;
  getsockname(holder, reinterpret_cast<sockaddr *>(&a), &len);
  std::string port = std::to_string(ntohs(a.sin_port));
  std::string l =
      init_line({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}});
  close(holder);
  EXPECT_NE(l.find("INIT HPU_ERROR_ADDRESS_IN_USE"), std::string::npos) << l;
  EXPECT_NE(l.find("MASTER_PORT"), std::string::npos) << l;
  EXPECT_NE(l.find(port), std::string::npos) << l;
}

// ---- faults: one process of three killed or stopped mid-allreduce ---------------

namespace {

// Allreduces of `count` floats in a loop; over shm both 1 MiB (chunk by
// chunk) and 4 KiB (in one meeting) meet in the shared area, whose timeout
// names it.
void strike(const std::string &transport, int sig, size_t count = 1 << 18) {
  std::vector<Env> envs = torchrun(3, transport);
  double timeout = sig == SIGSTOP ? 3.0 : 30.0;
  for (auto &e : envs) e["HPU_COMM_TIMEOUT"] = std::to_string(timeout);
  std::vector<Proc> procs;
  for (auto &e : envs) procs.push_back(spawn(job(1, count, true), e));
  for (size_t i = 0; i < procs.size(); ++i) ASSERT_EQ(read_line(procs[i], 30), "READY") << "process " << i;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double struck = now();
  kill(procs[2].pid, sig);
  for (int i = 0; i < 2; ++i) {
    std::string last = finish(procs[static_cast<size_t>(i)], timeout + 20);
    std::istringstream in(last);
    std::string word, status;
    double when = 0;
    in >> word >> status >> when;
    EXPECT_EQ(word, "FAIL") << "process " << i << ": " << last;
    double took = when - struck;
    if (sig == SIGKILL) {
      EXPECT_EQ(status, "HPU_ERROR_REMOTE") << last;
      EXPECT_LT(took, 2.0 * margin()) << last;
    } else {
      EXPECT_EQ(status, "HPU_ERROR_TIMEOUT") << last;
      if (transport == "shm") {
        EXPECT_NE(last.find("shared-memory allreduce"), std::string::npos) << last;
      }
      EXPECT_GT(took, timeout * 0.5) << last;
      EXPECT_LT(took, timeout + 2.0 * margin()) << last;
    }
  }
  kill(procs[2].pid, SIGKILL);
  finish(procs[2], 5);
}

}  // namespace

TEST(CommProc, KilledProcessFailsTheOthersOverTcp) { strike("tcp", SIGKILL); }
TEST(CommProc, KilledProcessFailsTheOthersOverShm) { strike("shm", SIGKILL); }
TEST(CommProc, StoppedProcessTimesOutOverTcp) { strike("tcp", SIGSTOP); }
TEST(CommProc, StoppedProcessTimesOutOverShm) { strike("shm", SIGSTOP); }
TEST(CommProc, KilledProcessFailsTheOthersMidSmallAllreduceOverShm) { strike("shm", SIGKILL, 1024); }
TEST(CommProc, StoppedProcessTimesOutMidSmallAllreduceOverShm) { strike("shm", SIGSTOP, 1024); }

// ---- Open MPI's mpirun -----------------------------------------------------------

TEST(CommProc, UnderMpirun) {
  std::string port = std::to_string(hpu_test::free_port());
  std::vector<std::string> argv = {"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "3",
                                   "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=" + port,
                                   "--mca", "btl", "self,tcp"};
  for (auto &a : job(1, 10007)) argv.push_back(a);
  Proc p = spawn(argv, {});
  int oks = 0;
  std::string line, all;
  while (!(line = read_line(p, 60)).empty()) {
    all += line + "\n";
    if (line.rfind("OK ", 0) == 0 && line.substr(line.rfind(' ') + 1) == "3") ++oks;
  }
  finish(p, 10);
  EXPECT_EQ(p.code, 0) << all;
  EXPECT_EQ(oks, 3) << all;
}

// ---- hosts: network namespaces joined by a veth pair (netns.hpp) ---------------

using hpu_test::Hosts;

TEST(CommHosts, TwoHostsTwoDevicesEachOverTcp) {
  Hosts h;
  ASSERT_TRUE(h.ok) << h.why;
  std::vector<Proc> procs;
  for (int i = 0; i < 2; ++i)
    procs.push_back(spawn(h.in(i, job(2, 300007)), h.env(i, {{"HPU_LOG_LEVEL", "info"}, {"WORLD_SIZE", "4"}})));
  for (int i = 0; i < 2; ++i) {
    std::string last = finish(procs[static_cast<size_t>(i)]);
    EXPECT_EQ(procs[static_cast<size_t>(i)].code, 0) << "host " << i << ": " << last;
    EXPECT_EQ(last, "OK " + std::to_string(2 * i) + " 4");
  }
}

// The link goes down mid-allreduce: no packet says so; both hosts time out.
TEST(CommHosts, CutLinkTimesOut) {
  Hosts h;
  ASSERT_TRUE(h.ok) << h.why;
  const double timeout = 3.0;
  std::vector<Proc> procs;
  for (int i = 0; i < 2; ++i)
    procs.push_back(spawn(h.in(i, job(1, 1 << 18, true)), h.env(i, {{"HPU_COMM_TIMEOUT", std::to_string(timeout)}})));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(read_line(procs[static_cast<size_t>(i)], 30), "READY") << "host " << i;
  double cut = now();
  ASSERT_TRUE(h.cut(1));
  for (int i = 0; i < 2; ++i) {
    std::string last = finish(procs[static_cast<size_t>(i)], timeout + 20);
    std::istringstream in(last);
    std::string word, status;
    double when = 0;
    in >> word >> status >> when;
    EXPECT_EQ(word, "FAIL") << last;
    EXPECT_EQ(status, "HPU_ERROR_TIMEOUT") << last;
    EXPECT_LT(when - cut, timeout + 2.0 * margin()) << last;
  }
}
