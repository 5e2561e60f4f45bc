// Devices: count, counted opens and closes, closed and foreign handles,
// properties, synchronize, the default stream, and bad input to each.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "expect.hpp"

using hpu_test::ptr_text;

TEST(Device, CountIsTheNumberOfVisibleDevices) {
  setenv("HPU_NUM_DEVICES", "5", 1);
  int n = -1;
  ASSERT_HPU_OK(hpuDeviceCount(&n));
  EXPECT_EQ(n, 5);
  EXPECT_HPU_FAIL(hpuDeviceCount(nullptr), HPU_ERROR_INVALID_ARGUMENT, "count is NULL");
}

TEST(Device, OpenOutOfRangeIsNotFound) {
  setenv("HPU_NUM_DEVICES", "2", 1);
  hpuDevice_t dev = reinterpret_cast<hpuDevice_t>(0x1234);
  EXPECT_HPU_FAIL(hpuDeviceOpen(&dev, 2), HPU_ERROR_NOT_FOUND, "ordinal 2", "2 devices");
  EXPECT_HPU_FAIL(hpuDeviceOpen(&dev, -1), HPU_ERROR_NOT_FOUND, "ordinal -1");
  EXPECT_EQ(dev, reinterpret_cast<hpuDevice_t>(0x1234)) << "out-pointer touched on failure";
  EXPECT_HPU_FAIL(hpuDeviceOpen(nullptr, 0), HPU_ERROR_INVALID_ARGUMENT, "dev is NULL");
}

TEST(Device, OpensAreCountedAndShareOneHandle) {
  hpuDevice_t a, b;
  ASSERT_HPU_OK(hpuDeviceOpen(&a, 0));
  ASSERT_HPU_OK(hpuDeviceOpen(&b, 0));
  EXPECT_EQ(a, b);
  ASSERT_HPU_OK(hpuDeviceClose(a));
  // One open remains: the handle still works.
  hpuMemStats_t s = HPU_MEM_STATS_INIT;
  EXPECT_HPU_OK(hpuMemStats(b, &s));
  ASSERT_HPU_OK(hpuDeviceClose(b));
  EXPECT_HPU_FAIL(hpuMemStats(b, &s), HPU_ERROR_INVALID_HANDLE, "is not an open device handle");
}

TEST(Device, ClosedHandleIsRejectedEverywhere) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 1));
  ASSERT_HPU_OK(hpuDeviceClose(dev));
  std::string text = ptr_text(dev);
  const char *v = text.c_str();
  void *p = nullptr;
  size_t f, t;
  char *json = nullptr;
  hpuStream_t stream;
  hpuMemStats_t stats = HPU_MEM_STATS_INIT;
  hpuDeviceProperties_t props = HPU_DEVICE_PROPERTIES_INIT;
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuDeviceGetProperties(dev, &props), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuDeviceSynchronize(dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuDeviceGetDefaultStream(dev, &stream), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuStreamCreate(&stream, dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, 512), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemGetInfo(dev, &f, &t), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemEmptyCache(dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemStats(dev, &stats), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemStatsJson(dev, &json), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemResetPeakStats(dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_HPU_FAIL(hpuMemResetAccumulatedStats(dev), HPU_ERROR_INVALID_HANDLE, v);
  EXPECT_EQ(json, nullptr);
}

TEST(Device, HandleFromBeforeTheLastCloseStaysDead) {
  hpuDevice_t old_handle, fresh;
  ASSERT_HPU_OK(hpuDeviceOpen(&old_handle, 0));
  ASSERT_HPU_OK(hpuDeviceClose(old_handle));
  ASSERT_HPU_OK(hpuDeviceOpen(&fresh, 0));
  EXPECT_NE(old_handle, fresh);
  hpuMemStats_t s = HPU_MEM_STATS_INIT;
  EXPECT_HPU_FAIL(hpuMemStats(old_handle, &s), HPU_ERROR_INVALID_HANDLE, ptr_text(old_handle).c_str());
  EXPECT_HPU_OK(hpuMemStats(fresh, &s));
  EXPECT_HPU_OK(hpuDeviceClose(fresh));
}

TEST(Device, NullForeignAndWrongKindHandles) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  hpuStream_t stream;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &stream));
  hpuEvent_t event;
  ASSERT_HPU_OK(hpuEventCreate(&event));
  int on_stack = 0;
  hpuDeviceProperties_t props = HPU_DEVICE_PROPERTIES_INIT;
  const hpuDevice_t bad[] = {reinterpret_cast<hpuDevice_t>(stream), reinterpret_cast<hpuDevice_t>(event),
                             reinterpret_cast<hpuDevice_t>(&on_stack), reinterpret_cast<hpuDevice_t>(~uintptr_t(0)),
                             reinterpret_cast<hpuDevice_t>(uintptr_t(0xD1) << 56 | 100)};
  for (hpuDevice_t b : bad)
    EXPECT_HPU_FAIL(hpuDeviceGetProperties(b, &props), HPU_ERROR_INVALID_HANDLE, ptr_text(b).c_str());
  EXPECT_HPU_FAIL(hpuDeviceGetProperties(nullptr, &props), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_HPU_OK(hpuDeviceClose(nullptr));
  EXPECT_HPU_OK(hpuEventDestroy(event));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

TEST(Device, Properties) {
  setenv("HPU_VISIBLE_DEVICES", "6,2", 1);
  setenv("HPU_DEVICE_PROFILE", "gaudi", 1);
  setenv("HPU_MEMORY_FRACTION", "0.75", 1);
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 1));
  hpuDeviceProperties_t p = HPU_DEVICE_PROPERTIES_INIT;
  ASSERT_HPU_OK(hpuDeviceGetProperties(dev, &p));
  EXPECT_STREQ(p.name, "HPU 1 (gaudi, emulated)");
  EXPECT_STREQ(p.profile, "gaudi");
  EXPECT_EQ(p.total_memory, 32ull << 30);
  EXPECT_EQ(p.memory_limit, 24ull << 30);
  EXPECT_EQ(p.ordinal, 1);
  EXPECT_EQ(p.module_id, 2);
  EXPECT_EQ(p.struct_size, sizeof p);
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

