#include "core/runtime.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu {

namespace {

struct Hook {
  int priority;
  void (*init)(const Config &);
  void (*shutdown)();
};

struct Runtime {
  std::mutex mu;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};
  std::atomic<bool> forked{false};  // set in a fork() child by the atfork handler
  pid_t pid = 0;
  Config config;
  std::vector<Hook> hooks;
};

// Never destroyed: stream workers and exit handlers may use it after statics die.
Runtime &rt() {
  static Runtime *r = new Runtime();
  return *r;
}

void sorted_insert(Hook h) {
  auto &hooks = rt().hooks;
  auto at = std::upper_bound(hooks.begin(), hooks.end(), h.priority,
                             [](int p, const Hook &x) { return p < x.priority; });
  hooks.insert(at, h);
}

}  // namespace

void on_init(int priority, void (*hook)(const Config &)) { sorted_insert({priority, hook, nullptr}); }
void on_shutdown(int priority, void (*hook)()) { sorted_insert({priority, nullptr, hook}); }

bool shutting_down() { return rt().stopping.load(std::memory_order_relaxed); }

const Config &config() { return rt().config; }

void ensure_init() {
  Runtime &r = rt();
  if (r.ready.load(std::memory_order_acquire)) {
    // A flag set at fork() rather than getpid() on every call: that is a
    // system call, and this is the path of every API call.
    if (r.forked.load(std::memory_order_relaxed))
      fail(HPU_ERROR_INVALID_USAGE,
           "libhpu was initialised in process %d; this fork() child must not use its devices or "
           "communicators (fork before the first libhpu call, or exec a fresh program)",
           static_cast<int>(r.pid));
    return;
  }
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.ready.load(std::memory_order_relaxed)) return;
  if (r.stopping.load()) fail(HPU_ERROR_INVALID_USAGE, "libhpu is shutting down");
  // Logging first, from the environment alone, so that configuration errors
  // below can already be logged at the requested level.
  if (const char *lvl = setting_from_environment("HPU_LOG_LEVEL")) {
    LogLevel level;
    if (parse_log_level(lvl, &level)) set_log_level(level);
  }
  Config c = load_config();
  set_log_level(c.log_level);
  if (!c.log_file.empty()) set_log_file(c.log_file);
  r.config = c;
  for (const Hook &h : r.hooks)
    if (h.init) h.init(r.config);
  r.pid = getpid();
  static const bool atfork_registered =
      pthread_atfork(nullptr, nullptr, [] { rt().forked.store(true, std::memory_order_relaxed); }) == 0;
  (void)atfork_registered;
  r.ready.store(true, std::memory_order_release);
  HPU_LOG(info, "core", "initialised: %d devices (%s, %s each), compute threads: %s", c.num_devices,
          c.profile.c_str(), format_bytes(c.capacity()).c_str(),
          c.num_threads ? strf("%d", c.num_threads).c_str() : "one per available CPU");
}

}  // namespace hpu

// At exit and dlclose: stop every worker thread so that nothing runs in code
// that is about to be unmapped. Skipped in a fork() child, whose copies of the
// parent's threads do not exist.
__attribute__((destructor)) static void hpu_shutdown() {
  hpu::Runtime &r = hpu::rt();
  r.stopping.store(true);
  if (!r.ready.load() || getpid() != r.pid) return;
  for (auto it = r.hooks.rbegin(); it != r.hooks.rend(); ++it)
    if (it->shutdown) it->shutdown();
}
