// The parallel_for pool's helpers: a caller that splits again right after a
// split finds the helper of the last one idle, so the pool never holds more
// helper threads than the budget lends (an extra helper would be woken by
// every split and spin beside the work).
#include <gtest/gtest.h>

#include <dirent.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "device/compute_budget.hpp"
#include "kernels/parallel.hpp"

namespace {

// Threads of this process now (/proc/self/task).
int thread_count() {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  while (dirent *e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

TEST(ParallelWait, BackToBackSplitsReuseTheOneHelperTheBudgetLends) {
  hpu::ComputeBudget::instance().configure(2);
  std::atomic<int64_t> sum{0};
  // The first split starts the helper.
  hpu::kernels::parallel_for_threads(2, 2, [&](int64_t b, int64_t e) { sum += e - b; });
  ASSERT_EQ(hpu::kernels::parallel_last_threads(), 2);
  const int before = thread_count();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 3000; ++i) {
    hpu::kernels::parallel_for_threads(2, 2, [&](int64_t b, int64_t e) { sum += e - b; });
    ASSERT_EQ(hpu::kernels::parallel_last_threads(), 2);
  }
  EXPECT_EQ(sum.load(), 2 * 3001);
  EXPECT_EQ(thread_count(), before) << "the pool started helpers the budget never lends at once";
}

TEST(ParallelWait, ErrorsOfTheHelpersChunkReachTheCaller) {
  hpu::ComputeBudget::instance().configure(2);
  for (int i = 0; i < 50; ++i)
    EXPECT_THROW(hpu::kernels::parallel_for_threads(
                     2, 2,
                     [&](int64_t b, int64_t) {
                       if (b == 1) throw std::runtime_error("chunk 1");
                     }),
                 std::runtime_error);
  int64_t seen = 0;
  hpu::kernels::parallel_for_threads(2, 2, [&](int64_t b, int64_t e) {
    if (b == 1) seen = e - b;
  });
  EXPECT_EQ(seen, 1);
}

}  // namespace
