// hpu-bench gemm: hpuMm in f32 and bf16 on 1 and 2 threads (each thread
// count in a child process, as HPU_NUM_THREADS is read at initialisation),
// beside PyTorch's torch.mm in the same types and on as many threads (Debian's
// python3-torch, when /usr/bin/python3 imports torch; one python process per
// thread count with torch.set_num_threads = threads, the best of 5 timed
// repetitions after a warm-up, as for libhpu; oneDNN and ATen held to the
// instruction set libhpu uses, so that HPU_KERNEL_ISA=avx512 or avx2
// compares like with like) and plain cblas_sgemm. One row per shape and
// type: 1- and 2-thread GFLOP/s, their ratio (a product should never be
// slower on 2 threads than on 1), the ratio to torch on as many threads and
// the %peak (the best slice over the best of the peaks that bound it on as
// many threads, measured after each slice, bench/peaks.cpp).
// Shapes: squares, and the products of the training step (hpu-train's MLP
// 784-1024-1024-10, batch 256 on one device and 128 per rank on two). Each
// thread count runs in a process of its own; the processes take turns, each
// shape and type measured kSlices times per thread count, the thread counts
// alternating, and the best slice counts.
#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bench.hpp"

namespace {

struct Shape {
  std::string name;
  int64_t m, k, n;
  bool ta, tb;  // op(A) = A^T: A is stored k x m; op(B) = B^T: B is stored n x k
  bool step;    // a product of the training step: expected at least as fast as torch's
};

// How long time_call measures: calibration, then the best of 2 runs.
double g_run_seconds = 0.05;
// Each shape and type is measured this many times per thread count, the
// thread counts alternating slice by slice (the processes take turns), and
// the best slice counts: a figure on a shared or virtual machine moves by a
// third or more for seconds at a time, and slices next to each other in time
// see the machine alike, so that 2t/1t compares the library with itself.
constexpr int kSlices = 3;

// Seconds per call of fn, best of 2 runs of enough calls for g_run_seconds.
template <class Fn>
double time_call(Fn fn) {
  fn();
  double t0 = bench::now_seconds();
  int calls = 0;
  while (bench::now_seconds() - t0 < g_run_seconds / 4) fn(), ++calls;
  double per = (bench::now_seconds() - t0) / calls;
  int reps = std::max(1, static_cast<int>(g_run_seconds / per));
  double best = 1e30;
  for (int r = 0; r < 2; ++r) {
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

// PyTorch's seconds per f32 and per bf16 torch.mm for each "m,k,n,ta,tb"
// argument, two a line; argv[2]: seconds per timed repetition; argv[3]: 0
// to keep oneDNN out (its bf16 products need AVX-512: torch on an AVX2 CPU
// runs them on ATen's own code).
const char *kTorch = R"PY(
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
rep = float(sys.argv[2])
torch.backends.mkldnn.enabled = sys.argv[3] == "1"
def seconds(a, b):
    t0 = time.perf_counter(); torch.mm(a, b); once = time.perf_counter() - t0
    calls = max(1, int(rep / once))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls): torch.mm(a, b)
        times.append((time.perf_counter() - t0) / calls)
    return min(times)
for arg in sys.argv[4:]:
    m, k, n, ta, tb = map(int, arg.split(","))
    a = torch.rand(k, m).t() if ta else torch.rand(m, k)
    b = torch.rand(n, k).t() if tb else torch.rand(k, n)
    f32 = seconds(a, b)
    print(f32, seconds(a.bfloat16(), b.bfloat16()), flush=True)  # a transposed view stays one
)PY";

// Two figures closer than this ratio are the same within the timing noise (a
// product that runs on one thread either way).
constexpr double kNoise = 0.97;

// What one thread count measures of one shape, in GFLOP/s (0: not measured).
struct Result {
  double sgemm, f32, bf16, torch_f32, torch_bf16, peak_f32, peak_bf16;
};

// torch's f32 and bf16 GFLOP/s of each shape at `threads` into results; false
// when torch is absent.
bool measure_torch(const std::vector<Shape> &shapes, int threads, Result *results) {
  const std::string isa = bench::library_isa();
  const bool onednn = isa == "amx" || isa == "avx512";
  std::string args = std::to_string(threads) + " " + std::to_string(g_run_seconds / 4) + (onednn ? " 1" : " 0");
  for (const Shape &s : shapes)
    args += " " + std::to_string(s.m) + "," + std::to_string(s.k) + "," + std::to_string(s.n) + "," +
            std::to_string(s.ta) + "," + std::to_string(s.tb);
  // torch's kernels on the instruction set libhpu's use: oneDNN's (bf16
  // products) and ATen's vector code.
  if (isa == "avx512") setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 1);
  if (isa != "amx") setenv("ATEN_CPU_CAPABILITY", isa == "scalar" ? "default" : isa.c_str(), 1);
  std::vector<double> sec;
  const std::string out = bench::python_output("gemm-torch", kTorch, args);
  for (const char *p = out.c_str(); *p;) {
    char *end;
    sec.push_back(std::strtod(p, &end));
    if (end == p) return false;
    p = end + std::strspn(end, " \n");
  }
  if (sec.size() != 2 * shapes.size()) return false;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double flop = 2.0 * shapes[i].m * shapes[i].n * shapes[i].k;
    results[i].torch_f32 = flop / sec[2 * i] * 1e-9;
    results[i].torch_bf16 = flop / sec[2 * i + 1] * 1e-9;
  }
  return true;
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

