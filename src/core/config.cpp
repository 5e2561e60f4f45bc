#include "core/config.hpp"

#include <jansson.h>
#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/runtime.hpp"

namespace hpu {

namespace {

struct Profile {
  const char *name;
  uint64_t gib;
};
constexpr Profile kProfiles[] = {{"gaudi", 32}, {"gaudi2", 96}, {"gaudi3", 128}};

bool int_in(const std::string &text, long lo, long hi, int *out) {
  char *end = nullptr;
  errno = 0;
  long v = strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// "1, 3,0" -> {1, 3, 0}; *bad is the item that is not a module id.
bool set_visible(Config &c, const std::string &text, std::string *bad) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int id;
    if (!int_in(item, 0, 1 << 20, &id)) {
      *bad = item;
      return false;
    }
    out.push_back(id);
    pos = comma + 1;
  }
  c.visible_devices = out;
  return true;
}

bool set_fraction(double *out, const std::string &text) {
  char *end = nullptr;
  double f = strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(f > 0.0 && f <= 1.0)) return false;
  *out = f;
  return true;
}

bool set_text(std::string *out, const std::string &text) {
  *out = text;
  return true;
}

// An autocast list remembers where its path was set, for the messages about
// reading its file.
bool set_op_list(OpListFile *out, const std::string &text, const std::string &where) {
  out->path = text;
  out->source = where;
  return true;
}

#define SET(body)                                                                        \
  [](Config & c, const std::string &v, const std::string &where, std::string *bad) -> bool { \
    (void)c, (void)v, (void)where, (void)bad;                                            \
    body                                                                                 \
  }

