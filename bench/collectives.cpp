// hpu-bench allreduce | allgather | reducescatter | broadcast | alltoall
//
// nccl-tests columns for ranks that are devices of this process: size, count,
// type, redop, root, then time (us), algbw and busbw (GB/s, 1e9) and #wrong for
// out-of-place and in-place runs. busbw = algbw x 2(n-1)/n for allreduce,
// (n-1)/n for allgather, reducescatter and alltoall, 1 for broadcast. The peer,
// measured in the same run on the same buffers: n plain threads that do the
// same data movement directly (for allreduce: each thread sums its share of
// the n inputs and writes it to the n outputs), one barrier per iteration; its
// busbw uses the same formula, and the ratio is ours (out-of-place) over it.
// Each row takes the three timings in turn, several times, and prints their
// medians, so that a burst of other load moves no single column.
//
//   -g N        ranks (devices 0..N-1), 2..8 (default 2)
//   -b / -e     smallest / largest size in bytes (default 8 and 64M)
//   -f F        size factor between rows (default 4)
//   -t TYPE     float, double, bfloat16, half, int32 (default float)
//   -o OP       sum, prod, min, max, avg (default sum)
//   -r ROOT     root of broadcast (default 0)
//   -n ITERS    iterations per size (default: enough for ~256 MiB moved, 5..1000)
//   -w WARMUP   warm-up iterations (default 3)
//   -k TRIALS   timings of each column per size, the median printed (default 5)
//   --min-busbw X   exit 1 when the average out-of-place busbw is below X GB/s
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace {

enum class Coll { allreduce, allgather, reducescatter, broadcast, alltoall };

struct Options {
  Coll coll = Coll::allreduce;
  const char *name = "allreduce";
  int ranks = 2;
  size_t min_bytes = 8, max_bytes = size_t(64) << 20;
  double factor = 4;
  hpuDataType_t dtype = HPU_FLOAT32;
  const char *type_name = "float";
  hpuRedOp_t op = HPU_SUM;
  const char *op_name = "sum";
  int root = 0;
  int iters = 0, warmup = 3, trials = 5;
  double min_busbw = -1;
};

size_t type_size(hpuDataType_t t) {
  switch (t) {
    case HPU_FLOAT64: return 8;
    case HPU_BFLOAT16: case HPU_FLOAT16: return 2;
    default: return 4;
  }
}

// Small integers: exact in every type, whatever order they are combined in.
double value(int rank, size_t i) { return static_cast<double>((i + static_cast<size_t>(rank) * 3) % 7) - 2; }

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

uint16_t to_f16(float f) {  // exact for the small integers used here
  if (f == 0) return 0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, exp = ((u >> 23) & 0xFF) - 127 + 15, man = (u >> 13) & 0x3FF;
  return static_cast<uint16_t>(sign | (exp << 10) | man);
}

void put(hpuDataType_t t, double v, void *out) {
  switch (t) {
    case HPU_FLOAT64: *static_cast<double *>(out) = v; break;
    case HPU_BFLOAT16: *static_cast<uint16_t *>(out) = to_bf16(static_cast<float>(v)); break;
    case HPU_FLOAT16: *static_cast<uint16_t *>(out) = to_f16(static_cast<float>(v)); break;
    case HPU_INT32: *static_cast<int32_t *>(out) = static_cast<int32_t>(v); break;
    default: *static_cast<float *>(out) = static_cast<float>(v); break;
  }
}

double reduce_ref(hpuRedOp_t op, int n, size_t i, hpuDataType_t t) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    double x = value(r, i);
    if (op == HPU_SUM || op == HPU_AVG) acc += x;
    if (op == HPU_PROD) acc *= x;
    if (op == HPU_MIN) acc = x < acc ? x : acc;
    if (op == HPU_MAX) acc = x > acc ? x : acc;
  }
  if (op == HPU_AVG) {
    if (t == HPU_INT32) return static_cast<double>(static_cast<int64_t>(acc) / n);
    if (t == HPU_FLOAT64) return acc / n;
    return static_cast<double>(static_cast<float>(acc) / static_cast<float>(n));
  }
  return acc;
}

// A barrier for the peer's threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0;
  uint64_t gen_ = 0;
};

struct Rank {
  hpuDevice_t dev = nullptr;
  hpuComm_t comm = nullptr;
  hpuStream_t stream = nullptr;
  void *send = nullptr, *recv = nullptr;
};

