// Logging: levels filter, HPU_LOG_FILE and hpuSetLogFile, the host callback,
// line format, hpuLogWrite for the layers above; hpuSetLastErrorMessage.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
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

std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
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
  const std::string text = read_file(path);
  EXPECT_NE(text.find("INFO core: initialised"), std::string::npos) << text;
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

// The error for a bad HPU_LOG_LEVEL lists exactly the names it accepts
// (hpu(7): off, error, warn or warning, info, debug, trace, in any case), and
// each name it lists sets its level.
TEST(Logging, EveryLevelTheErrorListsIsAccepted) {
  auto bad = run_child({{"HPU_LOG_LEVEL", "loud"}}, [] {
    int n;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 1;
    fprintf(stderr, "\nMESSAGE %s\n", hpuGetLastErrorMessage());
    return 0;
  });
  ASSERT_EQ(bad.exit_code, 0) << bad.output;
  const std::string lead = "expected one of ";
  const size_t at = bad.output.find(lead, bad.output.find("MESSAGE "));
  ASSERT_NE(at, std::string::npos) << bad.output;
  std::string listing = bad.output.substr(at + lead.size());
  listing = listing.substr(0, listing.find('\n'));
  std::vector<std::string> listed;
  std::istringstream words(listing);
  for (std::string w; words >> w;) {
    w.erase(std::remove_if(w.begin(), w.end(), [](char c) { return !std::isalpha(static_cast<unsigned char>(c)); }),
            w.end());
    if (!w.empty() && w != "or") listed.push_back(w);
  }
  const std::map<std::string, hpuLogLevel_t> accepted = {
      {"off", HPU_LOG_OFF},   {"error", HPU_LOG_ERROR}, {"warn", HPU_LOG_WARN},   {"warning", HPU_LOG_WARN},
      {"info", HPU_LOG_INFO}, {"debug", HPU_LOG_DEBUG}, {"trace", HPU_LOG_TRACE}};
  std::vector<std::string> want;
  for (auto &kv : accepted) want.push_back(kv.first);
  std::vector<std::string> sorted = listed;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, want) << listing;
  for (const std::string &name : listed) {
    std::string upper = name;
    for (char &c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const std::string &value : {name, upper}) {
      const hpuLogLevel_t level = accepted.count(name) ? accepted.at(name) : HPU_LOG_OFF;
      auto r = run_child({{"HPU_LOG_LEVEL", value}}, [level] {
        int n;
        hpuLogLevel_t got;
        if (hpuDeviceCount(&n) != HPU_SUCCESS || hpuGetLogLevel(&got) != HPU_SUCCESS) return 1;
        return got == level ? 0 : 2;
      });
      EXPECT_EQ(r.exit_code, 0) << "HPU_LOG_LEVEL=" << value << ": " << r.output;
    }
  }
}

TEST(Logging, WriteGoesThroughTheSameFilterAndCallback) {
  Captured c;
  ASSERT_EQ(hpuSetLogCallback(capture, &c), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogLevel(HPU_LOG_WARN), HPU_SUCCESS);
  ASSERT_EQ(hpuLogWrite(HPU_LOG_INFO, "trainer", "below the level"), HPU_SUCCESS);
  ASSERT_EQ(hpuLogWrite(HPU_LOG_WARN, "trainer", "two\nlines"), HPU_SUCCESS);
  ASSERT_EQ(hpuLogWrite(HPU_LOG_ERROR, "my-plugin.v2", "kept"), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogCallback(nullptr, nullptr), HPU_SUCCESS);
  std::lock_guard<std::mutex> lock(c.mu);
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_EQ(c.lines[0].first, HPU_LOG_WARN);
  const std::string &l = c.lines[0].second;
  const std::string tail = " WARN trainer: two lines";  // one event, one line
  ASSERT_GE(l.size(), tail.size());
  EXPECT_EQ(l.substr(l.size() - tail.size()), tail);
  EXPECT_NE(l.find(" hpu["), std::string::npos) << l;
  EXPECT_EQ(c.lines[1].first, HPU_LOG_ERROR);
  EXPECT_NE(c.lines[1].second.find(" ERROR my-plugin.v2: kept"), std::string::npos) << c.lines[1].second;
}

