#include "device/stream.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <queue>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/profiler.hpp"
#include "core/runtime.hpp"
#include "device/compute_budget.hpp"
#include "device/device.hpp"

namespace hpu {

namespace {

struct StreamList {
  std::mutex mu;
  std::vector<std::weak_ptr<Stream>> streams;
};

StreamList &stream_list() {
  static StreamList *list = new StreamList();  // never destroyed: workers outlive statics
  return *list;
}

// Forgets destroyed streams (l.mu held). An expired entry would keep the
// stream's memory (one allocation with its count) until then.
void forget_destroyed(StreamList &l) {
  l.streams.erase(std::remove_if(l.streams.begin(), l.streams.end(),
                                 [](const std::weak_ptr<Stream> &w) { return w.expired(); }),
                  l.streams.end());
}

// Stream numbers, the profiler's tracks: a destroyed stream's number goes to
// the next stream, so the profiler's table of track names grows with the most
// streams alive at once, not with every stream ever created.
struct StreamIds {
  std::mutex mu;
  std::priority_queue<int, std::vector<int>, std::greater<int>> free;  // lowest first
  int next = 0;
};

StreamIds &stream_ids() {
  static StreamIds *ids = new StreamIds();  // never destroyed, as the list
  return *ids;
}

int take_stream_id() {
  StreamIds &ids = stream_ids();
  std::lock_guard<std::mutex> lock(ids.mu);
  if (ids.free.empty()) return ids.next++;
  int id = ids.free.top();
  ids.free.pop();
  return id;
}

void give_back_stream_id(int id) {
  StreamIds &ids = stream_ids();
  std::lock_guard<std::mutex> lock(ids.mu);
  ids.free.push(id);
}

thread_local Stream *t_current = nullptr;

// How long a synchronize spins before it sleeps: longer than most operations
// of a small model's step, short beside a large GEMM.
constexpr auto kSpin = std::chrono::microseconds(100);
// How long an idle worker looks for its next operation before it sleeps.
constexpr auto kWorkSpin = std::chrono::microseconds(50);

std::atomic<int64_t> g_pending{0};  // see Stream::pending_anywhere()

// What the spinning heuristics count (see spin()).
std::atomic<int> g_spinners{0};   // threads in spin() now
std::atomic<int> g_active{0};     // streams with operations queued or running
std::atomic<int> g_computing{0};  // workers running a compute operation

// Counts its scope in `n`.
class Counted {
 public:
  explicit Counted(std::atomic<int> &n) : n_(n) { n_.fetch_add(1, std::memory_order_relaxed); }
  ~Counted() { n_.fetch_sub(1, std::memory_order_relaxed); }
  Counted(const Counted &) = delete;
  Counted &operator=(const Counted &) = delete;