// Every setting. A row's variable, key and range are what errors name; its
// fallback is what hpu(7) gives as the default (tests/unit/config_table.cpp
// checks hpu(7) against this table). Launcher variables that are not ours
// (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, Open MPI's OMPI_*, Slurm's SLURM_*,
// HOME, XDG_CONFIG_HOME) are not settings: comm/launch_env.cpp reads them, the
// one place that does, and documented_foreign_variables() lists those hpu(7)
// documents.
const std::vector<Setting> kSettings = {
    {"HPU_NUM_DEVICES", "num_devices", "integer", "8", "an integer from 1 to 256",
     "number of emulated devices", ReadAt::init, SET(return int_in(v, 1, 256, &c.num_devices);), nullptr},
    {"HPU_VISIBLE_DEVICES", "visible_devices", "list", "all", "a comma-separated list of module ids",
     "the module ids the process sees, in ordinal order", ReadAt::init, SET(return set_visible(c, v, bad);),
     nullptr},
    {"HPU_DEVICE_PROFILE", "profile", "name", "gaudi2", "one of gaudi, gaudi2, gaudi3",
     "the devices' profile: capacity and name", ReadAt::init,
     SET(if (profile_capacity(v) == 0) return false; c.profile = v; return true;), nullptr},
    {"HPU_DEVICE_MEMORY", "device_memory", "size", "", "a size such as 16GiB, 512MiB or a byte count",
     "capacity of each device, overriding the profile's", ReadAt::init,
     SET(return parse_bytes(v, &c.device_memory) && c.device_memory > 0;), nullptr},
    {"HPU_MEMORY_FRACTION", "memory_fraction", "number", "1", "a number in (0, 1]",
     "the share of the capacity allocations may use", ReadAt::init,
     SET(return set_fraction(&c.memory_fraction, v);), nullptr},
    {"HPU_CONFIG", nullptr, "path", "", "a path", "the JSON configuration file", ReadAt::init,
     SET(return true;), nullptr},
    {"HPU_LOG_LEVEL", "log_level", "name", "warn", "one of off, error, warn (or warning), info, debug, trace",
     "the least severe log lines written", ReadAt::init,
     SET(return parse_log_level(v.c_str(), &c.log_level);), nullptr},
    {"HPU_LOG_FILE", "log_file", "path", "", "a path", "append log lines to this file instead of stderr",
     ReadAt::init, SET(return set_text(&c.log_file, v);), nullptr},
    {"HPU_NUM_THREADS", "num_threads", "integer", "0", "an integer from 0 to 4096",
     "size of the compute budget; 0 = one per CPU the process may run on", ReadAt::init,
     SET(return int_in(v, 0, 4096, &c.num_threads);), nullptr},
    // Read on the first kernel that computes; an unknown level is a warning
    // there (kernels/cpu.cpp), not an error.
    {"HPU_KERNEL_ISA", "kernel_isa", "name", "the best level this CPU supports", "amx, avx512, avx2 or scalar",
     "the highest instruction set the kernels use", ReadAt::use, SET(return set_text(&c.kernel_isa, v);),
     nullptr},
    {"HPU_COMM_TIMEOUT", "comm.timeout", "duration", "30 seconds",
     "a positive number of seconds such as 30, 2.5 or 500ms", "deadline of every wait of the collectives",
     ReadAt::init, SET(return parse_seconds(v, &c.comm.timeout_seconds) && c.comm.timeout_seconds > 0;), nullptr},
    // Checked when a communicator is made (comm/communicator.cpp).
    {"HPU_TRANSPORT", "comm.transport", "name", "", "local, shm, tcp or verbs",
     "forces the transport of the collectives", ReadAt::init, SET(return set_text(&c.comm.transport, v);),
     nullptr},
    {"HPU_ALGO", "comm.algo", "name", "", "ring, tree, recursive_doubling, halving_doubling or direct",
     "forces the algorithm of the collectives", ReadAt::init, SET(return set_text(&c.comm.algo, v);), nullptr},
    // hpuCommInitFromEnv's: read at each call, checked by it (comm/launch_env.cpp).
    {"HPU_RANK", "comm.rank", "integer", "", "an integer from 0", "this process's launch rank", ReadAt::use,
     SET(return set_text(&c.comm.rank, v);), nullptr},
    {"HPU_WORLD_SIZE", "comm.world_size", "integer", "", "an integer from 1", "the number of processes",
     ReadAt::use, SET(return set_text(&c.comm.world_size, v);), nullptr},
    {"HPU_LOCAL_RANK", "comm.local_rank", "integer", "", "an integer from 0", "this process's rank on its host",
     ReadAt::use, SET(return set_text(&c.comm.local_rank, v);), nullptr},
    {"HPU_COMM_ID", "comm.id", "text", "", "host:port", "where the processes of a job meet", ReadAt::use,
     SET(return set_text(&c.comm.id, v);), nullptr},
    {"HPU_COMM_SECRET", "comm.secret", "text", "the content of the user's secret file", "32 hex digits",
     "the secret the connections prove they know", ReadAt::use, SET(return set_text(&c.comm.secret, v);),
     nullptr},
    {"HPU_COMM_LISTEN", "comm.listen", "text", "the rendezvous address", "any, or a host name or address",
     "where launch rank 0 listens", ReadAt::use, SET(return set_text(&c.comm.listen, v);), nullptr},
    {"HPU_SOCKET_IFNAME", "comm.socket_ifname", "name", "the first interface that is up and not loopback",
     "a network interface name", "the interface hpuGetUniqueId listens on", ReadAt::use,
     SET(return set_text(&c.comm.socket_ifname, v);), nullptr},
    {"HPU_TCP_LANES", "comm.tcp_lanes", "integer", "2", "an integer from 1 to 16",
     "connections between each pair of ranks of the tcp transport", ReadAt::use,
     SET(return int_in(v, 1, 16, &c.comm.tcp_lanes);), nullptr},
    // Read by the autocast layer at initialisation (autocast/op_lists.cpp).
    {"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST", "autocast.lower_precision_ops_list", "path", "", "a path",
     "replaces the lower-precision autocast op list", ReadAt::init,
     SET(return set_op_list(&c.lower_precision_ops, v, where);), "LOWER_LIST"},
    {"PT_HPU_AUTOCAST_FP32_OPS_LIST", "autocast.fp32_ops_list", "path", "", "a path",
     "replaces the fp32 autocast op list", ReadAt::init, SET(return set_op_list(&c.fp32_ops, v, where);), "FP32_LIST"},
    {"HPU_PROFILE", "trace_file", "path", "", "a path",
     "the profiler records from initialisation and writes a Chrome trace there at exit", ReadAt::init,
     SET(return set_text(&c.trace_file, v);), nullptr},
    {"HPU_SMI", "smi", "switch", "1", "0 (off) or another value (on)",
     "0 stops publishing the devices' figures for hpu-smi", ReadAt::init, SET(c.smi = v != "0"; return true;),
     nullptr},
    {"HPU_SMI_INTERVAL", "smi_interval", "duration", "500ms", "a duration such as 500ms or 1s, at least 10ms",
     "how often the hpu-smi figures are refreshed", ReadAt::init,
     SET(return parse_seconds(v, &c.smi_interval) && c.smi_interval >= 0.01;), nullptr},
    // Checked by the fault layer at initialisation (core/fault.cpp).
    {"HPU_FAULT_INJECT", "fault_inject", "list", "", "a comma-separated list of name=value",
     "makes the library fail on purpose, for tests", ReadAt::init, SET(return set_text(&c.fault_inject, v);),
     nullptr},
    {"HPU_IB_HCA", "comm.ib.hca", "list", "all", "a device and port list such as mlx5_0:1,mlx5_1",
     "the RDMA devices and ports the verbs transport may use", ReadAt::init,
     SET(return set_text(&c.comm.ib.hca, v);), nullptr},
    {"HPU_IB_QPS_PER_PORT", "comm.ib.qps_per_port", "integer", "1", "an integer from 1 to 16",
     "queue pairs to each peer on each port", ReadAt::init, SET(return int_in(v, 1, 16, &c.comm.ib.qps_per_port);),
     nullptr},
    {"HPU_IB_GID_INDEX", "comm.ib.gid_index", "integer", "chosen", "an integer from -1 to 1023",
     "the GID table index of a RoCE port; -1 = chosen", ReadAt::init,
     SET(return int_in(v, -1, 1023, &c.comm.ib.gid_index);), nullptr},
    {"HPU_IB_ROCE_VERSION", "comm.ib.roce_version", "integer", "2", "an integer from 1 to 2",
     "the RoCE version of the chosen GID", ReadAt::init, SET(return int_in(v, 1, 2, &c.comm.ib.roce_version);),
     nullptr},
    {"HPU_IB_ADDR_FAMILY", "comm.ib.addr_family", "name", "AF_INET", "AF_INET or AF_INET6",
     "the address family of the chosen GID", ReadAt::init,
     SET(if (v == "AF_INET" || v == "4") c.comm.ib.addr_family = 4;
         else if (v == "AF_INET6" || v == "6") c.comm.ib.addr_family = 6;
         else return false;
         return true;),
     nullptr},
    {"HPU_IB_TIMEOUT", "comm.ib.timeout", "integer", "14", "an integer from 1 to 31",
     "the queue pairs' ACK timeout, 4.096 us * 2^N", ReadAt::init, SET(return int_in(v, 1, 31, &c.comm.ib.timeout);),
     nullptr},
    {"HPU_IB_RETRY_CNT", "comm.ib.retry_cnt", "integer", "7", "an integer from 0 to 7",
     "retries before a work request fails", ReadAt::init, SET(return int_in(v, 0, 7, &c.comm.ib.retry_cnt);),
     nullptr},
    {"HPU_IB_LIBRARY", "comm.ib.library", "path", "libibverbs.so.1",
     "a libibverbs file name or path, such as libibverbs.so.1", "the libibverbs the verbs transport loads",
     ReadAt::init, SET(if (v.empty()) return false; c.comm.ib.library = v; return true;), nullptr},
    // Gone (they selected and configured a test adapter): setting one fails, saying so.
    {"HPU_IB_ADAPTER", "comm.ib.adapter", "removed", "",
     "the setting no longer exists; the verbs transport loads the libibverbs that HPU_IB_LIBRARY names "
     "(default libibverbs.so.1)",
     "removed", ReadAt::init, SET(return false;), nullptr},
    {"HPU_IB_TEST_FAULT", "comm.ib.test_fault", "removed", "",
     "the setting no longer exists; the verbs transport loads the libibverbs that HPU_IB_LIBRARY names "
     "(default libibverbs.so.1)",
     "removed", ReadAt::init, SET(return false;), nullptr},
};

