// Streams: in-order queues of operations, each run by its own worker thread
// (started on the first enqueue). Compute operations hold a token of the
// process-wide ComputeBudget while they run; waits hold none.
//
// A synchronize first spins briefly while a core is free of compute and the
// worker is not blocked in a wait operation, and an idle worker looks for its
// next operation a little before it sleeps: the short operations of a
// training step end sooner than a sleeping thread is woken (on a virtual
// machine, waking an idle CPU took ~50 us, longer than the operation itself).
//
// A failure inside an operation (an hpu::Error it throws) becomes the stream's
// sticky error: later operations are discarded, and every synchronize, query
// and enqueue reports it until the stream is destroyed (for a default stream:
// until its device is closed for the last time). Markers (event records) run
// even after an error, so nobody waits forever on them.
#pragma once

#include <hpu/status.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hpu {

class Device;

enum class OpKind {
  compute,  // holds a compute token while it runs
  wait,     // blocks on something else (an event, a peer); holds no token
  marker,   // runs even after a sticky error; must be quick
};

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(Device *device, bool is_default);
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  Device &device() const { return *device_; }
  bool is_default() const { return is_default_; }

  // Queues fn; throws the sticky error instead if there is one.
  void enqueue(std::function<void()> fn, OpKind kind = OpKind::compute);
  // Waits for everything queued so far; throws the sticky error.
  void synchronize();
  // True when idle; throws the sticky error.
  bool query();
  // Operations queued so far / completed so far (discarded ones count as done).
  uint64_t enqueued() const { return enqueued_.load(std::memory_order_acquire); }
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  void wait_completed(uint64_t seq);
  // Nanoseconds spent running operations (waits included), for utilisation.
  uint64_t busy_ns() const { return busy_ns_.load(std::memory_order_relaxed); }
  // The sticky error as a status (HPU_SUCCESS if none) and its message.
  hpuStatus_t error(std::string *message);
  // Stops the worker, discarding queued work (process shutdown).
  void shutdown();

  // All streams alive in the process (for deferred frees and shutdown).
  static std::vector<std::shared_ptr<Stream>> all();
  // Operations queued on any stream of the process and not yet done: when 0,
  // a free need not look at every stream.
  static int64_t pending_anywhere();
  // The stream whose worker is running the calling thread's operation, if any.
  static Stream *current();

 private:
  struct Op {
    std::function<void()> fn;
    OpKind kind;
    const char *name;  // the API function that queued it, for the profiler
    uint64_t call;     // and its call (prof::current_call)
    uint64_t bytes, flops;
  };
  void run();
  void throw_if_error();
  // Spins (no lock held) for at most kSpin until `target` operations have
  // completed; false when it gave up (time out, no free core, a wait op).
  bool spin_until(uint64_t target) const;
  // The worker's look for more work: spins (no lock held) for at most
  // kWorkSpin until `target` operations have been enqueued.
  void spin_until_enqueued(uint64_t target) const;
  // Sleeps (mu_ held through `lock`) until `target` operations have completed.
  void wait_done(std::unique_lock<std::mutex> &lock, uint64_t target);

  Device *device_;
  bool is_default_;
  int id_;  // the profiler's track: unique among live streams, reused after destruction
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Op> queue_;
  std::atomic<uint64_t> enqueued_{0}, completed_{0};
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<int> in_wait_op_{0};  // 1 while the worker runs an OpKind::wait
  hpuStatus_t error_ = HPU_SUCCESS;
  std::string error_message_;
  bool stop_ = false;
  // The smallest completion count a synchronize/wait_completed sleeps for: the
  // worker wakes waiters only when it reaches it, not after every operation.
  uint64_t wake_at_ = UINT64_MAX;
  std::thread worker_;
};

// Events: recorded on a stream; complete when the stream reaches them.
class Event : public std::enable_shared_from_this<Event> {
 public:
  void record(Stream &stream);
  void synchronize();
  bool query();
  // Milliseconds from start's completion to end's.
  static float elapsed_ms(Event &start, Event &end);
  // Blocks until the record that was latest at the time of the call completes
  // (used by hpuStreamWaitEvent as a wait operation).
  std::function<void()> waiter();

 private:
  void wait_for(uint64_t target);
  // When the latest record completed; fails (naming the argument `name`) when
  // there is none or it has not completed yet.
  std::chrono::steady_clock::time_point completion_time(const char *name);
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ = 0, completed_ = 0;
  std::chrono::steady_clock::time_point time_;
};

}  // namespace hpu