 private:
  std::atomic<int> &n_;
};

}  // namespace

Stream::Stream(Device *device, bool is_default) : device_(device), is_default_(is_default) {
  id_ = take_stream_id();
  prof::name_track({prof::TrackKind::stream, device->ordinal(), id_},
                   is_default ? "default stream" : strf("stream %d", id_));
}

Stream::~Stream() {
  shutdown();
  give_back_stream_id(id_);
}

std::vector<std::shared_ptr<Stream>> Stream::all() {
  StreamList &l = stream_list();
  std::lock_guard<std::mutex> lock(l.mu);
  forget_destroyed(l);
  std::vector<std::shared_ptr<Stream>> out;
  for (auto &w : l.streams)
    if (auto s = w.lock()) out.push_back(std::move(s));
  return out;
}

Stream *Stream::current() { return t_current; }

int64_t Stream::pending_anywhere() { return g_pending.load(std::memory_order_acquire); }

void Stream::throw_if_error() {
  if (error_ != HPU_SUCCESS) throw Error(error_, error_message_);
}

void Stream::enqueue(std::function<void()> fn, OpKind kind) {
  std::unique_lock<std::mutex> lock(mu_);
  if (kind != OpKind::marker) throw_if_error();
  if (stop_) fail(HPU_ERROR_INVALID_USAGE, "the stream is shutting down");
  if (!worker_.joinable()) {
    worker_ = std::thread([this] { run(); });
    StreamList &l = stream_list();
    std::lock_guard<std::mutex> list_lock(l.mu);
    forget_destroyed(l);
    l.streams.push_back(weak_from_this());
  }
  Op op{std::move(fn), kind, prof::current_api(), prof::current_call(), 0, 0};
  prof::take_annotation(&op.bytes, &op.flops);
  if (!op.name) op.name = "operation";
  queue_.push_back(std::move(op));
  if (enqueued_.load(std::memory_order_relaxed) == completed_.load(std::memory_order_relaxed))
    g_active.fetch_add(1, std::memory_order_relaxed);  // (mu_ orders both counts)
  g_pending.fetch_add(1, std::memory_order_acq_rel);
  enqueued_.fetch_add(1, std::memory_order_release);
  lock.unlock();
  work_cv_.notify_one();
}

void Stream::run() {
  t_current = this;
  set_log_device(device_->ordinal());
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      // The next operation usually follows within microseconds (the caller
      // was spinning on this one): look for it before going to sleep.
      lock.unlock();
      spin_until_enqueued(completed_.load(std::memory_order_relaxed) + 1);
      lock.lock();
    }
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    Op op = std::move(queue_.front());
    queue_.pop_front();
    bool skip = error_ != HPU_SUCCESS && op.kind != OpKind::marker;
    lock.unlock();
    hpuStatus_t status = HPU_SUCCESS;
    std::string message;
    if (!skip) {
      auto start = std::chrono::steady_clock::now();
      try {
        if (op.kind == OpKind::compute) {
          Counted computing(g_computing);
          ComputeToken token;
          op.fn();
        } else if (op.kind == OpKind::wait) {
          Counted waiting(in_wait_op_);
          op.fn();
        } else {
          op.fn();
        }
      } catch (const Error &e) {
        status = e.status();
        message = e.what();
      } catch (const std::bad_alloc &) {
        status = HPU_ERROR_OUT_OF_MEMORY;
        message = "host memory exhausted in a queued operation";
      } catch (const std::exception &e) {
        status = HPU_ERROR_INTERNAL;
        message = strf("queued operation failed: %s", e.what());
      }
      auto end = std::chrono::steady_clock::now();
      busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(),
                         std::memory_order_relaxed);
      if (prof::on())
        prof::record({prof::TrackKind::stream, device_->ordinal(), id_}, op.name,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count(), op.bytes,
                     op.flops, op.call);
    }
    op.fn = nullptr;  // release captures before reporting completion
    lock.lock();
    if (status != HPU_SUCCESS && error_ == HPU_SUCCESS) {
      error_ = status;
      error_message_ = message;
      HPU_LOG(debug, "stream", "device %d: queued operation failed: %s", device_->ordinal(), message.c_str());
    }
    uint64_t done = completed_.fetch_add(1, std::memory_order_release) + 1;
    g_pending.fetch_sub(1, std::memory_order_acq_rel);
    if (done == enqueued_.load(std::memory_order_relaxed)) g_active.fetch_sub(1, std::memory_order_relaxed);
    if (done >= wake_at_) {
      wake_at_ = UINT64_MAX;  // woken waiters that want more register again
      done_cv_.notify_all();
    }
  }
  // Discarded work counts as done so that no waiter blocks forever.
  if (!queue_.empty()) g_active.fetch_sub(1, std::memory_order_relaxed);
  completed_.fetch_add(queue_.size(), std::memory_order_release);
  g_pending.fetch_sub(static_cast<int64_t>(queue_.size()), std::memory_order_acq_rel);
  queue_.clear();
  done_cv_.notify_all();
}

