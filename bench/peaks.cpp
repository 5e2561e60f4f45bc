// hpu-bench peaks: the machine's own peaks, measured with plain loops written
// for them: f32 fused multiply-add on 512- and 256-bit vectors, the AVX-512
// bf16 dot product and the AMX bf16 tiles where the CPU has them, and memory
// bandwidth (a streaming read and a copy over buffers larger than the last
// level cache). The other tables divide their results by the peak that bounds
// them (bench::product_bound, bench::elementwise_bound).
//
// Each loop is compiled for its instructions with a target attribute and run
// only when __builtin_cpu_supports (or CPUID) says the CPU has them, so that
// the binary runs on any x86-64 CPU; a unit the CPU lacks reads 0 ("n/a").
#include <cpuid.h>
#include <immintrin.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "bench.hpp"

namespace {

#define PEAK_FMA256 __attribute__((target("avx2,fma")))
#define PEAK_FMA512 __attribute__((target("avx512f,fma")))
#define PEAK_BF16 __attribute__((target("avx512f,avx512bf16")))
#define PEAK_AMX __attribute__((target("amx-tile,amx-bf16")))

// Independent accumulator chains per loop: an FMA has 4 cycles of latency and
// 2 ports issue one each per cycle, so at least 8 chains keep both busy.
constexpr int kChains = 12;

volatile float g_sink;  // the loops' results go here, so that they are computed

// The body of the FMA and dot product loops: kChains accumulators of type V,
// acc[c] from SET1(c) (distinct, so that the compiler cannot merge the
// chains), each acc = OP(acc, a, b) per iteration (a and b: the caller's
// operands); the sum of their first lanes goes to g_sink.
#define PEAK_CHAINS(V, SET1, OP, FIRST_LANE)                                                 \
  V acc[kChains];                                                                             \
  _Pragma("GCC unroll 12") for (int c = 0; c < kChains; ++c) acc[c] = SET1(float(c));       \
  for (int64_t i = 0; i < iters; ++i) {                                                       \
    _Pragma("GCC unroll 12") for (int c = 0; c < kChains; ++c) acc[c] = OP(acc[c], a, b);   \
  }                                                                                           \
  float sum = 0;                                                                              \
  for (int c = 0; c < kChains; ++c) sum += FIRST_LANE(acc[c]);                               \
  g_sink = sum

// acc = acc x a + b stays between 0 and 12: no overflow, no denormals.
PEAK_FMA256 double fma256(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  PEAK_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32);
  return 2.0 * 8 * kChains * static_cast<double>(iters);  // 8 lanes, multiply + add
}

PEAK_FMA512 double fma512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  PEAK_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32);
  return 2.0 * 16 * kChains * static_cast<double>(iters);  // 16 lanes, multiply + add
}

// VDPBF16PS: each of 16 f32 lanes adds the products of 2 bf16 pairs.
PEAK_BF16 double bf16_dot(int64_t iters) {
  // bf16 1.0 (0x3f80) and 2^-24 (0x3380) in both halves of every lane.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33803380);
  PEAK_CHAINS(__m512, _mm512_set1_ps, _mm512_dpbf16_ps, _mm512_cvtss_f32);
  return 2.0 * 16 * 2 * kChains * static_cast<double>(iters);  // 16 lanes x 2 pairs
}

// LDTILECFG's 64-byte operand (palette 1).
struct TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// TDPBF16PS on full tiles (16 rows x 64 bytes): C[16x16 f32] += A[16x32 bf16]
// B[32x16 bf16 pairs], 2 x 16 x 16 x 32 FLOP. Four accumulators (tiles 0-3)
// from two A tiles (4, 5) and two B tiles (6, 7), as a GEMM's inner loop.
PEAK_AMX double amx_bf16(int64_t iters) {
  TileConfig cfg{};
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t in[16 * 32];
  alignas(64) float out[16 * 16];
  for (uint16_t &v : in) v = 0x3380;  // bf16 2^-24: the sums stay small
  _tile_loadd(4, in, 64);
  _tile_loadd(5, in, 64);
  _tile_loadd(6, in, 64);
  _tile_loadd(7, in, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  g_sink = out[0];
  return 4 * 2.0 * 16 * 16 * 32 * static_cast<double>(iters);
}

// CPUID leaf 7: AMX-BF16 and AMX-TILE (EDX bits 22 and 24).
bool cpu_has_amx_bf16() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && (d >> 24 & 1);
}

