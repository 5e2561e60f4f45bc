#include "core/profiler.hpp"

#include <jansson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/runtime.hpp"

namespace hpu::prof {

#ifdef HPU_NO_PROFILER
namespace {
std::atomic<bool> g_on{false};  // stays off; not exported (see profiler.hpp)
}  // namespace
#else
std::atomic<bool> g_on{false};
#endif

namespace {

constexpr int kHostPid = 1;
constexpr int kStreamPid = 100;   // + device ordinal
constexpr int kCommPid = 10000;   // + communicator id

struct Ev {
  char ph;  // 'X' span, 'C' counter
  int pid, tid;
  const char *name;
  uint64_t ts, dur;
  uint64_t bytes, flops;
  uint64_t call;  // the API call that queued a stream span (0: unknown)
};

// Events are appended to the recording thread's own buffer, without a lock:
// a thread marks its buffer busy, checks that the profiler is still on, and
// appends. stop() turns the profiler off, waits until no buffer is busy, and
// then owns every buffer's events until it returns (the seq_cst busy/g_on pair
// is the handshake: a thread that marks busy after stop() looked sees it off).
// A buffer outlives its thread until its events are written.
struct Buffer {
  static constexpr size_t kChunk = 4096;  // events; chunks never move, so appending never copies
  std::atomic<bool> busy{false};
  bool orphaned = false;  // its thread has exited (guarded by Profile::mu)
  std::vector<std::unique_ptr<Ev[]>> chunks;
  size_t count = 0;

