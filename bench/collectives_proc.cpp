// hpu-bench allreduce-proc: allreduce between processes (one device each) over
// the shm or tcp transport, beside two peers on the same sizes in the same
// run: Open MPI's MPI_Allreduce (hpu-bench-mpi under mpirun, when Open MPI was
// found at build time and mpirun runs) and Gloo's ring allreduce over its tcp
// transport (hpu-bench-gloo, when libgloo-dev was found). f32 sum; nccl-tests
// columns; busbw = algbw x 2(n-1)/n for all; each ratio is ours over the
// peer's busbw. One table per transport and process count asked for, then a
// summary: our ratio to Open MPI per size, transport and process count, and,
// for shm and tcp both, our latency at the smallest size with N processes
// over that with 2 (N: the largest -np above 2, else 4), beside its limit of
// 4 (jobs of their own at that size where the tables did not time it).
//
//   --transport T  shm, tcp or both (shm,tcp; default: by locality, i.e. shm);
//                  Open MPI uses its shared-memory BTL for shm and
//                  `--mca btl tcp,self` for tcp
//   -np N          processes, or a list of counts (2,4; default 2)
//   -b / -e / -f   smallest, largest size in bytes, factor (default 4K, 16M, 4)
//   -n / -w        iterations per size (default ~256 MiB moved, 5..1000), warm-up
//                  iterations before them (default as many: the first runs of a
//                  size, until memory and scheduling settle, are slower for all)
//   --no-mpi       skip the Open MPI peer
//   --no-gloo      skip the Gloo peer
//   --no-bind      leave the ranks to the scheduler; by default each rank is
//                  pinned to a CPU of its own when there are enough, as
//                  mpirun's default binding does for the Open MPI peer
//                  (pinning takes away the runs where the scheduler puts both
//                  ranks on one CPU, but leaves each rank's threads one CPU)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench.hpp"

namespace {

struct Options {
  std::string transport;  // of one job ("": by locality)
  int np = 2;             // of one job
  std::vector<std::string> transports{""};  // the tables: every transport...
  std::vector<int> nps{2};                  // ...with every process count
  size_t min_bytes = 4096, max_bytes = size_t(16) << 20;
  double factor = 4;
  int iters = 0, warmup = -1;  // -1: as many as the timed iterations
  bool mpi = true, gloo = true;
  bool bind = true;  // one CPU per rank when there are enough, as mpirun binds by default (--no-bind: not)
};

std::vector<size_t> sizes(const Options &o) {
  std::vector<size_t> s;
  for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * 1.0001; b *= o.factor) {
    s.push_back(static_cast<size_t>(b) / 4 * 4);
    if (o.factor <= 1) break;
  }
  return s;
}

int iterations(const Options &o, size_t bytes) {
  if (o.iters > 0) return o.iters;
  long n = static_cast<long>((size_t(256) << 20) / std::max<size_t>(bytes, 1));
  return static_cast<int>(std::min<long>(1000, std::max<long>(5, n)));
}

struct Shared {
  double seconds[64][64];  // [size][rank]
  long wrong[64][64];
  int failed;
};

