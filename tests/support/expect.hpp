// Assertions on libhpu calls: a call succeeds, or fails with a given status and
// a message that starts with the function's name and contains given pieces
// (the argument's name, its value).
//
//   EXPECT_HPU_OK(hpuDeviceOpen(&dev, 0));
//   EXPECT_HPU_FAIL(hpuMemAlloc(nullptr, dev, 1), HPU_ERROR_INVALID_ARGUMENT, "ptr is NULL");
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>

namespace hpu_test {

inline testing::AssertionResult hpu_ok(const char *call, hpuStatus_t got) {
  if (got == HPU_SUCCESS) return testing::AssertionSuccess();
  return testing::AssertionFailure() << call << " returned " << hpuGetErrorName(got) << ": "
                                     << hpuGetLastErrorMessage();
}

inline testing::AssertionResult hpu_failed(const char *call, hpuStatus_t got, hpuStatus_t want,
                                           std::initializer_list<const char *> pieces) {
  std::string message = hpuGetLastErrorMessage();
  if (got != want)
    return testing::AssertionFailure() << call << " returned " << hpuGetErrorName(got) << ", expected "
                                       << hpuGetErrorName(want) << " (last message: \"" << message << "\")";
  std::string function(call, std::strcspn(call, "( "));
  if (message.rfind(function + ": ", 0) != 0)
    return testing::AssertionFailure() << call << ": the message \"" << message << "\" does not start with \""
                                       << function << ": \"";
  for (const char *piece : pieces)
    if (message.find(piece) == std::string::npos)
      return testing::AssertionFailure() << call << ": the message \"" << message << "\" lacks \"" << piece << "\"";
  return testing::AssertionSuccess();
}

// "0x..." as the library prints a pointer or handle (%p).
inline std::string ptr_text(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace hpu_test

#define EXPECT_HPU_OK(call) EXPECT_TRUE(::hpu_test::hpu_ok(#call, (call)))
#define ASSERT_HPU_OK(call) ASSERT_TRUE(::hpu_test::hpu_ok(#call, (call)))
#define EXPECT_HPU_FAIL(call, status, ...) \
  EXPECT_TRUE(::hpu_test::hpu_failed(#call, (call), (status), {__VA_ARGS__}))
