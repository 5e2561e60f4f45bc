// The threads that run the replicas of an hpu_ddp run, kept for the whole run:
// replica 0 runs on the calling thread, each other one on a thread of its own
// that sleeps between jobs (a step costs a wake-up, not a thread creation).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hpu {

class ReplicaThreads {
 public:
  explicit ReplicaThreads(size_t replicas);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads &) = delete;
  ReplicaThreads &operator=(const ReplicaThreads &) = delete;

  // Runs job(i) for every replica i and returns when all are done. job must
  // not throw (the caller catches per replica).
  void run(const std::function<void(size_t)> &job);

 private:
  void loop(size_t i);

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(size_t)> *job_ = nullptr;
  uint64_t generation_ = 0;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hpu