// kernel_isa as device `ordinal`'s properties report it.
static std::string kernel_isa_of(int ordinal) {
  hpuDevice_t dev;
  hpuDeviceProperties_t p = HPU_DEVICE_PROPERTIES_INIT;
  EXPECT_HPU_OK(hpuDeviceOpen(&dev, ordinal));
  EXPECT_HPU_OK(hpuDeviceGetProperties(dev, &p));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
  return p.kernel_isa;
}

// hpuDeviceGetProperties(3): kernel_isa names the level the kernels use: the
// CPU's best, or HPU_KERNEL_ISA's when the CPU has it. device.cmake runs this
// again with HPU_KERNEL_ISA=scalar and =avx2.
TEST(Device, PropertiesNameTheKernelIsa) {
  const std::string isa = kernel_isa_of(0);
  const char *want = std::getenv("HPU_KERNEL_ISA");
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (want && std::string(want) == "scalar") {
    EXPECT_EQ(isa, "scalar");
  } else if (want && std::string(want) == "avx2" && has_avx2) {
    EXPECT_EQ(isa, "avx2");
  } else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl")) {
    EXPECT_TRUE(isa == "avx512" || isa == "amx") << isa;
    if (isa == "amx") {
      EXPECT_TRUE(__builtin_cpu_supports("avx512bf16"));
    }
  } else {
    EXPECT_EQ(isa, has_avx2 ? "avx2" : "scalar");
  }
  EXPECT_EQ(kernel_isa_of(1), isa) << "every device reports the same level";
}

// hpuConfigGet(3): HPU_KERNEL_ISA is reported as the environment says now, but
// the kernels read it once; kernel_isa stays the level in use.
TEST(Device, KernelIsaIsReadOnce) {
  const std::string in_use = kernel_isa_of(0), other = in_use == "scalar" ? "avx2" : "scalar";
  setenv("HPU_KERNEL_ISA", other.c_str(), 1);
  char *value = nullptr;
  ASSERT_HPU_OK(hpuConfigGet("HPU_KERNEL_ISA", &value, nullptr));
  EXPECT_EQ(std::string(value), other);
  hpuFree(value);
  EXPECT_EQ(kernel_isa_of(0), in_use);
}