#undef SET

// where: the variable, or "<file>: <key>".
void apply(Config &c, const Setting &s, const std::string &where, const std::string &value) {
  std::string bad = value;
  if (s.set(c, value, where, &bad)) {
    c.given[s.variable] = {value, where};
    return;
  }
  if (strcmp(s.type, "removed") == 0)
    fail(HPU_ERROR_CONFIG, "%s=\"%s\" is invalid: %s", where.c_str(), bad.c_str(), s.range);
  fail(HPU_ERROR_CONFIG, "%s=\"%s\" is invalid: expected %s", where.c_str(), bad.c_str(), s.range);
}

std::string json_text(const std::string &where, json_t *v) {
  if (json_is_string(v)) return json_string_value(v);
  if (json_is_integer(v)) return strf("%lld", static_cast<long long>(json_integer_value(v)));
  if (json_is_real(v)) return strf("%.17g", json_real_value(v));
  if (json_is_array(v)) {  // a list: its items joined by commas
    std::string joined;
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) {
      if (json_is_array(item)) fail(HPU_ERROR_CONFIG, "%s: an item must be a string or a number", where.c_str());
      joined += (i ? "," : "") + json_text(where, item);
    }
    return joined;
  }
  fail(HPU_ERROR_CONFIG, "%s must be a string or a number", where.c_str());
}

