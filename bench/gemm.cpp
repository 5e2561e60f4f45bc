// hpu-bench gemm: hpuMm in bf16 and f32 through libhpu beside plain
// cblas_sgemm on the same shapes, with 1 and 2 threads (each thread count in a
// child process, as HPU_NUM_THREADS is read at initialisation).
// Target (issue 3): bf16 >= 0.9 x sgemm at sizes >= 512 and the 1024-wide
// training shapes, >= 0.6 x for the N=10 layer and its K=10 backward.
// Beside them, PyTorch's bf16 torch.mm on the same shapes and transposes
// (Debian's python3-torch, when /usr/bin/python3 imports torch; one python
// process per thread count with torch.set_num_threads = threads, the median
// of 5 timed repetitions after a warm-up). Issue 3 expects it at about a
// quarter of sgemm, so hpu bf16 / torch bf16 should be about 4. %peak: hpu's
// GFLOP/s over the peak that bounds it on as many threads (bench/peaks.cpp).
#include <cblas.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench.hpp"

namespace {

struct Shape {
  const char *name;
  int64_t m, k, n;
  bool ta, tb;  // op(A) = A^T: A is stored k x m; op(B) = B^T: B is stored n x k
  double target;
};

// Seconds per call of fn, best of 3 runs of enough calls for ~0.2 s.
template <class Fn>
double time_call(Fn fn) {
  fn();
  double t0 = bench::now_seconds();
  int calls = 0;
  while (bench::now_seconds() - t0 < 0.05) fn(), ++calls;
  double per = (bench::now_seconds() - t0) / calls;
  int reps = std::max(1, static_cast<int>(0.2 / per));
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    double s = bench::now_seconds();
    for (int i = 0; i < reps; ++i) fn();
    best = std::min(best, (bench::now_seconds() - s) / reps);
  }
  return best;
}

hpuTensor_t tensor(hpuDevice_t dev, hpuDataType_t dt, int64_t rows, int64_t cols, bool transposed) {
  int64_t shape[2] = {transposed ? cols : rows, transposed ? rows : cols};
  hpuTensor_t t, v;
  BENCH_CHECK(hpuTensorCreate(&t, dev, dt, 2, shape));
  BENCH_CHECK(hpuTensorFillUniform(nullptr, t, -1, 1));
  if (!transposed) return t;
  BENCH_CHECK(hpuTensorTranspose(&v, t, 0, 1));
  BENCH_CHECK(hpuTensorRelease(t));
  return v;
}

// libhpu's hpuMm on op(A) x op(B), including the stream round trip.
double hpu_seconds(hpuDevice_t dev, hpuDataType_t dt, const Shape &s) {
  hpuTensor_t a = tensor(dev, dt, s.m, s.k, s.ta), b = tensor(dev, dt, s.k, s.n, s.tb);
  hpuStream_t stream;
  BENCH_CHECK(hpuDeviceGetDefaultStream(dev, &stream));
  double sec = time_call([&] {
    hpuTensor_t c;
    BENCH_CHECK(hpuMm(stream, a, b, &c));
    BENCH_CHECK(hpuStreamSynchronize(stream));
    BENCH_CHECK(hpuTensorRelease(c));
  });
  hpuTensorRelease(a);
  hpuTensorRelease(b);
  return sec;
}

double sgemm_seconds(const Shape &s, int threads) {
  std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.5f), b(static_cast<size_t>(s.k * s.n), 0.25f),
      c(static_cast<size_t>(s.m * s.n));
  return time_call([&] {
    openblas_set_num_threads(threads);  // libhpu keeps OpenBLAS at 1 thread between its calls
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k,
                1.0f, a.data(), s.ta ? s.m : s.k, b.data(), s.tb ? s.k : s.n, 0.0f, c.data(), s.n);
  });
}