// Linux gives the AMX tile data state only to a process that asks for it
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux 5.16): the same request
// libhpu makes; it covers every thread of the process.
bool tiles_granted() {
  static const bool granted = [] {
    constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

bool has_fma256() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_fma512() { return __builtin_cpu_supports("avx512f"); }
bool has_bf16_dot() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"); }

// Seconds from a common start until the last of `threads` threads (the
// calling one is thread 0; none pinned) has run fn(thread).
template <class Fn>
double seconds_on_threads(int threads, Fn fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(t);
    });
  while (ready.load() < threads - 1) std::this_thread::yield();
  const double t0 = bench::now_seconds();
  go.store(true, std::memory_order_release);
  fn(0);
  for (auto &th : pool) th.join();
  return bench::now_seconds() - t0;
}

// GFLOP/s of `loop` on `threads` threads: each runs as many iterations as
// take one thread about 20 ms (calibrated on the loop's first call); the best
// of `reps` repetitions.
double compute_peak(double (*loop)(int64_t), int threads, int reps) {
  static std::map<double (*)(int64_t), int64_t> calibrated;
  int64_t &iters = calibrated[loop];
  if (iters == 0) {
    iters = 1000;
    for (double s; (s = seconds_on_threads(1, [&](int) { loop(iters); })) < 5e-3;)
      iters = s > 1e-4 ? static_cast<int64_t>(iters * 5e-3 / s) + 1 : iters * 10;
    iters *= 4;
  }
  double best = 0, per_thread = 0;
  for (int r = 0; r < reps; ++r) {
    const double s = seconds_on_threads(threads, [&](int t) {
      const double f = loop(iters);
      if (t == 0) per_thread = f;
    });
    best = std::max(best, per_thread * threads / s * 1e-9);
  }
  return best;
}

// Reads every byte of [p, p + bytes) (16-byte SSE2 loads, 4 chains).
void stream_read(const char *p, size_t bytes) {
  const __m128i *v = reinterpret_cast<const __m128i *>(p);
  __m128i x0 = _mm_setzero_si128(), x1 = x0, x2 = x0, x3 = x0;
  for (size_t i = 0; i + 4 <= bytes / 16; i += 4) {
    x0 = _mm_xor_si128(x0, _mm_load_si128(v + i));
    x1 = _mm_xor_si128(x1, _mm_load_si128(v + i + 1));
    x2 = _mm_xor_si128(x2, _mm_load_si128(v + i + 2));
    x3 = _mm_xor_si128(x3, _mm_load_si128(v + i + 3));
  }
  g_sink = static_cast<float>(_mm_cvtsi128_si32(_mm_xor_si128(_mm_xor_si128(x0, x1), _mm_xor_si128(x2, x3))));
}

// The buffer for the memory loops: 4 x the last level cache, from 256 MiB to 1 GiB.
size_t default_memory_bytes() {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t want = llc > 0 ? 4 * static_cast<size_t>(llc) : 0;
  return std::min<size_t>(std::max<size_t>(want, size_t(256) << 20), size_t(1) << 30);
}

