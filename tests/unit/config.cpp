// Configuration: defaults, the HPU_CONFIG JSON file, the environment, their
// precedence, HPU_VISIBLE_DEVICES, and every bad value. Each case runs in a
// forked child whose library initialises with the environment given.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "child.hpp"

using hpu_test::Env;
using hpu_test::run_child;

namespace {

const char *const kVariables[] = {"HPU_CONFIG",          "HPU_NUM_DEVICES", "HPU_VISIBLE_DEVICES",
                                  "HPU_DEVICE_PROFILE",  "HPU_DEVICE_MEMORY", "HPU_MEMORY_FRACTION",
                                  "HPU_LOG_LEVEL",       "HPU_LOG_FILE",    "HPU_NUM_THREADS",
                                  "HPU_COMM_TIMEOUT",    "HPU_TRANSPORT",   "HPU_ALGO"};

// Every variable cleared (empty counts as unset), then the given ones.
Env with(const Env &given) {
  Env env;
  for (const char *v : kVariables) env.emplace_back(v, "");
  env.insert(env.end(), given.begin(), given.end());
  return env;
}

// Writes what the library made of its configuration to stderr:
// "count=2 profile=gaudi total=1073741824 limit=268435456 modules=3,1", or the
// status and message of the first failing call.
int describe() {
  int n = 0;
  hpuStatus_t s = hpuDeviceCount(&n);
  if (s != HPU_SUCCESS) {
    std::fprintf(stderr, "%s: %s", hpuGetErrorName(s), hpuGetLastErrorMessage());
    return 1;
  }
  std::string modules;
  hpuDeviceProperties_t first = HPU_DEVICE_PROPERTIES_INIT;
  for (int i = 0; i < n; ++i) {
    hpuDevice_t dev;
    hpuDeviceProperties_t p = HPU_DEVICE_PROPERTIES_INIT;
    if (hpuDeviceOpen(&dev, i) != HPU_SUCCESS || hpuDeviceGetProperties(dev, &p) != HPU_SUCCESS ||
        hpuDeviceClose(dev) != HPU_SUCCESS) {
      std::fprintf(stderr, "device %d: %s", i, hpuGetLastErrorMessage());
      return 2;
    }
    if (p.ordinal != i) return 3;
    if (i == 0) first = p;
    modules += (i ? "," : "") + std::to_string(p.module_id);
  }
  std::fprintf(stderr, "count=%d profile=%s total=%llu limit=%llu modules=%s", n, first.profile,
               static_cast<unsigned long long>(first.total_memory),
               static_cast<unsigned long long>(first.memory_limit), modules.c_str());
  return 0;
}

std::string describe_with(const Env &given) {
  auto r = run_child(with(given), describe);
  return r.output;
}

class ConfigFile {
 public:
  explicit ConfigFile(const std::string &text) {
    static int counter = 0;
    path_ = testing::TempDir() + "hpu-config-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".json";
    std::ofstream(path_) << text;
  }
  ~ConfigFile() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

constexpr unsigned long long GiB = 1ull << 30;

std::string expect_line(int count, const char *profile, unsigned long long total, unsigned long long limit,
                        const char *modules) {
  return "count=" + std::to_string(count) + " profile=" + profile + " total=" + std::to_string(total) +
         " limit=" + std::to_string(limit) + " modules=" + modules;
}

}  // namespace

TEST(Config, Defaults) {
  EXPECT_EQ(describe_with({}), expect_line(8, "gaudi2", 96 * GiB, 96 * GiB, "0,1,2,3,4,5,6,7"));
}

TEST(Config, Profiles) {
  EXPECT_EQ(describe_with({{"HPU_DEVICE_PROFILE", "gaudi"}, {"HPU_NUM_DEVICES", "1"}}),
            expect_line(1, "gaudi", 32 * GiB, 32 * GiB, "0"));
  EXPECT_EQ(describe_with({{"HPU_DEVICE_PROFILE", "gaudi3"}, {"HPU_NUM_DEVICES", "2"}}),
            expect_line(2, "gaudi3", 128 * GiB, 128 * GiB, "0,1"));
}

TEST(Config, EnvironmentSetsMemoryAndFraction) {
  EXPECT_EQ(describe_with({{"HPU_NUM_DEVICES", "3"}, {"HPU_DEVICE_PROFILE", "gaudi3"}, {"HPU_MEMORY_FRACTION", "0.5"}}),
            expect_line(3, "gaudi3", 128 * GiB, 64 * GiB, "0,1,2"));
  EXPECT_EQ(describe_with({{"HPU_NUM_DEVICES", "1"}, {"HPU_DEVICE_MEMORY", "16GiB"}}),
            expect_line(1, "gaudi2", 16 * GiB, 16 * GiB, "0"));
  EXPECT_EQ(describe_with({{"HPU_NUM_DEVICES", "1"}, {"HPU_DEVICE_MEMORY", "512 MiB"}}),
            expect_line(1, "gaudi2", 512ull << 20, 512ull << 20, "0"));
  // The limit is capacity x fraction, rounded down to the 512-byte granularity.
  EXPECT_EQ(describe_with({{"HPU_NUM_DEVICES", "1"}, {"HPU_DEVICE_MEMORY", "1000000"}, {"HPU_MEMORY_FRACTION", "0.5"}}),
            expect_line(1, "gaudi2", 1000000, 499712, "0"));
}

TEST(Config, VisibleDevicesMapOrdinalsToModules) {
  EXPECT_EQ(describe_with({{"HPU_VISIBLE_DEVICES", "3,1"}}), expect_line(2, "gaudi2", 96 * GiB, 96 * GiB, "3,1"));
  EXPECT_EQ(describe_with({{"HPU_VISIBLE_DEVICES", " 7 , 0 , 4 "}}),
            expect_line(3, "gaudi2", 96 * GiB, 96 * GiB, "7,0,4"));
  EXPECT_EQ(describe_with({{"HPU_NUM_DEVICES", "16"}, {"HPU_VISIBLE_DEVICES", "15"}}),
            expect_line(1, "gaudi2", 96 * GiB, 96 * GiB, "15"));
}

TEST(Config, FileSetsEveryKey) {
  ConfigFile f(R"({"num_devices": 4, "profile": "gaudi", "device_memory": "1GiB", "memory_fraction": 0.25,
                   "visible_devices": [3, 1], "log_level": "warn", "num_threads": 2,
                   "comm": {"timeout": "500ms", "transport": "tcp", "algo": "ring"}})");
  EXPECT_EQ(describe_with({{"HPU_CONFIG", f.path()}}), expect_line(2, "gaudi", GiB, GiB / 4, "3,1"));
  ConfigFile g(R"({"num_devices": "2", "visible_devices": "1", "device_memory": 1073741824})");
  EXPECT_EQ(describe_with({{"HPU_CONFIG", g.path()}}), expect_line(1, "gaudi2", GiB, GiB, "1"));
}