class Bench {
 public:
  explicit Bench(const Options &o) : o_(o), n_(o.ranks), ranks_(static_cast<size_t>(o.ranks)) {
    std::vector<hpuDevice_t> devs;
    for (int r = 0; r < n_; ++r) {
      BENCH_CHECK(hpuDeviceOpen(&ranks_[r].dev, r));
      BENCH_CHECK(hpuDeviceGetDefaultStream(ranks_[r].dev, &ranks_[r].stream));
      devs.push_back(ranks_[r].dev);
    }
    std::vector<hpuComm_t> comms(static_cast<size_t>(n_));
    BENCH_CHECK(hpuCommInitAll(comms.data(), n_, devs.data()));
    size_t most = buffer_bytes(o.max_bytes);
    for (int r = 0; r < n_; ++r) {
      ranks_[r].comm = comms[r];
      BENCH_CHECK(hpuMemAlloc(&ranks_[r].send, ranks_[r].dev, most));
      BENCH_CHECK(hpuMemAlloc(&ranks_[r].recv, ranks_[r].dev, most));
      BENCH_CHECK(hpuMemset(ranks_[r].send, 0, most));
      BENCH_CHECK(hpuMemset(ranks_[r].recv, 0, most));
    }
  }

  ~Bench() {
    for (auto &r : ranks_) {
      hpuCommDestroy(r.comm);
      hpuMemFree(r.send);
      hpuMemFree(r.recv);
      hpuDeviceClose(r.dev);
    }
  }