float value(int rank, size_t i) { return static_cast<float>((i + static_cast<size_t>(rank) * 3) % 7); }

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One process of the job: a rank on its device 0.
int rank_main(const Options &o, int rank, Shared *out) {
  hpuDevice_t dev;
  hpuComm_t comm;
  BENCH_CHECK(hpuDeviceOpen(&dev, 0));
  BENCH_CHECK(hpuCommInitFromEnv(&comm, 1, &dev));
  auto sz = sizes(o);
  void *send, *recv;
  BENCH_CHECK(hpuMemAlloc(&send, dev, o.max_bytes));
  BENCH_CHECK(hpuMemAlloc(&recv, dev, o.max_bytes));
  std::vector<float> host(o.max_bytes / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = value(rank, i);
  BENCH_CHECK(hpuMemcpy(send, host.data(), o.max_bytes, HPU_MEMCPY_HOST_TO_DEVICE));
  hpuStream_t stream;
  BENCH_CHECK(hpuDeviceGetDefaultStream(dev, &stream));
  for (size_t k = 0; k < sz.size() && k < 64; ++k) {
    size_t count = sz[k] / 4;
    int n = iterations(o, sz[k]);
    const int warmup = o.warmup < 0 ? n : o.warmup;
    for (int i = 0; i < warmup; ++i) BENCH_CHECK(hpuAllreduce(stream, comm, send, recv, count, HPU_FLOAT32, HPU_SUM));
    BENCH_CHECK(hpuBarrier(stream, comm));
    BENCH_CHECK(hpuStreamSynchronize(stream));
    double t0 = bench::now_seconds();
    for (int i = 0; i < n; ++i) BENCH_CHECK(hpuAllreduce(stream, comm, send, recv, count, HPU_FLOAT32, HPU_SUM));
    BENCH_CHECK(hpuStreamSynchronize(stream));
    out->seconds[k][rank] = (bench::now_seconds() - t0) / n;
    BENCH_CHECK(hpuMemcpy(host.data(), recv, count * 4, HPU_MEMCPY_DEVICE_TO_HOST));
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < o.np; ++r) want += value(r, i);
      wrong += host[i] != want;
    }
    out->wrong[k][rank] = wrong;
  }
  hpuMemFree(send);
  hpuMemFree(recv);
  BENCH_CHECK(hpuCommDestroy(comm));
  BENCH_CHECK(hpuDeviceClose(dev));
  return 0;
}

// A peer's "<bytes> <microseconds>" lines, read from `cmd`.
std::map<size_t, double> read_times(const std::string &cmd) {
  std::map<size_t, double> t;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return t;
  unsigned long long bytes;
  double us;
  while (fscanf(p, "%llu %lf", &bytes, &us) == 2) t[static_cast<size_t>(bytes) / 4 * 4] = us;
  pclose(p);
  return t;
}

std::string size_args(const Options &o) {
  return std::to_string(o.min_bytes) + " " + std::to_string(o.max_bytes) + " " + std::to_string(o.factor) + " " +
         std::to_string(o.iters) + " " + std::to_string(o.warmup);
}

// A peer's times per size in microseconds (empty when it did not run), and
// what ran or why nothing did, for the table's header.
struct Peer {
  std::map<size_t, double> times;
  std::string note;
};

// A peer program (bench/deps.cmake): beside hpu-bench in the build tree, in
// <libdir>/hpu once installed with it. "" when missing; `looked` says where
// it was looked for.
[[maybe_unused]] std::string find_peer(const char *name, std::string *looked) {
#ifdef HPU_BENCH_PEERS_FROM_BIN
  return bench::find_beside_self({name, std::string(HPU_BENCH_PEERS_FROM_BIN) + "/" + name}, looked);
#else
  return bench::find_beside_self({name}, looked);
#endif
}

// Open MPI's MPI_Allreduce under mpirun.
Peer mpi_peer(const Options &o) {
  Peer p;
  if (!o.mpi) {
    p.note = "none (--no-mpi)";
    return p;
  }
#ifdef HPU_BENCH_MPI
  std::string looked;
  const std::string exe = find_peer(HPU_BENCH_MPI, &looked);
  if (exe.empty()) {
    p.note = "Open MPI's program is missing (looked for " + looked + ")";
    return p;
  }
  std::string btl = o.transport == "tcp" ? "tcp,self" : "self,vader";
  p.times = read_times("mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(o.np) + " --mca btl " + btl +
                       " '" + exe + "' " + size_args(o) + " 2>/dev/null");
  p.note = p.times.empty() ? "Open MPI failed (mpirun of " + exe + ")"
                           : "Open MPI MPI_Allreduce, --mca btl " + btl + " (" + exe + ")";
#else
  p.note = "Open MPI not available (this hpu-bench was built without it)";
#endif
  return p;
}