// GB/s of a streaming read of `bytes` and of a copy of bytes/2 to the other
// half (counted as bytes read + written), each thread its contiguous part;
// the best of `reps` timings after one pass that maps the pages. A timing
// covers as many passes as take about 2 ms, so that a buffer that fits in a
// cache (hpu-bench train's working set) is timed as reliably as a large one.
void memory_peaks(int threads, int reps, size_t bytes, double *read, double *copy) {
  bytes &= ~size_t(4095);
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char *>(std::aligned_alloc(4096, bytes)), &std::free);
  if (!buf) return;
  char *p = buf.get();
  std::memset(p, 1, bytes);
  const size_t half = bytes / 2;
  auto part = [&](size_t n, int t) { return n / 4096 * t / threads * 4096; };  // page-aligned split
  int passes = 1;
  auto read_pass = [&](int t) {
    for (int i = 0; i < passes; ++i) stream_read(p + part(bytes, t), part(bytes, t + 1) - part(bytes, t));
  };
  auto copy_pass = [&](int t) {
    for (int i = 0; i < passes; ++i)
      std::memcpy(p + half + part(half, t), p + part(half, t), part(half, t + 1) - part(half, t));
  };
  const double first = seconds_on_threads(threads, copy_pass);
  passes = std::max(1, static_cast<int>(2e-3 / std::max(first, 1e-7)));
  *read = *copy = 0;
  for (int r = 0; r < reps; ++r) {
    *read = std::max(*read, passes * double(bytes) / seconds_on_threads(threads, read_pass) * 1e-9);
    *copy = std::max(*copy, passes * 2.0 * (half / 4096 * 4096) / seconds_on_threads(threads, copy_pass) * 1e-9);
  }
}

// The instruction set libhpu's kernels use, as device 0's properties report
// it (hpuDeviceGetProperties(3) kernel_isa).
std::string kernel_isa() {
  hpuDevice_t dev;
  BENCH_CHECK(hpuDeviceOpen(&dev, 0));
  hpuDeviceProperties_t props = HPU_DEVICE_PROPERTIES_INIT;
  BENCH_CHECK(hpuDeviceGetProperties(dev, &props));
  BENCH_CHECK(hpuDeviceClose(dev));
  return props.kernel_isa;
}

int process_threads() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

// A compute unit: its field in Peaks, its name in the bounds, its loop and
// whether this CPU has it.
struct Unit {
  double bench::Peaks::*field;
  const char *name;
  double (*loop)(int64_t);
  bool (*present)();
};

const Unit kAmx{&bench::Peaks::amx, "amx bf16", amx_bf16, tiles_granted};
const Unit kBf16Dot{&bench::Peaks::bf16_dot, "bf16 dot", bf16_dot, has_bf16_dot};
const Unit kFma512{&bench::Peaks::fma512, "fma512", fma512, has_fma512};
const Unit kFma256{&bench::Peaks::fma256, "fma256", fma256, has_fma256};

// The unit that bounds a matrix product on library_isa() on this CPU.
const Unit &product_unit(bool bf16) {
  const std::string isa = bench::library_isa();
  if (bf16 && isa == "amx") return kAmx;
  // avx2 and scalar stand for a CPU of that level: 256-bit FMA is its widest
  // unit (OpenBLAS, which runs the products there, may use wider vectors on a
  // CPU that has them).
  if (isa == "avx2" || isa == "scalar") return kFma256;
  if (bf16 && has_bf16_dot()) return kBf16Dot;
  // f32 products (and bf16 ones widened to f32) run on libhpu's AVX-512 FMA kernel.
  return has_fma512() ? kFma512 : kFma256;
}

}  // namespace

namespace bench {

int all_threads() { return process_threads(); }

const char *library_isa() {
  static const std::string isa = kernel_isa();
  return isa.c_str();
}

Peaks measure_peaks(int threads, int reps, int loops, size_t memory_bytes) {
  Peaks p;
  if (loops & kComputePeaks)
    for (const Unit *u : {&kFma256, &kFma512, &kBf16Dot, &kAmx})
      if (u->present()) p.*u->field = compute_peak(u->loop, threads, reps);
  if (loops & kMemoryPeaks)
    memory_peaks(threads, reps, memory_bytes ? memory_bytes : default_memory_bytes(), &p.read, &p.copy);
  return p;
}

Bound product_bound(const Peaks &p, bool bf16) {
  const Unit &u = product_unit(bf16);
  return {p.*u.field, u.name};
}

Bound measure_product_bound(int threads, int reps, bool bf16) {
  const Unit &u = product_unit(bf16);
  return {u.present() ? compute_peak(u.loop, threads, reps) : 0, u.name};
}

Bound elementwise_bound(const Peaks &p) { return {p.copy, "copy"}; }

std::string percent(double value, double peak) {
  if (!(peak > 0)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * value / peak);
  return buf;
}

}  // namespace bench

