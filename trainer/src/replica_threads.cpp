#include "replica_threads.hpp"

namespace hpu {

ReplicaThreads::ReplicaThreads(size_t replicas) {
  for (size_t i = 1; i < replicas; ++i) threads_.emplace_back([this, i] { loop(i); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto &t : threads_) t.join();
}

void ReplicaThreads::run(const std::function<void(size_t)> &job) {
  if (!threads_.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    running_ = threads_.size();
    ++generation_;
  }
  start_cv_.notify_all();
  job(0);
  if (threads_.empty()) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
}

void ReplicaThreads::loop(size_t i) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const std::function<void(size_t)> *job = job_;
    lock.unlock();
    (*job)(i);
    lock.lock();
    if (--running_ == 0) done_cv_.notify_one();
  }
}

}  // namespace hpu
