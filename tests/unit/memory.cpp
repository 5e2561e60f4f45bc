// Device memory: Habana's statistics figure by figure, the JSON form, capacity
// and out-of-memory, lazy reservation, the caching allocator (steady state,
// split, merge, empty cache), copies and sets, bad input, and threads.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "expect.hpp"

using hpu_test::ptr_text;

namespace {

constexpr uint64_t KiB = 1ull << 10, MiB = 1ull << 20, GiB = 1ull << 30;

hpuMemStats_t stats_of(hpuDevice_t dev) {
  hpuMemStats_t s = HPU_MEM_STATS_INIT;
  EXPECT_HPU_OK(hpuMemStats(dev, &s));
  return s;
}

// Habana's ten figures (Limit left out), in Habana's order, as one line that
// EXPECT_EQ can show side by side.
std::string line(uint64_t in_use, uint64_t max_in_use, uint64_t allocs, uint64_t frees, int64_t active,
                 uint64_t max_alloc, uint64_t total_allocs, uint64_t total_frees, int64_t total_active) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "InUse=%llu MaxInUse=%llu NumAllocs=%llu NumFrees=%llu ActiveAllocs=%lld MaxAllocSize=%llu "
                "TotalSystemAllocs=%llu TotalSystemFrees=%llu TotalActiveAllocs=%lld",
                (unsigned long long)in_use, (unsigned long long)max_in_use, (unsigned long long)allocs,
                (unsigned long long)frees, (long long)active, (unsigned long long)max_alloc,
                (unsigned long long)total_allocs, (unsigned long long)total_frees, (long long)total_active);
  return buf;
}

// What the device reports.
std::string figures(hpuDevice_t dev) {
  hpuMemStats_t s = stats_of(dev);
  return line(s.in_use, s.max_in_use, s.num_allocs, s.num_frees, s.active_allocs, s.max_alloc_size,
              s.total_system_allocs, s.total_system_frees, s.total_active_allocs);
}

// What Habana's rules say (TotalActiveAllocs follows from the totals).
std::string expected(uint64_t in_use, uint64_t max_in_use, uint64_t allocs, uint64_t frees, int64_t active,
                     uint64_t max_alloc, uint64_t total_allocs, uint64_t total_frees) {
  return line(in_use, max_in_use, allocs, frees, active, max_alloc, total_allocs, total_frees,
              static_cast<int64_t>(total_allocs) - static_cast<int64_t>(total_frees));
}

class Memory : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0)); }
  void TearDown() override { EXPECT_HPU_OK(hpuDeviceClose(dev)); }

  void *alloc(size_t bytes) {
    void *p = nullptr;
    EXPECT_HPU_OK(hpuMemAlloc(&p, dev, bytes));
    return p;
  }
  void free(void *p) { EXPECT_HPU_OK(hpuMemFree(p)); }

  hpuDevice_t dev = nullptr;
};

// A device of the given capacity (before the library initialises).
class SmallDevice : public Memory {
 protected:
  void SetUp() override {
    setenv("HPU_DEVICE_MEMORY", "64MiB", 1);
    Memory::SetUp();
  }
};

}  // namespace

TEST_F(Memory, FreshDeviceFigures) {
  hpuMemStats_t s = stats_of(dev);
  EXPECT_EQ(s.limit, 96 * GiB);
  EXPECT_EQ(figures(dev), expected(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.segment_allocs, 0u);
  EXPECT_EQ(s.segment_frees, 0u);
}

TEST_F(Memory, StatisticsFollowHabanaFigureByFigure) {
  void *a = alloc(1000);  // 1024 counted
  void *b = alloc(3000);  // 3072
  EXPECT_EQ(figures(dev), expected(4096, 4096, 2, 0, 2, 3072, 2, 0));
  free(a);
  EXPECT_EQ(figures(dev), expected(3072, 4096, 2, 1, 1, 3072, 2, 1));

  // Reset peak: MaxInUse becomes 0 (not InUse) and grows again with the next allocation.
  ASSERT_HPU_OK(hpuMemResetPeakStats(dev));
  EXPECT_EQ(figures(dev), expected(3072, 0, 2, 1, 1, 3072, 2, 1));
  void *c = alloc(1);  // 512
  EXPECT_EQ(figures(dev), expected(3584, 3584, 3, 1, 2, 3072, 3, 1));

  // Reset accumulated: counts and MaxAllocSize zeroed, MaxInUse = InUse, totals kept.
  ASSERT_HPU_OK(hpuMemResetAccumulatedStats(dev));
  EXPECT_EQ(figures(dev), expected(3584, 3584, 0, 0, 0, 0, 3, 1));

  // Blocks from before the reset freed after it: ActiveAllocs goes negative.
  free(b);
  EXPECT_EQ(figures(dev), expected(512, 3584, 0, 1, -1, 0, 3, 2));
  free(c);
  EXPECT_EQ(figures(dev), expected(0, 3584, 0, 2, -2, 0, 3, 3));
  void *d = alloc(513);  // 1024
  EXPECT_EQ(figures(dev), expected(1024, 3584, 1, 2, -1, 1024, 4, 3));
  ASSERT_HPU_OK(hpuMemResetPeakStats(dev));
  EXPECT_EQ(figures(dev), expected(1024, 0, 1, 2, -1, 1024, 4, 3));
  free(d);
  // Freeing never raises the peak.
  EXPECT_EQ(figures(dev), expected(0, 0, 1, 3, -2, 1024, 4, 4));
  ASSERT_HPU_OK(hpuMemResetAccumulatedStats(dev));
  EXPECT_EQ(figures(dev), expected(0, 0, 0, 0, 0, 0, 4, 4));
}

TEST_F(Memory, SizesAreRoundedTo512) {
  EXPECT_EQ(HPU_MEM_GRANULARITY, 512);
  const std::pair<size_t, uint64_t> cases[] = {{1, 512},          {511, 512},         {512, 512},
                                               {513, 1024},       {4096, 4096},       {MiB + 1, MiB + 512},
                                               {10 * MiB - 1, 10 * MiB}, {33 * MiB + 7, 33 * MiB + 512}};
  for (auto [bytes, counted] : cases) {
    uint64_t before = stats_of(dev).in_use;
    void *p = alloc(bytes);
    hpuMemStats_t s = stats_of(dev);
    EXPECT_EQ(s.in_use - before, counted) << bytes;
    EXPECT_EQ(s.max_alloc_size, std::max<uint64_t>(counted, s.max_alloc_size)) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u) << "allocation not aligned to the granularity";
    free(p);
    EXPECT_EQ(stats_of(dev).in_use, before);
  }
}

