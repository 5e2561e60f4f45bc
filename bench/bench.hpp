// hpu-bench: one subcommand per file (alloc, gemm, allreduce, ...). Each file
// registers its commands with HPU_BENCH; main() dispatches on argv[1].
#pragma once

#include <hpu/hpu.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace bench {

// A command's main: argv[0] is the subcommand. It returns kBadUsage for an
// argument it does not take (main() then prints the usage on stderr and exits
// 2); -h and --help never reach it (main() prints the usage on stdout).
using Main = int (*)(int argc, char **argv);
constexpr int kBadUsage = -1;

struct Command {
  const char *name;
  const char *help;   // one line, in the list of commands
  const char *usage;  // the arguments and what they do: "usage: hpu-bench NAME " precedes it
  Main main;
};

std::vector<Command> &commands();

struct Register {
  Register(const char *name, const char *help, const char *usage, Main main) {
    commands().push_back({name, help, usage, main});
  }
};

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The median of v (the mean of the middle two when v has an even size).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Exits with the status name and the library's message when a call fails.
inline void check(hpuStatus_t s, const char *what) {
  if (s != HPU_SUCCESS) {
    std::fprintf(stderr, "hpu-bench: %s: %s: %s\n", what, hpuGetErrorName(s), hpuGetLastErrorMessage());
    std::exit(1);
  }
}

// Runs run(threads) for each thread count in a child process of its own with
// HPU_NUM_THREADS = threads (read when libhpu initialises); returns the sum of
// the children's exit codes (rows below target; a crash counts one).
int in_child_per_thread_count(const std::vector<int> &thread_counts, const std::function<int(int threads)> &run);

// One child process per thread count (HPU_NUM_THREADS = threads), all started
// at once and run one at a time: turns[i] names the child (an index into
// thread_counts) that runs its next step while the others wait, so that the
// figures of different thread counts measured in neighbouring turns see the
// machine in the same state (a virtual machine's speed moves for seconds at a
// time). A child runs run(threads, step) for its steps 0, 1, ... and exits
// after its last turn, before the next turn starts. Returns the number of
// children that failed (a nonzero exit, a signal, or a turn never finished).
int in_children_taking_turns(const std::vector<int> &thread_counts, const std::vector<int> &turns,
                             const std::function<void(int threads, int step)> &run);

// The first of `candidates` (paths relative to the folder of this executable)
// that exists, resolved; "" when none does. `looked`, when given, receives the
// places looked at. Programs and libraries that hpu-bench runs are found this
// way: beside it in the build tree, under <libdir>/hpu once installed.
std::string find_beside_self(const std::vector<std::string> &candidates, std::string *looked = nullptr);

// Runs the Python program `script` (written to /tmp/hpu-bench-NAME.py) with
// Debian's /usr/bin/python3, the interpreter that sees python3-torch, and the
// arguments `args`; returns its standard output, or "" when python3 is missing
// or the program fails (torch not importable, ...; its stderr is dropped).
std::string python_output(const char *name, const char *script, const std::string &args);

// The machine's own peaks (bench/peaks.cpp, hpu-bench peaks) on some number of
// threads: GFLOP/s of f32 FMA on 512- and 256-bit vectors, of the AVX-512 bf16
// dot product and of the AMX bf16 tiles; GB/s of a streaming read and of a
// copy (bytes read + written). 0 where the CPU lacks the unit.
struct Peaks {
  double fma512 = 0, fma256 = 0, bf16_dot = 0, amx = 0;
  double read = 0, copy = 0;
};

// The peaks of the `loops` asked for (kComputePeaks, kMemoryPeaks or both),
// each the best of `reps` short runs on `threads` threads (not pinned); the
// memory loops use memory_bytes, or 0: 4 x the last level cache within
// 256 MiB - 1 GiB.
enum { kComputePeaks = 1, kMemoryPeaks = 2 };
Peaks measure_peaks(int threads, int reps, int loops, size_t memory_bytes = 0);

// The CPUs this process may run on (nproc).
int all_threads();

// The instruction set libhpu's kernels use ("amx", "avx512", "avx2",
// "scalar"): hpu(7)'s rule for HPU_KERNEL_ISA applied by the bench.
const char *library_isa();

// A peak and its row name in hpu-bench peaks.
struct Bound {
  double value;
  const char *name;
};

// The peak that bounds a matrix product on library_isa(): bf16 ones on AMX
// tiles at amx, on the bf16 dot product at avx512 (when the CPU has it), else
// like f32 ones on FMA: 512-bit at amx and avx512, 256-bit at avx2 and scalar.
// Element-wise kernels are bounded by the memory copy.
Bound product_bound(const Peaks &p, bool bf16);
// That peak measured now: the best of `reps` short runs of its loop on
// `threads` threads (0 where the CPU lacks the unit). Tables measure it beside
// each of their timings, so that a machine whose speed drifts (a shared VM)
// gives a result and its peak from the same moments.
Bound measure_product_bound(int threads, int reps, bool bf16);
Bound elementwise_bound(const Peaks &p);

// value as a percentage of peak ("63%"), or "n/a" when there is no peak.
std::string percent(double value, double peak);

}  // namespace bench

#define HPU_BENCH_CAT2_(a, b) a##b
#define HPU_BENCH_CAT_(a, b) HPU_BENCH_CAT2_(a, b)
#define HPU_BENCH(name, help, usage, fn) \
  static ::bench::Register HPU_BENCH_CAT_(bench_register_, __LINE__)(name, help, usage, fn)
#define BENCH_CHECK(call) ::bench::check((call), #call)
