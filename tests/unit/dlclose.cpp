// dlopen + dlclose of libhpu while its streams have worker threads and queued
// work: no hang, no crash, the library really unloads, and a second load works
// from scratch. Runs in a forked child with an alarm, so a hang fails the test.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <unistd.h>

#include <cstdio>

#include "child.hpp"

namespace {

// One load-use-unload cycle; 0 when it went as expected.
int cycle() {
  void *lib = dlopen(HPU_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 10;
  }
#define SYM(name) auto name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name))
  SYM(hpuDeviceOpen);
  SYM(hpuMemAlloc);
  SYM(hpuMemsetAsync);
  SYM(hpuStreamCreate);
  SYM(hpuEventCreate);
  SYM(hpuEventRecord);
  SYM(hpuStreamWaitEvent);
#undef SYM
  if (!hpuDeviceOpen || !hpuMemAlloc || !hpuMemsetAsync || !hpuStreamCreate || !hpuEventCreate ||
      !hpuEventRecord || !hpuStreamWaitEvent)
    return 11;
  // Two devices, each with a busy created stream and a busy default stream,
  // and a third stream waiting on an event queued behind the busy work.
  const size_t n = size_t(16) << 20;
  for (int d = 0; d < 2; ++d) {
    hpuDevice_t dev;
    hpuStream_t busy, waiting;
    hpuEvent_t event;
    void *buf;
    if (hpuDeviceOpen(&dev, d) || hpuMemAlloc(&buf, dev, n) || hpuStreamCreate(&busy, dev) ||
        hpuStreamCreate(&waiting, dev) || hpuEventCreate(&event))
      return 12;
    for (int i = 0; i < 50; ++i)
      if (hpuMemsetAsync(busy, buf, i, n) || hpuMemsetAsync(nullptr, buf, i, n)) return 13;
    if (hpuEventRecord(busy, event) || hpuStreamWaitEvent(waiting, event) || hpuMemsetAsync(waiting, buf, 1, n))
      return 14;
  }
  if (dlclose(lib) != 0) return 15;
  if (dlopen(HPU_LIBRARY_PATH, RTLD_NOW | RTLD_NOLOAD) != nullptr) return 16;  // still mapped
  return 0;
}

}  // namespace

TEST(Dlclose, UnloadWithBusyStreamsNeitherHangsNorCrashes) {
  ASSERT_EQ(dlopen(HPU_LIBRARY_PATH, RTLD_NOW | RTLD_NOLOAD), nullptr) << "the test itself must not load libhpu";
  auto r = hpu_test::run_child({}, [] {
    alarm(60);  // a hang ends as SIGALRM (exit code 142)
    for (int i = 0; i < 2; ++i)
      if (int rc = cycle()) return rc + 10 * i;
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << "10-19: first cycle, 20-29: second; 142: hung\n" << r.output;
}