TEST_F(Memory, ZeroBytesGiveNullAndCountNothing) {
  void *p = reinterpret_cast<void *>(0x1);
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(figures(dev), expected(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_HPU_OK(hpuMemFree(nullptr));
  EXPECT_EQ(figures(dev), expected(0, 0, 0, 0, 0, 0, 0, 0));
}

TEST_F(Memory, StatsJsonHasHabanasKeysInOrder) {
  void *a = alloc(1000), *b = alloc(5 * MiB);
  ASSERT_HPU_OK(hpuMemResetAccumulatedStats(dev));
  free(a);
  free(b);
  void *c = alloc(700);  // a state with a negative ActiveAllocs and non-zero everything else
  char *json = nullptr;
  ASSERT_HPU_OK(hpuMemStatsJson(dev, &json));
  ASSERT_NE(json, nullptr);
  std::string text = json;
  hpuFree(json);
  hpuMemStats_t s = stats_of(dev);
  ASSERT_EQ(s.active_allocs, -1);

  const std::pair<const char *, long long> want[] = {
      {"Limit", (long long)s.limit},
      {"InUse", (long long)s.in_use},
      {"MaxInUse", (long long)s.max_in_use},
      {"NumAllocs", (long long)s.num_allocs},
      {"NumFrees", (long long)s.num_frees},
      {"ActiveAllocs", s.active_allocs},
      {"MaxAllocSize", (long long)s.max_alloc_size},
      {"TotalSystemAllocs", (long long)s.total_system_allocs},
      {"TotalSystemFrees", (long long)s.total_system_frees},
      {"TotalActiveAllocs", s.total_active_allocs},
      {"ReservedBytes", (long long)s.reserved_bytes},
      {"SegmentAllocs", (long long)s.segment_allocs},
      {"SegmentFrees", (long long)s.segment_frees},
  };
  ASSERT_EQ(text.front(), '{') << text;
  ASSERT_EQ(text.back(), '}') << text;
  std::regex member("\"([A-Za-z]+)\"\\s*:\\s*(-?[0-9]+)\\s*([,}])");
  size_t i = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), member); it != std::sregex_iterator(); ++it, ++i) {
    ASSERT_LT(i, std::size(want)) << "extra member " << (*it)[0] << " in " << text;
    EXPECT_EQ((*it)[1], want[i].first) << text;
    EXPECT_EQ(std::stoll((*it)[2]), want[i].second) << want[i].first << " in " << text;
  }
  EXPECT_EQ(i, std::size(want)) << text;

  char *untouched = reinterpret_cast<char *>(0x1);
  EXPECT_HPU_FAIL(hpuMemStatsJson(dev, nullptr), HPU_ERROR_INVALID_ARGUMENT, "json is NULL");
  EXPECT_HPU_FAIL(hpuMemStatsJson(nullptr, &untouched), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_EQ(untouched, reinterpret_cast<char *>(0x1));
  free(c);
}

TEST_F(Memory, StatsHonourAnOlderStructSize) {
  void *p = alloc(512);
  hpuMemStats_t s;
  std::memset(&s, 0xCD, sizeof s);
  s.struct_size = offsetof(hpuMemStats_t, max_in_use);  // knows Limit and InUse only
  ASSERT_HPU_OK(hpuMemStats(dev, &s));
  EXPECT_EQ(s.limit, 96 * GiB);
  EXPECT_EQ(s.in_use, 512u);
  EXPECT_EQ(s.max_in_use, 0xCDCDCDCDCDCDCDCDull);
  hpuMemStats_t t = HPU_MEM_STATS_INIT;
  t.struct_size = 3;
  EXPECT_HPU_FAIL(hpuMemStats(dev, &t), HPU_ERROR_INVALID_ARGUMENT, "stats->struct_size is 3");
  EXPECT_HPU_FAIL(hpuMemStats(dev, nullptr), HPU_ERROR_INVALID_ARGUMENT, "stats is NULL");
  free(p);
}

