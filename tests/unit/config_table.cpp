// The table of settings (core/config.cpp) against hpu(7): every setting has an
// ENVIRONMENT entry whose "Default:" agrees with the table, every variable
// documented there is a setting (or one of the launcher's that hpu(7) names),
// and the "Configuration file" table pairs the same keys and variables. Then
// the table's rows at work: each key of the file sets what its variable sets,
// and the environment beats the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/error.hpp"

namespace {

std::vector<std::string> man_lines() {
  std::ifstream in(HPU_MAN7);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The lines from `start` (a line equal to it) up to the next line starting with
// `stop`.
std::vector<std::string> section(const std::vector<std::string> &lines, const std::string &start,
                                 const std::string &stop) {
  std::vector<std::string> out;
  bool in = false;
  for (const std::string &l : lines) {
    if (in && l.rfind(stop, 0) == 0) break;
    if (in) out.push_back(l);
    if (l == start) in = true;
  }
  return out;
}

// The arguments of a roff request, quotes removed: `.BR a ", " b` -> {a, ", ", b}.
std::vector<std::string> arguments(const std::string &line) {
  std::vector<std::string> args;
  size_t i = line.find(' ');
  while (i != std::string::npos && i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    std::string arg;
    if (line[i] == '"') {
      size_t end = line.find('"', i + 1);
      arg = line.substr(i + 1, end - i - 1);
      i = end == std::string::npos ? end : end + 1;
    } else {
      size_t end = line.find(' ', i);
      arg = line.substr(i, end - i);
      i = end;
    }
    args.push_back(arg);
  }
  return args;
}

// Plain text of some roff lines: font requests joined as they print.
std::string plain(const std::vector<std::string> &lines) {
  std::string text;
  for (const std::string &l : lines) {
    std::string piece;
    if (l.rfind(".\\\"", 0) == 0) continue;
    if (l.size() > 1 && l[0] == '.') {
      std::string request = l.substr(1, l.find(' ') == std::string::npos ? std::string::npos : l.find(' ') - 1);
      std::vector<std::string> args = arguments(l);
      bool alternating = request.size() == 2;  // BR, RB, IR, ...: no spaces between the pieces
      for (size_t i = 0; i < args.size(); ++i) piece += (i && !alternating ? " " : "") + args[i];
    } else {
      piece = l;
    }
    text += (text.empty() ? "" : " ") + piece;
  }
  return std::regex_replace(text, std::regex(R"(\\-)"), "-");
}

struct Entry {
  std::vector<std::string> variables;
  std::string text;
};

// The .TP entries of ENVIRONMENT before its "Configuration file" subsection.
std::vector<Entry> environment_entries() {
  std::vector<std::string> env = section(man_lines(), ".SH ENVIRONMENT", ".SS ");
  std::vector<Entry> entries;
  for (size_t i = 0; i < env.size(); ++i) {
    if (env[i] != ".TP" || i + 1 >= env.size()) continue;
    Entry e;
    std::regex name(R"([A-Z][A-Z0-9_]+)");
    for (std::sregex_iterator m(env[i + 1].begin(), env[i + 1].end(), name), end; m != end; ++m)
      if (m->str() != "BR" && m->str() != "B") e.variables.push_back(m->str());
    std::vector<std::string> body;
    for (size_t j = i + 2; j < env.size() && env[j] != ".TP"; ++j) body.push_back(env[j]);
    e.text = plain(body);
    entries.push_back(e);
  }
  return entries;
}

bool removed(const hpu::Setting &s) { return std::strcmp(s.type, "removed") == 0; }

}  // namespace

TEST(ConfigTable, EverySettingIsDocumentedWithItsDefault) {
  std::vector<Entry> entries = environment_entries();
  ASSERT_GT(entries.size(), 20u);
  for (const hpu::Setting &s : hpu::settings()) {
    if (removed(s)) continue;
    const Entry *found = nullptr;
    for (const Entry &e : entries)
      for (const std::string &v : e.variables)
        if (v == s.variable) found = &e;
    ASSERT_NE(found, nullptr) << s.variable << " has no entry in hpu(7)'s ENVIRONMENT";
    size_t at = found->text.find("Default: ");
    if (!*s.fallback) {
      EXPECT_EQ(at, std::string::npos) << s.variable << ": the table has no default, hpu(7) says: "
                                       << found->text.substr(at);
      continue;
    }
    ASSERT_NE(at, std::string::npos) << s.variable << ": hpu(7) gives no default; the table says " << s.fallback;
    std::string stated = found->text.substr(at + 9);
    size_t n = std::strlen(s.fallback);
    bool agrees = stated.compare(0, n, s.fallback) == 0 && (stated.size() == n || !isalnum(stated[n]));
    EXPECT_TRUE(agrees) << s.variable << ": hpu(7) says \"Default: " << stated.substr(0, 60) << "\", the table "
                        << s.fallback;
  }
}

TEST(ConfigTable, EveryDocumentedVariableExists) {
  std::set<std::string> known;
  for (const hpu::Setting &s : hpu::settings())
    if (!removed(s)) known.insert(s.variable);
  for (const char *v : hpu::documented_foreign_variables()) known.insert(v);
  for (const Entry &e : environment_entries()) {
    ASSERT_FALSE(e.variables.empty()) << e.text;
    for (const std::string &v : e.variables) EXPECT_EQ(known.count(v), 1u) << v << " is documented but not read";
  }
}

TEST(ConfigTable, TheFileTableHasEveryKeyWithItsVariable) {
  std::vector<std::string> file = section(man_lines(), ".SS Configuration file", ".SH ");
  std::map<std::string, std::string> documented;  // key -> variable
  std::regex row(R"(^([a-z0-9_.]+)\t(HPU_[A-Z0-9_]+|PT_HPU_[A-Z0-9_]+)\t)");
  for (const std::string &l : file) {
    std::smatch m;
    if (std::regex_search(l, m, row)) documented[m[1]] = m[2];
  }
  size_t keys = 0;
  for (const hpu::Setting &s : hpu::settings()) {
    if (!s.key || removed(s)) continue;
    ++keys;
    ASSERT_EQ(documented.count(s.key), 1u) << s.key << " is not in hpu(7)'s Configuration file table";
    EXPECT_EQ(documented[s.key], s.variable) << s.key;
  }
  EXPECT_EQ(documented.size(), keys) << "hpu(7) lists keys the table does not have";
}

namespace {

struct TempJson {
  char path[32] = "/tmp/hpu-config-table-XXXXXX";
  explicit TempJson(const std::string &text) {
    int fd = mkstemp(path);
    close(fd);
    std::ofstream(path) << text;
  }
  ~TempJson() { unlink(path); }
};

// {"a": {"b": value}} for the key "a.b".
std::string nested(const std::string &key, const std::string &value) {
  size_t dot = key.find('.');
  if (dot == std::string::npos) return "{\"" + key + "\": " + value + "}";
  return "{\"" + key.substr(0, dot) + "\": " + nested(key.substr(dot + 1), value) + "}";
}

// A value each row accepts, unlike its default.
std::string sample(const hpu::Setting &s) {
  const std::string t = s.type;
  std::string range = s.range;
  if (t == "integer") {
    std::smatch lo, hi;
    if (!std::regex_search(range, hi, std::regex(R"(to (\d+))"))) return "3";
    std::regex_search(range, lo, std::regex(R"(from (-?\d+))"));
    return hi[1] == s.fallback ? lo[1] : hi[1];
  }
  if (t == "number") return "0.25";
  if (t == "size") return "1GiB";
  if (t == "duration") return "2s";
  if (t == "switch") return "0";
  if (std::string(s.variable) == "HPU_VISIBLE_DEVICES") return "1,0";
  if (std::string(s.variable) == "HPU_DEVICE_PROFILE") return "gaudi3";
  if (std::string(s.variable) == "HPU_LOG_LEVEL") return "debug";
  if (std::string(s.variable) == "HPU_IB_ADDR_FAMILY") return "AF_INET6";
  if (std::string(s.variable) == "HPU_FAULT_INJECT") return "peer_stall=1";
  return "sample-" + std::string(s.variable);
}

// A Config printed field by field, to compare two of them.
std::string describe(const hpu::Config &c) {
  std::ostringstream o;
  o << c.num_devices << ' ' << c.visible_devices.size() << ' ' << c.profile << ' ' << c.device_memory << ' '
    << c.memory_fraction << ' ' << int(c.log_level) << ' ' << c.log_file << ' ' << c.num_threads << ' '
    << c.kernel_isa << ' ' << c.trace_file << ' ' << c.smi << ' ' << c.smi_interval << ' ' << c.fault_inject << ' '
    << c.lower_precision_ops.path << ' ' << c.fp32_ops.path << ' ' << c.comm.timeout_seconds << ' '
    << c.comm.transport << ' ' << c.comm.algo << ' ' << c.comm.tcp_lanes << ' ' << c.comm.socket_ifname << ' '
    << c.comm.rank << ' ' << c.comm.world_size << ' ' << c.comm.local_rank << ' ' << c.comm.id << ' '
    << c.comm.secret << ' ' << c.comm.listen << ' ' << c.comm.ib.hca << ' ' << c.comm.ib.library << ' '
    << c.comm.ib.gid_index << ' ' << c.comm.ib.roce_version << ' ' << c.comm.ib.addr_family << ' '
    << c.comm.ib.qps_per_port << ' ' << c.comm.ib.timeout << ' ' << c.comm.ib.retry_cnt;
  return o.str();
}

}  // namespace

// Each key of the file changes the Config as its variable does, and the
// variable beats the key. Runs with none of the variables set.
TEST(ConfigTable, EachKeySetsWhatItsVariableSets) {
  for (const hpu::Setting &s : hpu::settings()) unsetenv(s.variable);
  for (const char *v : hpu::documented_foreign_variables()) unsetenv(v);
  const std::string defaults = describe(hpu::load_config());
  for (const hpu::Setting &s : hpu::settings()) {
    if (!s.key || removed(s)) continue;
    const std::string value = sample(s);
    SCOPED_TRACE(std::string(s.variable) + "=" + value);
    setenv(s.variable, value.c_str(), 1);
    const std::string from_env = describe(hpu::load_config());
    unsetenv(s.variable);
    EXPECT_NE(from_env, defaults) << "setting " << s.variable << " changes nothing";
    TempJson file(nested(s.key, "\"" + value + "\""));
    setenv("HPU_CONFIG", file.path, 1);
    EXPECT_EQ(describe(hpu::load_config()), from_env) << s.key << " in the file";
    unsetenv("HPU_CONFIG");
  }
  // The environment beats the file.
  TempJson file(R"({"comm": {"tcp_lanes": 4}, "num_threads": 3})");
  setenv("HPU_CONFIG", file.path, 1);
  setenv("HPU_TCP_LANES", "5", 1);
  hpu::Config c = hpu::load_config();
  EXPECT_EQ(c.comm.tcp_lanes, 5);
  EXPECT_EQ(c.num_threads, 3);
  unsetenv("HPU_TCP_LANES");
  unsetenv("HPU_CONFIG");
}

// A bad value names the variable (or key), the value and the table's range.
TEST(ConfigTable, BadValuesNameTheVariableAndTheRange) {
  for (const hpu::Setting &s : hpu::settings()) {
    if (std::strcmp(s.type, "integer") != 0 || !s.key || std::string(s.range).find(" to ") == std::string::npos)
      continue;
    setenv(s.variable, "99999", 1);
    try {
      hpu::load_config();
      ADD_FAILURE() << s.variable << "=99999 accepted";
    } catch (const hpu::Error &e) {
      EXPECT_EQ(e.status(), HPU_ERROR_CONFIG);
      EXPECT_NE(std::string(e.what()).find(std::string(s.variable) + "=\"99999\" is invalid: expected " + s.range),
                std::string::npos)
          << e.what();
    }
    unsetenv(s.variable);
  }
}

// Settings read at each use: config_now() sees the environment of the moment.
TEST(ConfigTable, SettingsReadAtUseFollowTheEnvironment) {
  setenv("HPU_TCP_LANES", "3", 1);
  EXPECT_EQ(hpu::config_now().comm.tcp_lanes, 3);
  setenv("HPU_TCP_LANES", "7", 1);
  EXPECT_EQ(hpu::config_now().comm.tcp_lanes, 7);
  setenv("HPU_COMM_ID", "10.0.0.1:29500", 1);
  EXPECT_STREQ(hpu::config_now().launch_value("HPU_COMM_ID"), "10.0.0.1:29500");
  EXPECT_EQ(hpu::config_now().launch_value("HPU_RANK"), nullptr);
  unsetenv("HPU_TCP_LANES");
  unsetenv("HPU_COMM_ID");
}
