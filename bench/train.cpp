// hpu-bench train: samples/second of the Fashion-MNIST MLP step
// (784-1024-1024-10, AdamW, a global batch of 256) through hpu::Trainer, in
// 32-true and bf16-mixed, on 1 device and on 2 with hpu_ddp (128 per rank),
// beside the same model and step in PyTorch (Debian's python3-torch, when
// /usr/bin/python3 imports torch) measured in the same run: fp32 at its best
// thread count, CPU autocast bf16, and DDP over gloo with two processes.
// Targets (issue 6): bf16-mixed >= 3 x torch bf16 autocast; 32-true >= torch
// fp32; devices=2 >= 1.5 x torch DDP at the same global batch; (issue 26)
// 1 device >= 80% of the bound at every level. Both sides are
// timed --rounds times (default 3) in turn, the order swapping every round, and
// the table shows medians: one run of either moves by 20-40% on a busy VM.
// %peak: the products' FLOP per second over the peak that bounds them on all
// the process's CPUs (bench/peaks.cpp): AMX tiles (bf16 at amx), the bf16 dot
// product (bf16 at avx512), FMA on 512-bit vectors (f32 at amx and avx512),
// on 256-bit ones (everything at avx2). The peak, and the bandwidth below,
// are measured right after each of our fits and each round divides by its
// own: on a machine whose speed drifts the row shows the median of the
// rounds' percentages, each from one moment.
// %bound: samples/s over the step's roofline. A step's bound time is the
// products' FLOP (9,564,160 per sample) at that peak plus the bytes the rest
// of the step must move at least at the memory bandwidth: the copy bandwidth
// (bytes read + written) on all the process's CPUs over a buffer the size of
// the step's working set (the parameters, moments, bf16 weight copies and
// each layer's output and gradient: about 29 MB, which may fit in the last
// level cache). The bytes counted, from the model's shapes: AdamW reads and
// writes each f32 parameter and its two moments (24 bytes a parameter; on 1
// device the gradient goes from the weight gradient's product straight into
// the update, as libhpu does it, and with 2 devices each replica's gradient is
// written, summed and read: 16 bytes more), bf16-mixed writes the bf16 copy of
// each weight (2 bytes), and the batch's images are read from the dataset and
// written to the device. The products' own operands and results (the
// activations and their gradients) are theirs: at these shapes they take
// less time than the arithmetic.
// The peer: PyTorch at the same level as libhpu, HPU_KERNEL_ISA=avx512
// setting ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 for it, avx2 setting AVX2 and
// ATEN_CPU_CAPABILITY=avx2 (unless they are set already; oneDNN has no bf16
// products below AVX-512, so there torch's autocast runs without oneDNN, as it
// does on a CPU without AVX-512).
// --profile: the profiler's cost on the step (issue 10: none measurable when
// off, under 5% when on). Each configuration runs --rounds rounds (default 5)
// of three fits, each step timed alone to its devices' end:
//   out  a child process on the copy of libhpu whose profiler hooks are
//        compiled out (HPU_NO_PROFILER: bench-noprof/ beside hpu-bench in the
//        build tree, <libdir>/hpu/bench-noprof installed; loaded through
//        LD_LIBRARY_PATH; the child reports which libhpu it loaded);
//   off  a child process on libhpu itself, the profiler off;
//   on   a fit in this process in which the profiler records every other
//        step (hpuProfilerStart before it, hpuProfilerStop after it, neither
//        timed).
// The two children swap order every round (out off, off out, ...), so a drift
// of the machine's speed falls on both. Off's cost is a round's median off
// step over its median out step; on's is the on fit's median recorded step
// over its median unrecorded one. The table shows the medians and ranges over
// the rounds, the samples/s of the median steps, and the noise: how much two
// fits of the same library differ (the median |difference| between the
// adjacent rounds' out fits and off fits). Off is "within noise" when its
// median cost is no larger than that.
#include <hpu/trainer.hpp>
#include <limits.h>
#include <link.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "bench.hpp"