TEST_F(Memory, GetInfoIsLimitMinusInUse) {
  void *p = alloc(3 * MiB + 1);
  size_t free_bytes = 0, total = 0;
  ASSERT_HPU_OK(hpuMemGetInfo(dev, &free_bytes, &total));
  EXPECT_EQ(total, 96 * GiB);
  EXPECT_EQ(free_bytes, 96 * GiB - (3 * MiB + 512));
  EXPECT_HPU_FAIL(hpuMemGetInfo(dev, nullptr, &total), HPU_ERROR_INVALID_ARGUMENT, "free_bytes is NULL");
  EXPECT_HPU_FAIL(hpuMemGetInfo(dev, &free_bytes, nullptr), HPU_ERROR_INVALID_ARGUMENT, "total_bytes is NULL");
  EXPECT_HPU_FAIL(hpuMemGetInfo(nullptr, &free_bytes, &total), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  free(p);
}

TEST_F(SmallDevice, OutOfMemoryAtExactlyTheLimit) {
  EXPECT_EQ(stats_of(dev).limit, 64 * MiB);
  void *big = alloc(64 * MiB - 512);
  void *last = alloc(512);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(stats_of(dev).in_use, stats_of(dev).limit);
  void *p = reinterpret_cast<void *>(0x1);
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, 1), HPU_ERROR_OUT_OF_MEMORY,
                  "1 bytes requested (512 in the allocator's 512-byte granules)",
                  "device 0 has 67108864 bytes (64 MiB), 67108864 in use, 0 free");
  EXPECT_EQ(p, reinterpret_cast<void *>(0x1)) << "out-pointer touched on failure";
  // The failure counts nothing.
  EXPECT_EQ(figures(dev), expected(64 * MiB, 64 * MiB, 2, 0, 2, 64 * MiB - 512, 2, 0));
  free(last);
  void *again = alloc(100);
  EXPECT_NE(again, nullptr);
  free(again);
  free(big);
  // More than the limit in one piece, and more than a size_t can round.
  // The figures are exact: one byte more than the device is not "64.0 MiB".
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, 64 * MiB + 1), HPU_ERROR_OUT_OF_MEMORY,
                  "67108865 bytes requested (67109376 in the allocator's 512-byte granules)",
                  "device 0 has 67108864 bytes (64 MiB), 0 in use, 67108864 free");
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, SIZE_MAX), HPU_ERROR_OUT_OF_MEMORY, "18446744073709551615 bytes");
}

TEST_F(SmallDevice, SmallBlocksFillTheDeviceExactly) {
  std::vector<void *> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(alloc(MiB));
  EXPECT_EQ(stats_of(dev).in_use, 64 * MiB);
  void *p;
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, 512), HPU_ERROR_OUT_OF_MEMORY, "67108864 in use, 0 free");
  free(blocks.back());
  blocks.pop_back();
  blocks.push_back(alloc(MiB - 512));
  blocks.push_back(alloc(512));
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, dev, 512), HPU_ERROR_OUT_OF_MEMORY, "67108864 in use, 0 free");
  for (void *b : blocks) free(b);
}

TEST_F(SmallDevice, CachedSegmentsDoNotCauseOutOfMemory) {
  // Fill the cache with small segments, free everything, then ask for the
  // whole device in one piece: the cache is emptied to make room.
  std::vector<void *> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(alloc(MiB));
  for (void *b : blocks) free(b);
  hpuMemStats_t before = stats_of(dev);
  EXPECT_EQ(before.reserved_bytes, 20 * MiB);
  void *all = alloc(64 * MiB);
  ASSERT_NE(all, nullptr);
  hpuMemStats_t after = stats_of(dev);
  EXPECT_EQ(after.in_use, 64 * MiB);
  EXPECT_EQ(after.segment_frees - before.segment_frees, 10u);
  EXPECT_EQ(after.reserved_bytes, 64 * MiB);
  free(all);
}

