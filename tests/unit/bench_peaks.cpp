// hpu-bench peaks (hpu-bench(1)): a row per unit with a positive figure on 1
// thread and on all threads of the process, "n/a" only for a unit the CPU
// lacks, and the bounds the other tables divide by, which follow
// HPU_KERNEL_ISA; hpu-bench gemm's slices (the thread counts alternating)
// and its and train's %peak columns (each over the peak measured beside its
// timings), train's %bound column (the
// step's roofline: the bytes counted, the working set and the bandwidth over
// it), whose compute peak follows HPU_KERNEL_ISA. No figure is compared with
// a threshold: only that each is a number, and how the byte counts of the two
// precisions differ.
#include <cpuid.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef HPU_BENCH_PATH
namespace {

struct Ran {
  int code = -1;
  std::string out;
};

// Runs `env hpu-bench args`; its stdout, stderr dropped.
Ran bench(const std::string &env, const std::string &args) {
  FILE *p = popen((env + " " HPU_BENCH_PATH " " + args + " 2>/dev/null </dev/null").c_str(), "r");
  Ran r;
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> words(const std::string &line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

// The line of `table` that starts with `first` followed by a space, or "".
std::string row(const std::string &table, const std::string &first) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, first.size() + 1, first + " ") == 0) return line;
  return "";
}

bool positive_number(const std::string &s) {
  char *end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && v > 0;
}

bool cpu_has(const std::string &unit) {
  if (unit == "fma512") return __builtin_cpu_supports("avx512f");
  if (unit == "fma256") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (unit == "bf16-dot") return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  if (unit == "amx-bf16") {
    // CPUID 7: AMX-BF16 and AMX-TILE (EDX bits 22, 24), and Linux's grant of
    // the tile data to this process (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA).
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1) && (d >> 24 & 1) &&
           syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }
  return true;  // read, copy
}

// A short run: one repetition, a 64 MiB buffer.
const char *kShort = "peaks --reps 1 --mib 64";

}  // namespace

TEST(BenchPeaks, EveryUnitHasARowWithAFigurePerThreadCountOrNaWhereTheCpuLacksIt) {
  const Ran r = bench("", kShort);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string header = row(r.out, "unit");
  ASSERT_NE(header, "") << r.out;
  // "1 thread", and "N threads" when the process may run on more CPUs.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const size_t columns = header.find(" threads") != std::string::npos ? 2 : 1;
  EXPECT_TRUE(cpus > 1 || columns == 1) << header;
  for (const std::string unit : {"fma512", "fma256", "bf16-dot", "amx-bf16", "read", "copy"}) {
    const std::vector<std::string> w = words(row(r.out, unit));
    ASSERT_GE(w.size(), columns + 2) << unit << " has no row in:\n" << r.out;
    // The figures per thread count, then the scaling from 1 thread to all.
    for (size_t c = w.size() - columns - 1; c < w.size(); ++c) {
      if (w[c] == "n/a") {
        EXPECT_FALSE(cpu_has(unit)) << unit << ": n/a on a CPU that has it:\n" << r.out;
      } else {
        EXPECT_TRUE(positive_number(w[c])) << unit << " column " << c << ": " << w[c] << "\n" << r.out;
        EXPECT_TRUE(cpu_has(unit)) << unit << " measured on a CPU without it:\n" << r.out;
      }
    }
  }
  EXPECT_NE(r.out.find("the bounds of the other tables: bf16 products "), std::string::npos) << r.out;
}

TEST(BenchPeaks, TheBoundsFollowHpuKernelIsa) {
  // scalar: every CPU has it; bf16 products are widened to f32, bounded by FMA.
  const Ran scalar = bench("HPU_KERNEL_ISA=scalar", kShort);
  ASSERT_EQ(scalar.code, 0) << scalar.out;
  EXPECT_NE(scalar.out.find("libhpu's kernels use scalar "), std::string::npos) << scalar.out;
  EXPECT_EQ(scalar.out.find("bf16 products amx"), std::string::npos) << scalar.out;
  EXPECT_EQ(scalar.out.find("bf16 products bf16 dot"), std::string::npos) << scalar.out;
  // A CPU of that level has no wider FMA than 256 bits: both kinds of product are bounded by it.
  EXPECT_NE(scalar.out.find("bf16 products fma256, f32 products fma256"), std::string::npos) << scalar.out;
  // A level the CPU lacks or an unknown name: the best level, as libhpu does.
  const Ran unknown = bench("HPU_KERNEL_ISA=no-such-isa", kShort);
  const Ran best = bench("", kShort);
  ASSERT_EQ(unknown.code, 0) << unknown.out;
  const std::string line = "libhpu's kernels use ";
  const size_t at = best.out.find(line);
  ASSERT_NE(at, std::string::npos) << best.out;
  const std::string level = best.out.substr(at, best.out.find(' ', at + line.size()) - at);
  EXPECT_NE(unknown.out.find(level), std::string::npos) << level << "\n" << unknown.out;
}