  int run() {
    const char *peer = o_.coll == Coll::allreduce || o_.coll == Coll::reducescatter ? "plain threaded sum"
                                                                                    : "plain threaded copy";
    std::printf("# hpu-bench %s: %d ranks (devices 0..%d of this process), type %s, redop %s, warmup %d, "
                "median of %d trials\n", o_.name, n_, n_ - 1, o_.type_name, has_op() ? o_.op_name : "none", o_.warmup,
                o_.trials);
    std::printf("#\n# %58s %32s %24s\n", "out-of-place", "in-place", peer);
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "time",
                "busbw", "ratio");
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s %9s %7s %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "");
    double sum_busbw = 0, sum_ratio = 0;
    int rows = 0;
    size_t esize = type_size(o_.dtype);
    for (double size = static_cast<double>(o_.min_bytes); size <= static_cast<double>(o_.max_bytes) * 1.0001;
         size *= o_.factor) {
      size_t count = per_rank_count(static_cast<size_t>(size) / esize);
      if (count == 0) continue;
      size_t bytes = total_bytes(count);
      int iters = o_.iters > 0 ? o_.iters : static_cast<int>(std::max<size_t>(5, std::min<size_t>(1000, (size_t(256) << 20) / std::max<size_t>(bytes, 1))));
      std::vector<double> outs, ins, peers;
      for (int k = 0; k < o_.trials; ++k) {
        outs.push_back(time_op(count, false, iters));
        ins.push_back(time_op(count, true, iters));
        peers.push_back(time_peer(count, iters));
      }
      const double t_out = bench::median(outs), t_in = bench::median(ins), t_peer = bench::median(peers);
      long wrong_out = check(count, false), wrong_in = check(count, true);
      double bw_out = busbw(bytes, t_out), bw_in = busbw(bytes, t_in), bw_peer = busbw(bytes, t_peer);
      std::printf("  %10zu %12zu %8s %6s %6d %9.1f %7.2f %7.2f %6ld %9.1f %7.2f %7.2f %6ld %9.1f %7.2f %6.2f\n",
                  bytes, count_column(count), o_.type_name, has_op() ? o_.op_name : "none",
                  o_.coll == Coll::broadcast ? o_.root : -1, t_out * 1e6, algbw(bytes, t_out), bw_out, wrong_out,
                  t_in * 1e6, algbw(bytes, t_in), bw_in, wrong_in, t_peer * 1e6, bw_peer, bw_out / bw_peer);
      std::fflush(stdout);
      sum_busbw += bw_out + bw_in;
      sum_ratio += bw_out / bw_peer;
      ++rows;
      total_wrong_ += wrong_out + wrong_in;
    }
    double avg = rows ? sum_busbw / (2 * rows) : 0;
    std::printf("# Out of bounds values : %ld %s\n", total_wrong_, total_wrong_ ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", avg);
    std::printf("# Avg ratio to the %s (out-of-place busbw): %.2f\n", peer, rows ? sum_ratio / rows : 0);
    if (total_wrong_) return 1;
    if (o_.min_busbw >= 0 && avg < o_.min_busbw) {
      std::printf("# FAILED: average bus bandwidth %.3f GB/s is below --min-busbw %.3f\n", avg, o_.min_busbw);
      return 1;
    }
    return 0;
  }

 private:
  bool has_op() const { return o_.coll == Coll::allreduce || o_.coll == Coll::reducescatter; }

  // The count argument of the call for a total size of `elems` elements.
  size_t per_rank_count(size_t elems) const {
    switch (o_.coll) {
      case Coll::allgather: case Coll::reducescatter: case Coll::alltoall: return elems / static_cast<size_t>(n_);
      default: return elems;
    }
  }
  size_t total_bytes(size_t count) const {
    size_t b = count * type_size(o_.dtype);
    return o_.coll == Coll::allreduce || o_.coll == Coll::broadcast ? b : b * static_cast<size_t>(n_);
  }
  size_t count_column(size_t count) const { return total_bytes(count) / type_size(o_.dtype); }
  size_t buffer_bytes(size_t max_bytes) const { return max_bytes + 4096; }

  double algbw(size_t bytes, double t) const { return static_cast<double>(bytes) / t / 1e9; }
  double busbw(size_t bytes, double t) const {
    double n = n_;
    double f = o_.coll == Coll::allreduce ? 2 * (n - 1) / n : o_.coll == Coll::broadcast ? 1 : (n - 1) / n;
    return algbw(bytes, t) * f;
  }

  // The buffers of one call on rank r.
  void pointers(int r, size_t count, bool in_place, const void **s, void **d) const {
    const Rank &k = ranks_[static_cast<size_t>(r)];
    size_t chunk = count * type_size(o_.dtype);
    *s = k.send;
    *d = k.recv;
    if (!in_place) return;
    *s = k.recv;
    if (o_.coll == Coll::allgather) *s = static_cast<char *>(k.recv) + chunk * static_cast<size_t>(r);
    if (o_.coll == Coll::reducescatter) {
      *s = k.send;
      *d = static_cast<char *>(k.send) + chunk * static_cast<size_t>(r);
    }
  }

  void issue(size_t count, bool in_place) {
    for (int r = 0; r < n_; ++r) {
      const Rank &k = ranks_[static_cast<size_t>(r)];
      const void *s;
      void *d;
      pointers(r, count, in_place, &s, &d);
      switch (o_.coll) {
        case Coll::allreduce: BENCH_CHECK(hpuAllreduce(k.stream, k.comm, s, d, count, o_.dtype, o_.op)); break;
        case Coll::allgather: BENCH_CHECK(hpuAllgather(k.stream, k.comm, s, d, count, o_.dtype)); break;
        case Coll::reducescatter: BENCH_CHECK(hpuReduceScatter(k.stream, k.comm, s, d, count, o_.dtype, o_.op)); break;
        case Coll::broadcast: BENCH_CHECK(hpuBroadcast(k.stream, k.comm, s, d, count, o_.dtype, o_.root)); break;
        case Coll::alltoall: BENCH_CHECK(hpuAlltoall(k.stream, k.comm, s, d, count, o_.dtype)); break;
      }
    }
  }

  void sync() {
    for (auto &k : ranks_) BENCH_CHECK(hpuStreamSynchronize(k.stream));
  }

  // Seconds per operation, `iters` queued back to back on every rank.
  double time_op(size_t count, bool in_place, int iters) {
    for (int i = 0; i < o_.warmup; ++i) issue(count, in_place);
    sync();
    double t0 = bench::now_seconds();
    for (int i = 0; i < iters; ++i) issue(count, in_place);
    sync();
    return (bench::now_seconds() - t0) / iters;
  }

  // Loads the inputs, runs once, counts the wrong elements on every rank.
  long check(size_t count, bool in_place) {
    const size_t e = type_size(o_.dtype), n = static_cast<size_t>(n_);
    const size_t in_elems = o_.coll == Coll::reducescatter || o_.coll == Coll::alltoall ? count * n : count;
    const size_t out_elems = o_.coll == Coll::allgather || o_.coll == Coll::alltoall ? count * n : count;
    std::vector<uint8_t> host(std::max(in_elems, out_elems) * e);
    for (int r = 0; r < n_; ++r) {
      const void *s;
      void *d;
      pointers(r, count, in_place, &s, &d);
      for (size_t i = 0; i < in_elems; ++i) put(o_.dtype, value(r, i), host.data() + i * e);
      BENCH_CHECK(hpuMemcpy(const_cast<void *>(s), host.data(), in_elems * e, HPU_MEMCPY_HOST_TO_DEVICE));
    }
    issue(count, in_place);
    sync();
    long wrong = 0;
    std::vector<uint8_t> want(e);
    for (int r = 0; r < n_; ++r) {
      const void *s;
      void *d;
      pointers(r, count, in_place, &s, &d);
      BENCH_CHECK(hpuMemcpy(host.data(), d, out_elems * e, HPU_MEMCPY_DEVICE_TO_HOST));
      for (size_t i = 0; i < out_elems; ++i) {
        double v = 0;
        switch (o_.coll) {
          case Coll::allreduce: v = reduce_ref(o_.op, n_, i, o_.dtype); break;
          case Coll::reducescatter: v = reduce_ref(o_.op, n_, static_cast<size_t>(r) * count + i, o_.dtype); break;
          case Coll::allgather: v = value(static_cast<int>(i / count), i % count); break;
          case Coll::broadcast: v = value(o_.root, i); break;
          case Coll::alltoall: v = value(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count); break;
        }
        put(o_.dtype, v, want.data());
        if (std::memcmp(want.data(), host.data() + i * e, e) != 0) ++wrong;
      }
    }
    return wrong;
  }

  // The same data movement by n plain threads, one barrier per iteration.
  double time_peer(size_t count, int iters) {
    const size_t e = type_size(o_.dtype), n = static_cast<size_t>(n_);
    std::vector<const char *> in(n);
    std::vector<char *> out(n);
    for (size_t r = 0; r < n; ++r) {
      in[r] = static_cast<const char *>(ranks_[r].send);
      out[r] = static_cast<char *>(ranks_[r].recv);
    }
    Barrier barrier(n_);
    double elapsed = 0;
    auto body = [&](size_t t) {
      for (int it = -o_.warmup; it < iters; ++it) {
        barrier.wait();
        double t0 = it == 0 && t == 0 ? bench::now_seconds() : 0;
        if (t0) elapsed = -t0;
        peer_step(t, count, e, in, out);
      }
      barrier.wait();
      if (t == 0) elapsed += bench::now_seconds();
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) threads.emplace_back(body, t);
    body(0);
    for (auto &th : threads) th.join();
    return elapsed / iters;
  }

  // Thread t's share of one iteration of the peer.
  void peer_step(size_t t, size_t count, size_t e, const std::vector<const char *> &in,
                 const std::vector<char *> &out) const {
    const size_t n = in.size();
    switch (o_.coll) {
      case Coll::allreduce:
      case Coll::reducescatter: {
        // Thread t sums its share of the elements over the n inputs; allreduce
        // writes the sum to every output, reducescatter to the owner's.
        size_t total = o_.coll == Coll::allreduce ? count : count * n;
        size_t begin = total * t / n, end = total * (t + 1) / n;
        size_t share = end - begin;
        if (o_.dtype == HPU_FLOAT32) {
          auto *dst = reinterpret_cast<float *>(out[t] + (o_.coll == Coll::allreduce ? begin * e : 0));
          const float *a = reinterpret_cast<const float *>(in[0]) + begin;
          for (size_t i = 0; i < share; ++i) dst[i] = a[i];
          for (size_t r = 1; r < n; ++r) {
            const float *b = reinterpret_cast<const float *>(in[r]) + begin;
            for (size_t i = 0; i < share; ++i) dst[i] += b[i];
          }
          if (o_.coll == Coll::allreduce)
            for (size_t r = 0; r < n; ++r)
              if (r != t) std::memcpy(out[r] + begin * e, dst, share * e);
        } else {  // other types: the same traffic as bytes
          char *dst = out[t] + (o_.coll == Coll::allreduce ? begin * e : 0);
          for (size_t r = 0; r < n; ++r) std::memcpy(dst, in[r] + begin * e, share * e);
          if (o_.coll == Coll::allreduce)
            for (size_t r = 0; r < n; ++r)
              if (r != t) std::memcpy(out[r] + begin * e, dst, share * e);
        }
        break;
      }
      case Coll::allgather:  // thread t copies its input to every output
        for (size_t r = 0; r < n; ++r) std::memcpy(out[r] + t * count * e, in[t], count * e);
        break;
      case Coll::alltoall:  // thread t copies its n blocks to their owners
        for (size_t r = 0; r < n; ++r) std::memcpy(out[r] + t * count * e, in[t] + r * count * e, count * e);
        break;
      case Coll::broadcast: {  // thread t copies its share of the root's buffer everywhere
        size_t begin = count * e * t / n, end = count * e * (t + 1) / n;
        for (size_t r = 0; r < n; ++r) std::memcpy(out[r] + begin, in[static_cast<size_t>(o_.root)] + begin, end - begin);
        break;
      }
    }
  }

  Options o_;
  int n_;
  std::vector<Rank> ranks_;
  long total_wrong_ = 0;
};

