#include "core/config.hpp"

#include <jansson.h>
#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace hpu {

namespace {

struct Profile {
  const char *name;
  uint64_t gib;
};
constexpr Profile kProfiles[] = {{"gaudi", 32}, {"gaudi2", 96}, {"gaudi3", 128}};

[[noreturn]] void bad(const std::string &where, const std::string &value, const char *expect) {
  fail(HPU_ERROR_CONFIG, "%s=\"%s\" is invalid: expected %s", where.c_str(), value.c_str(), expect);
}

int parse_int(const std::string &where, const std::string &text, int lo, int hi) {
  char *end = nullptr;
  errno = 0;
  long v = strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    bad(where, text, strf("an integer from %d to %d", lo, hi).c_str());
  return static_cast<int>(v);
}

std::vector<int> parse_int_list(const std::string &where, const std::string &text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    out.push_back(parse_int(where, item, 0, 1 << 20));
    pos = comma + 1;
  }
  return out;
}

void set_profile(Config &c, const std::string &where, const std::string &value) {
  if (profile_capacity(value) == 0) bad(where, value, "one of gaudi, gaudi2, gaudi3");
  c.profile = value;
}

void set_memory(Config &c, const std::string &where, const std::string &value) {
  if (!parse_bytes(value, &c.device_memory) || c.device_memory == 0)
    bad(where, value, "a size such as 16GiB, 512MiB or a byte count");
}

void set_fraction(Config &c, const std::string &where, const std::string &value) {
  char *end = nullptr;
  double f = strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(f > 0.0 && f <= 1.0))
    bad(where, value, "a number in (0, 1]");
  c.memory_fraction = f;
}

void set_log_level_text(Config &c, const std::string &where, const std::string &value) {
  if (!parse_log_level(value.c_str(), &c.log_level))
    bad(where, value, "one of error, warn, info, debug, trace");
}

void set_timeout(Config &c, const std::string &where, const std::string &value) {
  if (!parse_seconds(value, &c.comm.timeout_seconds) || c.comm.timeout_seconds <= 0)
    bad(where, value, "a positive number of seconds such as 30, 2.5 or 500ms");
}

// One HPU_IB_* setting, by its key in "comm.ib" (where names the variable or key for errors).
void set_ib(IbConfig &ib, const char *key, const std::string &where, const std::string &value) {
  if (strcmp(key, "hca") == 0) {
    ib.hca = value;
  } else if (strcmp(key, "library") == 0) {
    if (value.empty()) bad(where, value, "a libibverbs file name or path, such as libibverbs.so.1");
    ib.library = value;
  } else if (strcmp(key, "gid_index") == 0) {
    ib.gid_index = parse_int(where, value, -1, 1023);
  } else if (strcmp(key, "roce_version") == 0) {
    ib.roce_version = parse_int(where, value, 1, 2);
  } else if (strcmp(key, "addr_family") == 0) {
    if (value == "AF_INET" || value == "4") ib.addr_family = 4;
    else if (value == "AF_INET6" || value == "6") ib.addr_family = 6;
    else bad(where, value, "AF_INET or AF_INET6");
  } else if (strcmp(key, "qps_per_port") == 0) {
    ib.qps_per_port = parse_int(where, value, 1, 16);
  } else if (strcmp(key, "timeout") == 0) {
    ib.timeout = parse_int(where, value, 1, 31);
  } else if (strcmp(key, "retry_cnt") == 0) {
    ib.retry_cnt = parse_int(where, value, 0, 7);
  } else if (strcmp(key, "adapter") == 0 || strcmp(key, "test_fault") == 0) {
    fail(HPU_ERROR_CONFIG, "%s=\"%s\" is invalid: the setting no longer exists; the verbs transport loads the "
         "libibverbs that HPU_IB_LIBRARY names (default libibverbs.so.1)", where.c_str(), value.c_str());
  }
}

// The comm.ib keys and their variables.
constexpr const char *kIbKeys[][2] = {
    {"hca", "HPU_IB_HCA"},
    {"library", "HPU_IB_LIBRARY"},
    {"gid_index", "HPU_IB_GID_INDEX"},
    {"roce_version", "HPU_IB_ROCE_VERSION"},
    {"addr_family", "HPU_IB_ADDR_FAMILY"},
    {"qps_per_port", "HPU_IB_QPS_PER_PORT"},
    {"timeout", "HPU_IB_TIMEOUT"},
    {"retry_cnt", "HPU_IB_RETRY_CNT"},
    // Gone (they selected and configured a test adapter): setting one fails, saying so.
    {"adapter", "HPU_IB_ADAPTER"},
    {"test_fault", "HPU_IB_TEST_FAULT"},
};

std::string json_text(const std::string &where, json_t *v) {
  if (json_is_string(v)) return json_string_value(v);
  if (json_is_integer(v)) return strf("%lld", static_cast<long long>(json_integer_value(v)));
  if (json_is_real(v)) return strf("%.17g", json_real_value(v));
  fail(HPU_ERROR_CONFIG, "%s must be a string or a number", where.c_str());
}