// PyTorch's seconds per bf16 torch.mm for each "m,k,n,ta,tb" argument, one a line.
const char *kTorch = R"PY(
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
for arg in sys.argv[2:]:
    m, k, n, ta, tb = map(int, arg.split(","))
    a = torch.rand(k, m).t() if ta else torch.rand(m, k)
    b = torch.rand(n, k).t() if tb else torch.rand(k, n)
    a, b = a.bfloat16(), b.bfloat16()  # a transposed view stays one
    t0 = time.perf_counter(); torch.mm(a, b); once = time.perf_counter() - t0
    calls = max(1, int(0.05 / once))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls): torch.mm(a, b)
        times.append((time.perf_counter() - t0) / calls)
    print(sorted(times)[2], flush=True)
)PY";

// torch bf16 seconds per call of each shape at `threads`, or empty when torch is absent.
std::vector<double> torch_seconds(const std::vector<Shape> &shapes, int threads) {
  std::string args = std::to_string(threads);
  for (const Shape &s : shapes)
    args += " " + std::to_string(s.m) + "," + std::to_string(s.k) + "," + std::to_string(s.n) + "," +
            std::to_string(s.ta) + "," + std::to_string(s.tb);
  std::vector<double> sec;
  const std::string out = bench::python_output("gemm-torch", kTorch, args);
  for (const char *p = out.c_str(); *p;) {
    char *end;
    sec.push_back(std::strtod(p, &end));
    if (end == p) return {};
    p = end + std::strspn(end, "\n");
  }
  if (sec.size() != shapes.size()) return {};
  return sec;
}

// Microseconds of one empty operation's round trip: an event recorded on the
// stream, then hpuStreamSynchronize (the cost every hpuMm column includes).
double round_trip_us(hpuDevice_t dev) {
  hpuStream_t stream;
  hpuEvent_t event;
  BENCH_CHECK(hpuDeviceGetDefaultStream(dev, &stream));
  BENCH_CHECK(hpuEventCreate(&event));
  double sec = time_call([&] {
    BENCH_CHECK(hpuEventRecord(stream, event));
    BENCH_CHECK(hpuStreamSynchronize(stream));
  });
  hpuEventDestroy(event);
  return sec * 1e6;
}

int run(int threads, const std::vector<Shape> &shapes) {
  const std::vector<double> torch = torch_seconds(shapes, threads);  // before libhpu's threads start
  if (torch.empty())
    std::printf("# %d thread(s): PyTorch absent: /usr/bin/python3 cannot import torch "
                "(scripts/deps --bench installs python3-torch)\n",
                threads);
  // The peaks, before libhpu's threads start too.
  const bench::Peaks peaks = bench::measure_peaks(threads, 3, bench::kComputePeaks);
  const bench::Bound f32_peak = bench::product_bound(peaks, false), bf16_peak = bench::product_bound(peaks, true);
  hpuDevice_t dev;
  BENCH_CHECK(hpuDeviceOpen(&dev, 0));
  std::printf("# %d thread(s): empty operation round trip (hpuEventRecord + hpuStreamSynchronize) %.1f us;\n"
              "# peaks on as many threads (hpu-bench peaks; libhpu uses %s): f32 %s %.1f, bf16 %s %.1f GFLOP/s\n",
              threads, round_trip_us(dev), bench::library_isa(), f32_peak.name, f32_peak.value, bf16_peak.name,
              bf16_peak.value);
  int misses = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &s = shapes[i];
    double flop = 2.0 * s.m * s.n * s.k;
    double peer = flop / sgemm_seconds(s, threads) * 1e-9;
    double f32 = flop / hpu_seconds(dev, HPU_FLOAT32, s) * 1e-9;
    double bf16 = flop / hpu_seconds(dev, HPU_BFLOAT16, s) * 1e-9;
    bool ok = bf16 / peer >= s.target;
    misses += !ok;
    std::printf("%-22s %7d %10.1f %10.1f %7s %10.1f %7s %8.2f %8.2f %7.2f %-4s", s.name, threads, peer, f32,
                bench::percent(f32, f32_peak.value).c_str(), bf16, bench::percent(bf16, bf16_peak.value).c_str(),
                f32 / peer, bf16 / peer, s.target, ok ? "ok" : "MISS");
    if (torch.empty()) std::printf(" %10s %10s\n", "-", "-");
    else std::printf(" %10.1f %10.2f\n", flop / torch[i] * 1e-9, bf16 * torch[i] / flop * 1e9);
    std::fflush(stdout);
  }
  hpuDeviceClose(dev);
  return misses;
}