// What a child process (one thread count) keeps between its turns.
struct Child {
  hpuDevice_t dev = nullptr;
  Result *results = nullptr;  // one per shape
};

// A child's first turn: torch's figures and the peaks (before libhpu's
// threads start), then the device, and a line of the machine's figures (the
// %peak columns divide by the peaks measured beside the slices instead).
void set_up(Child &ch, int threads, const std::vector<Shape> &shapes) {
  if (!measure_torch(shapes, threads, ch.results))
    std::printf("# %d thread(s): PyTorch absent: /usr/bin/python3 cannot import torch "
                "(scripts/deps --bench installs python3-torch)\n",
                threads);
  const bench::Peaks peaks = bench::measure_peaks(threads, 3, bench::kComputePeaks);
  const bench::Bound f32_peak = bench::product_bound(peaks, false), bf16_peak = bench::product_bound(peaks, true);
  BENCH_CHECK(hpuDeviceOpen(&ch.dev, 0));
  std::printf("# %d thread(s): empty operation round trip (hpuEventRecord + hpuStreamSynchronize) %.1f us; "
              "peaks (hpu-bench peaks): f32 %s %.1f, bf16 %s %.1f GFLOP/s\n",
              threads, round_trip_us(ch.dev), f32_peak.name, f32_peak.value, bf16_peak.name, bf16_peak.value);
}

// A child's last turn: OpenBLAS's own threads, started on 2 threads, spin a
// while after each call, so cblas_sgemm comes after every hpuMm figure.
void sgemm_all(Child &ch, int threads, const std::vector<Shape> &shapes) {
  hpuDeviceClose(ch.dev);
  for (size_t i = 0; i < shapes.size(); ++i)
    ch.results[i].sgemm = 2.0 * shapes[i].m * shapes[i].n * shapes[i].k / sgemm_seconds(shapes[i], threads) * 1e-9;
}