// The `column`th word (from 0) of `first`'s row is a positive percentage.
void expect_percentage(const std::string &table, const std::string &first, size_t column) {
  const std::vector<std::string> w = words(row(table, first));
  ASSERT_GT(w.size(), column) << first << " has no row in:\n" << table;
  const std::string pct = w[column];
  EXPECT_EQ(pct.back(), '%') << first << ": " << pct << "\n" << table;
  EXPECT_TRUE(positive_number(pct.substr(0, pct.size() - 1))) << first << ": " << pct << "\n" << table;
}

TEST(BenchPeaks, ElementwisePrintsItsBandwidthAsAPercentageOfTheCopyPeak) {
  const Ran r = bench("", "elementwise --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> header = words(row(r.out, "kernel"));
  ASSERT_GE(header.size(), 7u) << r.out;
  EXPECT_EQ(header[6], "%peak") << r.out;  // kernel threads MiB moved libhpu GB/s %peak
  expect_percentage(r.out, "add", 5);     // add f32 1 192 12.32 93%
  expect_percentage(r.out, "relu", 5);
  expect_percentage(r.out, "cast", 5);
}

TEST(BenchPeaks, TrainPrintsItsSamplesPerSecondAsAPercentageOfThePeak) {
  const Ran r = bench("", "train --steps 1 --rounds 1 --no-peer --devices 1 --precision 32-true");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> header = words(row(r.out, "precision"));
  ASSERT_GE(header.size(), 4u) << r.out;
  EXPECT_EQ(header[3], "%peak") << r.out;
  expect_percentage(r.out, "32-true", 3);
  EXPECT_NE(r.out.find("9564160 FLOP"), std::string::npos) << r.out;
  // "# 32-true on 1 device(s): UNIT GFLOP/s [lo-hi], ...": the peak measured
  // after the round, which its %peak divides by.
  const std::vector<std::string> seen = words(row(r.out, "# 32-true on 1 device(s):"));
  ASSERT_GE(seen.size(), 7u) << r.out;
  const std::vector<std::string> w = words(row(r.out, "32-true"));
  ASSERT_GE(w.size(), 4u) << r.out;
  const double samples = std::strtod(w[2].c_str(), nullptr), peak = std::strtod(seen[6].c_str(), nullptr);
  ASSERT_GT(peak, 0) << r.out;
  EXPECT_NEAR(std::strtod(w[3].c_str(), nullptr), 100 * samples * 9564160e-9 / peak, 0.6) << r.out;
}

// train's row of `precision` on 1 device: precision devices samples/s %peak
// %bound MB-moved MB-set GB/s peer ...
constexpr size_t kBound = 4, kMoved = 5, kSet = 6, kBandwidth = 7;
const char *kShortTrain = "train --steps 1 --rounds 1 --no-peer --devices 1";

double number(const std::string &s) { return positive_number(s) ? std::strtod(s.c_str(), nullptr) : 0; }

TEST(BenchPeaks, TrainPrintsEachRowsPercentageOfItsRooflineAndWhatTheRooflineCounts) {
  const Ran r = bench("", kShortTrain);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> header = words(row(r.out, "precision"));
  ASSERT_GT(header.size(), kBound) << r.out;
  EXPECT_EQ(header[kBound], "%bound") << r.out;
  for (const std::string precision : {"32-true", "bf16-mixed"}) {
    expect_percentage(r.out, precision, kBound);
    const std::vector<std::string> w = words(row(r.out, precision));
    ASSERT_GT(w.size(), kBandwidth) << precision << " has no row in:\n" << r.out;
    for (size_t c : {kMoved, kSet, kBandwidth})
      EXPECT_TRUE(positive_number(w[c])) << precision << " column " << c << ": " << w[c] << "\n" << r.out;
  }
  // bf16-mixed also writes the bf16 copy of each of the 1,861,632 weights
  // (2 bytes: 3.7 MB), which is part of its working set too.
  const std::vector<std::string> f32 = words(row(r.out, "32-true")), bf16 = words(row(r.out, "bf16-mixed"));
  ASSERT_GT(f32.size(), kSet);
  ASSERT_GT(bf16.size(), kSet);
  EXPECT_NEAR(number(bf16[kMoved]) - number(f32[kMoved]), 3.7, 0.15) << r.out;
  EXPECT_GT(number(bf16[kSet]), number(f32[kSet])) << r.out;
  EXPECT_NE(r.out.find("%bound: samples/s as a percentage of the roofline"), std::string::npos) << r.out;
}

TEST(BenchPeaks, TrainBoundsBothPrecisionsBy256BitFmaAtAvx2) {
  // A CPU without avx2 runs at scalar, bounded the same way.
  const Ran r = bench("HPU_KERNEL_ISA=avx2", kShortTrain);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("32-true fma256 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16-mixed fma256 "), std::string::npos) << r.out;
}