namespace {

constexpr int kGlobalBatch = 256;

// How a fit is timed: `whole`, from the first timed batch to the end; `each`,
// every batch alone, from its start to its devices' end, into `off`;
// `alternate`, the same, the profiler recording every other batch (started
// before it, stopped after it, outside the timed span) into `on`: the two
// sides interleave step by step, so a change in the machine's speed (other
// work, clocks) falls on both.
enum class Timing { whole, each, alternate };

// Times the batches after the first `warm` ones.
struct Timer : hpu::Callback {
  Timer(int64_t warm, Timing timing) : warm_(warm), timing_(timing) {}
  std::string state_key() const override { return "BenchTimer"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_train_batch_start(hpu::Trainer &, int64_t b) override {
    if (b == warm_) t0 = bench::now_seconds();
    if (timing_ == Timing::whole || b < warm_) return;
    recording_ = timing_ == Timing::alternate && (b - warm_) % 2 == 1;
    if (recording_) BENCH_CHECK(hpuProfilerStart("/tmp/hpu-bench-train.trace.json"));
    start_ = bench::now_seconds();
  }
  void on_train_batch_end(hpu::Trainer &t, const hpu::Metrics &, int64_t b) override {
    if (timing_ == Timing::whole || b < warm_) return;
    sync(t);
    (recording_ ? on : off).push_back(bench::now_seconds() - start_);
    if (recording_) BENCH_CHECK(hpuProfilerStop());
  }
  void on_train_end(hpu::Trainer &t) override {
    sync(t);
    t1 = bench::now_seconds();
  }
  static void sync(hpu::Trainer &t) {
    for (const auto &d : t.devices()) hpu::check(hpuDeviceSynchronize(d.get()));
  }
  int64_t warm_;
  Timing timing_;
  bool recording_ = false;
  double t0 = 0, t1 = 0, start_ = 0;
  std::vector<double> on, off;  // seconds per batch with and without the profiler
};

hpu::TensorDataset random_images(size_t n) {
  hpu::Rng rng(3);
  std::vector<float> x(n * 784);
  std::vector<int32_t> y(n);
  for (auto &v : x) v = float(rng.uniform());
  for (auto &v : y) v = int32_t(rng.below(10));
  return hpu::TensorDataset(std::move(x), std::move(y), {1, 28, 28});
}

constexpr int64_t kWidths[] = {784, 1024, 1024, 10};  // the MLP's layer widths

hpu::Sequential mlp() {
  hpu::Sequential s;
  s.add(hpu::Flatten());
  s.add(hpu::Linear(kWidths[0], kWidths[1]));
  s.add(hpu::ReLU());
  s.add(hpu::Linear(kWidths[1], kWidths[2]));
  s.add(hpu::ReLU());
  s.add(hpu::Linear(kWidths[2], kWidths[3]));
  return s;
}

// FLOP of the step's matrix products per sample: each Linear(in, out) costs
// 2 in out forward and as much for its weight gradient; its input gradient
// too, except the first layer's (the images need none). 9,564,160.
double flop_per_sample() {
  double flop = 0;
  for (size_t l = 0; l + 1 < std::size(kWidths); ++l) flop += (l == 0 ? 2 : 3) * 2.0 * kWidths[l] * kWidths[l + 1];
  return flop;
}

// The step's roofline (see the top of this file): the bytes the rest of the
// step must move at least, and the working set the bandwidth is measured over.
struct StepBytes {
  double moved = 0;        // per step, all devices
  double working_set = 0;  // per device
};
StepBytes step_bytes(bool bf16, int devices) {
  double params = 0, weights = 0, widths = 0;
  for (size_t l = 0; l + 1 < std::size(kWidths); ++l) {
    weights += double(kWidths[l]) * kWidths[l + 1];
    params += double(kWidths[l]) * kWidths[l + 1] + kWidths[l + 1];
  }
  for (int64_t w : kWidths) widths += double(w);
  const double per_rank = double(kGlobalBatch) / devices, image = 4.0 * kWidths[0];
  // Each replica's AdamW reads and writes its f32 parameters and moments; with
  // 1 device the gradient never leaves the product that applies the update,
  // with more it is written, summed across the replicas (read, written) and
  // read back by AdamW. bf16-mixed: the bf16 copy of each weight is written.
  // The batch's images are read from the dataset and written to the device.
  const double state = 24 * params + (devices > 1 ? 16 * params : 0) + (bf16 ? 2 * weights : 0);
  StepBytes b;
  b.moved = devices * state + 2 * image * kGlobalBatch;
  // The parameters and moments, the bf16 copies, and each layer's output and
  // its gradient in the products' type.
  b.working_set = 12 * params + (bf16 ? 2 * weights : 0) + 2 * per_rank * widths * (bf16 ? 2 : 4) +
                  (devices > 1 ? 4 * params : 0);
  return b;
}

// PyTorch at the same level as libhpu: oneDNN (its products) and ATen (its
// element-wise kernels) limited to the instructions of library_isa() unless
// the caller set their variables; the names of what was set, for the header.
std::string limit_peer_isa() {
  const std::string isa = bench::library_isa();
  std::string set;
  auto limit = [&](const char *name, const char *value) {
    if (getenv(name)) return;
    setenv(name, value, 0);
    set += std::string(set.empty() ? "" : " ") + name + "=" + value;
  };
  if (isa == "avx512") limit("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16");
  if (isa == "avx2" || isa == "scalar") {
    limit("ONEDNN_MAX_CPU_ISA", isa == "avx2" ? "AVX2" : "SSE41");
    limit("ATEN_CPU_CAPABILITY", isa == "avx2" ? "avx2" : "default");
  }
  return set;
}

// One fit of `steps` timed training steps.
std::shared_ptr<Timer> fit(const char *precision, int devices, int steps, Timing timing) {
  const int warm = 3, per_rank = kGlobalBatch / devices;
  hpu::TrainerOptions o;
  o.devices = devices;
  o.precision = precision;
  o.seed = 1;
  o.max_epochs = 1;
  o.limit_train_batches = warm + steps;
  o.limit_val_batches = 0;
  o.logger = false;
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.enable_model_summary = false;
  o.default_root_dir = "/tmp";
  auto timer = std::make_shared<Timer>(warm, timing);
  o.callbacks = {timer};
  hpu::Trainer t(o);
  hpu::InMemoryData data(random_images(size_t((warm + steps) * kGlobalBatch)), random_images(16), random_images(16),
                         10, per_rank);
  hpu::OptimizerSpec opt;
  opt.name = "adamw";
  opt.lr = 1e-3;
  hpu::Classifier model(mlp(), opt);
  t.fit(model, data);
  return timer;
}

// Samples per second of `steps` timed training steps.
double hpu_rate(const char *precision, int devices, int steps) {
  auto timer = fit(precision, devices, steps, Timing::whole);
  return double(steps) * kGlobalBatch / (timer->t1 - timer->t0);
}

// ---- --profile --------------------------------------------------------------

// `hpu-bench train --step-times P N STEPS`, the child process of --profile:
// one fit timing each step; prints the libhpu objects this process loaded,
// whether their profiler records, and each step's seconds.
int step_times_main(const char *precision, int devices, int steps) {
  auto timer = fit(precision, devices, steps, Timing::each);
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *) {
        if (std::strstr(info->dlpi_name, "/libhpu.so")) std::printf("libhpu %s\n", info->dlpi_name);
        return 0;
      },
      nullptr);
  const std::string probe = "/tmp/hpu-bench-train-probe." + std::to_string(getpid()) + ".json";
  const hpuStatus_t s = hpuProfilerStart(probe.c_str());
  if (s == HPU_SUCCESS) {
    BENCH_CHECK(hpuProfilerStop());
    std::remove(probe.c_str());
  }
  std::printf("profiler %s\n", s == HPU_SUCCESS ? "records" : hpuGetErrorName(s));
  for (double t : timer->off) std::printf("step %.9f\n", t);
  return 0;
}