void apply_ib_object(IbConfig &ib, const std::string &path, json_t *obj) {
  if (!json_is_object(obj)) fail(HPU_ERROR_CONFIG, "%s: key \"comm.ib\" must be an object", path.c_str());
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    bool known = false;
    for (auto &k : kIbKeys) known = known || strcmp(key, k[0]) == 0;
    if (!known)
      fail(HPU_ERROR_CONFIG,
           "%s: unknown key \"comm.ib.%s\" (known: hca, library, gid_index, roce_version, addr_family, qps_per_port, "
           "timeout, retry_cnt)",
           path.c_str(), key);
    std::string where = path + ": comm.ib." + key;
    set_ib(ib, key, where, json_text(where, v));
  }
}

void apply_comm_object(Config &c, const std::string &path, json_t *obj) {
  if (!json_is_object(obj)) fail(HPU_ERROR_CONFIG, "%s: key \"comm\" must be an object", path.c_str());
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    std::string where = path + ": comm." + key;
    if (strcmp(key, "timeout") == 0) {
      set_timeout(c, where, json_text(where, v));
    } else if (strcmp(key, "transport") == 0) {
      c.comm.transport = json_text(where, v);
    } else if (strcmp(key, "algo") == 0) {
      c.comm.algo = json_text(where, v);
    } else if (strcmp(key, "ib") == 0) {
      apply_ib_object(c.comm.ib, path, v);
    } else {
      fail(HPU_ERROR_CONFIG, "%s: unknown key \"comm.%s\" (known: timeout, transport, algo, ib)",
           path.c_str(), key);
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
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    std::string where = path + ": " + key;
    if (strcmp(key, "num_devices") == 0) {
      c.num_devices = parse_int(where, json_text(where, v), 1, 256);
    } else if (strcmp(key, "visible_devices") == 0) {
      if (json_is_array(v)) {
        std::string joined;
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) joined += (i ? "," : "") + json_text(where, item);
        c.visible_devices = parse_int_list(where, joined);
      } else {
        c.visible_devices = parse_int_list(where, json_text(where, v));
      }
    } else if (strcmp(key, "profile") == 0) {
      set_profile(c, where, json_text(where, v));
    } else if (strcmp(key, "device_memory") == 0) {
      set_memory(c, where, json_text(where, v));
    } else if (strcmp(key, "memory_fraction") == 0) {
      set_fraction(c, where, json_text(where, v));
    } else if (strcmp(key, "log_level") == 0) {
      set_log_level_text(c, where, json_text(where, v));
    } else if (strcmp(key, "log_file") == 0) {
      c.log_file = json_text(where, v);
    } else if (strcmp(key, "num_threads") == 0) {
      c.num_threads = parse_int(where, json_text(where, v), 0, 4096);
    } else if (strcmp(key, "comm") == 0) {
      apply_comm_object(c, path, v);
    } else {
      fail(HPU_ERROR_CONFIG,
           "HPU_CONFIG=%s: unknown key \"%s\" (known: num_devices, visible_devices, profile, "
           "device_memory, memory_fraction, log_level, log_file, num_threads, comm)",
           path.c_str(), key);
    }
  }
}

const char *env(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

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
  if (const char *path = env("HPU_CONFIG")) apply_file(c, path);
  if (const char *v = env("HPU_NUM_DEVICES")) c.num_devices = parse_int("HPU_NUM_DEVICES", v, 1, 256);
  // Where the visible list came from, for the messages below.
  std::string visible = "HPU_VISIBLE_DEVICES";
  if (!c.visible_devices.empty()) visible = std::string(env("HPU_CONFIG")) + ": visible_devices";
  if (const char *v = env("HPU_VISIBLE_DEVICES")) {
    c.visible_devices = parse_int_list("HPU_VISIBLE_DEVICES", v);
    visible = "HPU_VISIBLE_DEVICES";
  }
  if (const char *v = env("HPU_DEVICE_PROFILE")) set_profile(c, "HPU_DEVICE_PROFILE", v);
  if (const char *v = env("HPU_DEVICE_MEMORY")) set_memory(c, "HPU_DEVICE_MEMORY", v);
  if (const char *v = env("HPU_MEMORY_FRACTION")) set_fraction(c, "HPU_MEMORY_FRACTION", v);
  if (const char *v = env("HPU_LOG_LEVEL")) set_log_level_text(c, "HPU_LOG_LEVEL", v);
  if (const char *v = env("HPU_LOG_FILE")) c.log_file = v;
  if (const char *v = env("HPU_NUM_THREADS")) c.num_threads = parse_int("HPU_NUM_THREADS", v, 0, 4096);
  if (const char *v = env("HPU_COMM_TIMEOUT")) set_timeout(c, "HPU_COMM_TIMEOUT", v);
  if (const char *v = env("HPU_TRANSPORT")) c.comm.transport = v;
  if (const char *v = env("HPU_ALGO")) c.comm.algo = v;
  for (auto &k : kIbKeys)
    if (const char *v = env(k[1])) set_ib(c.comm.ib, k[0], k[1], v);

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

}  // namespace hpu
