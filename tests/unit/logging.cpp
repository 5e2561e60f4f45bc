// Logging: levels filter, HPU_LOG_FILE, the host callback, line format.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "child.hpp"

using hpu_test::run_child;

namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<hpuLogLevel_t, std::string>> lines;
};

void capture(hpuLogLevel_t level, const char *line, void *user) {
  auto *c = static_cast<Captured *>(user);
  std::lock_guard<std::mutex> lock(c->mu);
  c->lines.emplace_back(level, line);
}

int open_and_close_device() {
  hpuDevice_t dev;
  if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) return 10;
  if (hpuDeviceClose(dev) != HPU_SUCCESS) return 11;
  return 0;
}

}  // namespace

TEST(Logging, LevelFiltersLinesOnStderr) {
  auto quiet = run_child({{"HPU_LOG_LEVEL", "warn"}}, open_and_close_device);
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.output.find("opened device 0"), std::string::npos) << quiet.output;

  auto loud = run_child({{"HPU_LOG_LEVEL", "debug"}}, open_and_close_device);
  EXPECT_EQ(loud.exit_code, 0);
  EXPECT_NE(loud.output.find("DEBUG device: opened device 0"), std::string::npos) << loud.output;
  EXPECT_NE(loud.output.find("INFO core: initialised"), std::string::npos) << loud.output;
  EXPECT_EQ(loud.output.find("TRACE"), std::string::npos) << loud.output;
}

TEST(Logging, LineCarriesTimePidRankDeviceAndComponent) {
  auto r = run_child({{"HPU_LOG_LEVEL", "debug"}}, open_and_close_device);
  ASSERT_EQ(r.exit_code, 0);
  std::istringstream in(r.output);
  std::string first;
  std::getline(in, first);
  // 2026-11-21T10:55:12.123456Z hpu[1234] rank=- device=- INFO core: ...
  ASSERT_GE(first.size(), 28u) << first;
  EXPECT_EQ(first[4], '-');
  EXPECT_EQ(first[10], 'T');
  EXPECT_EQ(first[26], 'Z');
  EXPECT_NE(first.find(" hpu["), std::string::npos);
  EXPECT_NE(first.find(" rank=- device=- "), std::string::npos) << first;
}

TEST(Logging, FileReceivesLines) {
  std::string path = testing::TempDir() + "hpu-log-test.log";
  std::remove(path.c_str());
  auto r = run_child({{"HPU_LOG_LEVEL", "info"}, {"HPU_LOG_FILE", path}}, open_and_close_device);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "");  // nothing on stderr
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("INFO core: initialised"), std::string::npos) << text.str();
}

TEST(Logging, UnopenableFileFailsInitialisationWithConfig) {
  auto r = run_child({{"HPU_LOG_FILE", "/nonexistent-dir/x.log"}}, [] {
    int n;
    hpuStatus_t s = hpuDeviceCount(&n);
    if (s != HPU_ERROR_CONFIG) return 1;
    std::string msg = hpuGetLastErrorMessage();
    return msg.find("/nonexistent-dir/x.log") != std::string::npos ? 0 : 2;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Logging, CallbackReceivesLinesAndCanBeRemoved) {
  Captured c;
  ASSERT_EQ(hpuSetLogCallback(capture, &c), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogLevel(HPU_LOG_DEBUG), HPU_SUCCESS);
  ASSERT_EQ(open_and_close_device(), 0);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    ASSERT_FALSE(c.lines.empty());
    bool seen = false;
    for (auto &l : c.lines) {
      if (l.second.find("opened device 0") != std::string::npos) {
        seen = true;
        EXPECT_EQ(l.first, HPU_LOG_DEBUG);
        EXPECT_NE(l.second.back(), '\n');  // no trailing newline
      }
    }
    EXPECT_TRUE(seen);
  }
  ASSERT_EQ(hpuSetLogCallback(nullptr, nullptr), HPU_SUCCESS);
  size_t before = c.lines.size();
  ASSERT_EQ(open_and_close_device(), 0);
  EXPECT_EQ(c.lines.size(), before);
}

TEST(Logging, LevelGetSetAndBadInput) {
  hpuLogLevel_t level;
  ASSERT_EQ(hpuSetLogLevel(HPU_LOG_TRACE), HPU_SUCCESS);
  ASSERT_EQ(hpuGetLogLevel(&level), HPU_SUCCESS);
  EXPECT_EQ(level, HPU_LOG_TRACE);
  EXPECT_EQ(hpuSetLogLevel(static_cast<hpuLogLevel_t>(9)), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("level 9"), std::string::npos) << hpuGetLastErrorMessage();
  EXPECT_EQ(hpuGetLogLevel(nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("level is NULL"), std::string::npos);
  ASSERT_EQ(hpuGetLogLevel(&level), HPU_SUCCESS);
  EXPECT_EQ(level, HPU_LOG_TRACE);  // unchanged by the failed call
}

TEST(Logging, BadLevelInEnvironmentIsAConfigError) {
  auto r = run_child({{"HPU_LOG_LEVEL", "loud"}}, [] {
    int n;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 1;
    return std::string(hpuGetLastErrorMessage()).find("HPU_LOG_LEVEL=\"loud\"") != std::string::npos ? 0 : 2;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
