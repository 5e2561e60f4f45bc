// Two "hosts" for multi-host tests: network namespaces joined by a veth pair,
// made with iproute2 (needs root). Header-only, for the unit and trainer tests.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace hpu_test {

// Runs a shell command quietly; its exit status.
inline int sh(const std::string &cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// Namespaces hpu-<pid>-0 (10.201.x.1) and hpu-<pid>-1 (10.201.x.2) joined by a
// veth pair; removed (with every process in them) on scope exit. `ok` is
// false, and `why` says what failed, when they cannot be made.
struct Hosts {
  std::string ns[2], dev[2], addr[2];
  bool ok = false;
  std::string why;

  Hosts() {
    int id = getpid();
    for (int i = 0; i < 2; ++i) {
      ns[i] = "hpu-" + std::to_string(id) + "-" + std::to_string(i);
      dev[i] = "hv" + std::to_string(id % 1000000) + (i ? "b" : "a");
      addr[i] = "10.201." + std::to_string(id % 250) + "." + std::to_string(i + 1);
    }
    std::vector<std::string> steps = {"ip netns add " + ns[0], "ip netns add " + ns[1],
                                      "ip link add " + dev[0] + " type veth peer name " + dev[1]};
    for (int i = 0; i < 2; ++i) {
      steps.push_back("ip link set " + dev[i] + " netns " + ns[i]);
      steps.push_back("ip -n " + ns[i] + " addr add " + addr[i] + "/24 dev " + dev[i]);
      steps.push_back("ip -n " + ns[i] + " link set " + dev[i] + " up");
      steps.push_back("ip -n " + ns[i] + " link set lo up");
    }
    for (const auto &s : steps)
      if (sh(s) != 0) {
        why = "cannot make network namespaces (needs root and iproute2): `" + s + "` failed";
        return;
      }
    ok = true;
  }
  ~Hosts() {
    for (auto &n : ns) {
      sh("ip netns pids " + n + " | xargs -r kill -9");
      sh("ip netns del " + n);
    }
  }
  Hosts(const Hosts &) = delete;
  Hosts &operator=(const Hosts &) = delete;

  // argv run inside host `host`.
  std::vector<std::string> in(int host, const std::vector<std::string> &argv) const {
    std::vector<std::string> a = {"ip", "netns", "exec", ns[host]};
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  }
  // The launch variables of the process on `host` (one per host, rank = host,
  // one device each), with `extra` added or replacing them.
  std::map<std::string, std::string> env(int host, const std::map<std::string, std::string> &extra = {}) const {
    std::map<std::string, std::string> e = {
        {"RANK", std::to_string(host)}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", addr[0]}, {"MASTER_PORT", "29500"}};
    for (const auto &[k, v] : extra) e[k] = v;
    return e;
  }
  // Takes host `host` off the network: its end of the veth pair goes down.
  bool cut(int host) const { return sh("ip -n " + ns[host] + " link set " + dev[host] + " down") == 0; }
};

}  // namespace hpu_test
