#include "device/compute_budget.hpp"

#include <sched.h>

#include <algorithm>

namespace hpu {

ComputeBudget &ComputeBudget::instance() {
  static ComputeBudget *budget = new ComputeBudget();  // never destroyed: workers may outlive statics
  return *budget;
}

void ComputeBudget::set_free(int free) {
  free_ = free;
  busy_.store(size_ - free_, std::memory_order_relaxed);
}

void ComputeBudget::configure(int tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens = std::max(tokens, 1);
  int free = free_ + tokens - size_;
  size_ = tokens;
  set_free(free);
  cv_.notify_all();
}

void ComputeBudget::acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return free_ > 0; });
  set_free(free_ - 1);
}

int ComputeBudget::try_acquire(int want) {
  std::lock_guard<std::mutex> lock(mu_);
  int got = std::max(0, std::min(want, free_));
  set_free(free_ - got);
  return got;
}

void ComputeBudget::release(int n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    set_free(free_ + n);
  }
  if (n == 1)
    cv_.notify_one();
  else
    cv_.notify_all();
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

}  // namespace hpu