  void push(const Ev &e) {
    if (count == chunks.size() * kChunk) chunks.emplace_back(new Ev[kChunk]);
    chunks[count / kChunk][count % kChunk] = e;
    ++count;
  }
  // Appends the events to `out` and empties the buffer (its first chunk stays).
  void drain(std::vector<Ev> *out) {
    for (size_t i = 0; i < count; ++i) out->push_back(chunks[i / kChunk][i % kChunk]);
    if (chunks.size() > 1) chunks.resize(1);
    count = 0;
  }
};

struct Profile {
  std::mutex mu;  // buffers, names, start/stop
  FILE *file = nullptr;
  std::string path;
  uint64_t origin = 0;
  std::vector<Buffer *> buffers;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, int> comm_ranks;  // comm pid -> ranks
  std::string summary;
};

Profile &profile() {
  static Profile *p = new Profile();  // never destroyed: threads may record during exit
  return *p;
}

// This thread's buffer, registered on its first event; at the thread's exit it
// is freed if empty, else left to the next stop(). Events after that are dropped.
thread_local Buffer *t_buffer = nullptr;
thread_local bool t_exited = false;

struct ThreadExit {
  ~ThreadExit() {
    Buffer *b = t_buffer;
    t_buffer = nullptr;
    t_exited = true;
    Profile &p = profile();
    std::lock_guard<std::mutex> lock(p.mu);
    if (b->count == 0) {
      p.buffers.erase(std::find(p.buffers.begin(), p.buffers.end(), b));
      delete b;
    } else {
      b->orphaned = true;
    }
  }
};

Buffer *this_thread_buffer() {
  if (Buffer *b = t_buffer) return b;
  if (t_exited) return nullptr;
  auto *b = new Buffer();
  {
    Profile &p = profile();
    std::lock_guard<std::mutex> lock(p.mu);
    p.buffers.push_back(b);
  }
  t_buffer = b;
  thread_local ThreadExit at_exit;  // constructed once, here: runs at this thread's exit
  return b;
}

void append(const Ev &e) {
  Buffer *b = this_thread_buffer();
  if (!b) return;
  b->busy.store(true, std::memory_order_seq_cst);
  if (g_on.load(std::memory_order_seq_cst)) b->push(e);
  b->busy.store(false, std::memory_order_release);
}

// Called by stop() with Profile::mu held and the profiler off: waits for the
// threads still appending, then takes every buffer's events in start order;
// frees the buffers of exited threads.
std::vector<Ev> collect(Profile &p) {
  std::vector<Ev> all;
  for (Buffer *b : p.buffers) {
    while (b->busy.load(std::memory_order_seq_cst)) std::this_thread::yield();
    b->drain(&all);
  }
  auto orphan = [](Buffer *b) {
    if (!b->orphaned) return false;
    delete b;
    return true;
  };
  p.buffers.erase(std::remove_if(p.buffers.begin(), p.buffers.end(), orphan), p.buffers.end());
  // An operation that began before hpuProfilerStart counts from the start on.
  for (Ev &e : all)
    if (e.ts < p.origin) {
      const uint64_t before = p.origin - e.ts;
      e.dur = e.dur > before ? e.dur - before : 0;
      e.ts = p.origin;
    }
  std::stable_sort(all.begin(), all.end(), [](const Ev &a, const Ev &b) { return a.ts < b.ts; });
  return all;
}

thread_local const char *t_api = nullptr;
thread_local uint64_t t_call = 0;
std::atomic<uint64_t> g_next_call{1};
#ifndef HPU_NO_PROFILER
thread_local uint64_t t_bytes = 0, t_flops = 0;  // annotate()
#endif
std::atomic<int> g_next_thread{1};
thread_local int t_thread = 0;

int host_lane() {
  if (!t_thread) t_thread = g_next_thread.fetch_add(1);
  return t_thread;
}

void ids(const Track &t, int *pid, int *tid) {
  switch (t.kind) {
    case TrackKind::host: *pid = kHostPid; *tid = host_lane(); break;
    case TrackKind::stream: *pid = kStreamPid + t.group; *tid = t.lane; break;
    case TrackKind::comm: *pid = kCommPid + t.group; *tid = t.lane; break;
  }
}

std::string process_name(int pid) {
  if (pid == kHostPid) return "host";
  if (pid >= kCommPid) return strf("comm %d", pid - kCommPid);
  return strf("HPU %d", pid - kStreamPid);
}

double busbw_factor(const char *name, int n) {
  if (n <= 1) return 1.0;
  std::string s = name;
  if (s.find("llreduce") != std::string::npos) return 2.0 * (n - 1) / n;
  if (s.find("llgather") != std::string::npos || s.find("educeScatter") != std::string::npos ||
      s.find("educescatter") != std::string::npos || s.find("lltoall") != std::string::npos)
    return static_cast<double>(n - 1) / n;
  return 1.0;
}

std::string make_summary(const Profile &p, const std::vector<Ev> &events) {
  struct Agg {
    uint64_t count = 0, ns = 0, bytes = 0, flops = 0;
    int ranks = 1;
    std::set<uint64_t> calls;  // the API calls already counted
  };
  std::map<std::string, Agg> ops, colls;
  for (const Ev &e : events) {
    if (e.ph != 'X' || e.pid == kHostPid) continue;
    Agg &a = (e.pid >= kCommPid ? colls : ops)[e.name];
    // A call counts once however many operations it queued (an op and the
    // casts of its inputs).
    if (e.call == 0 || a.calls.insert(e.call).second) a.count++;
    a.ns += e.dur;
    a.bytes += e.bytes;
    a.flops += e.flops;
    if (e.pid >= kCommPid) {
      auto it = p.comm_ranks.find(e.pid);
      if (it != p.comm_ranks.end()) a.ranks = it->second;
    }
  }
  auto by_time = [](const std::map<std::string, Agg> &m) {
    std::vector<std::pair<std::string, Agg>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second.ns > b.second.ns; });
    return v;
  };
  std::string out = strf("%-28s %8s %12s %14s %10s\n", "operation (stream)", "calls", "total ms", "GFLOP", "GFLOP/s");
  for (auto &[name, a] : by_time(ops)) {
    double s = a.ns / 1e9;
    out += strf("%-28s %8llu %12.3f %14.3f %10.2f\n", name.c_str(), (unsigned long long)a.count, a.ns / 1e6,
                a.flops / 1e9, s > 0 ? a.flops / 1e9 / s : 0.0);
  }
  if (!colls.empty()) {
    out += strf("\n%-28s %8s %12s %14s %10s %10s\n", "collective", "calls", "total ms", "MB", "algbw", "busbw");
    for (auto &[name, a] : by_time(colls)) {
      double s = a.ns / 1e9;
      double algbw = s > 0 ? a.bytes / 1e9 / s : 0.0;
      out += strf("%-28s %8llu %12.3f %14.3f %10.2f %10.2f\n", name.c_str(), (unsigned long long)a.count, a.ns / 1e6,
                  a.bytes / 1e6, algbw, algbw * busbw_factor(name.c_str(), a.ranks));
    }
  }
  return out;
}

void write_trace(Profile &p, const std::vector<Ev> &all) {
  json_t *events = json_array();
  std::map<int, bool> pids;
  for (const Ev &e : all) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(e.name));
    json_object_set_new(o, "ph", json_stringn(&e.ph, 1));
    json_object_set_new(o, "pid", json_integer(e.pid));
    json_object_set_new(o, "tid", json_integer(e.tid));
    json_object_set_new(o, "ts", json_real((e.ts - p.origin) / 1e3));
    json_t *args = json_object();
    if (e.ph == 'X') {
      json_object_set_new(o, "dur", json_real(e.dur / 1e3));
      if (e.bytes) json_object_set_new(args, "bytes", json_integer(static_cast<json_int_t>(e.bytes)));
      if (e.flops) json_object_set_new(args, "flops", json_integer(static_cast<json_int_t>(e.flops)));
    } else {
      json_object_set_new(args, "InUse", json_integer(static_cast<json_int_t>(e.bytes)));
    }
    json_object_set_new(o, "args", args);
    json_array_append_new(events, o);
    pids[e.pid] = true;
  }
  auto meta = [&](const char *what, int pid, int tid, const std::string &name) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(what));
    json_object_set_new(o, "ph", json_string("M"));
    json_object_set_new(o, "pid", json_integer(pid));
    json_object_set_new(o, "tid", json_integer(tid));
    json_t *args = json_object();
    json_object_set_new(args, "name", json_string(name.c_str()));
    json_object_set_new(o, "args", args);
    json_array_append_new(events, o);
  };
  // Every process a track is named in gets its name too, also a device none
  // of whose streams ran during the recording.
  for (auto &kv : p.thread_names) pids[kv.first.first] = true;
  for (auto &kv : pids) meta("process_name", kv.first, 0, process_name(kv.first));
  for (auto &kv : p.thread_names) meta("thread_name", kv.first.first, kv.first.second, kv.second);
  json_t *root = json_object();
  json_object_set_new(root, "traceEvents", events);
  json_object_set_new(root, "displayTimeUnit", json_string("ms"));
  int rc = json_dumpf(root, p.file, JSON_COMPACT);
  json_decref(root);
  bool ok = rc == 0 && fflush(p.file) == 0;
  ok = (fclose(p.file) == 0) && ok;
  p.file = nullptr;
  if (!ok) fail(HPU_ERROR_IO, "cannot write the trace to %s: %s", p.path.c_str(), strerror(errno));
}

