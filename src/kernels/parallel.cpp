// A pool of helper threads for parallel_for. Helpers are lent by the
// ComputeBudget per call, so the pool never needs more threads than the
// budget has tokens; between jobs they look for the next one for a moment,
// then sleep on a condition variable.
#include "kernels/parallel.hpp"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/runtime.hpp"
#include "device/compute_budget.hpp"

namespace hpu::kernels {

namespace {

// How long a helper looks for its next task, and a caller for its helpers'
// chunks, before sleeping: waking a sleeping thread costs 15-50 us on a
// virtual machine, longer than many kernels' chunks.
constexpr auto kSpin = std::chrono::microseconds(50);

// Spins until done() or kSpin has passed; returns done().
template <class Done>
bool spin_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    if (i % 32 == 0 && std::chrono::steady_clock::now() >= until) return done();
    _mm_pause();
  }
}

// Then a helper yields its CPU for up to kYield before it sleeps: a training
// step runs single-threaded parts between its parallel products (the batch's
// copy and cast, the loss: 50-150 us), after which a sleeping helper took
// 15-100 us to wake. A yielding helper leaves its CPU to any thread that
// wants it, so busy neighbours lose nothing (hpu-bench train measures it).
constexpr auto kYield = std::chrono::microseconds(400);

template <class Done>
bool yield_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kYield;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    sched_yield();
  }
  return done();
}

class Pool {
 public:
  // work() runs on a helper; then the helper counts itself idle before it
  // calls finish(), which lets the caller go on (and submit again): so a
  // caller that submits again at once finds that helper idle instead of
  // starting another thread, and no extra helper spins beside the work.
  void submit(std::function<void()> work, std::function<void()> finish) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back({std::move(work), std::move(finish)});
      queued_.store(tasks_.size(), std::memory_order_release);
      // One sleeping helper per queued task: tasks in flight never exceed the
      // tokens lent, so nobody waits for a helper that is busy elsewhere.
      if (idle_ < static_cast<int>(tasks_.size())) threads_.emplace_back([this] { run(); });
    }
    cv_.notify_one();
  }

  void stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (auto &t : threads) t.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    ++idle_;  // counted idle while it spins too: submit() need not start a thread
    for (;;) {
      if (tasks_.empty() && !stop_) {
        lock.unlock();
        auto queued = [&] { return queued_.load(std::memory_order_acquire) > 0; };
        if (!spin_until(queued)) yield_until(queued);
        lock.lock();
      }
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      --idle_;
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.store(tasks_.size(), std::memory_order_relaxed);
      lock.unlock();
      task.work();
      lock.lock();
      ++idle_;
      lock.unlock();
      task.finish();
      lock.lock();
    }
  }

  struct Task {
    std::function<void()> work, finish;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> queued_{0};  // tasks_.size(), for spinning helpers
  int idle_ = 0;
  bool stop_ = false;
};

Pool &pool() {
  static Pool *p = new Pool();  // never destroyed; stopped at shutdown
  return *p;
}

// After the devices' stream workers (priority 10) have stopped.
const bool registered = (on_shutdown(5, [] { pool().stop(); }), true);

// Counts finished chunks; keeps the first exception.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> pending;
  std::exception_ptr error;
};

thread_local int t_last_threads = 1;  // parallel_last_threads()

// [0, n) in at most max_chunks even chunks (n > 0).
void run_chunks(int64_t n, int64_t max_chunks, const std::function<void(int64_t, int64_t)> &fn) {
  ComputeBudget &budget = ComputeBudget::instance();
  max_chunks = std::min<int64_t>(max_chunks, budget.size());
  int helpers = max_chunks > 1 ? budget.try_acquire(static_cast<int>(max_chunks - 1)) : 0;
  t_last_threads = helpers + 1;
  if (helpers == 0) {
    fn(0, n);
    return;
  }
  int chunks = helpers + 1;
  auto bound = [&](int c) { return n * c / chunks; };
  Latch latch;
  latch.pending = helpers;
  std::vector<std::exception_ptr> errors(chunks);
  for (int c = 1; c < chunks; ++c) {
    pool().submit(
        [&, c] {
          try {
            fn(bound(c), bound(c + 1));
          } catch (...) {
            errors[c] = std::current_exception();
          }
        },
        [&, c] {
          std::lock_guard<std::mutex> lock(latch.mu);
          if (errors[c] && !latch.error) latch.error = errors[c];
          if (--latch.pending == 0) latch.cv.notify_one();
        });
  }
  std::exception_ptr mine;
  try {
    fn(bound(0), bound(1));
  } catch (...) {
    mine = std::current_exception();
  }
  if (!spin_until([&] { return latch.pending.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(latch.mu);
    latch.cv.wait(lock, [&] { return latch.pending == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(latch.mu);  // the last helper has left the latch
  }
  budget.release(helpers);
  if (mine) std::rethrow_exception(mine);
  if (latch.error) std::rethrow_exception(latch.error);
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0) return;
  run_chunks(n, n / std::max<int64_t>(grain, 1), fn);
}

void parallel_for_threads(int64_t n, int64_t threads, const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0) return;
  run_chunks(n, std::min(n, threads), fn);
}

int parallel_last_threads() { return t_last_threads; }

void parallel_blocks(int64_t n, int64_t blocks, const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0) return;
  blocks = std::clamp<int64_t>(blocks, 1, n);
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(n * i / blocks, n * (i + 1) / blocks);
  });
}

}  // namespace hpu::kernels