TEST(Logging, WriteBadInputNamesTheArgument) {
  auto expect_fails = [](hpuStatus_t s, const char *needle) {
    EXPECT_EQ(s, HPU_ERROR_INVALID_ARGUMENT);
    std::string msg = hpuGetLastErrorMessage();
    EXPECT_EQ(msg.rfind("hpuLogWrite: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  expect_fails(hpuLogWrite(HPU_LOG_OFF, "x", "m"), "level 0");
  expect_fails(hpuLogWrite(static_cast<hpuLogLevel_t>(6), "x", "m"), "level 6");
  expect_fails(hpuLogWrite(HPU_LOG_WARN, nullptr, "m"), "component is NULL");
  expect_fails(hpuLogWrite(HPU_LOG_WARN, "x", nullptr), "message is NULL");
  expect_fails(hpuLogWrite(HPU_LOG_WARN, "", "m"), "component \"\"");
  expect_fails(hpuLogWrite(HPU_LOG_WARN, "two words", "m"), "' ' at 3");
  expect_fails(hpuLogWrite(HPU_LOG_WARN, "abcdefghijklmnopqrstuvwxyz0123456", "m"), "33 characters");
}

TEST(Logging, SetLogFileAtRunTimeAndBack) {
  std::string path = testing::TempDir() + "hpu-log-set-file.log";
  std::remove(path.c_str());
  auto r = run_child({{"HPU_LOG_LEVEL", "warn"}}, [path] {
    if (hpuSetLogFile(path.c_str()) != HPU_SUCCESS) return 1;
    if (hpuLogWrite(HPU_LOG_WARN, "test", "into the file") != HPU_SUCCESS) return 2;
    if (hpuSetLogFile(nullptr) != HPU_SUCCESS) return 3;
    if (hpuLogWrite(HPU_LOG_WARN, "test", "back on stderr") != HPU_SUCCESS) return 4;
    if (hpuSetLogFile("/nonexistent-dir/x.log") != HPU_ERROR_IO) return 5;
    std::string msg = hpuGetLastErrorMessage();
    if (msg.find("hpuSetLogFile: path=/nonexistent-dir/x.log: cannot open") != 0) return 6;
    return hpuLogWrite(HPU_LOG_WARN, "test", "still on stderr") == HPU_SUCCESS ? 0 : 7;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("into the file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("WARN test: back on stderr"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("WARN test: still on stderr"), std::string::npos) << r.output;
  const std::string text = read_file(path);
  EXPECT_NE(text.find("WARN test: into the file\n"), std::string::npos) << text;
}

TEST(Logging, FullPipeDropsLinesInsteadOfBlocking) {
  auto r = run_child({{"HPU_LOG_LEVEL", "warn"}}, [] {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    // Nobody reads: the pipe fills after 64 KiB; the writer must not block.
    std::string path = "/proc/self/fd/" + std::to_string(fds[1]);
    if (hpuSetLogFile(path.c_str()) != HPU_SUCCESS) return 2;
    const std::string text(200, 'x');
    for (int i = 0; i < 2000; ++i)  // ~500 KiB
      if (hpuLogWrite(HPU_LOG_WARN, "test", text.c_str()) != HPU_SUCCESS) return 3;
    return hpuSetLogFile(nullptr) == HPU_SUCCESS ? 0 : 4;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Logging, SetLastErrorMessageForLayersAbove) {
  ASSERT_EQ(hpuSetLastErrorMessage("myLayerCall: x is NULL"), HPU_SUCCESS);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "myLayerCall: x is NULL");
  EXPECT_EQ(hpuSetLastErrorMessage(nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuSetLastErrorMessage: message is NULL");
  std::string other;
  std::thread([&] { other = hpuGetLastErrorMessage(); }).join();
  EXPECT_EQ(other, "");  // thread-local
}
