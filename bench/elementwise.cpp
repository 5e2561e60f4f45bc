// hpu-bench elementwise: hpuAdd, hpuRelu (f32) and the f32 -> bf16 cast
// (hpuTensorCopy) over 64 MiB inputs through libhpu, beside memcpy of the same
// bytes in the same run. Bandwidth counts bytes read + bytes written.
// Target (issue 3): >= 0.7 x memcpy bandwidth.
#include <cstring>
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

// memcpy GB/s moving `bytes` (read + write counted) — single-threaded, as glibc does it.
double memcpy_gbs(size_t bytes) {
  std::vector<char> a(bytes / 2, 1), b(bytes / 2);
  return bytes / best_seconds([&] { std::memcpy(b.data(), a.data(), a.size()); }) * 1e-9;
}

int elementwise_main(int argc, char **argv) {
  hpuDevice_t dev;
  hpuStream_t s;
  BENCH_CHECK(hpuDeviceOpen(&dev, 0));
  BENCH_CHECK(hpuDeviceGetDefaultStream(dev, &s));
  int64_t shape[1] = {kElems};
  hpuTensor_t a, b, h;
  BENCH_CHECK(hpuTensorCreate(&a, dev, HPU_FLOAT32, 1, shape));
  BENCH_CHECK(hpuTensorCreate(&b, dev, HPU_FLOAT32, 1, shape));
  BENCH_CHECK(hpuTensorCreate(&h, dev, HPU_BFLOAT16, 1, shape));
  BENCH_CHECK(hpuTensorFillUniform(a, -1, 1, s));
  BENCH_CHECK(hpuTensorFillUniform(b, -1, 1, s));
  BENCH_CHECK(hpuStreamSynchronize(s));
  struct Row {
    const char *name;
    double bytes;  // read + written
    double seconds;
  };
  const double n4 = 4.0 * kElems, n2 = 2.0 * kElems;
  auto op = [&](auto call) {
    return best_seconds([&] {
      hpuTensor_t out = nullptr;
      BENCH_CHECK(call(&out));
      BENCH_CHECK(hpuStreamSynchronize(s));
      if (out) BENCH_CHECK(hpuTensorRelease(out));
    });
  };
  Row rows[] = {
      {"add f32", 3 * n4, op([&](hpuTensor_t *o) { return hpuAdd(s, a, b, o); })},
      {"relu f32", 2 * n4, op([&](hpuTensor_t *o) { return hpuRelu(s, a, o); })},
      {"cast f32->bf16", n4 + n2, op([&](hpuTensor_t *) { return hpuTensorCopy(h, a, s); })},
  };
  std::printf("# 64 MiB inputs (%lld elements); GB/s count bytes read + written; memcpy moves the same bytes\n",
              static_cast<long long>(kElems));
  std::printf("%-16s %10s %12s %12s %8s %7s\n", "kernel", "MiB moved", "libhpu GB/s", "memcpy GB/s", "ratio",
              "target");
  for (const Row &r : rows) {
    double gbs = r.bytes / r.seconds * 1e-9, peer = memcpy_gbs(static_cast<size_t>(r.bytes));
    std::printf("%-16s %10.0f %12.2f %12.2f %8.2f %7.2f %s\n", r.name, r.bytes / (1 << 20), gbs, peer, gbs / peer,
                kTarget, gbs / peer >= kTarget ? "ok" : "MISS");
  }
  for (hpuTensor_t t : {a, b, h}) hpuTensorRelease(t);
  hpuDeviceClose(dev);
  return 0;
}

}  // namespace

HPU_BENCH("elementwise", "hpuAdd/hpuRelu/cast over 64 MiB vs memcpy of the same bytes", elementwise_main);
