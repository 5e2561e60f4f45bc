#include <hpu/trainer/rng.hpp>
#include <hpu/trainer/sampler.hpp>

#include "test_util.hpp"

#include <algorithm>
#include <set>

TEST(Sampler, SameSeedAndEpochGiveTheSameOrder) {
  hpu::DistributedSampler a(1000, 1, 0, true, 7), b(1000, 1, 0, true, 7);
  a.set_epoch(3);
  b.set_epoch(3);
  EXPECT_EQ(a.indices(), b.indices());
  b.set_epoch(4);
  EXPECT_NE(a.indices(), b.indices());
  hpu::DistributedSampler c(1000, 1, 0, true, 8);
  c.set_epoch(3);
  EXPECT_NE(a.indices(), c.indices());
  std::vector<size_t> sorted = a.indices();
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
}

TEST(Sampler, ShardsAreDisjointEqualAndPadded) {
  // 10 samples over 3 ranks: 4 each, the first two of the order repeated.
  std::multiset<size_t> all;
  for (int r = 0; r < 3; ++r) {
    hpu::DistributedSampler s(10, 3, r, false, 0);
    EXPECT_EQ(s.size(), 4u);
    auto idx = s.indices();
    ASSERT_EQ(idx.size(), 4u);
    for (size_t k = 0; k < idx.size(); ++k) EXPECT_EQ(idx[k], (size_t(r) + 3 * k) % 10);
    all.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(all.size(), 12u);
  EXPECT_EQ(all.count(0), 2u);
  EXPECT_EQ(all.count(1), 2u);
  for (size_t i = 2; i < 10; ++i) EXPECT_EQ(all.count(i), 1u);
}

TEST(Sampler, DropLastCutsToAMultiple) {
  std::set<size_t> all;
  for (int r = 0; r < 3; ++r) {
    hpu::DistributedSampler s(10, 3, r, true, 1, true);
    EXPECT_EQ(s.size(), 3u);
    for (size_t i : s.indices()) EXPECT_TRUE(all.insert(i).second) << "index " << i << " twice";
  }
  EXPECT_EQ(all.size(), 9u);
  EXPECT_EQ(hpu::DistributedSampler(10, 3, 0, true, 1, true).num_batches(2), 2u);
  EXPECT_EQ(hpu::DistributedSampler(10, 3, 0, true, 1, false).num_batches(3), 2u);
}

TEST(Sampler, RanksTogetherCoverWhatOneRankWithTheGlobalBatchCovers) {
  const size_t n = 1003, B = 8;
  const int R = 4;
  hpu::DistributedSampler one(n, 1, 0, true, 42);
  one.set_epoch(2);
  auto single = one.indices();
  std::vector<std::vector<size_t>> shards;
  for (int r = 0; r < R; ++r) {
    hpu::DistributedSampler s(n, R, r, true, 42);
    s.set_epoch(2);
    shards.push_back(s.indices());
  }
  for (size_t b = 0; (b + 1) * B * R <= n; ++b) {
    std::multiset<size_t> global(single.begin() + b * B * R, single.begin() + (b + 1) * B * R), split;
    for (int r = 0; r < R; ++r) split.insert(shards[r].begin() + b * B, shards[r].begin() + (b + 1) * B);
    ASSERT_EQ(global, split) << "step " << b;
  }
}

TEST(Sampler, BadArgumentsAreErrors) {
  EXPECT_HPU_ERROR(hpu::DistributedSampler(10, 0, 0), HPU_ERROR_INVALID_ARGUMENT, "num_replicas is 0");
  EXPECT_HPU_ERROR(hpu::DistributedSampler(10, 2, 2), HPU_ERROR_INVALID_ARGUMENT, "rank is 2");
  EXPECT_HPU_ERROR(hpu::DistributedSampler(10, 2, -1), HPU_ERROR_INVALID_ARGUMENT, "rank is -1");
  EXPECT_HPU_ERROR(hpu::DistributedSampler(10).num_batches(0), HPU_ERROR_INVALID_ARGUMENT, "batch_size is 0");
}

TEST(Rng, IsDeterministicAndUnbiasedEnough) {
  hpu::Rng a(5), b(5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(), b.next());
  auto st = a.state();
  uint64_t x = a.next();
  a.set_state(st);
  EXPECT_EQ(a.next(), x);
  // below(n) stays in range and hits every value.
  std::vector<int> hist(7);
  for (int i = 0; i < 7000; ++i) hist[a.below(7)]++;
  for (int h : hist) EXPECT_GT(h, 800);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) sum += a.uniform();
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}
