// hpu-bench profiler: the profiler's cost per recorded event. Each thread
// calls hpuDeviceCount (one host span per call when recording) with the
// profiler off and on (hpuProfilerStart/Stop around the calls, not timed);
// the table shows CPU nanoseconds per call (the threads' CPU time, so other
// load on the machine does not count), median of 5 runs, and the difference:
// what one event costs. `hpu-bench train --profile` shows what that comes to on
// a training step (issue 10: under 5%).
#include <time.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace {

constexpr long kCalls = 50000;  // per thread and run
constexpr int kRuns = 5;

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// CPU nanoseconds per call over `threads` threads calling at once.
double per_call_ns(int threads, bool recording) {
  if (recording) BENCH_CHECK(hpuProfilerStart("/tmp/hpu-bench-profiler.trace.json"));
  std::vector<std::thread> pool;
  std::vector<double> cpu(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([t, &cpu] {
      int n;
      double t0 = thread_cpu_seconds();
      for (long i = 0; i < kCalls; ++i) hpuDeviceCount(&n);
      cpu[t] = thread_cpu_seconds() - t0;
    });
  for (auto &th : pool) th.join();
  if (recording) BENCH_CHECK(hpuProfilerStop());
  double sum = 0;
  for (double c : cpu) sum += c;
  return sum * 1e9 / (double(kCalls) * threads);
}

double median_ns(int threads, bool recording) {
  std::vector<double> v;
  for (int r = 0; r < kRuns; ++r) v.push_back(per_call_ns(threads, recording));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int profiler_main(int argc, char **) {
  if (argc > 1) return bench::kBadUsage;
  int n;
  BENCH_CHECK(hpuDeviceCount(&n));  // initialise outside the timing
  std::printf("# CPU ns per hpuDeviceCount call, median of %d runs of %ld calls per thread\n", kRuns, kCalls);
  std::printf("%7s %10s %10s %14s\n", "threads", "off", "recording", "ns per event");
  for (int threads : {1, 2, 4}) {
    const double off = median_ns(threads, false), on = median_ns(threads, true);
    std::printf("%7d %10.1f %10.1f %14.1f\n", threads, off, on, on - off);
  }
  return 0;
}

}  // namespace

HPU_BENCH("profiler", "the profiler's cost per recorded event, 1-4 threads",
          "\n  CPU ns per hpuDeviceCount call on 1, 2 and 4 threads, profiler off and recording\n", profiler_main);
