// The profiler: records host API calls, stream operations (ops, copies,
// collectives), communicator activity and device memory in use, and writes a
// Chrome trace-event JSON file that Perfetto and chrome://tracing open:
//   process "host"            one track per calling thread (API calls)
//   process "HPU <n>"         one track per stream, and a "memory" counter
//   process "comm <id>"       one track per communicator rank
// Off, it costs a relaxed atomic load per call site. HPU_PROFILE=path starts it
// at initialisation and writes the file at exit; hpuProfilerStart/Stop do the
// same from code.
// Compiled with HPU_NO_PROFILER (hpu-bench's copy of the library, which
// measures what the hooks cost when off), on() is constant false, the hooks
// below are empty and start() fails with HPU_ERROR_UNSUPPORTED. A file that
// calls a hook must then be compiled with it too (bench/deps.cmake lists
// them): otherwise that copy fails to link, missing g_on or the hook.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace hpu::prof {

#ifdef HPU_NO_PROFILER
constexpr bool on() { return false; }
#else
extern std::atomic<bool> g_on;
inline bool on() { return g_on.load(std::memory_order_relaxed); }
#endif

uint64_t now_ns();  // steady clock

enum class TrackKind { host, stream, comm };

struct Track {
  TrackKind kind;
  int group;  // device ordinal (stream), communicator id (comm); unused for host
  int lane;   // stream id, rank; host thread id is filled in by record()
};

// One finished span. `name` must outlive the profile (a string literal or
// __func__); bytes and flops may be 0. `call` is the API call that queued it
// (current_call()): the summary counts the spans of one call as one call; 0
// counts each span as a call of its own.
void record(const Track &track, const char *name, uint64_t start_ns, uint64_t end_ns, uint64_t bytes = 0,
            uint64_t flops = 0, uint64_t call = 0);
// A counter sample: memory in use on a device.
void memory_counter(int device, uint64_t in_use);
#ifdef HPU_NO_PROFILER
inline void name_track(const Track &, const std::string &) {}
inline void name_comm(int, int) {}
#else
// Names a track ("default stream", "stream 3", "rank 1 of 4").
void name_track(const Track &track, const std::string &name);
// A communicator's rank count, for the summary's busbw.
void name_comm(int comm_id, int nranks);
#endif

// Starts recording into `path` (opened now: an unwritable path fails here with
// HPU_ERROR_IO). Throws HPU_ERROR_INVALID_USAGE when already recording.
void start(const std::string &path);
// Writes the trace and the summary; throws HPU_ERROR_INVALID_USAGE when not recording.
void stop();
// The summary table of the last stopped profile ("" if none).
std::string last_summary();

// The exported function running on this thread (set by the API boundary);
// stream operations take it as their name, and the number of the call
// (unique in the process while recording, 0 when the call began with the
// profiler off), so that the casts an op queues before it count with it.
class ApiScope {
 public:
  explicit ApiScope(const char *function);
  ~ApiScope();
  ApiScope(const ApiScope &) = delete;
  ApiScope &operator=(const ApiScope &) = delete;

 private:
  const char *previous_;
  uint64_t previous_call_;
  uint64_t start_ = 0;
};
const char *current_api();
uint64_t current_call();

// Work figures of the operation about to be enqueued on this thread; the next
// enqueue takes them (and clears them).
#ifdef HPU_NO_PROFILER
inline void annotate(uint64_t, uint64_t) {}
inline void take_annotation(uint64_t *bytes, uint64_t *flops) { *bytes = *flops = 0; }
#else
void annotate(uint64_t bytes, uint64_t flops);
void take_annotation(uint64_t *bytes, uint64_t *flops);
#endif

}  // namespace hpu::prof