TEST(Config, EnvironmentBeatsFileBeatsDefaults) {
  ConfigFile f(R"({"num_devices": 4, "profile": "gaudi", "device_memory": "1GiB", "visible_devices": [3, 1]})");
  // Profile from the environment, memory and visibility from the file.
  EXPECT_EQ(describe_with({{"HPU_CONFIG", f.path()}, {"HPU_DEVICE_PROFILE", "gaudi3"}}),
            expect_line(2, "gaudi3", GiB, GiB, "3,1"));
  // The environment's count and visibility replace the file's.
  EXPECT_EQ(describe_with({{"HPU_CONFIG", f.path()}, {"HPU_NUM_DEVICES", "6"}, {"HPU_VISIBLE_DEVICES", "5"}}),
            expect_line(1, "gaudi", GiB, GiB, "5"));
  EXPECT_EQ(describe_with({{"HPU_CONFIG", f.path()}, {"HPU_DEVICE_MEMORY", "2GiB"}, {"HPU_MEMORY_FRACTION", "0.5"}}),
            expect_line(2, "gaudi", 2 * GiB, GiB, "3,1"));
}

TEST(Config, LogLevelFromFileAndEnvironment) {
  ConfigFile f(R"({"log_level": "info"})");
  auto from_file = run_child(with({{"HPU_CONFIG", f.path()}}), describe);
  EXPECT_NE(from_file.output.find("INFO core: initialised"), std::string::npos) << from_file.output;
  auto env_wins = run_child(with({{"HPU_CONFIG", f.path()}, {"HPU_LOG_LEVEL", "error"}}), describe);
  EXPECT_EQ(env_wins.output.find("INFO"), std::string::npos) << env_wins.output;
  EXPECT_EQ(env_wins.exit_code, 0);
}

