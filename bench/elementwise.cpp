// hpu-bench elementwise: hpuAdd, hpuRelu and hpuCast f32 -> bf16 over 64 MiB
// f32 inputs through libhpu, beside memcpy of the same bytes in the same run,
// with 1 and 2 threads (each in a child process: HPU_NUM_THREADS is read at
// initialisation). Target (issue 3): >= 0.7 x memcpy bandwidth. %peak: the
// GB/s over the memory copy peak on as many threads (bench/peaks.cpp).
//
// What is compared, like with like:
// - bytes: an op's bytes read + written; memcpy copies half as many bytes from
//   one buffer to another, so it too reads + writes that total;
// - threads: libhpu's kernels split the work over the compute budget
//   (HPU_NUM_THREADS); memcpy runs as that many threads, each copying its
//   contiguous part;
// - memory: both read inputs and write outputs whose pages are already
//   mapped (memcpy's destination is touched before timing; an op's output comes
//   from the device's caching allocator, which keeps the block of the previous
//   iteration, so only the untimed warm-up call maps fresh pages);
// - time: an op's time is the whole public call as a user sees it: argument
//   checks, output allocation, enqueue, the kernel, hpuStreamSynchronize and
//   hpuTensorRelease. Best of 5 after one warm-up, for both.
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace {

constexpr double kTarget = 0.7;
constexpr int64_t kElems = (int64_t(64) << 20) / 4;  // 64 MiB of f32

template <class Fn>
double best_seconds(Fn fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    double s = bench::now_seconds();
    fn();
    best = std::min(best, bench::now_seconds() - s);
  }
  return best;
}

// memcpy GB/s moving `bytes` (read + write counted) on `threads` threads.
double memcpy_gbs(size_t bytes, int threads) {
  std::vector<char> a(bytes / 2, 1), b(bytes / 2, 2);
  auto copy = [&] {
    std::vector<std::thread> pool;
    auto part = [&](int t) {
      size_t lo = a.size() * t / threads, hi = a.size() * (t + 1) / threads;
      std::memcpy(b.data() + lo, a.data() + lo, hi - lo);
    };
    for (int t = 1; t < threads; ++t) pool.emplace_back(part, t);
    part(0);
    for (auto &th : pool) th.join();
  };
  return bytes / best_seconds(copy) * 1e-9;
}

int run(int threads) {
  const double copy_peak = bench::elementwise_bound(bench::measure_peaks(threads, 3, bench::kMemoryPeaks)).value;
  hpuDevice_t dev;
  hpuStream_t s;
  BENCH_CHECK(hpuDeviceOpen(&dev, 0));
  BENCH_CHECK(hpuDeviceGetDefaultStream(dev, &s));
  int64_t shape[1] = {kElems};
  hpuTensor_t a, b;
  BENCH_CHECK(hpuTensorCreate(&a, dev, HPU_FLOAT32, 1, shape));
  BENCH_CHECK(hpuTensorCreate(&b, dev, HPU_FLOAT32, 1, shape));
  BENCH_CHECK(hpuTensorFillUniform(s, a, -1, 1));  // signs at random: no branch predicts them
  BENCH_CHECK(hpuTensorFillUniform(s, b, -1, 1));
  BENCH_CHECK(hpuStreamSynchronize(s));
  auto op = [&](auto call) {
    return best_seconds([&] {
      hpuTensor_t out = nullptr;
      BENCH_CHECK(call(&out));
      BENCH_CHECK(hpuStreamSynchronize(s));
      BENCH_CHECK(hpuTensorRelease(out));
    });
  };
  struct Row {
    const char *name;
    double bytes;  // read + written
    double seconds;
  };
  const double n4 = 4.0 * kElems, n2 = 2.0 * kElems;
  Row rows[] = {
      {"add f32", 3 * n4, op([&](hpuTensor_t *o) { return hpuAdd(s, a, b, o); })},
      {"relu f32", 2 * n4, op([&](hpuTensor_t *o) { return hpuRelu(s, a, o); })},
      {"cast f32->bf16", n4 + n2, op([&](hpuTensor_t *o) { return hpuCast(s, a, HPU_BFLOAT16, o); })},
  };
  int misses = 0;
  for (const Row &r : rows) {
    double gbs = r.bytes / r.seconds * 1e-9, peer = memcpy_gbs(static_cast<size_t>(r.bytes), threads);
    bool ok = gbs / peer >= kTarget;
    misses += !ok;
    std::printf("%-16s %7d %10.0f %12.2f %7s %12.2f %8.2f %7.2f %s\n", r.name, threads, r.bytes / (1 << 20), gbs,
                bench::percent(gbs, copy_peak).c_str(), peer, gbs / peer, kTarget, ok ? "ok" : "MISS");
  }
  for (hpuTensor_t t : {a, b}) BENCH_CHECK(hpuTensorRelease(t));
  BENCH_CHECK(hpuDeviceClose(dev));
  return misses;
}

int elementwise_main(int argc, char **argv) {
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      thread_counts = {std::max(1, std::atoi(argv[++i]))};
    } else {
      return bench::kBadUsage;
    }
  }
  std::printf("# 64 MiB f32 inputs (%lld elements); GB/s count bytes read + written; memcpy moves the same\n"
              "# bytes on as many threads as libhpu's compute budget (HPU_NUM_THREADS = threads); %%peak:\n"
              "# libhpu's GB/s as a percentage of the memory copy peak on as many threads (hpu-bench peaks)\n",
              static_cast<long long>(kElems));
  std::printf("%-16s %7s %10s %12s %7s %12s %8s %7s\n", "kernel", "threads", "MiB moved", "libhpu GB/s", "%peak",
              "memcpy GB/s", "ratio", "target");
  int misses = bench::in_child_per_thread_count(thread_counts, run);
  std::printf("# %d row(s) below target\n", misses);
  return 0;
}

}  // namespace

HPU_BENCH("elementwise", "hpuAdd/hpuRelu/hpuCast over 64 MiB vs memcpy of the same bytes, 1 and 2 threads",
          "[--threads N]\n  --threads N  one thread count instead of 1 and 2\n", elementwise_main);