namespace {

std::string figure(double v) {
  if (!(v > 0)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

int peaks_main(int argc, char **argv) {
  int reps = 5;
  size_t mib = default_memory_bytes() >> 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc && std::atoi(argv[i + 1]) >= 1) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--mib") && i + 1 < argc && std::atoi(argv[i + 1]) >= 1) mib = std::atoi(argv[++i]);
    else return bench::kBadUsage;
  }
  const int n = bench::all_threads();
  std::vector<int> counts = {1};
  if (n > 1) counts.push_back(n);
  std::vector<bench::Peaks> peaks;
  for (int t : counts) peaks.push_back(bench::measure_peaks(t, reps, bench::kComputePeaks | bench::kMemoryPeaks, mib << 20));
  std::printf("# the machine's peaks: plain loops on 1 thread and on all %d of the process (not pinned),\n"
              "# best of %d repetitions (about 20 ms of arithmetic, passes over the buffer for 2 ms or\n"
              "# one pass, whichever is longer, for memory);\n"
              "# GFLOP/s count a multiply-add as 2 FLOP; memory GB/s over a %zu MiB buffer count bytes\n"
              "# read + written; n/a: the CPU lacks the unit (or, for AMX, Linux refused its tiles)\n",
              n, reps, mib);
  std::printf("%-10s %-44s", "unit", "loop");
  for (int t : counts) std::printf(" %11s", (std::to_string(t) + (t == 1 ? " thread" : " threads")).c_str());
  std::printf(" %8s\n", "scaling");
  struct Row {
    const char *name, *loop;
    double bench::Peaks::*field;
  } rows[] = {
      {"fma512", "GFLOP/s, f32 _mm512_fmadd_ps, 12 chains", &bench::Peaks::fma512},
      {"fma256", "GFLOP/s, f32 _mm256_fmadd_ps, 12 chains", &bench::Peaks::fma256},
      {"bf16-dot", "GFLOP/s, _mm512_dpbf16_ps, 12 chains", &bench::Peaks::bf16_dot},
      {"amx-bf16", "GFLOP/s, _tile_dpbf16ps, 4 accumulator tiles", &bench::Peaks::amx},
      {"read", "GB/s, streaming read", &bench::Peaks::read},
      {"copy", "GB/s, memcpy (read + written)", &bench::Peaks::copy},
  };
  for (const Row &r : rows) {
    std::printf("%-10s %-44s", r.name, r.loop);
    for (const bench::Peaks &p : peaks) std::printf(" %11s", figure(p.*r.field).c_str());
    const double one = peaks.front().*r.field, all = peaks.back().*r.field;
    std::printf(" %8s\n", one > 0 ? figure(all / one).c_str() : "n/a");
  }
  const bench::Peaks &all = peaks.back();
  const bench::Bound bf16 = bench::product_bound(all, true), f32 = bench::product_bound(all, false),
                     mem = bench::elementwise_bound(all);
  std::printf("# libhpu's kernels use %s (kernel_isa of hpuDeviceGetProperties; HPU_KERNEL_ISA in hpu(7));\n"
              "# the bounds of the other tables: bf16 products %s, f32 products %s, element-wise %s\n",
              bench::library_isa(), bf16.name, f32.name, mem.name);
  return 0;
}

}  // namespace

HPU_BENCH("peaks", "the machine's own peaks: f32 FMA, bf16 dot product, AMX tiles, memory bandwidth",
          "[--reps N] [--mib M]\n"
          "  GFLOP/s and GB/s of plain loops on 1 thread and on all threads of the process; the\n"
          "  other commands print their results as a percentage of these\n"
          "  --reps N  repetitions of each loop, the best counts (5)\n"
          "  --mib M   the memory loops' buffer in MiB (4 x the last level cache, 256 to 1024)\n",
          peaks_main);