TEST_F(Memory, WholeCapacityOnAHostWithLessRam) {
  // 96 GiB per device, eight devices: reserved lazily, so only touched bytes cost RAM.
  std::vector<hpuDevice_t> devs(8);
  std::vector<void *> ptrs(8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_HPU_OK(hpuDeviceOpen(&devs[i], i));
    ASSERT_HPU_OK(hpuMemAlloc(&ptrs[i], devs[i], 96 * GiB));
    EXPECT_EQ(stats_of(devs[i]).in_use, 96 * GiB);
    EXPECT_EQ(stats_of(devs[i]).reserved_bytes, 96 * GiB);
  }
  // Touch both ends of the last device's memory.
  char *p = static_cast<char *>(ptrs[7]);
  ASSERT_HPU_OK(hpuMemset(p, 0x5A, 4096));
  ASSERT_HPU_OK(hpuMemset(p + 96 * GiB - 4096, 0xA5, 4096));
  unsigned char head[4096], tail[4096];
  ASSERT_HPU_OK(hpuMemcpy(head, p, sizeof head, HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuMemcpy(tail, p + 96 * GiB - 4096, sizeof tail, HPU_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(std::all_of(head, head + 4096, [](unsigned char c) { return c == 0x5A; }));
  EXPECT_TRUE(std::all_of(tail, tail + 4096, [](unsigned char c) { return c == 0xA5; }));
  void *q;
  EXPECT_HPU_FAIL(hpuMemAlloc(&q, devs[7], 1), HPU_ERROR_OUT_OF_MEMORY,
                  "device 7 has 103079215104 bytes (96 GiB), 103079215104 in use, 0 free");
  for (int i = 0; i < 8; ++i) {
    EXPECT_HPU_OK(hpuMemFree(ptrs[i]));
    EXPECT_HPU_OK(hpuMemEmptyCache(devs[i]));
    EXPECT_EQ(stats_of(devs[i]).reserved_bytes, 0u);
    EXPECT_HPU_OK(hpuDeviceClose(devs[i]));
  }
}

TEST_F(Memory, SteadyLoopMakesNoNewSegments) {
  // A training-loop pattern: the same sizes every step, small, medium and large.
  const size_t sizes[] = {512, 3000, 64 * KiB, MiB, 3 * MiB + 100, 12 * MiB, 40 * MiB};
  auto step = [&] {
    std::vector<void *> live;
    for (size_t s : sizes) live.push_back(alloc(s));
    for (size_t s : sizes) live.push_back(alloc(s / 2 + 1));
    for (void *p : live) free(p);
  };
  step();
  hpuMemStats_t warm = stats_of(dev);
  EXPECT_GT(warm.segment_allocs, 0u);
  for (int i = 0; i < 200; ++i) step();
  hpuMemStats_t later = stats_of(dev);
  EXPECT_EQ(later.segment_allocs, warm.segment_allocs);
  EXPECT_EQ(later.segment_frees, warm.segment_frees);
  EXPECT_EQ(later.reserved_bytes, warm.reserved_bytes);
  EXPECT_EQ(later.total_system_allocs, warm.total_system_allocs + 200 * 2 * std::size(sizes));
  EXPECT_EQ(later.in_use, 0u);
}

TEST_F(Memory, ManyFreesOfOneSizeAreReusedWithoutNewSegments) {
  // More blocks of one size than the allocator keeps aside for quick reuse:
  // the rest go back to their pool, and all of them serve the next round.
  std::vector<void *> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(alloc(4096));
  hpuMemStats_t first = stats_of(dev);
  for (int round = 0; round < 5; ++round) {
    for (void *b : blocks) free(b);
    EXPECT_EQ(stats_of(dev).in_use, 0u);
    blocks.clear();
    for (int i = 0; i < 100; ++i) blocks.push_back(alloc(4096));
    std::vector<void *> sorted = blocks;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a block handed out twice";
  }
  hpuMemStats_t s = stats_of(dev);
  EXPECT_EQ(s.segment_allocs, first.segment_allocs);
  EXPECT_EQ(s.in_use, 100u * 4096);
  EXPECT_EQ(s.active_allocs, 100);
  for (void *b : blocks) free(b);
  // A different size after the frees still fits in the merged segment.
  void *big = alloc(MiB);
  EXPECT_EQ(stats_of(dev).segment_allocs, first.segment_allocs);
  free(big);
}

TEST_F(Memory, SmallPoolSplitsAndMerges) {
  // Consecutive small blocks are carved from one 2 MiB segment.
  char *a = static_cast<char *>(alloc(512));
  char *b = static_cast<char *>(alloc(512));
  char *c = static_cast<char *>(alloc(512));
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(c, b + 512);
  EXPECT_EQ(stats_of(dev).segment_allocs, 1u);
  EXPECT_EQ(stats_of(dev).reserved_bytes, 2 * MiB);
  // A freed block is reused by the next request of its size.
  free(b);
  EXPECT_EQ(alloc(512), b);
  // Freed neighbours merge: four 512 KiB blocks fill the segment; once freed,
  // the segment serves two 1 MiB blocks without a new one.
  free(a);
  free(b);
  free(c);
  std::vector<void *> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(alloc(512 * KiB));
  EXPECT_EQ(stats_of(dev).segment_allocs, 1u);
  for (void *q : quarters) free(q);
  void *h1 = alloc(MiB), *h2 = alloc(MiB);
  EXPECT_EQ(stats_of(dev).segment_allocs, 1u);
  EXPECT_EQ(static_cast<char *>(h2) - static_cast<char *>(h1), static_cast<ptrdiff_t>(MiB));
  free(h1);
  free(h2);
}

TEST_F(Memory, LargePoolSegments) {
  void *m1 = alloc(5 * MiB), *m2 = alloc(5 * MiB);  // medium: one 20 MiB segment
  hpuMemStats_t s = stats_of(dev);
  EXPECT_EQ(s.segment_allocs, 1u);
  EXPECT_EQ(s.reserved_bytes, 20 * MiB);
  EXPECT_EQ(static_cast<char *>(m2) - static_cast<char *>(m1), static_cast<ptrdiff_t>(5 * MiB));
  void *big = alloc(49 * MiB + 1);  // large: a segment of its own, in 2 MiB steps
  s = stats_of(dev);
  EXPECT_EQ(s.segment_allocs, 2u);
  EXPECT_EQ(s.reserved_bytes, 20 * MiB + 50 * MiB);
  EXPECT_EQ(s.in_use, 10 * MiB + 49 * MiB + 512);
  free(m1);
  free(m2);
  free(big);
  // The freed big block serves a request of the same size again.
  void *again = alloc(49 * MiB + 1);
  EXPECT_EQ(again, big);
  EXPECT_EQ(stats_of(dev).segment_allocs, 2u);
  free(again);
}

TEST_F(Memory, EmptyCacheReturnsFreeSegments) {
  void *keep = alloc(512);
  std::vector<void *> blocks;
  for (size_t s : {size_t(1000), size_t(900 * KiB), size_t(900 * KiB), size_t(3 * MiB), size_t(30 * MiB)})
    blocks.push_back(alloc(s));
  for (void *b : blocks) free(b);
  hpuMemStats_t before = stats_of(dev);
  EXPECT_GT(before.reserved_bytes, 2 * MiB);
  ASSERT_HPU_OK(hpuMemEmptyCache(dev));
  hpuMemStats_t after = stats_of(dev);
  // Only the segment holding `keep` stays.
  EXPECT_EQ(after.reserved_bytes, 2 * MiB);
  EXPECT_EQ(after.segment_allocs, before.segment_allocs);
  EXPECT_EQ(after.segment_frees, before.segment_allocs - 1);
  EXPECT_EQ(after.in_use, 512u);
  free(keep);
  ASSERT_HPU_OK(hpuMemEmptyCache(dev));
  EXPECT_EQ(stats_of(dev).reserved_bytes, 0u);
  EXPECT_EQ(stats_of(dev).segment_frees, before.segment_allocs);
  EXPECT_HPU_FAIL(hpuMemEmptyCache(nullptr), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
}

TEST_F(Memory, FreeRejectsWhatItDidNotAllocate) {
  char *p = static_cast<char *>(alloc(4096));
  int on_stack;
  EXPECT_HPU_FAIL(hpuMemFree(p + 512), HPU_ERROR_INVALID_HANDLE, ptr_text(p + 512).c_str(), "device 0");
  EXPECT_HPU_FAIL(hpuMemFree(&on_stack), HPU_ERROR_INVALID_HANDLE, ptr_text(&on_stack).c_str(), "is not device memory");
  EXPECT_EQ(stats_of(dev).num_frees, 0u);
  free(p);
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_INVALID_HANDLE, ptr_text(p).c_str(), "already freed");
  EXPECT_EQ(stats_of(dev).num_frees, 1u);
}

// hpuMemFree takes no device: the allocation's own device frees it.
TEST_F(Memory, FreeFindsTheAllocationsDevice) {
  hpuDevice_t other;
  ASSERT_HPU_OK(hpuDeviceOpen(&other, 1));
  void *q = nullptr;
  ASSERT_HPU_OK(hpuMemAlloc(&q, other, 4096));
  const uint64_t frees_here = stats_of(dev).num_frees;
  EXPECT_EQ(stats_of(other).in_use, 4096u);
  EXPECT_HPU_OK(hpuMemFree(q));
  EXPECT_EQ(stats_of(other).in_use, 0u);
  EXPECT_EQ(stats_of(other).num_frees, 1u);
  EXPECT_EQ(stats_of(dev).num_frees, frees_here);
  EXPECT_HPU_OK(hpuDeviceClose(other));  // nothing of `other` is left allocated
  EXPECT_HPU_FAIL(hpuMemFree(q), HPU_ERROR_INVALID_HANDLE, ptr_text(q).c_str());
}

TEST_F(Memory, AllocBadInput) {
  EXPECT_HPU_FAIL(hpuMemAlloc(nullptr, dev, 512), HPU_ERROR_INVALID_ARGUMENT, "ptr is NULL");
  void *p = reinterpret_cast<void *>(0x1);
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, nullptr, 512), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  hpuStream_t s;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &s));
  EXPECT_HPU_FAIL(hpuMemAlloc(&p, reinterpret_cast<hpuDevice_t>(s), 512), HPU_ERROR_INVALID_HANDLE,
                  ptr_text(s).c_str());
  EXPECT_EQ(p, reinterpret_cast<void *>(0x1));
  EXPECT_HPU_FAIL(hpuMemResetPeakStats(nullptr), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_HPU_FAIL(hpuMemResetAccumulatedStats(nullptr), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
}

TEST_F(Memory, CopiesInEveryDirection) {
  hpuDevice_t other;
  ASSERT_HPU_OK(hpuDeviceOpen(&other, 1));
  const size_t n = 3 * MiB + 123;
  std::vector<unsigned char> host(n), back(n, 0);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(i * 131 + 7);
  void *a = alloc(n), *b = nullptr, *c = alloc(n);
  ASSERT_HPU_OK(hpuMemAlloc(&b, other, n));
  ASSERT_HPU_OK(hpuMemcpy(a, host.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemcpy(b, a, n, HPU_MEMCPY_DEVICE_TO_DEVICE));  // across devices
  ASSERT_HPU_OK(hpuMemcpy(c, b, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemcpy(back.data(), c, n, HPU_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(host, back);
  // Asynchronous forms, on a created stream and on the default one (NULL).
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuMemsetAsync(s, a, 0x11, n));
  ASSERT_HPU_OK(hpuMemsetAsync(s, static_cast<char *>(a) + 100, 0x22, 50));
  ASSERT_HPU_OK(hpuMemcpyAsync(s, back.data(), a, n, HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuStreamSynchronize(s));
  for (size_t i : {size_t(0), size_t(99), size_t(100), size_t(149), size_t(150), n - 1})
    EXPECT_EQ(back[i], (i >= 100 && i < 150) ? 0x22 : 0x11) << i;
  ASSERT_HPU_OK(hpuMemcpyAsync(nullptr, c, host.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemsetAsync(nullptr, c, 0, 10));
  hpuStream_t def;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &def));
  ASSERT_HPU_OK(hpuStreamSynchronize(def));
  ASSERT_HPU_OK(hpuMemcpy(back.data(), c, n, HPU_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(back[9], 0);
  EXPECT_EQ(back[10], host[10]);
  EXPECT_EQ(back[n - 1], host[n - 1]);
  ASSERT_HPU_OK(hpuMemset(a, 0xFF, n));
  ASSERT_HPU_OK(hpuMemcpy(back.data(), a, n, HPU_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](unsigned char x) { return x == 0xFF; }));
  // Zero bytes is a no-op.
  EXPECT_HPU_OK(hpuMemcpy(a, host.data(), 0, HPU_MEMCPY_HOST_TO_DEVICE));
  EXPECT_HPU_OK(hpuMemset(a, 1, 0));
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  free(a);
  free(c);
  EXPECT_HPU_OK(hpuMemFree(b));
  EXPECT_HPU_OK(hpuDeviceClose(other));
}

TEST_F(Memory, CopyKindsAreChecked) {
  const size_t n = 4096;
  char *d = static_cast<char *>(alloc(n));
  std::vector<char> host(n);
  char *h = host.data();
  std::string ds = ptr_text(d), hs = ptr_text(h);
  const hpuMemcpyKind_t H2D = HPU_MEMCPY_HOST_TO_DEVICE, D2H = HPU_MEMCPY_DEVICE_TO_HOST,
                        D2D = HPU_MEMCPY_DEVICE_TO_DEVICE;
  // Host memory where device memory is required.
  EXPECT_HPU_FAIL(hpuMemcpy(h, h, n, H2D), HPU_ERROR_INVALID_HANDLE, ("dst " + hs).c_str(),
                  "not device memory, as HPU_MEMCPY_HOST_TO_DEVICE requires");
  EXPECT_HPU_FAIL(hpuMemcpy(h, h, n, D2H), HPU_ERROR_INVALID_HANDLE, ("src " + hs).c_str());
  EXPECT_HPU_FAIL(hpuMemcpy(d, h, n, D2D), HPU_ERROR_INVALID_HANDLE, ("src " + hs).c_str());
  EXPECT_HPU_FAIL(hpuMemcpy(h, d, n, D2D), HPU_ERROR_INVALID_HANDLE, ("dst " + hs).c_str());
  // Device memory where host memory is expected.
  EXPECT_HPU_FAIL(hpuMemcpy(d, d, n, H2D), HPU_ERROR_INVALID_ARGUMENT, ("src " + ds).c_str(),
                  "use HPU_MEMCPY_DEVICE_TO_DEVICE");
  EXPECT_HPU_FAIL(hpuMemcpy(d, d, n, D2H), HPU_ERROR_INVALID_ARGUMENT, ("dst " + ds).c_str());
  // A range running past the end of its allocation.
  EXPECT_HPU_FAIL(hpuMemcpy(d, h, 4 * MiB, H2D), HPU_ERROR_INVALID_ARGUMENT,
                  ("dst " + ds + " (+4194304 bytes) runs 4190208 bytes past the end of its 4096-byte").c_str());
  // NULL and unknown kinds.
  EXPECT_HPU_FAIL(hpuMemcpy(nullptr, h, n, H2D), HPU_ERROR_INVALID_ARGUMENT, "dst is NULL");
  EXPECT_HPU_FAIL(hpuMemcpy(d, nullptr, n, H2D), HPU_ERROR_INVALID_ARGUMENT, "src is NULL");
  EXPECT_HPU_FAIL(hpuMemcpy(d, h, n, static_cast<hpuMemcpyKind_t>(0)), HPU_ERROR_INVALID_ARGUMENT, "kind 0");
  EXPECT_HPU_FAIL(hpuMemcpy(d, h, n, static_cast<hpuMemcpyKind_t>(7)), HPU_ERROR_INVALID_ARGUMENT, "kind 7");
  // The same checks for the asynchronous form, plus its stream.
  EXPECT_HPU_FAIL(hpuMemcpyAsync(nullptr, h, h, n, H2D), HPU_ERROR_INVALID_HANDLE, ("dst " + hs).c_str());
  EXPECT_HPU_FAIL(hpuMemcpyAsync(nullptr, d, h, n, static_cast<hpuMemcpyKind_t>(-1)), HPU_ERROR_INVALID_ARGUMENT,
                  "kind -1");
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  hpuStream_t not_a_stream = reinterpret_cast<hpuStream_t>(e);
  EXPECT_HPU_FAIL(hpuMemcpyAsync(not_a_stream, d, h, n, H2D), HPU_ERROR_INVALID_HANDLE, ptr_text(not_a_stream).c_str());
  EXPECT_HPU_OK(hpuEventDestroy(e));
  free(d);
}

// Row i of dst is row rows[i] of src, in every direction; rows may repeat and
// come in any order, the caller's list may change once the call returns, and a
// long list is copied by several threads.
TEST_F(Memory, RowGathersInEveryDirection) {
  const size_t row = 1000, n_src = 300, n = 2000;  // 2 MB of rows: chunks of 65 rows
  std::vector<unsigned char> host(row * n_src), back(row * n, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 131 + i / row);
  std::vector<int64_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = int64_t((i * 7919 + 13) % n_src);
  auto expect_rows = [&](const std::vector<unsigned char> &got, const std::vector<int64_t> &list) {
    for (size_t i = 0; i < list.size(); ++i)
      ASSERT_EQ(0, std::memcmp(got.data() + i * row, host.data() + size_t(list[i]) * row, row)) << "row " << i;
  };
  char *src = static_cast<char *>(alloc(host.size())), *dst = static_cast<char *>(alloc(back.size()));
  ASSERT_HPU_OK(hpuMemcpy(src, host.data(), host.size(), HPU_MEMCPY_HOST_TO_DEVICE));
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  // Host to device, the list overwritten before the copy has run.
  std::vector<int64_t> list = rows;
  ASSERT_HPU_OK(hpuMemcpyRowsAsync(s, dst, host.data(), row, list.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  std::fill(list.begin(), list.end(), 0);
  ASSERT_HPU_OK(hpuMemcpyAsync(s, back.data(), dst, back.size(), HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuStreamSynchronize(s));
  expect_rows(back, rows);
  // Device to host and device to device (the default stream), a few rows.
  const std::vector<int64_t> few{299, 0, 299, 5};
  std::fill(back.begin(), back.end(), 0);
  ASSERT_HPU_OK(hpuMemcpyRowsAsync(s, back.data(), src, row, few.data(), few.size(), HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuStreamSynchronize(s));
  expect_rows(back, few);
  EXPECT_EQ(back[few.size() * row], 0);  // nothing past the rows asked for
  ASSERT_HPU_OK(hpuMemcpyRowsAsync(nullptr, dst, src, row, few.data(), few.size(), HPU_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemcpy(back.data(), dst, few.size() * row, HPU_MEMCPY_DEVICE_TO_HOST));
  expect_rows(back, few);
  // No rows, or rows of no bytes: nothing is checked or copied.
  EXPECT_HPU_OK(hpuMemcpyRowsAsync(s, dst, host.data(), row, nullptr, 0, HPU_MEMCPY_HOST_TO_DEVICE));
  EXPECT_HPU_OK(hpuMemcpyRowsAsync(s, dst, host.data(), 0, nullptr, 5, HPU_MEMCPY_HOST_TO_DEVICE));
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  free(src);
  free(dst);
}

TEST_F(Memory, RowGatherBadInput) {
  const size_t n = 4096;
  char *d = static_cast<char *>(alloc(n));
  std::vector<char> host(n);
  char *h = host.data();
  const std::string ds = ptr_text(d), hs = ptr_text(h);
  const hpuMemcpyKind_t H2D = HPU_MEMCPY_HOST_TO_DEVICE, D2D = HPU_MEMCPY_DEVICE_TO_DEVICE;
  const int64_t ok[] = {3, 1}, negative[] = {2, -7}, far[] = {0, 100000}, huge[] = {0, INT64_MAX / 2};
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, 64, nullptr, 2, H2D), HPU_ERROR_INVALID_ARGUMENT, "rows is NULL");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, 64, negative, 2, H2D), HPU_ERROR_INVALID_ARGUMENT, "rows[1] is -7");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, SIZE_MAX / 2, ok, 4, H2D), HPU_ERROR_INVALID_ARGUMENT,
                  "count 4 rows of row_bytes", "overflow");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, 2048, huge, 2, H2D), HPU_ERROR_INVALID_ARGUMENT,
                  "rows[1] is 4611686018427387903; that row of row_bytes 2048 is past the end of the address space");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, 64, ok, 2, static_cast<hpuMemcpyKind_t>(9)),
                  HPU_ERROR_INVALID_ARGUMENT, "kind 9");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, nullptr, h, 64, ok, 2, H2D), HPU_ERROR_INVALID_ARGUMENT, "dst is NULL");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, nullptr, 64, ok, 2, H2D), HPU_ERROR_INVALID_ARGUMENT, "src is NULL");
  // dst must hold count rows; a device src must hold every row asked for.
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, h, h, 64, ok, 2, H2D), HPU_ERROR_INVALID_HANDLE, ("dst " + hs).c_str());
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, h, 64, ok, 70000, H2D), HPU_ERROR_INVALID_ARGUMENT,
                  ("dst " + ds + " (+4480000 bytes) runs").c_str());  // checked before rows is read
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, d, 64, ok, 2, H2D), HPU_ERROR_INVALID_ARGUMENT, ("src " + ds).c_str(),
                  "use HPU_MEMCPY_DEVICE_TO_DEVICE");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(nullptr, d, d + 2048, 64, far, 2, D2D), HPU_ERROR_INVALID_ARGUMENT,
                  ("rows[1] is 100000, but src " + ptr_text(d + 2048) + " holds 32 rows of row_bytes 64").c_str());
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(reinterpret_cast<hpuStream_t>(e), d, h, 64, ok, 2, H2D), HPU_ERROR_INVALID_HANDLE,
                  ptr_text(e).c_str());
  EXPECT_HPU_OK(hpuEventDestroy(e));
  free(d);
}