// hpu-bench gemm: per shape and type, the GFLOP/s on 1 and 2 threads, their
// ratio, and each as a percentage of the peak that bounds it.
TEST(BenchPeaks, GemmPrintsEachProductsThreadRatioAndPercentagesOfThePeak) {
  const Ran r = bench("", "gemm --quick --shapes 'square 256' --slices");
  ASSERT_EQ(r.code, 0) << r.out;
  // "# slice Nt square 256 TYPE GFLOP/s peak GFLOP/s", in the order run: per
  // type, the thread counts alternate slice by slice, 3 slices each, each
  // followed by a measure of the peak.
  std::map<std::string, std::string> order;            // type -> "1 2 1 2 1 2"
  std::map<std::string, std::map<int, double>> best;   // type -> threads -> best slice
  std::map<std::string, std::map<int, double>> peak;   // type -> threads -> best peak
  std::istringstream slices(r.out);
  for (std::string line; std::getline(slices, line);) {
    const std::vector<std::string> w = words(line);
    if (w.size() != 9 || w[1] != "slice") continue;
    ASSERT_TRUE(positive_number(w[6])) << line;
    ASSERT_EQ(w[7], "peak") << line;
    ASSERT_TRUE(positive_number(w[8])) << line;
    const int threads = std::atoi(w[2].c_str());
    order[w[5]] += std::to_string(threads) + " ";
    best[w[5]][threads] = std::max(best[w[5]][threads], number(w[6]));
    peak[w[5]][threads] = std::max(peak[w[5]][threads], number(w[8]));
  }
  ASSERT_EQ(order.size(), 2u) << r.out;
  for (const auto &[type, seq] : order)
    EXPECT_TRUE(seq == "1 2 1 2 1 2 " || seq == "2 1 2 1 2 1 ") << type << ": " << seq << "\n" << r.out;
  // shape type hpu 1t hpu 2t 2t/1t %peak %peak ...; a row's shape is 2 words.
  const std::vector<std::string> header = words(row(r.out, "shape"));
  ASSERT_GE(header.size(), 9u) << r.out;
  EXPECT_EQ(header[6], "2t/1t") << r.out;
  EXPECT_EQ(header[7], "%peak") << r.out;
  EXPECT_EQ(header[8], "%peak") << r.out;
  int rows = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const std::vector<std::string> w = words(line);
    if (w.size() < 8 || w[0] != "square" || w[1] != "256") continue;
    ++rows;
    EXPECT_TRUE(w[2] == "f32" || w[2] == "bf16") << line;
    for (size_t c : {3, 4, 5}) EXPECT_TRUE(positive_number(w[c])) << "column " << c << ": " << line;
    for (size_t c : {6, 7}) {
      EXPECT_EQ(w[c].back(), '%') << line;
      EXPECT_TRUE(positive_number(w[c].substr(0, w[c].size() - 1))) << line;
    }
    EXPECT_NEAR(number(w[5]), number(w[4]) / number(w[3]), 0.02) << "2t/1t is 2t over 1t: " << line;
    EXPECT_NEAR(number(w[3]), best[w[2]][1], 0.051) << "1t is its best slice: " << line;
    EXPECT_NEAR(number(w[4]), best[w[2]][2], 0.051) << "2t is its best slice: " << line;
    for (int t : {1, 2}) {
      const std::string &shown = w[5 + t];
      EXPECT_NEAR(number(shown.substr(0, shown.size() - 1)), 100 * best[w[2]][t] / peak[w[2]][t], 0.51)
          << t << "t's %peak is its best slice over the best peak beside the slices: " << line;
    }
  }
  EXPECT_EQ(rows, 2) << r.out;
}
#endif
