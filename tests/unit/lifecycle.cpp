// The library's life in a process: fork rules and exit with work still queued.
// Each case runs in a forked child with an alarm, so a hang fails the test.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "child.hpp"
#include "expect.hpp"

using hpu_test::run_child;

namespace {

constexpr size_t kBytes = size_t(16) << 20;

// Opens device 0, copies through it and closes it; 0 on success.
int use_a_device() {
  hpuDevice_t dev;
  void *p;
  std::vector<unsigned char> in(kBytes, 0x5A), out(kBytes, 0);
  if (hpuDeviceOpen(&dev, 0) || hpuMemAlloc(&p, dev, kBytes)) return 1;
  if (hpuMemcpy(p, in.data(), kBytes, HPU_MEMCPY_HOST_TO_DEVICE) ||
      hpuMemcpy(out.data(), p, kBytes, HPU_MEMCPY_DEVICE_TO_HOST))
    return 2;
  if (in != out) return 3;
  if (hpuMemFree(p) || hpuDeviceClose(dev)) return 4;
  return 0;
}

}  // namespace

TEST(Lifecycle, ChildForkedBeforeInitialisationWorks) {
  auto r = run_child({}, [] {
    alarm(60);
    return use_a_device();
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(use_a_device(), 0) << hpuGetLastErrorMessage();  // the parent initialises afterwards
}

TEST(Lifecycle, ChildOfAnInitialisedParentIsRefused) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  void *p;
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, kBytes));
  for (int i = 0; i < 20; ++i) ASSERT_HPU_OK(hpuMemsetAsync(nullptr, p, i, kBytes));  // workers busy at the fork
  auto r = run_child({}, [dev, p] {
    alarm(60);
    int n;
    if (hpuDeviceCount(&n) != HPU_ERROR_INVALID_USAGE) return 1;
    std::string msg = hpuGetLastErrorMessage();
    if (msg.rfind("hpuDeviceCount: ", 0) != 0 || msg.find("fork") == std::string::npos ||
        msg.find(std::to_string(getppid())) == std::string::npos) {
      std::fprintf(stderr, "%s\n", msg.c_str());
      return 2;
    }
    void *q = reinterpret_cast<void *>(0x1);
    if (hpuMemAlloc(&q, dev, 512) != HPU_ERROR_INVALID_USAGE || q != reinterpret_cast<void *>(0x1)) return 3;
    if (hpuMemFree(p) != HPU_ERROR_INVALID_USAGE) return 4;
    hpuDevice_t again;
    if (hpuDeviceOpen(&again, 0) != HPU_ERROR_INVALID_USAGE) return 5;
    std::exit(0);  // a normal exit: the library's exit handler must not touch the parent's threads
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The parent is unaffected.
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_HPU_OK(hpuMemFree(p));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

TEST(Lifecycle, ExitWithWorkStillQueuedDoesNotHang) {
  auto r = run_child({}, [] {
    alarm(60);
    // Several seconds of queued work on two devices, and a stream waiting on
    // an event whose record sits behind it: at exit the work is dropped and the
    // wait gives up.
    for (int d = 0; d < 2; ++d) {
      hpuDevice_t dev;
      hpuStream_t busy, waiting;
      hpuEvent_t event;
      void *buf;
      if (hpuDeviceOpen(&dev, d) || hpuMemAlloc(&buf, dev, 4 * kBytes) || hpuStreamCreate(&busy, dev) ||
          hpuStreamCreate(&waiting, dev) || hpuEventCreate(&event))
        return 1;
      for (int i = 0; i < 200; ++i)
        if (hpuMemsetAsync(busy, buf, i, 4 * kBytes) || hpuMemsetAsync(nullptr, buf, i, 4 * kBytes)) return 2;
      if (hpuEventRecord(busy, event) || hpuStreamWaitEvent(waiting, event) ||
          hpuMemsetAsync(waiting, buf, 0, 4 * kBytes))
        return 3;
    }
    std::exit(0);
  });
  EXPECT_EQ(r.exit_code, 0) << "142 means the exit hung\n" << r.output;
}