TEST_F(Memory, SetBadInput) {
  char *d = static_cast<char *>(alloc(4096));
  std::vector<char> host(4096);
  EXPECT_HPU_FAIL(hpuMemset(nullptr, 0, 16), HPU_ERROR_INVALID_ARGUMENT, "dst is NULL");
  EXPECT_HPU_FAIL(hpuMemset(d, 256, 16), HPU_ERROR_INVALID_ARGUMENT, "value 256");
  EXPECT_HPU_FAIL(hpuMemset(d, -1, 16), HPU_ERROR_INVALID_ARGUMENT, "value -1");
  EXPECT_HPU_FAIL(hpuMemset(host.data(), 0, 16), HPU_ERROR_INVALID_HANDLE, ptr_text(host.data()).c_str(),
                  "not device memory");
  EXPECT_HPU_FAIL(hpuMemset(d, 0, 4 * MiB), HPU_ERROR_INVALID_ARGUMENT, "(+4194304 bytes) runs");
  EXPECT_HPU_FAIL(hpuMemsetAsync(nullptr, d, 300, 16), HPU_ERROR_INVALID_ARGUMENT, "value 300");
  EXPECT_HPU_FAIL(hpuMemsetAsync(nullptr, host.data(), 0, 16), HPU_ERROR_INVALID_HANDLE, "not device memory");
  EXPECT_HPU_FAIL(hpuMemsetAsync(reinterpret_cast<hpuStream_t>(dev), d, 0, 16), HPU_ERROR_INVALID_HANDLE,
                  ptr_text(dev).c_str());
  free(d);
}