// The object at `prefix` ("" for the top level, else "comm." or "comm.ib."):
// each key is a setting's key, or an object whose keys continue it.
void apply_object(Config &c, const std::string &path, const std::string &prefix, json_t *obj) {
  const char *name;
  json_t *v;
  json_object_foreach(obj, name, v) {
    std::string key = prefix + name;
    std::string where = path + ": " + key;
    const Setting *row = nullptr;
    bool is_prefix = false;
    for (const Setting &s : kSettings) {
      if (!s.key) continue;
      if (key == s.key) row = &s;
      is_prefix = is_prefix || strncmp(s.key, (key + ".").c_str(), key.size() + 1) == 0;
    }
    if (row) {
      apply(c, *row, where, json_text(where, v));
    } else if (is_prefix) {
      if (!json_is_object(v)) fail(HPU_ERROR_CONFIG, "%s: key \"%s\" must be an object", path.c_str(), key.c_str());
      apply_object(c, path, key + ".", v);
    } else {
      std::string known;
      for (const Setting &s : kSettings) {
        if (!s.key || strncmp(s.key, prefix.c_str(), prefix.size()) != 0 || strcmp(s.type, "removed") == 0)
          continue;
        std::string rest = s.key + prefix.size();
        rest = rest.substr(0, rest.find('.'));
        if (known.find(" " + rest + ",") == std::string::npos) known += " " + rest + ",";
      }
      known.pop_back();
      fail(HPU_ERROR_CONFIG, "%s: unknown key \"%s\" (known:%s)", path.c_str(), key.c_str(), known.c_str());
    }
  }
}

void apply_file(Config &c, const std::string &path) {
  json_error_t err;
  json_t *root = json_load_file(path.c_str(), JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    if (err.line <= 0 && err.position == 0)
      fail(HPU_ERROR_CONFIG, "HPU_CONFIG=%s: cannot read: %s", path.c_str(), err.text);
    fail(HPU_ERROR_CONFIG, "HPU_CONFIG=%s: line %d, column %d: %s", path.c_str(), err.line,
         err.column, err.text);
  }
  struct Guard {
    json_t *j;
    ~Guard() { json_decref(j); }
  } guard{root};
  if (!json_is_object(root)) fail(HPU_ERROR_CONFIG, "HPU_CONFIG=%s: the top level must be an object", path.c_str());
  apply_object(c, "HPU_CONFIG=" + path, "", root);
}

const char *env(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : nullptr;
}

// The rows read at `when` (all of them for ReadAt::init) from the environment.
void apply_environment(Config &c, bool use_only) {
  for (const Setting &s : kSettings) {
    if (!s.key || (use_only && s.read_at != ReadAt::use)) continue;
    const char *v = env(s.variable);
    const char *old = s.older ? env(s.older) : nullptr;
    if (v && old)
      HPU_LOG(warn, "config", "both %s=\"%s\" and the older %s=\"%s\" are set; using %s", s.variable, v, s.older,
              old, s.variable);
    if (v) apply(c, s, s.variable, v);
    else if (old) apply(c, s, s.older, old);
  }
}