namespace {

struct Bad {
  Env env;
  const char *piece1;
  const char *piece2;
};

void expect_config_error(const Bad &b, const std::string &file_text = "") {
  std::string output = describe_with(b.env);
  std::string context = "env:";
  for (auto &kv : b.env) context += " " + kv.first + "=" + kv.second;
  EXPECT_EQ(output.rfind("HPU_ERROR_CONFIG: hpuDeviceCount: ", 0), 0u) << context << "\n" << file_text << "\n" << output;
  EXPECT_NE(output.find(b.piece1), std::string::npos) << context << "\n" << output;
  if (b.piece2) {
    EXPECT_NE(output.find(b.piece2), std::string::npos) << context << "\n" << output;
  }
}

}  // namespace

TEST(Config, BadEnvironmentValuesNameTheVariableAndValue) {
  const Bad cases[] = {
      {{{"HPU_NUM_DEVICES", "0"}}, "HPU_NUM_DEVICES=\"0\"", "1 to 256"},
      {{{"HPU_NUM_DEVICES", "257"}}, "HPU_NUM_DEVICES=\"257\"", nullptr},
      {{{"HPU_NUM_DEVICES", "abc"}}, "HPU_NUM_DEVICES=\"abc\"", nullptr},
      {{{"HPU_NUM_DEVICES", "4x"}}, "HPU_NUM_DEVICES=\"4x\"", nullptr},
      {{{"HPU_VISIBLE_DEVICES", "8"}}, "lists device 8", "only 8 devices"},
      {{{"HPU_NUM_DEVICES", "2"}, {"HPU_VISIBLE_DEVICES", "0,2"}}, "lists device 2", "only 2 devices"},
      {{{"HPU_VISIBLE_DEVICES", "1,1"}}, "lists device 1 twice", nullptr},
      {{{"HPU_VISIBLE_DEVICES", "a"}}, "HPU_VISIBLE_DEVICES=\"a\"", nullptr},
      {{{"HPU_VISIBLE_DEVICES", "1,,2"}}, "HPU_VISIBLE_DEVICES=\"\"", nullptr},
      {{{"HPU_VISIBLE_DEVICES", "-1"}}, "HPU_VISIBLE_DEVICES=\"-1\"", nullptr},
      {{{"HPU_DEVICE_PROFILE", "gaudi4"}}, "HPU_DEVICE_PROFILE=\"gaudi4\"", "gaudi, gaudi2, gaudi3"},
      {{{"HPU_DEVICE_MEMORY", "abc"}}, "HPU_DEVICE_MEMORY=\"abc\"", nullptr},
      {{{"HPU_DEVICE_MEMORY", "0"}}, "HPU_DEVICE_MEMORY=\"0\"", nullptr},
      {{{"HPU_DEVICE_MEMORY", "-1GiB"}}, "HPU_DEVICE_MEMORY=\"-1GiB\"", nullptr},
      {{{"HPU_DEVICE_MEMORY", "16XB"}}, "HPU_DEVICE_MEMORY=\"16XB\"", nullptr},
      {{{"HPU_DEVICE_MEMORY", "1e30"}}, "HPU_DEVICE_MEMORY=\"1e30\"", nullptr},
      {{{"HPU_MEMORY_FRACTION", "0"}}, "HPU_MEMORY_FRACTION=\"0\"", "(0, 1]"},
      {{{"HPU_MEMORY_FRACTION", "1.5"}}, "HPU_MEMORY_FRACTION=\"1.5\"", nullptr},
      {{{"HPU_MEMORY_FRACTION", "-0.5"}}, "HPU_MEMORY_FRACTION=\"-0.5\"", nullptr},
      {{{"HPU_MEMORY_FRACTION", "half"}}, "HPU_MEMORY_FRACTION=\"half\"", nullptr},
      {{{"HPU_MEMORY_FRACTION", "nan"}}, "HPU_MEMORY_FRACTION=\"nan\"", nullptr},
      {{{"HPU_LOG_LEVEL", "loud"}}, "HPU_LOG_LEVEL=\"loud\"", nullptr},
      {{{"HPU_NUM_THREADS", "-1"}}, "HPU_NUM_THREADS=\"-1\"", nullptr},
      {{{"HPU_NUM_THREADS", "many"}}, "HPU_NUM_THREADS=\"many\"", nullptr},
      {{{"HPU_COMM_TIMEOUT", "-1"}}, "HPU_COMM_TIMEOUT=\"-1\"", nullptr},
      {{{"HPU_COMM_TIMEOUT", "0"}}, "HPU_COMM_TIMEOUT=\"0\"", nullptr},
      {{{"HPU_COMM_TIMEOUT", "5min"}}, "HPU_COMM_TIMEOUT=\"5min\"", nullptr},
  };
  for (const Bad &b : cases) expect_config_error(b);
}

