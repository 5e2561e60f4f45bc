#include "core/fault.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include <signal.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::fault {

namespace {

const char *const kNames[] = {"alloc_fail_after", "alloc_fail_count", "conn_drop_after_bytes",  "peer_delay_ms",
                              "peer_stall",       "fault_rank",       "checkpoint_short_write", "stop_in_setup"};

std::mutex g_mu;
std::map<std::string, int64_t> *g_faults = nullptr;  // set once at initialisation; never freed
std::atomic<bool> g_any{false};
std::atomic<int64_t> g_allocs{0};
std::atomic<int64_t> g_alloc_failures{0};

void init(const Config &c) {
  if (!c.fault_inject.empty()) configure(c.fault_inject);
}

const bool registered = (on_init(1, init), true);

}  // namespace

void configure(const std::string &spec) {
  auto faults = std::make_unique<std::map<std::string, int64_t>>();
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq);
    bool known = false;
    for (const char *k : kNames) known = known || name == k;
    if (!known) {
      std::string names;
      for (const char *k : kNames) names += (names.empty() ? "" : ", ") + std::string(k);
      fail(HPU_ERROR_CONFIG, "HPU_FAULT_INJECT: unknown fault \"%s\" (known: %s)", name.c_str(), names.c_str());
    }
    std::string text = eq == std::string::npos ? "" : item.substr(eq + 1);
    char *end = nullptr;
    long long v = strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < 0)
      fail(HPU_ERROR_CONFIG, "HPU_FAULT_INJECT: %s=\"%s\" is invalid: expected a count >= 0", name.c_str(),
           text.c_str());
    (*faults)[name] = v;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocs = 0;
  g_alloc_failures = 0;
  g_any = !faults->empty();
  g_faults = faults.release();  // the previous map is leaked: readers may still hold it
  if (g_any) HPU_LOG(warn, "fault", "fault injection is on: %s", spec.c_str());
}

int64_t value(const char *name) {
  if (!g_any.load(std::memory_order_relaxed)) return -1;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_faults->find(name);
  return it == g_faults->end() ? -1 : it->second;
}

bool active(const char *name) { return value(name) >= 0; }

bool fail_this_allocation() {
  const int64_t after = value("alloc_fail_after");
  if (after < 0) return false;
  if (g_allocs.fetch_add(1, std::memory_order_relaxed) < after) return false;
  const int64_t count = value("alloc_fail_count");
  return count < 0 || g_alloc_failures.fetch_add(1, std::memory_order_relaxed) < count;
}

void setup_point(const char *what, int rank) {
  if (value("stop_in_setup") <= 0) return;
  const int64_t chosen = value("fault_rank");
  if (chosen >= 0 && chosen != rank) return;
  HPU_LOG(warn, "fault", "rank %d stops itself in its %s setup (HPU_FAULT_INJECT stop_in_setup)", rank, what);
  raise(SIGSTOP);
}

}  // namespace hpu::fault