// Gloo's ring allreduce over its tcp transport, one process per rank.
Peer gloo_peer(const Options &o) {
  Peer p;
  if (!o.gloo) {
    p.note = "none (--no-gloo)";
    return p;
  }
#ifdef HPU_BENCH_GLOO
  std::string looked;
  const std::string exe = find_peer(HPU_BENCH_GLOO, &looked);
  if (exe.empty()) {
    p.note = "Gloo's program is missing (looked for " + looked + ")";
    return p;
  }
  char dir[] = "/tmp/hpu-bench-gloo-XXXXXX";
  if (!mkdtemp(dir)) {
    p.note = std::string("Gloo did not run: cannot create a folder in /tmp: ") + std::strerror(errno);
    return p;
  }
  std::string cmd = "sh -c '";
  for (int r = o.np - 1; r >= 0; --r)
    cmd += "\"" + exe + "\" " + std::to_string(r) + " " + std::to_string(o.np) + " " + dir + " " + size_args(o) +
           (r > 0 ? " >/dev/null & " : "; wait'");
  p.times = read_times(cmd + " 2>/dev/null");
  std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "hpu-bench: cannot remove %s\n", dir);
  p.note = p.times.empty() ? "Gloo failed (" + exe + ")"
                           : "Gloo allreduce, Algorithm::RING, tcp transport on 127.0.0.1 (" + exe + ")";
#else
  p.note = "Gloo not available (this hpu-bench was built without libgloo-dev)";
#endif
  return p;
}

size_t parse_size(const char *s) {
  char *end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}


// CPUs this process may run on.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Pins the calling process to the r-th allowed CPU (before any thread starts,
// so that its threads inherit it).
void bind_to_cpu(int r) {
  auto cpus = allowed_cpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("hpu-bench: sched_setaffinity");
}