TEST(Device, PropertiesHonourAnOlderStructSize) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  // A caller built against a header whose struct ended after `profile`.
  hpuDeviceProperties_t p;
  std::memset(&p, 0xAB, sizeof p);
  p.struct_size = offsetof(hpuDeviceProperties_t, total_memory);
  ASSERT_HPU_OK(hpuDeviceGetProperties(dev, &p));
  EXPECT_STREQ(p.profile, "gaudi2");
  EXPECT_EQ(p.total_memory, 0xABABABABABABABABull) << "a field beyond struct_size was written";
  EXPECT_EQ(p.ordinal, static_cast<int>(0xABABABAB));
  // libhpu 0.2's struct ended after module_id.
  std::memset(&p, 0xAB, sizeof p);
  p.struct_size = offsetof(hpuDeviceProperties_t, kernel_isa);
  ASSERT_HPU_OK(hpuDeviceGetProperties(dev, &p));
  EXPECT_EQ(p.module_id, 0);
  EXPECT_EQ(static_cast<unsigned char>(p.kernel_isa[0]), 0xABu) << "kernel_isa is beyond struct_size";

  hpuDeviceProperties_t q = HPU_DEVICE_PROPERTIES_INIT;
  EXPECT_HPU_FAIL(hpuDeviceGetProperties(dev, nullptr), HPU_ERROR_INVALID_ARGUMENT, "props is NULL");
  q.struct_size = 0;
  EXPECT_HPU_FAIL(hpuDeviceGetProperties(dev, &q), HPU_ERROR_INVALID_ARGUMENT, "props->struct_size is 0");
  q.struct_size = size_t(1) << 40;
  EXPECT_HPU_FAIL(hpuDeviceGetProperties(dev, &q), HPU_ERROR_INVALID_ARGUMENT, "props->struct_size is 1099511627776");
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

TEST(Device, CloseRefusesWhileMemoryOrStreamsLive) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  void *p;
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, 1000));
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY, "device 0 still has 1 allocation", "1 KiB");
  ASSERT_HPU_OK(hpuMemFree(p));
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY, "device 0 still has 1 stream");
  ASSERT_HPU_OK(hpuStreamDestroy(s));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_INVALID_HANDLE, "not an open device handle");
}

TEST(Device, SynchronizeWaitsForEveryStream) {
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  const size_t n = 32 << 20;
  void *a, *b;
  ASSERT_HPU_OK(hpuMemAlloc(&a, dev, n));
  ASSERT_HPU_OK(hpuMemAlloc(&b, dev, n));
  hpuStream_t s1, s2;
  ASSERT_HPU_OK(hpuStreamCreate(&s1, dev));
  ASSERT_HPU_OK(hpuStreamCreate(&s2, dev));
  ASSERT_HPU_OK(hpuMemsetAsync(s1, a, 1, n));
  ASSERT_HPU_OK(hpuMemsetAsync(s2, b, 2, n));
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_HPU_OK(hpuStreamQuery(s1));
  EXPECT_HPU_OK(hpuStreamQuery(s2));
  EXPECT_HPU_FAIL(hpuDeviceSynchronize(nullptr), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_HPU_OK(hpuStreamDestroy(s1));
  EXPECT_HPU_OK(hpuStreamDestroy(s2));
  EXPECT_HPU_OK(hpuMemFree(a));
  EXPECT_HPU_OK(hpuMemFree(b));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

TEST(Device, DefaultStream) {
  hpuDevice_t d0, d1;
  ASSERT_HPU_OK(hpuDeviceOpen(&d0, 0));
  ASSERT_HPU_OK(hpuDeviceOpen(&d1, 1));
  hpuStream_t s0, again, s1;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(d0, &s0));
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(d0, &again));
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(d1, &s1));
  EXPECT_EQ(s0, again);
  EXPECT_NE(s0, s1);
  EXPECT_HPU_OK(hpuStreamSynchronize(s0));
  EXPECT_HPU_OK(hpuStreamQuery(s0));
  EXPECT_HPU_FAIL(hpuStreamDestroy(s0), HPU_ERROR_INVALID_USAGE, "default stream", ptr_text(s0).c_str());
  EXPECT_HPU_FAIL(hpuDeviceGetDefaultStream(d0, nullptr), HPU_ERROR_INVALID_ARGUMENT, "stream is NULL");
  ASSERT_HPU_OK(hpuDeviceClose(d0));
  // The default stream dies with the last close.
  EXPECT_HPU_FAIL(hpuStreamSynchronize(s0), HPU_ERROR_INVALID_HANDLE, ptr_text(s0).c_str());
  ASSERT_HPU_OK(hpuDeviceOpen(&d0, 0));
  hpuStream_t reopened;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(d0, &reopened));
  EXPECT_HPU_OK(hpuStreamSynchronize(reopened));
  EXPECT_HPU_OK(hpuDeviceClose(d0));
  EXPECT_HPU_OK(hpuDeviceClose(d1));
}