namespace {

// Allocates, fills, checks and frees random sizes; returns false on corrupt data.
bool churn(hpuDevice_t dev, unsigned seed, int rounds) {
  std::mt19937 rng(seed);
  std::vector<std::pair<void *, size_t>> live;
  std::vector<unsigned char> back;
  const unsigned char tag = static_cast<unsigned char>(seed);
  for (int i = 0; i < rounds; ++i) {
    if (live.size() < 8 && (live.empty() || rng() % 2)) {
      size_t n = 1 + rng() % (rng() % 8 == 0 ? 3 * MiB : 20 * KiB);
      void *p;
      if (hpuMemAlloc(&p, dev, n) != HPU_SUCCESS || hpuMemset(p, tag, n) != HPU_SUCCESS) return false;
      live.emplace_back(p, n);
    } else {
      size_t k = rng() % live.size();
      auto [p, n] = live[k];
      back.assign(n, 0);
      if (hpuMemcpy(back.data(), p, n, HPU_MEMCPY_DEVICE_TO_HOST) != HPU_SUCCESS) return false;
      if (std::any_of(back.begin(), back.end(), [&](unsigned char c) { return c != tag; })) return false;
      if (hpuMemFree(p) != HPU_SUCCESS) return false;
      live.erase(live.begin() + k);
    }
  }
  for (auto [p, n] : live)
    if (hpuMemFree(p) != HPU_SUCCESS) return false;
  return true;
}

}  // namespace

