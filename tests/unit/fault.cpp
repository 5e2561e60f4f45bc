// HPU_FAULT_INJECT: injected allocation failures surface as
// HPU_ERROR_OUT_OF_MEMORY with a message, leak nothing, and the process goes on.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <string>
#include <vector>

#include "child.hpp"

using hpu_test::run_child;

TEST(FaultInjection, AllocationFailsAfterNAndRecoversAfterK) {
  auto r = run_child({{"HPU_FAULT_INJECT", "alloc_fail_after=3,alloc_fail_count=2"}, {"HPU_LOG_LEVEL", "off"}}, [] {
    hpuDevice_t dev;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) return 1;
    std::vector<void *> ok;
    for (int i = 0; i < 3; ++i) {
      void *p;
      if (hpuMemAlloc(&p, dev, 4096) != HPU_SUCCESS) return 2;
      ok.push_back(p);
    }
    for (int i = 0; i < 2; ++i) {
      void *p = reinterpret_cast<void *>(0x1);
      if (hpuMemAlloc(&p, dev, 4096) != HPU_ERROR_OUT_OF_MEMORY) return 3;
      if (p != reinterpret_cast<void *>(0x1)) return 4;  // out-pointer untouched
      if (std::string(hpuGetLastErrorMessage()).find("HPU_FAULT_INJECT") == std::string::npos) return 5;
    }
    hpuMemStats_t st = HPU_MEM_STATS_INIT;
    if (hpuMemStats(dev, &st) != HPU_SUCCESS || st.num_allocs != 3 || st.in_use != 3 * 4096) return 6;
    void *p;
    if (hpuMemAlloc(&p, dev, 4096) != HPU_SUCCESS) return 7;  // recovered
    ok.push_back(p);
    for (void *q : ok)
      if (hpuMemFree(q) != HPU_SUCCESS) return 8;
    return hpuDeviceClose(dev) == HPU_SUCCESS ? 0 : 9;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(FaultInjection, BadSpecificationIsAConfigError) {
  for (const char *spec : {"alloc_fail_after=-1", "allocate_fail=3", "alloc_fail_after=x", "alloc_fail_after"}) {
    auto r = run_child({{"HPU_FAULT_INJECT", spec}}, [] {
      int n;
      if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 1;
      return std::string(hpuGetLastErrorMessage()).find("HPU_FAULT_INJECT") != std::string::npos ? 0 : 2;
    });
    EXPECT_EQ(r.exit_code, 0) << spec << ": " << r.output;
  }
}

TEST(FaultInjection, AnUnknownFaultIsNamedBesideTheKnownOnes) {
  auto r = run_child({{"HPU_FAULT_INJECT", "peer_stal=1"}}, [] {
    int n;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 1;
    std::string m = hpuGetLastErrorMessage();
    for (const char *name : {"\"peer_stal\"", "alloc_fail_after", "alloc_fail_count", "conn_drop_after_bytes",
                             "peer_delay_ms", "peer_stall", "fault_rank", "checkpoint_short_write", "stop_in_setup"})
      if (m.find(name) == std::string::npos) return 2;
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(FaultInjection, InjectionIsLoggedAsAWarning) {
  auto r = run_child({{"HPU_FAULT_INJECT", "peer_delay_ms=5"}}, [] {
    int n;
    return hpuDeviceCount(&n) == HPU_SUCCESS ? 0 : 1;
  });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("fault injection is on: peer_delay_ms=5"), std::string::npos) << r.output;
}
