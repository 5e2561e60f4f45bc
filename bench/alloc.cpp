// hpu-bench alloc: the cost of a cached hpuMemAlloc/hpuMemFree pair, with one
// thread and with eight threads on eight devices, and of hpuMemStats, beside
// glibc malloc/free (and mallinfo2) measured in the same run.
// Target (issue 2): a cached pair costs no more than 2 x malloc/free.
#include <malloc.h>
#include <time.h>

#include <cstring>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace {

constexpr double kTarget = 2.0;

// Keeps the compiler from eliding a malloc/free pair.
inline void keep(void *p) { asm volatile("" : : "r"(p) : "memory"); }

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Runs `pair` (which does `iters` alloc/free pairs) on `threads` threads at
// once, thread t with argument t; returns CPU nanoseconds per pair (the
// threads' CPU time over all pairs: other load on the machine does not count).
template <class Pair>
double per_pair_ns(int threads, long iters, Pair pair) {
  std::vector<std::thread> pool;
  std::vector<double> cpu(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([=, &cpu] {
      double t0 = thread_cpu_seconds();
      pair(t, iters);
      cpu[t] = thread_cpu_seconds() - t0;
    });
  for (auto &th : pool) th.join();
  double total = 0;
  for (double c : cpu) total += c;
  return total * 1e9 / (static_cast<double>(iters) * threads);
}

// Picks an iteration count that takes about `seconds` on one thread.
template <class Pair>
long calibrate(double seconds, Pair pair) {
  long iters = 1000;
  for (;;) {
    double ns = per_pair_ns(1, iters, pair);
    if (ns * iters >= seconds * 1e9 / 4 || iters > (1L << 26)) return static_cast<long>(seconds * 1e9 / ns) + 1;
    iters *= 4;
  }
}

struct Row {
  const char *what;
  int threads;
  size_t bytes;
  double hpu_ns, peer_ns;
};

void print(const Row &r) {
  char size[32] = "-";
  if (r.bytes >= (1u << 20))
    std::snprintf(size, sizeof size, "%zu MiB", r.bytes >> 20);
  else if (r.bytes >= 1024)
    std::snprintf(size, sizeof size, "%zu KiB", r.bytes >> 10);
  else if (r.bytes)
    std::snprintf(size, sizeof size, "%zu B", r.bytes);
  double ratio = r.hpu_ns / r.peer_ns;
  std::printf("%-22s %7d %9s %12.1f %12.1f %8.2f %8s\n", r.what, r.threads, size, r.hpu_ns, r.peer_ns, ratio,
              ratio <= kTarget ? "yes" : "NO");
}

int run(int argc, char **argv) {
  double seconds = 0.2;  // per measurement
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      return bench::kBadUsage;
    }
  }
  const int kThreads = 8;
  std::vector<hpuDevice_t> devs(kThreads);
  for (int t = 0; t < kThreads; ++t) BENCH_CHECK(hpuDeviceOpen(&devs[t], t));
  const size_t sizes[] = {512, 4 << 10, 64 << 10, 1 << 20, 16 << 20};

  std::printf("hpu-bench alloc: cached hpuMemAlloc+hpuMemFree pair vs glibc malloc+free of the same size,\n"
              "and hpuMemStats vs glibc mallinfo2; CPU ns per pair or call (threads' CPU time / count).\n"
              "Target: a cached pair costs no more than %.0f x malloc/free.\n\n", kTarget);
  std::printf("%-22s %7s %9s %12s %12s %8s %8s\n", "case", "threads", "size", "hpu ns", "glibc ns", "ratio",
              "<= 2x");
  for (int threads : {1, kThreads}) {
    for (size_t bytes : sizes) {
      auto hpu_pair = [&devs, bytes](int t, long iters) {
        hpuDevice_t dev = devs[t];
        for (long i = 0; i < iters; ++i) {
          void *p;
          if (hpuMemAlloc(&p, dev, bytes) != HPU_SUCCESS || hpuMemFree(p) != HPU_SUCCESS) std::abort();
        }
      };
      auto malloc_pair = [bytes](int, long iters) {
        for (long i = 0; i < iters; ++i) {
          void *p = std::malloc(bytes);
          keep(p);
          std::free(p);
        }
      };
      // Warm both caches (segments mapped, malloc's mmap threshold adjusted).
      per_pair_ns(threads, 10, hpu_pair);
      per_pair_ns(threads, 10, malloc_pair);
      long iters = calibrate(seconds / threads, hpu_pair);
      long peer_iters = calibrate(seconds / threads, malloc_pair);
      print({threads == 1 ? "alloc+free" : "alloc+free, 8 devices", threads, bytes,
             per_pair_ns(threads, iters, hpu_pair), per_pair_ns(threads, peer_iters, malloc_pair)});
    }
  }
  auto stats = [&devs](int t, long iters) {
    hpuMemStats_t s = HPU_MEM_STATS_INIT;
    for (long i = 0; i < iters; ++i)
      if (hpuMemStats(devs[t], &s) != HPU_SUCCESS) std::abort();
  };
  auto info = [](int, long iters) {
    for (long i = 0; i < iters; ++i) {
      struct mallinfo2 m = mallinfo2();
      keep(&m);
    }
  };
  print({"hpuMemStats/mallinfo2", 1, 0, per_pair_ns(1, calibrate(seconds, stats), stats),
         per_pair_ns(1, calibrate(seconds, info), info)});
  for (hpuDevice_t d : devs) BENCH_CHECK(hpuDeviceClose(d));
  return 0;
}

}  // namespace

HPU_BENCH("alloc", "cached device alloc/free and hpuMemStats vs glibc malloc/free",
          "[--seconds S]\n  --seconds S  time per measurement (default 0.2)\n", run);
