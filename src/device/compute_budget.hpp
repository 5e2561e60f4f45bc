// One compute budget for the whole process: at most N threads compute at once,
// whichever devices they work for. N = HPU_NUM_THREADS, or the CPUs this
// process may run on. Stream workers hold one token while a compute operation
// runs; kernels may borrow more for parallel work. Waits (collectives, events)
// hold none, so eight devices on two cores never deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace hpu {

class ComputeBudget {
 public:
  static ComputeBudget &instance();

  void configure(int tokens);
  int size() const { return size_; }

  void acquire();
  // Takes up to `want` more tokens without waiting; returns how many it got.
  int try_acquire(int want);
  void release(int n = 1);
  // Tokens held now, read without the lock (for spinning waiters: a core is
  // free of compute while busy() < available_cpus()).
  int busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  void set_free(int free);  // mu_ held
  std::mutex mu_;
  std::condition_variable cv_;
  int size_ = 1;
  int free_ = 1;
  std::atomic<int> busy_{0};
};

// Holds one token for its scope.
class ComputeToken {
 public:
  ComputeToken() { ComputeBudget::instance().acquire(); }
  ~ComputeToken() { ComputeBudget::instance().release(); }
  ComputeToken(const ComputeToken &) = delete;
  ComputeToken &operator=(const ComputeToken &) = delete;
};

// CPUs this process may run on (sched_getaffinity), at least 1.
int available_cpus();

}  // namespace hpu