TEST(Config, BadFileValuesNameTheKeyAndValue) {
  struct FileCase {
    const char *text;
    const char *piece;
  };
  const FileCase cases[] = {
      {R"({"num_devices": 0})", "num_devices=\"0\""},
      {R"({"num_devices": 1.5})", "num_devices=\"1.5\""},
      {R"({"profile": "gaudi9"})", "profile=\"gaudi9\""},
      {R"({"profile": true})", "profile must be a string or a number"},
      {R"({"device_memory": "lots"})", "device_memory=\"lots\""},
      {R"({"memory_fraction": 2})", "memory_fraction=\"2\""},
      {R"({"log_level": "chatty"})", "log_level=\"chatty\""},
      {R"({"visible_devices": [0, "x"]})", "visible_devices=\"x\""},
      {R"({"visible_devices": [9]})", "visible_devices lists device 9"},
      {R"({"comm": {"timeout": "soon"}})", "comm.timeout=\"soon\""},
      {R"({"comm": 3})", "\"comm\" must be an object"},
      {R"([1, 2])", "the top level must be an object"},
  };
  for (const FileCase &c : cases) {
    ConfigFile f(c.text);
    expect_config_error({{{"HPU_CONFIG", f.path()}}, c.piece, f.path().c_str()}, c.text);
  }
}

TEST(Config, UnknownKeysAreErrorsNamingTheKey) {
  ConfigFile f(R"({"num_devices": 2, "num_device": 4})");
  expect_config_error({{{"HPU_CONFIG", f.path()}}, "unknown key \"num_device\"", f.path().c_str()});
  ConfigFile g(R"({"comm": {"timeout": 5, "retries": 3}})");
  expect_config_error({{{"HPU_CONFIG", g.path()}}, "unknown key \"comm.retries\"", nullptr});
}

TEST(Config, MalformedFileNamesLineAndColumn) {
  ConfigFile f("{\n  \"num_devices\": 4,\n  \"profile\" \"gaudi\"\n}\n");
  expect_config_error({{{"HPU_CONFIG", f.path()}}, "line 3, column ", f.path().c_str()});
  ConfigFile g("{\"num_devices\": 4, \"num_devices\": 5}");
  expect_config_error({{{"HPU_CONFIG", g.path()}}, "line 1, column ", "duplicate"});
  ConfigFile empty("");
  expect_config_error({{{"HPU_CONFIG", empty.path()}}, empty.path().c_str(), nullptr});
}

TEST(Config, MissingFileIsAConfigError) {
  expect_config_error({{{"HPU_CONFIG", "/nonexistent/hpu.json"}}, "HPU_CONFIG=/nonexistent/hpu.json", "cannot read"});
}