struct ChildFit {
  double step = 0;                  // median seconds per step
  std::vector<std::string> libhpu;  // the libhpu objects it loaded
  std::string profiler;             // "records", or what hpuProfilerStart returned
};

// Runs step_times_main in a child process (this program again), on the libhpu
// in `libdir` when it is not empty: LD_LIBRARY_PATH comes before the build
// tree's RUNPATH, for hpu-bench and libhpu-trainer alike.
ChildFit child_fit(const char *precision, int devices, int steps, const std::string &libdir) {
  std::string n = std::to_string(devices), k = std::to_string(steps), p = precision;
  std::string cmd = "hpu-bench", sub = "train", flag = "--step-times";
  char *argv[] = {cmd.data(), sub.data(), flag.data(), p.data(), n.data(), k.data(), nullptr};
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    if (libdir.empty() || std::strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0) env.push_back(*e);
  if (!libdir.empty()) {
    const char *old = getenv("LD_LIBRARY_PATH");
    env.push_back("LD_LIBRARY_PATH=" + libdir + (old && *old ? std::string(":") + old : ""));
  }
  std::vector<char *> envp;
  for (auto &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("hpu-bench: pipe");
    std::exit(1);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::fflush(stdout);
  pid_t pid;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    std::fprintf(stderr, "hpu-bench: cannot start /proc/self/exe: %s\n", std::strerror(rc));
    std::exit(1);
  }
  ChildFit r;
  std::vector<double> times;
  FILE *out = fdopen(fds[0], "r");
  char line[PATH_MAX + 64];
  while (std::fgets(line, sizeof line, out)) {
    std::string l = line;
    if (!l.empty() && l.back() == '\n') l.pop_back();
    if (l.rfind("step ", 0) == 0) times.push_back(std::atof(l.c_str() + 5));
    else if (l.rfind("libhpu ", 0) == 0) r.libhpu.push_back(l.substr(7));
    else if (l.rfind("profiler ", 0) == 0) r.profiler = l.substr(9);
  }
  std::fclose(out);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || times.size() != size_t(steps)) {
    std::fprintf(stderr, "hpu-bench: the fit in a child process (%s) failed\n",
                 libdir.empty() ? "profiler off" : libdir.c_str());
    std::exit(1);
  }
  r.step = bench::median(times);
  return r;
}