int gemm_main(int argc, char **argv) {
  bool big = false;
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--4096") == 0) big = true;
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) thread_counts = {std::atoi(argv[++i])};
    else return bench::kBadUsage;
  }
  std::vector<Shape> shapes;
  for (int64_t n : {256, 512, 1024, 2048, 4096}) {
    if (n == 4096 && !big) continue;
    shapes.push_back({nullptr, n, n, n, false, false, n >= 512 ? 0.9 : 0.0});
  }
  static std::vector<std::string> square_names;
  for (auto &s : shapes) square_names.push_back("square " + std::to_string(s.m));
  for (size_t i = 0; i < shapes.size(); ++i) shapes[i].name = square_names[i].c_str();
  // Training shapes: x[256, K] W^T[K, N] forward, its backward dX = dY W and dW = dY^T X.
  shapes.push_back({"fwd M256 K784 N1024", 256, 784, 1024, false, true, 0.9});
  shapes.push_back({"dX  M256 K1024 N784", 256, 1024, 784, false, false, 0.9});
  shapes.push_back({"dW  M1024 K256 N784", 1024, 256, 784, true, false, 0.9});
  shapes.push_back({"fwd M256 K1024 N1024", 256, 1024, 1024, false, true, 0.9});
  shapes.push_back({"dX  M256 K1024 N1024", 256, 1024, 1024, false, false, 0.9});
  shapes.push_back({"dW  M1024 K256 N1024", 1024, 256, 1024, true, false, 0.9});
  shapes.push_back({"fwd M256 K1024 N10", 256, 1024, 10, false, true, 0.6});
  shapes.push_back({"dX  M256 K10 N1024", 256, 10, 1024, false, false, 0.6});
  shapes.push_back({"dW  M10 K256 N1024", 10, 256, 1024, true, false, 0.6});

  std::printf("# GFLOP/s; sgemm = plain cblas_sgemm (Debian OpenBLAS, openblas_set_num_threads = threads);\n"
              "# f32/bf16 = hpuMm through libhpu (HPU_NUM_THREADS = threads), stream round trip included;\n"
              "# torch bf16 = torch.mm on bf16 tensors (python3-torch, set_num_threads = threads), median of 5;\n"
              "# bf16/torch = hpu bf16 / torch bf16, expected about 4 (issue 3: torch bf16 ~ sgemm / 4);\n"
              "# %%peak = hpu's GFLOP/s as a percentage of the peak that bounds it on as many threads\n"
              "# (hpu-bench peaks: f32 on FMA, bf16 on the unit of the ISA libhpu uses)\n");
  std::printf("%-22s %7s %10s %10s %7s %10s %7s %8s %8s %7s %-4s %10s %10s\n", "shape", "threads", "sgemm", "hpu f32",
              "%peak", "hpu bf16", "%peak", "f32/sg", "bf16/sg", "target", "", "torch bf16", "bf16/torch");
  int misses = bench::in_child_per_thread_count(thread_counts, [&](int t) { return run(t, shapes); });
  std::printf("# %d shape(s) below target\n", misses);
  return 0;
}

}  // namespace

HPU_BENCH("gemm", "hpuMm bf16/f32 vs cblas_sgemm and torch bf16, 1 and 2 threads",
          "[--4096] [--threads N]\n"
          "  GFLOP/s of hpuMm f32/bf16 and cblas_sgemm on squares and training shapes, and of\n"
          "  PyTorch's bf16 torch.mm when /usr/bin/python3 imports torch (bf16/torch: about 4 expected)\n"
          "  --4096       also the 4096 square\n"
          "  --threads N  one thread count instead of 1 and 2\n",
          gemm_main);