bool parse_size(const char *s, size_t *out) {
  char *end;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  if (*end == 'K' || *end == 'k') v *= 1024, ++end;
  else if (*end == 'M' || *end == 'm') v *= 1024 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024, ++end;
  if (*end) return false;
  *out = static_cast<size_t>(v);
  return true;
}

const char *kUsage =
    "[-g ranks 2..8] [-b min] [-e max] [-f factor] [-t float|double|bfloat16|half|int32]\n"
    "       [-o sum|prod|min|max|avg] [-r root] [-n iters] [-w warmup] [-k trials] [--min-busbw GB/s]\n";

int run(Coll coll, int argc, char **argv) {
  Options o;
  o.coll = coll;
  o.name = argv[0];
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return bench::kBadUsage;
    const char *v = argv[++i];
    if (a == "-g") o.ranks = std::atoi(v);
    else if (a == "-b") { if (!parse_size(v, &o.min_bytes)) return bench::kBadUsage; }
    else if (a == "-e") { if (!parse_size(v, &o.max_bytes)) return bench::kBadUsage; }
    else if (a == "-f") o.factor = std::atof(v);
    else if (a == "-r") o.root = std::atoi(v);
    else if (a == "-n") o.iters = std::atoi(v);
    else if (a == "-w") o.warmup = std::atoi(v);
    else if (a == "-k") o.trials = std::atoi(v);
    else if (a == "--min-busbw") o.min_busbw = std::atof(v);
    else if (a == "-t") {
      o.type_name = v;
      std::string t = v;
      if (t == "float") o.dtype = HPU_FLOAT32;
      else if (t == "double") o.dtype = HPU_FLOAT64;
      else if (t == "bfloat16") o.dtype = HPU_BFLOAT16;
      else if (t == "half") o.dtype = HPU_FLOAT16;
      else if (t == "int32") o.dtype = HPU_INT32;
      else return bench::kBadUsage;
    } else if (a == "-o") {
      o.op_name = v;
      std::string p = v;
      if (p == "sum") o.op = HPU_SUM;
      else if (p == "prod") o.op = HPU_PROD;
      else if (p == "min") o.op = HPU_MIN;
      else if (p == "max") o.op = HPU_MAX;
      else if (p == "avg") o.op = HPU_AVG;
      else return bench::kBadUsage;
    } else {
      return bench::kBadUsage;
    }
  }
  if (o.ranks < 2 || o.ranks > 8 || o.factor <= 1 || o.min_bytes > o.max_bytes || o.root < 0 || o.root >= o.ranks ||
      o.warmup < 0 || o.iters < 0 || o.trials < 1)
    return bench::kBadUsage;
  Bench b(o);
  return b.run();
}

int allreduce_main(int argc, char **argv) { return run(Coll::allreduce, argc, argv); }
int allgather_main(int argc, char **argv) { return run(Coll::allgather, argc, argv); }
int reducescatter_main(int argc, char **argv) { return run(Coll::reducescatter, argc, argv); }
int broadcast_main(int argc, char **argv) { return run(Coll::broadcast, argc, argv); }
int alltoall_main(int argc, char **argv) { return run(Coll::alltoall, argc, argv); }

}  // namespace

HPU_BENCH("allreduce", "allreduce busbw, nccl-tests columns, vs a plain threaded sum", kUsage,
          allreduce_main);
HPU_BENCH("allgather", "allgather busbw, nccl-tests columns, vs a plain threaded copy", kUsage,
          allgather_main);
HPU_BENCH("reducescatter", "reduce-scatter busbw, nccl-tests columns, vs a plain threaded sum", kUsage,
          reducescatter_main);
HPU_BENCH("broadcast", "broadcast busbw, nccl-tests columns, vs a plain threaded copy", kUsage,
          broadcast_main);
HPU_BENCH("alltoall", "alltoall busbw, nccl-tests columns, vs a plain threaded copy", kUsage,
          alltoall_main);