// `path` resolved ("" when it does not resolve), and the directory of a file.
std::string real_path(const std::string &path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? buf : "";
}
std::string real_dir(const std::string &file) {
  const std::string path = real_path(file);
  return path.substr(0, path.rfind('/'));
}

// A number as printf would print it with `format`, or "-" when it is NaN.
std::string shown(const char *format, double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Exits unless the child loaded exactly one libhpu, from `noprof_dir` when
// `compiled_out` and from elsewhere otherwise, and its profiler records only
// when not compiled out.
void expect_library(const ChildFit &c, const std::string &noprof_dir, bool compiled_out) {
  const bool one = c.libhpu.size() == 1;
  if (one && (real_dir(c.libhpu[0]) == noprof_dir) == compiled_out && (c.profiler == "records") != compiled_out)
    return;
  std::string loaded;
  for (const auto &l : c.libhpu) loaded += " " + l;
  std::fprintf(stderr, "hpu-bench: the %s child loaded libhpu from:%s; its hpuProfilerStart: %s\n",
               compiled_out ? "compiled-out" : "profiler-off", loaded.empty() ? " (none)" : loaded.c_str(),
               c.profiler.c_str());
  std::exit(1);
}

// Median, lowest and highest of a list of percentages (NaN when empty).
struct Spread {
  double median = NAN, low = NAN, high = NAN;
};
Spread spread(const std::vector<double> &v) {
  if (v.empty()) return {};
  return {bench::median(v), *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

// The profiler's cost on one configuration (see the top of this file).
struct ProfilerCost {
  double out = NAN, off = NAN, on = NAN;  // samples/s of the median steps
  Spread off_cost, on_cost;               // percent, over the rounds
  double noise = NAN;                     // percent: two fits of one library
};
ProfilerCost profiler_cost(const char *precision, int devices, int steps, int rounds, const std::string &noprof_dir) {
  std::vector<double> out, off, on, off_cost, on_cost, same;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < 2; ++i) {
      const bool compiled_out = (r + i) % 2 == 0;  // out off, off out, ...
      if (compiled_out && noprof_dir.empty()) continue;
      const ChildFit c = child_fit(precision, devices, steps, compiled_out ? noprof_dir : "");
      expect_library(c, noprof_dir, compiled_out);
      std::vector<double> &series = compiled_out ? out : off;
      if (!series.empty()) same.push_back(std::fabs(100.0 * (c.step / series.back() - 1.0)));
      series.push_back(c.step);
    }
    if (!out.empty()) off_cost.push_back(100.0 * (off.back() / out.back() - 1.0));
    auto timer = fit(precision, devices, steps, Timing::alternate);
    const double a = bench::median(timer->off), b = bench::median(timer->on);
    on.push_back(b);
    on_cost.push_back(100.0 * (b / a - 1.0));
  }
  ProfilerCost c;
  if (!out.empty()) c.out = kGlobalBatch / bench::median(out);
  c.off = kGlobalBatch / bench::median(off);
  c.on = kGlobalBatch / bench::median(on);
  c.off_cost = spread(off_cost);
  c.on_cost = spread(on_cost);
  if (!same.empty()) c.noise = bench::median(same);
  return c;
}

// The folder of the copy of libhpu whose profiler hooks are compiled out
// (bench/deps.cmake), found relative to this executable, so that a build tree
// or an installed tree uses its own: bench-noprof/ beside hpu-bench in the
// build tree, <libdir>/hpu/bench-noprof once installed. "" when neither holds
// it; `looked` says where it was looked for.
std::string find_noprof_dir(std::string *looked) {
#if defined(HPU_BENCH_NOPROF_FROM_BIN) && defined(HPU_BENCH_NOPROF_SONAME)
  const std::string lib = bench::find_beside_self(
      {"bench-noprof/" HPU_BENCH_NOPROF_SONAME, HPU_BENCH_NOPROF_FROM_BIN "/" HPU_BENCH_NOPROF_SONAME}, looked);
  if (!lib.empty()) return real_dir(lib);
#endif
  if (looked->empty()) *looked = "nowhere: this hpu-bench was built without it";
  return "";
}

int profile_main(int steps, int rounds, const std::vector<std::pair<const char *, int>> &configurations) {
  steps = std::max(steps, 2);
  std::string looked;
  const std::string noprof_dir = find_noprof_dir(&looked);
  if (noprof_dir.empty())
    std::fprintf(stderr,
                 "hpu-bench: the copy of libhpu without the profiler's hooks is missing (looked in %s): build with "
                 "-DHPU_BUILD_BENCH=ON, which makes it beside hpu-bench and installs it with it; the \"out\" "
                 "column is left out\n",
                 looked.c_str());
  std::printf("# Fashion-MNIST MLP 784-1024-1024-10, AdamW, global batch %d: the profiler's cost on the step\n",
              kGlobalBatch);
  std::printf("# %d rounds of 3 fits of %d timed steps each:\n"
              "#   out: a child process on libhpu with the profiler's hooks compiled out (%s)\n"
              "#   off: a child process on libhpu, the profiler off (out and off alternate their order)\n"
              "#   on:  every other step of a fit recorded, compared with its unrecorded steps\n"
              "# s/s: samples/s of the median steps; costs: median and range over the rounds;\n"
              "# noise: median |difference| between two fits of the same library in this run\n",
              rounds, steps, noprof_dir.empty() ? "missing, see above" : noprof_dir.c_str());
  std::printf("%-11s %7s %9s %9s %9s %9s %15s %7s %-27s %9s %15s %-10s\n", "precision", "devices", "out s/s",
              "off s/s", "on s/s", "off cost", "off range", "noise", "off limit: none measurable", "on cost",
              "on range", "on limit");
  auto range = [](const Spread &s) { return shown("%+.1f%%", s.low) + ".." + shown("%+.1f%%", s.high); };
  int misses = 0;
  for (const auto &[precision, devices] : configurations) {
    const ProfilerCost c = profiler_cost(precision, devices, steps, rounds, noprof_dir);
    const char *off_verdict = "- (no figure)";
    if (!std::isnan(c.off_cost.median) && !std::isnan(c.noise)) {
      const bool within = std::fabs(c.off_cost.median) <= c.noise;
      off_verdict = within ? "within noise: met" : "beyond noise: missed";
      misses += !within;
    }
    const bool on_met = c.on_cost.median < 5.0;
    misses += !on_met;
    std::printf("%-11s %7d %9s %9.0f %9.0f %9s %15s %7s %-27s %9s %15s %-10s\n", precision, devices,
                shown("%.0f", c.out).c_str(), c.off, c.on, shown("%+.1f%%", c.off_cost.median).c_str(),
                range(c.off_cost).c_str(), shown("%.1f%%", c.noise).c_str(), off_verdict,
                shown("%+.1f%%", c.on_cost.median).c_str(), range(c.on_cost).c_str(),
                on_met ? "<5%: met" : "<5%: missed");
  }
  char *text = nullptr;
  if (hpuProfilerGetSummary(&text) == HPU_SUCCESS && text) {
    std::printf("\n# profile of the last recorded step\n%s\n", text);
    hpuFree(text);
  }
  return misses;
}

// PyTorch's samples/second for "fp32", "bf16" or "ddp" (gloo, 2 processes, 32-bit),
// or 0 when torch is not importable.
const char *kTorch = R"PY(
import os, sys, time, torch, torch.nn as nn
mode, steps, B = sys.argv[1], int(sys.argv[2]), 256
def model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
def run(m, b, bf16, steps, sync=lambda: None):
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x, y = torch.rand(b, 1, 28, 28), torch.randint(0, 10, (b,))
    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = nn.functional.cross_entropy(m(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); loss.item()
    for _ in range(3): step()
    sync(); t0 = time.perf_counter()
    for _ in range(steps): step()
    sync(); return time.perf_counter() - t0
def ddp(rank, port, steps, q):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    m = nn.parallel.DistributedDataParallel(model())
    t = run(m, B // 2, False, steps, dist.barrier)
    if rank == 0: q.put(t)
    dist.destroy_process_group()
def main():
    if mode == "ddp":
        import socket, torch.multiprocessing as mp
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        ctx = mp.get_context("spawn"); q = ctx.Queue()
        ps = [ctx.Process(target=ddp, args=(r, port, steps, q)) for r in range(2)]
        [p.start() for p in ps]; t = q.get(timeout=600); [p.join() for p in ps]
        print(steps * B / t)
    else:
        if mode == "bf16" and os.environ.get("ONEDNN_MAX_CPU_ISA") in ("AVX2", "SSE41"):
            # oneDNN has no bf16 products below AVX-512: on such a CPU torch
            # runs them in its own kernels, as here
            torch.backends.mkldnn.enabled = False
        best = 0
        for n in sorted({1, os.cpu_count() or 1}):
            torch.set_num_threads(n)
            best = max(best, steps * B / run(model(), B, mode == "bf16", steps))
        print(best)
if __name__ == "__main__":  # spawned DDP ranks import this file again
    main()
)PY";

double torch_rate(const char *mode, int steps) {
  const std::string out = bench::python_output("train-torch", kTorch, std::string(mode) + " " + std::to_string(steps));
  return out.empty() ? 0 : std::atof(out.c_str());
}

const char *kUsage =
    "[--steps N] [--rounds N] [--precision 32-true|bf16-mixed] [--devices 1|2] [--no-peer]\n"
    "       hpu-bench train --profile [--rounds N] [--steps N] [--precision P] [--devices N]\n"
    "  samples/s of the Fashion-MNIST MLP step beside PyTorch's (--no-peer: without), medians over\n"
    "  --rounds rounds (3), ours and the peer's in turn;\n"
    "  --profile: the profiler's cost on the step instead: steps/s with its hooks compiled out\n"
    "  (a copy of libhpu in bench-noprof/ beside hpu-bench, or <libdir>/hpu/bench-noprof once\n"
    "  installed; run in a child process), with the profiler off and on; off's cost (limit: none\n"
    "  measurable, i.e. within the noise between two fits measured in the same run) and on's\n"
    "  (limit: 5%), medians over --rounds rounds (5).\n";

int train_main(int argc, char **argv) {
  if (argc == 5 && !std::strcmp(argv[1], "--step-times"))
    return step_times_main(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  int steps = 20, rounds = 0;
  bool profile = false, peers = true;
  std::string only_precision;
  int only_devices = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--no-peer")) peers = false;
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc) only_precision = argv[++i];
    else if (!std::strcmp(argv[i], "--devices") && i + 1 < argc) only_devices = std::atoi(argv[++i]);
    else return bench::kBadUsage;
  }
  if (steps < 1) steps = 1;
  if (rounds < 1) rounds = profile ? 5 : 3;
  auto wanted = [&](const char *precision, int devices) {
    return (only_precision.empty() || only_precision == precision) && (!only_devices || only_devices == devices);
  };
  if (profile) {
    std::vector<std::pair<const char *, int>> configurations;
    for (int devices : {1, 2})
      for (const char *precision : {"32-true", "bf16-mixed"})
        if (wanted(precision, devices)) configurations.push_back({precision, devices});
    return profile_main(steps, rounds, configurations);
  }
  struct Row {
    const char *precision;
    int devices;
    const char *peer_mode, *peer_name;
    double target;
  } rows[] = {{"32-true", 1, "fp32", "torch fp32 (best threads)", 1.0},
              {"bf16-mixed", 1, "bf16", "torch autocast bf16", 3.0},
              {"32-true", 2, "ddp", "torch DDP gloo x2", 1.5},
              {"bf16-mixed", 2, "ddp", "torch DDP gloo x2", 1.5}};
  const int threads = bench::all_threads();
  const bench::Peaks peaks{};  // the units' names only: their peaks are measured round by round
  const char *f32_unit = bench::product_bound(peaks, false).name, *bf16_unit = bench::product_bound(peaks, true).name;
  const std::string peer_isa = peers ? limit_peer_isa() : "";
  std::printf("# Fashion-MNIST MLP 784-1024-1024-10, AdamW, global batch %d, %d timed steps, %d rounds\n"
              "# each round times our fit and the peer's in turn (the order swaps every round); samples/s\n"
              "# are medians over the rounds, ratio is the median of the rounds' ratios [lowest-highest]\n"
              "# %%peak: samples/s x %.0f FLOP (the step's products per sample) as a percentage of the\n"
              "# peak on all %d threads (hpu-bench peaks; libhpu uses %s): 32-true %s and\n"
              "# bf16-mixed %s measured right after each of our fits; the median of the rounds' percentages\n"
              "# %%bound: samples/s as a percentage of the roofline: per step, the products' FLOP at that\n"
              "# peak plus the bytes the rest of the step moves at least (AdamW's f32 parameters and\n"
              "# moments read and written, the bf16 weight copies written, the batch gathered; with 2\n"
              "# devices each replica's and its gradients' too) at the copy bandwidth over a buffer of the\n"
              "# step's working set, measured after the peak; the median of the rounds' percentages; per\n"
              "# row: MB moved, working set MB, GB/s (median)\n",
              kGlobalBatch, steps, rounds, flop_per_sample(), threads, bench::library_isa(), f32_unit, bf16_unit);
  if (!peer_isa.empty()) std::printf("# the peer at the same level: %s\n", peer_isa.c_str());
  std::printf("%-11s %7s %12s %6s %6s %22s %26s %12s %7s %13s %7s\n", "precision", "devices", "samples/s", "%peak",
              "%bound", "bytes: moved set GB/s", "peer", "peer s/s", "ratio", "range", "target");
  bool no_torch = false;
  std::string peaks_seen;  // per row: the peaks measured beside its rounds
  for (const Row &r : rows) {
    if (!wanted(r.precision, r.devices)) continue;
    const bool bf16 = !std::strcmp(r.precision, "bf16-mixed");
    const StepBytes bytes = step_bytes(bf16, r.devices);
    std::vector<double> ours, peer, ratio, flops, bandwidths, of_peak, of_bound;
    for (int round = 0; round < rounds; ++round) {
      const bool peer_first = round % 2 == 1;
      double p = peers && peer_first ? torch_rate(r.peer_mode, steps) : 0;
      const double o = hpu_rate(r.precision, r.devices, steps);
      const double peak = bench::measure_product_bound(threads, 3, bf16).value;
      const double bandwidth =
          bench::measure_peaks(threads, 5, bench::kMemoryPeaks, size_t(bytes.working_set * r.devices)).copy;
      if (peers && !peer_first) p = torch_rate(r.peer_mode, steps);
      ours.push_back(o);
      flops.push_back(peak);
      bandwidths.push_back(bandwidth);
      if (peak > 0 && bandwidth > 0) {
        const double bound_seconds = kGlobalBatch * flop_per_sample() / (peak * 1e9) + bytes.moved / (bandwidth * 1e9);
        of_peak.push_back(o * flop_per_sample() * 1e-9 / peak);
        of_bound.push_back(o * bound_seconds / kGlobalBatch);
      }
      if (p > 0) {
        peer.push_back(p);
        ratio.push_back(o / p);
      }
    }
    auto share = [](const std::vector<double> &v) { return v.empty() ? "n/a" : bench::percent(bench::median(v), 1); };
    char traffic[48], seen[160];
    std::snprintf(traffic, sizeof traffic, "%.1f %.1f %.0f", bytes.moved * 1e-6, bytes.working_set * r.devices * 1e-6,
                  bench::median(bandwidths));
    std::snprintf(seen, sizeof seen, "# %s on %d device(s): %s %.1f GFLOP/s [%.1f-%.1f], copy %.1f GB/s [%.1f-%.1f]\n",
                  r.precision, r.devices, bf16 ? bf16_unit : f32_unit, bench::median(flops),
                  *std::min_element(flops.begin(), flops.end()), *std::max_element(flops.begin(), flops.end()),
                  bench::median(bandwidths), *std::min_element(bandwidths.begin(), bandwidths.end()),
                  *std::max_element(bandwidths.begin(), bandwidths.end()));
    peaks_seen += seen;
    std::printf("%-11s %7d %12.0f %6s %6s %22s %26s", r.precision, r.devices, bench::median(ours),
                share(of_peak).c_str(), share(of_bound).c_str(), traffic, r.peer_name);
    if (!ratio.empty()) {
      char range[32];
      std::snprintf(range, sizeof range, "%.2f-%.2f", *std::min_element(ratio.begin(), ratio.end()),
                    *std::max_element(ratio.begin(), ratio.end()));
      std::printf(" %12.0f %7.2f %13s %6.1fx\n", bench::median(peer), bench::median(ratio), range, r.target);
    } else {
      no_torch |= peers;
      std::printf(" %12s %7s %13s %6.1fx\n", "-", "-", "-", r.target);
    }
  }
  std::printf("# the peaks measured beside the rounds, median [lowest-highest]:\n%s", peaks_seen.c_str());
  if (no_torch)
    std::printf("# PyTorch: /usr/bin/python3 cannot import torch (scripts/deps --bench installs python3-torch)\n");
  return 0;
}

}  // namespace

HPU_BENCH("train", "Fashion-MNIST MLP training step: samples/s, 1-2 devices, both precisions, vs PyTorch [--profile]",
          kUsage, train_main);