std::string ratio(double x, double y) {
  if (!(x > 0) || !(y > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x / y);
  return buf;
}

std::string gflops(double x) {
  if (!(x > 0)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

int gemm_main(int argc, char **argv) {
  bool big = false, show_slices = false;
  std::vector<int> thread_counts = {1, 2};
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--4096") == 0) big = true;
    else if (std::strcmp(argv[i], "--quick") == 0) g_run_seconds = 0.02;
    else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) thread_counts = {std::atoi(argv[++i])};
    else if (std::strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--slices") == 0) show_slices = true;
    else return bench::kBadUsage;
  }
  std::vector<Shape> all;
  for (int64_t n : {256, 512, 1024, 2048, 4096})
    if (n < 4096 || big) all.push_back({"square " + std::to_string(n), n, n, n, false, false, false});
  // The training step's products at batch b: x[b, K] W^T[K, N] forward, its
  // backward dX = dY W and dW = dY^T X.
  for (int64_t b : {256, 128}) {
    const std::string mb = "M" + std::to_string(b), kb = "K" + std::to_string(b);
    for (int64_t in : {784, 1024}) {
      const std::string in_s = std::to_string(in);
      all.push_back({"fwd " + mb + " K" + in_s + " N1024", b, in, 1024, false, true, true});
      if (in == 1024) all.push_back({"dX  " + mb + " K1024 N1024", b, 1024, 1024, false, false, true});
      all.push_back({"dW  M1024 " + kb + " N" + in_s, 1024, b, in, true, false, true});
    }
    all.push_back({"fwd " + mb + " K1024 N10", b, 1024, 10, false, true, true});
    all.push_back({"dX  " + mb + " K10 N1024", b, 10, 1024, false, false, true});
    all.push_back({"dW  M10 " + kb + " N1024", 10, b, 1024, true, false, true});
  }
  std::vector<Shape> shapes;
  for (const Shape &s : all)
    if (only.empty() || s.name.find(only) != std::string::npos) shapes.push_back(s);
  if (shapes.empty()) {
    std::fprintf(stderr, "hpu-bench gemm: no shape's name contains '%s'\n", only.c_str());
    return bench::kBadUsage;
  }

  // The children write their results here; the parent prints them side by side.
  const size_t per = shapes.size(), counts = thread_counts.size(), bytes = counts * per * sizeof(Result);
  void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("hpu-bench gemm: mmap");
    return 1;
  }
  Result *results = static_cast<Result *>(mem);
  std::memset(mem, 0, bytes);
  // The turns: each child sets up; then for each shape and type, kSlices
  // slices per thread count, the counts alternating and the first of them
  // moving on by one from product to product (a process that follows one
  // that kept both CPUs busy was seen to run slower for a while); last, each
  // child's sgemm figures. A child's steps follow its turns in this order.
  const int n = static_cast<int>(counts), products = static_cast<int>(2 * per);
  std::vector<int> turns;
  for (int c = 0; c < n; ++c) turns.push_back(c);
  for (int q = 0; q < products; ++q)
    for (int p = 0; p < n * kSlices; ++p) turns.push_back((q + p) % n);
  for (int c = 0; c < n; ++c) turns.push_back(c);
  Child child;
  const int failed = bench::in_children_taking_turns(thread_counts, turns, [&](int t, int step) {
    size_t slot = 0;
    while (thread_counts[slot] != t) ++slot;
    child.results = results + slot * per;
    if (step == 0) return set_up(child, t, shapes);
    if (step > products * kSlices) return sgemm_all(child, t, shapes);
    const int q = (step - 1) / kSlices;
    const Shape &s = shapes[static_cast<size_t>(q / 2)];
    const bool bf16 = q % 2;
    const double gflops = 2.0 * s.m * s.n * s.k / hpu_seconds(child.dev, bf16 ? HPU_BFLOAT16 : HPU_FLOAT32, s) * 1e-9;
    Result &r = child.results[q / 2];
    double &best = bf16 ? r.bf16 : r.f32;
    best = std::max(best, gflops);
    // The peak right after the slice: the best of them divides the best slice.
    const double peak = bench::measure_product_bound(t, 1, bf16).value;
    double &best_peak = bf16 ? r.peak_bf16 : r.peak_f32;
    best_peak = std::max(best_peak, peak);
    if (show_slices)
      std::printf("# slice %dt %s %s %.1f peak %.1f\n", t, s.name.c_str(), bf16 ? "bf16" : "f32", gflops, peak);
  });
  if (failed) {
    std::fprintf(stderr, "hpu-bench gemm: %d measuring process(es) failed\n", failed);
    munmap(mem, bytes);
    return 1;
  }

  const int t0 = thread_counts.front(), t1 = thread_counts.back();
  const bool two = thread_counts.size() > 1;
  std::printf("# GFLOP/s of hpuMm through libhpu (HPU_NUM_THREADS = threads; stream round trip included),\n"
              "# of torch.mm in the same type (python3-torch, set_num_threads = threads, on libhpu's ISA) and of\n"
              "# cblas_sgemm (Debian OpenBLAS, openblas_set_num_threads = threads), on %d and %d thread(s);\n"
              "# %dt/%dt: hpu's ratio between them (>= 1 wanted); /torch: hpu over torch on as many threads\n"
              "# (>= 1 wanted on the training step's shapes); %%peak: hpu over the peak that bounds it on as\n"
              "# many threads (hpu-bench peaks), measured after each slice (the best slice over the best\n"
              "# peak); libhpu uses %s\n",
              t0, t1, t1, t0, bench::library_isa());
  std::printf("%-21s %-4s %8s %8s %6s %6s %6s %8s %8s %7s %7s %8s %8s %s\n", "shape", "type", ("hpu " + std::to_string(t0) + "t").c_str(),
              ("hpu " + std::to_string(t1) + "t").c_str(), (std::to_string(t1) + "t/" + std::to_string(t0) + "t").c_str(),
              "%peak", "%peak", ("torch" + std::to_string(t0) + "t").c_str(), ("torch" + std::to_string(t1) + "t").c_str(),
              "/torch", "/torch", ("sgemm" + std::to_string(t0) + "t").c_str(), ("sgemm" + std::to_string(t1) + "t").c_str(),
              "misses");
  int misses = 0;
  for (size_t i = 0; i < per; ++i) {
    const Shape &s = shapes[i];
    const Result &a = results[i], &b = results[(counts - 1) * per + i];
    for (bool bf16 : {false, true}) {
      const double h0 = bf16 ? a.bf16 : a.f32, h1 = bf16 ? b.bf16 : b.f32;
      const double p0 = bf16 ? a.torch_bf16 : a.torch_f32, p1 = bf16 ? b.torch_bf16 : b.torch_f32;
      std::string miss;
      if (two && h1 < kNoise * h0) miss += " 2t<1t";
      if (s.step && p0 > 0 && (h0 < p0 || h1 < p1)) miss += " <torch";
      misses += !miss.empty();
      std::printf("%-21s %-4s %8s %8s %6s %6s %6s %8s %8s %7s %7s %8s %8s %s\n", s.name.c_str(), bf16 ? "bf16" : "f32",
                  gflops(h0).c_str(), two ? gflops(h1).c_str() : "-", two ? ratio(h1, h0).c_str() : "-",
                  bench::percent(h0, bf16 ? a.peak_bf16 : a.peak_f32).c_str(),
                  two ? bench::percent(h1, bf16 ? b.peak_bf16 : b.peak_f32).c_str() : "-", gflops(p0).c_str(),
                  two ? gflops(p1).c_str() : "-", ratio(h0, p0).c_str(), two ? ratio(h1, p1).c_str() : "-",
                  bf16 ? "" : gflops(a.sgemm).c_str(), bf16 || !two ? "" : gflops(b.sgemm).c_str(),
                  miss.empty() ? "ok" : miss.c_str() + 1);
    }
  }
  munmap(mem, bytes);
  std::printf("# %d row(s) with a miss\n", misses);
  return 0;
}

}  // namespace

HPU_BENCH("gemm", "hpuMm f32/bf16 on 1 and 2 threads vs torch.mm and cblas_sgemm",
          "[--4096] [--quick] [--shapes TEXT] [--slices] [--threads N]\n"
          "  GFLOP/s of hpuMm f32/bf16 on 1 and 2 threads, their ratio, and the ratio to PyTorch's\n"
          "  torch.mm in the same type on as many threads (when /usr/bin/python3 imports torch),\n"
          "  on squares and the training step's shapes; cblas_sgemm beside the f32 rows\n"
          "  --4096         also the 4096 square\n"
          "  --quick        shorter timing runs (noisier figures)\n"
          "  --shapes TEXT  only the shapes whose name contains TEXT\n"
          "  --slices       also print each timed slice (a line per slice, in the order run)\n"
          "  --threads N    one thread count instead of 1 and 2\n",
          gemm_main);