TEST(Config, FailedInitialisationIsRetriedOnTheNextCall) {
  auto r = run_child(with({{"HPU_NUM_DEVICES", "zero"}}), [] {
    int n = 0;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 1;
    if (hpuDeviceCount(&n) != HPU_ERROR_CONFIG) return 2;  // still bad: fails again
    setenv("HPU_NUM_DEVICES", "3", 1);
    if (hpuDeviceCount(&n) != HPU_SUCCESS) return 3;
    return n == 3 ? 0 : 4;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

namespace {

// hpuConfigGet(name) in the child, written as "value|source" or "STATUS: message".
int report(const char *name) {
  char *value = nullptr, *source = nullptr;
  hpuStatus_t s = hpuConfigGet(name, &value, &source);
  if (s != HPU_SUCCESS) {
    std::fprintf(stderr, "%s: %s", hpuGetErrorName(s), hpuGetLastErrorMessage());
    return 1;
  }
  std::fprintf(stderr, "%s|%s", value, source);
  hpuFree(value);
  hpuFree(source);
  return 0;
}

std::string config_get(const Env &given, const char *name) {
  return run_child(with(given), [name] { return report(name); }).output;
}

}  // namespace

TEST(ConfigGet, ReportsTheValueInUseAndWhereItCameFrom) {
  ConfigFile f(R"({"num_devices": 4, "profile": "gaudi", "comm": {"ib": {"hca": "mlx5_0:1"}}})");
  EXPECT_EQ(config_get({}, "HPU_NUM_DEVICES"), "8|default");
  EXPECT_EQ(config_get({{"HPU_NUM_DEVICES", "3"}}, "HPU_NUM_DEVICES"), "3|HPU_NUM_DEVICES");
  EXPECT_EQ(config_get({{"HPU_CONFIG", f.path()}}, "num_devices"), "4|HPU_CONFIG=" + f.path() + ": num_devices");
  EXPECT_EQ(config_get({{"HPU_CONFIG", f.path()}, {"HPU_NUM_DEVICES", "2"}}, "num_devices"), "2|HPU_NUM_DEVICES");
  EXPECT_EQ(config_get({{"HPU_CONFIG", f.path()}}, "comm.ib.hca"), "mlx5_0:1|HPU_CONFIG=" + f.path() + ": comm.ib.hca");
  EXPECT_EQ(config_get({{"HPU_CONFIG", f.path()}}, "HPU_CONFIG"), f.path() + "|HPU_CONFIG");
  EXPECT_EQ(config_get({}, "HPU_FAULT_INJECT"), "|default");
  // An older name reaches the same setting.
  ConfigFile ops("linear\n");
  EXPECT_EQ(config_get({{"LOWER_LIST", ops.path()}}, "LOWER_LIST"), ops.path() + "|LOWER_LIST");
}

TEST(ConfigGet, SettingsReadAtInitialisationKeepThatValueAndOthersFollowTheEnvironment) {
  auto r = run_child(with({{"HPU_NUM_DEVICES", "3"}, {"HPU_TCP_LANES", "3"}}), [] {
    int n = 0;
    if (hpuDeviceCount(&n) != HPU_SUCCESS) return 1;
    setenv("HPU_NUM_DEVICES", "5", 1);
    setenv("HPU_TCP_LANES", "4", 1);
    if (report("HPU_NUM_DEVICES") != 0) return 2;
    std::fputc(' ', stderr);
    return report("HPU_TCP_LANES");
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "3|HPU_NUM_DEVICES 4|HPU_TCP_LANES");
}

TEST(ConfigGet, BadNamesAndArgumentsAreErrors) {
  EXPECT_EQ(config_get({}, "HPU_NO_SUCH_THING"),
            "HPU_ERROR_NOT_FOUND: hpuConfigGet: name \"HPU_NO_SUCH_THING\" is not a libhpu setting (hpu(7), "
            "ENVIRONMENT, lists them)");
  EXPECT_NE(config_get({}, "HPU_IB_TEST_FAULT").find("HPU_ERROR_INVALID_ARGUMENT: hpuConfigGet: name "
                                                    "\"HPU_IB_TEST_FAULT\": the setting no longer exists"),
            std::string::npos);
  EXPECT_NE(config_get({{"HPU_NUM_DEVICES", "0"}}, "HPU_NUM_DEVICES").find("HPU_ERROR_CONFIG"), std::string::npos);
  auto r = run_child(with({}), [] {
    char *v = nullptr;
    char sentinel = 0;
    char *s = &sentinel;
    if (hpuConfigGet(nullptr, &v, &s) != HPU_ERROR_INVALID_ARGUMENT || v || s != &sentinel) return 1;
    std::fprintf(stderr, "%s;", hpuGetLastErrorMessage());
    if (hpuConfigGet("HPU_NUM_DEVICES", nullptr, &s) != HPU_ERROR_INVALID_ARGUMENT || s != &sentinel) return 2;
    std::fprintf(stderr, "%s;", hpuGetLastErrorMessage());
    // source may be NULL.
    if (hpuConfigGet("HPU_NUM_DEVICES", &v, nullptr) != HPU_SUCCESS || std::string(v) != "8") return 3;
    hpuFree(v);
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "hpuConfigGet: name is NULL;hpuConfigGet: value is NULL;");
}