// Runs one job of o.np processes; their figures land in `shared`. False if a rank failed.
bool run_job(const Options &o, Shared *shared) {
  std::memset(shared, 0, sizeof *shared);
  std::string id = "127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < o.np; ++r) {
    pid_t pid = fork();
    if (pid == 0) {  // this process has not touched libhpu: the child may
      for (const char *v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                            "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
        unsetenv(v);
      setenv("HPU_RANK", std::to_string(r).c_str(), 1);
      setenv("HPU_WORLD_SIZE", std::to_string(o.np).c_str(), 1);
      setenv("HPU_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("HPU_COMM_ID", id.c_str(), 1);
      if (!o.transport.empty()) setenv("HPU_TRANSPORT", o.transport.c_str(), 1);
      if (o.bind) bind_to_cpu(r);
      _exit(rank_main(o, r, shared));
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  if (!ok) std::fprintf(stderr, "hpu-bench: a rank failed\n");
  return ok;
}

// Seconds per allreduce of size k (the slowest rank) and the wrong elements.
double job_time(const Shared &s, int np, size_t k, long *wrong) {
  double t = 0;
  for (int r = 0; r < np; ++r) {
    t = std::max(t, s.seconds[k][r]);
    if (wrong) *wrong += s.wrong[k][r];
  }
  return t;
}

// " | time busbw ratio" for a peer's figure at `bytes`, or dashes.
void print_peer(const std::map<size_t, double> &peer, size_t bytes, double factor, double busbw) {
  auto it = peer.find(bytes);
  if (it == peer.end()) {
    std::printf(" | %10s %8s %6s", "-", "-", "-");
    return;
  }
  double pbus = static_cast<double>(bytes) / (it->second * 1e-6) / 1e9 * factor;
  std::printf(" | %10.2f %8.3f %6.2f", it->second, pbus, busbw / pbus);
}

// "a,b,c" split at the commas.
std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> items;
  size_t from = 0;
  for (size_t comma; (comma = s.find(',', from)) != std::string::npos; from = comma + 1)
    items.push_back(s.substr(from, comma - from));
  items.push_back(s.substr(from));
  return items;
}

// One job's options: `transport` with `np` processes (pinned when asked and
// there are CPUs enough).
Options job_options(const Options &o, const std::string &transport, int np, bool bind_asked) {
  Options j = o;
  j.transport = transport;
  j.np = np;
  j.bind = bind_asked && static_cast<size_t>(np) <= allowed_cpus().size();
  return j;
}

// Our seconds per allreduce at every size of a job, and its wrong elements.
struct JobTimes {
  std::vector<double> seconds;
  std::vector<long> wrong;
};

bool time_job(const Options &o, Shared *shared, JobTimes *out) {
  if (!run_job(o, shared)) return false;
  const auto sz = sizes(o);
  for (size_t k = 0; k < sz.size() && k < 64; ++k) {
    long wrong = 0;
    out->seconds.push_back(job_time(*shared, o.np, k, &wrong));
    out->wrong.push_back(wrong);
  }
  return true;
}

// One table: a job of ours beside the peers on the same transport and
// process count.
struct Table {
  Options o;
  JobTimes ours;
  Peer mpi, gloo;
};

void print_table(const Table &t, bool bind_asked) {
  const Options &o = t.o;
  double factor = 2.0 * (o.np - 1) / o.np;
  std::printf("# hpu-bench allreduce-proc: %d processes x 1 device, transport %s, float sum\n", o.np,
              o.transport.empty() ? "by locality (shm)" : o.transport.c_str());
  std::printf("# peer mpi: %s\n", t.mpi.note.c_str());
  std::printf("# peer gloo: %s\n", t.gloo.note.c_str());
  std::printf("# binding: %s\n", o.bind ? "each rank pinned to a CPU of its own (mpirun binds each rank to a core too)"
                                  : bind_asked ? "none (more ranks than CPUs; mpirun does not bind then either)"
                                               : "none (--no-bind: the scheduler places the ranks)");
  std::printf("# ratio = our busbw / the peer's (for latency: the peer's time / ours)\n");
  std::printf("#%11s %12s %10s %8s %8s %7s | %10s %8s %6s | %10s %8s %6s\n", "size", "count", "time(us)", "algbw",
              "busbw", "#wrong", "mpi(us)", "busbw", "ratio", "gloo(us)", "busbw", "ratio");
  auto sz = sizes(o);
  for (size_t k = 0; k < t.ours.seconds.size(); ++k) {
    double sec = t.ours.seconds[k];
    double algbw = static_cast<double>(sz[k]) / sec / 1e9, busbw = algbw * factor;
    std::printf("%12zu %12zu %10.2f %8.3f %8.3f %7ld", sz[k], sz[k] / 4, sec * 1e6, algbw, busbw, t.ours.wrong[k]);
    print_peer(t.mpi.times, sz[k], factor, busbw);
    print_peer(t.gloo.times, sz[k], factor, busbw);
    std::printf("\n");
  }
}

// The transport a table ran over, as the summary names it ("" is by
// locality: shm on one host).
std::string transport_name(const std::string &t) { return t.empty() ? "shm" : t; }

// The summary's rows: "vs-mpi TRANSPORT RANKS" and our ratio to Open MPI at
// every size ("-" where it did not run), for every table.
void print_mpi_ratios(const std::vector<Table> &tables) {
  const auto sz = sizes(tables[0].o);
  std::printf("# ratio to Open MPI per size: our busbw / Open MPI's (>= 1: at least as fast)\n");
  std::printf("#%-6s %9s %5s", "", "transport", "ranks");
  for (size_t b : sz) std::printf(" %9zu", b);
  std::printf("\n");
  for (const Table &t : tables) {
    std::printf("%-7s %9s %5d", "vs-mpi", transport_name(t.o.transport).c_str(), t.o.np);
    for (size_t k = 0; k < t.ours.seconds.size(); ++k) {
      auto it = t.mpi.times.find(sz[k]);
      if (it == t.mpi.times.end()) std::printf(" %9s", "-");
      else std::printf(" %9.2f", it->second * 1e-6 / t.ours.seconds[k]);
    }
    std::printf("\n");
  }
}

int allreduce_proc_main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-mpi" || a == "--no-gloo") {
      (a == "--no-mpi" ? o.mpi : o.gloo) = false;
      continue;
    }
    if (a == "--bind" || a == "--no-bind") {  // --bind: the default, still accepted
      o.bind = a == "--bind";
      continue;
    }
    if (i + 1 >= argc) return bench::kBadUsage;
    const char *v = argv[++i];
    if (a == "--transport") {
      o.transports = split_list(v);
      for (const std::string &t : o.transports)
        if (t != "shm" && t != "tcp") return bench::kBadUsage;
    } else if (a == "-np") {
      o.nps.clear();
      for (const std::string &n : split_list(v)) {
        o.nps.push_back(std::atoi(n.c_str()));
        if (o.nps.back() < 2 || o.nps.back() > 64) return bench::kBadUsage;
      }
    }
    else if (a == "-b") o.min_bytes = parse_size(v);
    else if (a == "-e") o.max_bytes = parse_size(v);
    else if (a == "-f") o.factor = std::atof(v);
    else if (a == "-n") o.iters = std::atoi(v);
    else if (a == "-w") o.warmup = std::atoi(v);
    else return bench::kBadUsage;
  }
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.factor < 1) return bench::kBadUsage;
  const bool bind_asked = o.bind;
  auto *shared = static_cast<Shared *>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<Table> tables;
  for (const std::string &transport : o.transports)
    for (int np : o.nps) {
      Table t;
      t.o = job_options(o, transport, np, bind_asked);
      if (!time_job(t.o, shared, &t.ours)) return 1;
      t.mpi = mpi_peer(t.o);
      t.gloo = gloo_peer(t.o);
      print_table(t, bind_asked);
      std::fflush(stdout);
      tables.push_back(std::move(t));
    }
  print_mpi_ratios(tables);
  // The latency rows: N ranks over 2 at the smallest size, for shm and tcp,
  // from the tables where they timed it, else from a job at that size alone.
  const int largest = *std::max_element(o.nps.begin(), o.nps.end());
  const int many = largest > 2 ? largest : 4;
  const size_t smallest = sizes(o)[0];
  std::printf("# latency at %zu B: %d ranks over 2 ranks (target <= 4)\n", smallest, many);
  for (const char *transport : {"shm", "tcp"}) {
    double at[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const int np = i == 0 ? 2 : many;
      for (const Table &t : tables)
        if (transport_name(t.o.transport) == transport && t.o.np == np) at[i] = t.ours.seconds[0];
      if (at[i] > 0) continue;
      Options one = job_options(o, transport, np, bind_asked);
      one.max_bytes = one.min_bytes;
      JobTimes j;
      if (!time_job(one, shared, &j)) return 1;
      at[i] = j.seconds[0];
    }
    std::printf("%-7s %9s %5d %9.2f us, 2 ranks %9.2f us: %6.2f x (target <= 4)\n", "latency", transport, many,
                at[1] * 1e6, at[0] * 1e6, at[1] / at[0]);
  }
  munmap(shared, sizeof *shared);
  return 0;
}

}  // namespace

HPU_BENCH("allreduce-proc", "allreduce between processes over shm or tcp, vs Open MPI's MPI_Allreduce and Gloo",
          "[--transport shm|tcp|shm,tcp] [-np N[,N...]] [-b BYTES] [-e BYTES] [-f FACTOR] [-n ITERS]\n"
          "       [-w WARMUP] [--no-mpi] [--no-gloo] [--no-bind]\n",
          allreduce_proc_main);
