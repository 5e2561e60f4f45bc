// Statuses, error names and strings, the thread-local last error, the version,
// hpuFree.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <set>
#include <string>
#include <thread>

#include "expect.hpp"

namespace {

struct Known {
  hpuStatus_t status;
  int number;
  const char *name;
};

// DESIGN.md's table: the numbers are fixed forever.
const Known kStatuses[] = {
    {HPU_SUCCESS, 0, "HPU_SUCCESS"},
    {HPU_ERROR_INVALID_ARGUMENT, 1, "HPU_ERROR_INVALID_ARGUMENT"},
    {HPU_ERROR_INVALID_HANDLE, 2, "HPU_ERROR_INVALID_HANDLE"},
    {HPU_ERROR_OUT_OF_MEMORY, 3, "HPU_ERROR_OUT_OF_MEMORY"},
    {HPU_ERROR_NOT_FOUND, 4, "HPU_ERROR_NOT_FOUND"},
    {HPU_ERROR_BUSY, 5, "HPU_ERROR_BUSY"},
    {HPU_ERROR_NOT_READY, 6, "HPU_ERROR_NOT_READY"},
    {HPU_ERROR_UNSUPPORTED, 7, "HPU_ERROR_UNSUPPORTED"},
    {HPU_ERROR_CONFIG, 8, "HPU_ERROR_CONFIG"},
    {HPU_ERROR_IO, 9, "HPU_ERROR_IO"},
    {HPU_ERROR_NOT_AVAILABLE, 10, "HPU_ERROR_NOT_AVAILABLE"},
    {HPU_ERROR_INVALID_USAGE, 11, "HPU_ERROR_INVALID_USAGE"},
    {HPU_ERROR_REMOTE, 12, "HPU_ERROR_REMOTE"},
    {HPU_ERROR_TIMEOUT, 13, "HPU_ERROR_TIMEOUT"},
    {HPU_ERROR_ABORTED, 14, "HPU_ERROR_ABORTED"},
    {HPU_ERROR_ADDRESS_IN_USE, 15, "HPU_ERROR_ADDRESS_IN_USE"},
    {HPU_ERROR_INTERNAL, 99, "HPU_ERROR_INTERNAL"},
};

}  // namespace

TEST(Status, NumbersAndNamesAreFixed) {
  std::set<std::string> strings;
  for (const Known &k : kStatuses) {
    EXPECT_EQ(static_cast<int>(k.status), k.number) << k.name;
    EXPECT_STREQ(hpuGetErrorName(k.status), k.name);
    const char *text = hpuGetErrorString(k.status);
    ASSERT_NE(text, nullptr);
    EXPECT_GT(std::strlen(text), 0u) << k.name;
    strings.insert(text);
  }
  EXPECT_EQ(strings.size(), sizeof kStatuses / sizeof kStatuses[0]) << "two statuses share a description";
  EXPECT_STREQ(hpuGetErrorString(HPU_ERROR_OUT_OF_MEMORY), "out of memory");
}

TEST(Status, UnknownNumbersGetAFixedName) {
  for (int n : {-1, 16, 42, 98, 100, 1 << 30}) {
    EXPECT_STREQ(hpuGetErrorName(static_cast<hpuStatus_t>(n)), "HPU_STATUS_UNKNOWN") << n;
    EXPECT_STREQ(hpuGetErrorString(static_cast<hpuStatus_t>(n)), "unknown status") << n;
  }
}

TEST(Status, LastErrorIsEmptyBeforeAnyFailure) { EXPECT_STREQ(hpuGetLastErrorMessage(), ""); }

TEST(Status, LastErrorNamesFunctionArgumentAndValue) {
  hpuDevice_t dev;
  EXPECT_HPU_FAIL(hpuDeviceOpen(&dev, 12345), HPU_ERROR_NOT_FOUND, "ordinal 12345");
  EXPECT_HPU_FAIL(hpuDeviceCount(nullptr), HPU_ERROR_INVALID_ARGUMENT, "count is NULL");
}

TEST(Status, LastErrorSurvivesSuccessfulCalls) {
  EXPECT_HPU_FAIL(hpuDeviceCount(nullptr), HPU_ERROR_INVALID_ARGUMENT, "count is NULL");
  std::string before = hpuGetLastErrorMessage();
  int n = 0;
  EXPECT_HPU_OK(hpuDeviceCount(&n));
  EXPECT_EQ(before, hpuGetLastErrorMessage());
}

TEST(Status, LastErrorIsPerThread) {
  EXPECT_HPU_FAIL(hpuDeviceCount(nullptr), HPU_ERROR_INVALID_ARGUMENT, "count is NULL");
  std::string other_before, other_after;
  std::thread t([&] {
    other_before = hpuGetLastErrorMessage();
    hpuDevice_t dev;
    hpuDeviceOpen(&dev, -7);
    other_after = hpuGetLastErrorMessage();
  });
  t.join();
  EXPECT_EQ(other_before, "");
  EXPECT_NE(other_after.find("ordinal -7"), std::string::npos) << other_after;
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("count is NULL"), std::string::npos);
}

TEST(Status, Version) {
  EXPECT_EQ(hpuGetVersion(), HPU_VERSION);
  EXPECT_EQ(HPU_VERSION, (HPU_VERSION_MAJOR << 16) | (HPU_VERSION_MINOR << 8) | HPU_VERSION_PATCH);
  std::string text = std::to_string(HPU_VERSION_MAJOR) + "." + std::to_string(HPU_VERSION_MINOR) + "." +
                     std::to_string(HPU_VERSION_PATCH);
  EXPECT_EQ(text, HPU_VERSION_STRING);
}

TEST(Status, FreeAcceptsNullAndLibraryMemory) {
  hpuFree(nullptr);
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  char *json = nullptr;
  ASSERT_HPU_OK(hpuMemStatsJson(dev, &json));
  ASSERT_NE(json, nullptr);
  hpuFree(json);  // ASan checks the pairing
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}
