// A C++ consumer of the C API: allocates and copies on two devices from two
// threads and checks the data and the memory figures.
#include <hpu/hpu.h>

#include <cstdio>
#include <numeric>
#include <thread>
#include <vector>

namespace {

bool check(hpuStatus_t s, const char *what) {
  if (s == HPU_SUCCESS) return true;
  std::fprintf(stderr, "%s: %s: %s\n", what, hpuGetErrorName(s), hpuGetLastErrorMessage());
  return false;
}

bool round_trip(int ordinal) {
  std::vector<int> in(10000), out(in.size());
  std::iota(in.begin(), in.end(), ordinal * 100000);
  hpuDevice_t dev;
  hpuStream_t stream;
  void *p;
  if (!check(hpuDeviceOpen(&dev, ordinal), "hpuDeviceOpen") || !check(hpuStreamCreate(&stream, dev), "hpuStreamCreate") ||
      !check(hpuMemAlloc(&p, dev, in.size() * sizeof(int)), "hpuMemAlloc"))
    return false;
  const size_t bytes = in.size() * sizeof(int);
  bool ok = check(hpuMemcpyAsync(stream, p, in.data(), bytes, HPU_MEMCPY_HOST_TO_DEVICE), "copy in") &&
            check(hpuMemcpyAsync(stream, out.data(), p, bytes, HPU_MEMCPY_DEVICE_TO_HOST), "copy out") &&
            check(hpuStreamSynchronize(stream), "hpuStreamSynchronize") && in == out;
  hpuMemStats_t st = HPU_MEM_STATS_INIT;
  ok = ok && check(hpuMemStats(dev, &st), "hpuMemStats") && st.in_use == 40448 /* 40000 rounded to 512 */;
  ok = check(hpuMemFree(p), "hpuMemFree") && ok;
  ok = check(hpuStreamDestroy(stream), "hpuStreamDestroy") && ok;
  return check(hpuDeviceClose(dev), "hpuDeviceClose") && ok;
}

}  // namespace

int main() {
  int n = 0;
  if (!check(hpuDeviceCount(&n), "hpuDeviceCount") || n < 2) return 1;
  bool ok[2] = {false, false};
  std::thread a([&] { ok[0] = round_trip(0); }), b([&] { ok[1] = round_trip(1); });
  a.join();
  b.join();
  if (!ok[0] || !ok[1]) return 1;
  std::printf("find_package consumer: libhpu %s, ok\n", HPU_VERSION_STRING);
  return 0;
}
