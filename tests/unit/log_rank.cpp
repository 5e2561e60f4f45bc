// A communicator's lines carry its rank (rank=N): those of its set-up and of
// its operations; the thread's lines before and after show rank=-.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <sstream>
#include <string>

#include "child.hpp"

using hpu_test::run_child;

namespace {

// Two ranks on two devices of this process, then one allreduce each.
int two_ranks() {
  hpuDevice_t devs[2];
  hpuComm_t comms[2];
  hpuStream_t streams[2];
  void *buf[2];
  for (int i = 0; i < 2; ++i) {
    if (hpuDeviceOpen(&devs[i], i) != HPU_SUCCESS || hpuStreamCreate(&streams[i], devs[i]) != HPU_SUCCESS ||
        hpuMemAlloc(&buf[i], devs[i], 64 * sizeof(float)) != HPU_SUCCESS)
      return 1;
  }
  if (hpuCommInitAll(comms, 2, devs) != HPU_SUCCESS) return 2;
  for (int i = 0; i < 2; ++i)
    if (hpuAllreduce(streams[i], comms[i], buf[i], buf[i], 64, HPU_FLOAT32, HPU_SUM) != HPU_SUCCESS) return 3;
  for (int i = 0; i < 2; ++i)
    if (hpuStreamSynchronize(streams[i]) != HPU_SUCCESS) return 4;
  for (int i = 0; i < 2; ++i) {
    if (hpuCommDestroy(comms[i]) != HPU_SUCCESS || hpuMemFree(buf[i]) != HPU_SUCCESS ||
        hpuStreamDestroy(streams[i]) != HPU_SUCCESS || hpuDeviceClose(devs[i]) != HPU_SUCCESS)
      return 5;
  }
  return 0;
}

}  // namespace

TEST(LogRank, ACommunicatorsLinesCarryItsRank) {
  auto r = run_child({{"HPU_LOG_LEVEL", "trace"}, {"HPU_NUM_DEVICES", "2"}}, two_ranks);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  int joined = 0;
  bool closed_without_rank = false;
  for (std::string line; std::getline(in, line);) {
    for (int rank : {0, 1}) {
      if (line.find("rank " + std::to_string(rank) + " of 2 on device") == std::string::npos) continue;
      ++joined;
      EXPECT_NE(line.find(" rank=" + std::to_string(rank) + " "), std::string::npos) << line;
    }
    if (line.find("INFO core: initialised") != std::string::npos) {
      EXPECT_NE(line.find(" rank=- "), std::string::npos) << line;
    }
    if (line.find("closed device") != std::string::npos && line.find(" rank=- ") != std::string::npos)
      closed_without_rank = true;
  }
  EXPECT_EQ(joined, 2) << r.output;
  // The calling thread's rank ends with the set-up.
  EXPECT_TRUE(closed_without_rank) << r.output;
}