const std::vector<const char *> kForeign = {"XDG_CONFIG_HOME", "HOME", "LOWER_LIST", "FP32_LIST"};

}  // namespace

const std::vector<Setting> &settings() { return kSettings; }

const Setting *find_setting(const std::string &name) {
  for (const Setting &s : kSettings)
    if (name == s.variable || (s.older && name == s.older) || (s.key && name == s.key)) return &s;
  return nullptr;
}

const std::vector<const char *> &documented_foreign_variables() { return kForeign; }

const char *setting_from_environment(const char *variable) { return env(variable); }

const char *Config::launch_value(const char *variable) const {
  const std::pair<const char *, const std::string *> launch[] = {
      {"HPU_RANK", &comm.rank},  {"HPU_WORLD_SIZE", &comm.world_size}, {"HPU_LOCAL_RANK", &comm.local_rank},
      {"HPU_COMM_ID", &comm.id}, {"HPU_COMM_SECRET", &comm.secret},   {"HPU_COMM_LISTEN", &comm.listen}};
  for (auto &l : launch)
    if (strcmp(variable, l.first) == 0) return l.second->empty() ? nullptr : l.second->c_str();
  return nullptr;
}

uint64_t profile_capacity(const std::string &profile) {
  for (const Profile &p : kProfiles)
    if (profile == p.name) return p.gib << 30;
  return 0;
}

uint64_t Config::capacity() const { return device_memory ? device_memory : profile_capacity(profile); }

bool parse_bytes(const std::string &text, uint64_t *bytes) {
  const char *s = text.c_str();
  char *end = nullptr;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0 || !(v >= 0) || !std::isfinite(v)) return false;
  while (*end == ' ') ++end;
  struct Unit {
    const char *name;
    double scale;
  };
  static const Unit units[] = {{"", 1},       {"B", 1},          {"K", 1024.0},     {"KiB", 1024.0},
                               {"M", 1 << 20}, {"MiB", 1 << 20},  {"G", 1 << 30},    {"GiB", 1 << 30},
                               {"T", 1099511627776.0},            {"TiB", 1099511627776.0},
                               {"KB", 1e3},    {"MB", 1e6},       {"GB", 1e9},       {"TB", 1e12}};
  for (const Unit &u : units) {
    if (strcasecmp(end, u.name) == 0 && (strlen(u.name) != 2 || end[1] == 'B' || end[1] == 'b')) {
      double b = v * u.scale;
      if (b > 9.0e18) return false;
      *bytes = static_cast<uint64_t>(b);
      return true;
    }
  }
  return false;
}

bool parse_seconds(const std::string &text, double *seconds) {
  const char *s = text.c_str();
  char *end = nullptr;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0) || !std::isfinite(v)) return false;
  if (*end == '\0' || strcmp(end, "s") == 0) {
    *seconds = v;
    return true;
  }
  if (strcmp(end, "ms") == 0) {
    *seconds = v / 1000.0;
    return true;
  }
  return false;
}

Config load_config() {
  Config c;
  if (const char *path = env("HPU_CONFIG")) {
    apply_file(c, path);
    c.given["HPU_CONFIG"] = {path, "HPU_CONFIG"};
  }
  // Where the visible list came from, for the messages below.
  std::string visible = "HPU_VISIBLE_DEVICES";
  if (!c.visible_devices.empty()) visible = std::string(env("HPU_CONFIG")) + ": visible_devices";
  if (env("HPU_VISIBLE_DEVICES")) visible = "HPU_VISIBLE_DEVICES";
  apply_environment(c, false);

  for (size_t i = 0; i < c.visible_devices.size(); ++i) {
    int d = c.visible_devices[i];
    if (d >= c.num_devices)
      fail(HPU_ERROR_CONFIG, "%s lists device %d but only %d devices exist (HPU_NUM_DEVICES=%d)", visible.c_str(),
           d, c.num_devices, c.num_devices);
    for (size_t j = 0; j < i; ++j)
      if (c.visible_devices[j] == d) fail(HPU_ERROR_CONFIG, "%s lists device %d twice", visible.c_str(), d);
  }
  return c;
}

Config config_now() {
  Config c = config();
  apply_environment(c, true);
  return c;
}

}  // namespace hpu