TEST_F(Memory, ThreadsOnOneDevice) {
  const int threads = 8, rounds = 300;
  std::vector<std::thread> pool;
  std::vector<char> ok(threads, 0);
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { ok[t] = churn(dev, 100 + t, rounds); });
  for (auto &th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_TRUE(ok[t]) << "thread " << t << ": " << hpuGetLastErrorMessage();
  hpuMemStats_t s = stats_of(dev);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.num_allocs, s.num_frees);
  EXPECT_EQ(s.active_allocs, 0);
  EXPECT_GE(s.num_allocs, static_cast<uint64_t>(threads * rounds / 2));
}

TEST_F(Memory, ThreadsOnSeveralDevices) {
  const int threads = 8, rounds = 300;
  std::vector<hpuDevice_t> devs(threads);
  for (int t = 0; t < threads; ++t) ASSERT_HPU_OK(hpuDeviceOpen(&devs[t], t));
  std::vector<std::thread> pool;
  std::vector<char> ok(threads, 0);
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { ok[t] = churn(devs[t], 200 + t, rounds); });
  for (auto &th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    EXPECT_TRUE(ok[t]) << "thread " << t;
    hpuMemStats_t s = stats_of(devs[t]);
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.num_allocs, s.num_frees);
    EXPECT_HPU_OK(hpuDeviceClose(devs[t]));
  }
}