void start_from_env(const Config &c) {
  if (c.trace_file.empty()) return;
  const char *path = c.trace_file.c_str();
#ifdef HPU_NO_PROFILER
  HPU_LOG(warn, "profiler", "HPU_PROFILE=%s: this libhpu is built without its profiler (HPU_NO_PROFILER)", path);
#else
  start(path);
#endif
}

void stop_at_exit() {
  if (!on()) return;
  try {
    stop();
  } catch (const Error &e) {
    HPU_LOG(error, "profiler", "%s", e.what());
  }
}

const bool registered = (on_init(5, start_from_env), on_shutdown(5, stop_at_exit), true);

}  // namespace

uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(const Track &track, const char *name, uint64_t start_ns, uint64_t end_ns, uint64_t bytes, uint64_t flops,
            uint64_t call) {
  Ev e{'X', 0, 0, name ? name : "?", start_ns, end_ns >= start_ns ? end_ns - start_ns : 0, bytes, flops, call};
  ids(track, &e.pid, &e.tid);
  append(e);
}

void memory_counter(int device, uint64_t in_use) {
  append({'C', kStreamPid + device, 0, "memory", now_ns(), 0, in_use, 0, 0});
}

#ifndef HPU_NO_PROFILER
void name_track(const Track &track, const std::string &name) {
  int pid = 0, tid = 0;
  ids(track, &pid, &tid);
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.thread_names[{pid, tid}] = name;
}

void name_comm(int comm_id, int nranks) {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.comm_ranks[kCommPid + comm_id] = nranks;
}
#endif

void start(const std::string &path) {
#ifdef HPU_NO_PROFILER
  fail(HPU_ERROR_UNSUPPORTED, "this libhpu is built without its profiler (HPU_NO_PROFILER): cannot record into %s",
       path.c_str());
#endif
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.file) fail(HPU_ERROR_INVALID_USAGE, "the profiler is already recording into %s", p.path.c_str());
  FILE *f = fopen(path.c_str(), "w");
  if (!f) fail(HPU_ERROR_IO, "cannot open %s for the trace: %s", path.c_str(), strerror(errno));
  p.file = f;
  p.path = path;
  p.origin = now_ns();
  g_on.store(true, std::memory_order_seq_cst);
  HPU_LOG(info, "profiler", "recording a trace into %s", path.c_str());
}

void stop() {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.file) fail(HPU_ERROR_INVALID_USAGE, "the profiler is not recording");
  g_on.store(false, std::memory_order_seq_cst);  // the handshake with append()
  const std::vector<Ev> events = collect(p);
  p.summary = make_summary(p, events);
  write_trace(p, events);
  const size_t n = events.size();
  HPU_LOG(info, "profiler", "wrote %zu events to %s", n, p.path.c_str());
}

std::string last_summary() {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.summary;
}

ApiScope::ApiScope(const char *function) : previous_(t_api), previous_call_(t_call) {
  t_api = function;
  t_call = 0;
  if (on()) {
    start_ = now_ns();
    t_call = g_next_call.fetch_add(1, std::memory_order_relaxed);
  }
}

ApiScope::~ApiScope() {
  if (start_ && on()) record({TrackKind::host, 0, 0}, t_api, start_, now_ns());
  t_api = previous_;
  t_call = previous_call_;
}

const char *current_api() { return t_api; }
uint64_t current_call() { return t_call; }

#ifndef HPU_NO_PROFILER
void annotate(uint64_t bytes, uint64_t flops) {
  t_bytes = bytes;
  t_flops = flops;
}

void take_annotation(uint64_t *bytes, uint64_t *flops) {
  *bytes = t_bytes;
  *flops = t_flops;
  t_bytes = t_flops = 0;
}
#endif

}  // namespace hpu::prof