namespace {

// Spins until reached() for at most `limit`, while the threads that want a
// CPU fit on the CPUs, and not given_up(); returns reached(). Those are: the
// compute threads (the budget's tokens), the workers of streams with work
// that are not computing (in a wait operation, or woken and not running
// yet), the spinners, and `reserve` more. So eight devices' workers never
// spin beside a kernel or a collective on two cores.
template <class Reached, class GivenUp>
bool spin(std::chrono::microseconds limit, int reserve, Reached reached, GivenUp given_up) {
  static const int cpus = available_cpus();
  const ComputeBudget &budget = ComputeBudget::instance();
  const auto until = std::chrono::steady_clock::now() + limit;
  auto crowded = [&] {
    int workers = g_active.load(std::memory_order_relaxed) - g_computing.load(std::memory_order_relaxed);
    return budget.busy() + std::max(workers, 0) + g_spinners.load(std::memory_order_relaxed) + reserve > cpus;
  };
  g_spinners.fetch_add(1, std::memory_order_relaxed);
  bool done = false;
  for (unsigned i = 1;; ++i) {
    if ((done = reached())) break;
    if (i % 32 == 0 && (std::chrono::steady_clock::now() >= until || crowded() || given_up())) {
      done = reached();
      break;
    }
    _mm_pause();
  }
  g_spinners.fetch_sub(1, std::memory_order_relaxed);
  return done;
}

}  // namespace

// The worker computes (counted by the budget) while a synchronize spins.
bool Stream::spin_until(uint64_t target) const {
  return spin(
      kSpin, 0, [&] { return completed_.load(std::memory_order_acquire) >= target; },
      [&] { return in_wait_op_.load(std::memory_order_relaxed) > 0; });
}

// The thread that will enqueue needs a CPU of its own while the worker spins.
void Stream::spin_until_enqueued(uint64_t target) const {
  spin(
      kWorkSpin, 1, [&] { return enqueued_.load(std::memory_order_acquire) >= target; }, [] { return false; });
}

void Stream::wait_done(std::unique_lock<std::mutex> &lock, uint64_t target) {
  while (completed_.load(std::memory_order_acquire) < target) {
    wake_at_ = std::min(wake_at_, target);
    done_cv_.wait(lock);
  }
}

void Stream::wait_completed(uint64_t seq) {
  if (spin_until(seq)) return;
  std::unique_lock<std::mutex> lock(mu_);
  wait_done(lock, seq);
}

void Stream::synchronize() {
  if (t_current == this) fail(HPU_ERROR_INVALID_USAGE, "a queued operation synchronized its own stream");
  spin_until(enqueued_.load(std::memory_order_acquire));
  std::unique_lock<std::mutex> lock(mu_);
  wait_done(lock, enqueued_.load(std::memory_order_acquire));
  throw_if_error();
}

bool Stream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  throw_if_error();
  return completed_.load(std::memory_order_acquire) >= enqueued_.load(std::memory_order_acquire);
}

hpuStatus_t Stream::error(std::string *message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (message) *message = error_message_;
  return error_;
}

void Stream::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id())
    worker_.detach();  // the last reference went away inside one of its own operations
  else
    worker_.join();
}

void Event::record(Stream &stream) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = ++recorded_;
  }
  try {
    stream.enqueue(
        [self = shared_from_this(), target] {
          std::lock_guard<std::mutex> lock(self->mu_);
          if (target > self->completed_) {
            self->completed_ = target;
            self->time_ = std::chrono::steady_clock::now();
          }
          self->cv_.notify_all();
        },
        OpKind::marker);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    --recorded_;
    throw;
  }
}

void Event::wait_for(uint64_t target) {
  std::unique_lock<std::mutex> lock(mu_);
  // Re-check now and then so that process shutdown never hangs on a record
  // that will not run.
  while (completed_ < target && !shutting_down())
    cv_.wait_for(lock, std::chrono::milliseconds(100));
}

void Event::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = recorded_;
  }
  wait_for(target);
}

bool Event::query() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= recorded_;
}

std::function<void()> Event::waiter() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    target = recorded_;
  }
  return [self = shared_from_this(), target] { self->wait_for(target); };
}

std::chrono::steady_clock::time_point Event::completion_time(const char *name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recorded_ == 0) fail(HPU_ERROR_INVALID_USAGE, "%s event has never been recorded", name);
  if (completed_ < recorded_) fail(HPU_ERROR_NOT_READY, "%s event has not completed yet", name);
  return time_;
}

float Event::elapsed_ms(Event &start, Event &end) {
  // One event at a time (start and end may be the same event); start first,
  // so that when both fail the message names start.
  const auto t0 = start.completion_time("start");
  const auto t1 = end.completion_time("end");
  return std::chrono::duration<float, std::milli>(t1 - t0).count();
}

}  // namespace hpu
