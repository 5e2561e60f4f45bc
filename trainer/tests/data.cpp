#include <hpu/trainer/data.hpp>
#include <hpu/trainer/idx.hpp>

#include "test_util.hpp"
#include "transfer.hpp"

#include <cmath>

using namespace trainer_test;

namespace {

// A tiny MNIST-format dataset: n images of 2x3 with pixel values i*10+label.
void write_fake(const std::string &dir, const std::string &prefix, uint32_t n, uint32_t labels_n) {
  hpu::IdxArray im, lb;
  im.shape = {n, 2, 3};
  for (uint32_t i = 0; i < n * 6; ++i) im.data.push_back(uint8_t(i % 251));
  lb.shape = {labels_n};
  for (uint32_t i = 0; i < labels_n; ++i) lb.data.push_back(uint8_t(i % 10));
  hpu::write_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz", im, true);
  hpu::write_idx(dir + "/" + prefix + "-labels-idx1-ubyte", lb, false);
}

}  // namespace

TEST(FashionMNIST, LoadsDebiansPackage) {
  hpu::FashionMNIST data(256);
  data.setup();
  EXPECT_EQ(data.batch_size(), 256);
  EXPECT_EQ(data.num_classes(), 10);
  EXPECT_EQ(data.train_data().size(), 55000u);
  EXPECT_EQ(data.val_data().size(), 5000u);
  EXPECT_EQ(data.test_data().size(), 10000u);
  EXPECT_EQ(data.train_data().sample_shape(), (std::vector<int64_t>{28, 28}));
  std::vector<int> count(10);
  for (int32_t y : data.test_data().labels()) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 10);
    count[y]++;
  }
  for (int c : count) EXPECT_EQ(c, 1000);  // the test set is balanced
  // Normalised with the training set's statistics: mean ~0, std ~1.
  double sum = 0, sq = 0;
  const auto &x = data.train_data().features();
  for (float v : x) sum += v, sq += double(v) * v;
  const double mean = sum / double(x.size());
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / double(x.size()) - mean * mean), 1.0, 0.01);
}

TEST(FashionMNIST, MissingFolderNamesThePackage) {
  hpu::FashionMNIST data(64, "/nonexistent/fashion-mnist");
  EXPECT_HPU_ERROR(data.setup(), HPU_ERROR_NOT_FOUND, "dataset-fashion-mnist");
  EXPECT_HPU_ERROR(data.setup(), HPU_ERROR_NOT_FOUND, "/nonexistent/fashion-mnist");
}

TEST(FashionMNIST, MissingFileIsNamed) {
  TempDir dir;
  write_fake(dir.path(), "train", 20, 20);
  hpu::FashionMNIST data(4, dir.path(), 5);
  EXPECT_HPU_ERROR(data.setup(), HPU_ERROR_NOT_FOUND, "t10k-images-idx3-ubyte");
}

TEST(FashionMNIST, ReadsAnyFolderOfIdxFilesPlainOrCompressed) {
  TempDir dir;
  write_fake(dir.path(), "train", 20, 20);
  write_fake(dir.path(), "t10k", 6, 6);
  hpu::FashionMNIST data(4, dir.path(), 5);
  data.setup();
  EXPECT_EQ(data.train_data().size(), 15u);
  EXPECT_EQ(data.val_data().size(), 5u);
  EXPECT_EQ(data.test_data().size(), 6u);
  EXPECT_EQ(data.val_data().labels()[0], 15 % 10);
  EXPECT_FLOAT_EQ(data.train_data().features()[1], (1.0f / 255.0f - 0.2860f) / 0.3530f);
}

TEST(FashionMNIST, MismatchedCountsAndBadValSizeAreErrors) {
  TempDir dir;
  write_fake(dir.path(), "train", 20, 19);
  write_fake(dir.path(), "t10k", 6, 6);
  EXPECT_HPU_ERROR(hpu::FashionMNIST(4, dir.path(), 5).setup(), HPU_ERROR_IO, "has 20 images but");
  write_fake(dir.path(), "train", 20, 20);
  EXPECT_HPU_ERROR(hpu::FashionMNIST(4, dir.path(), 20).setup(), HPU_ERROR_INVALID_ARGUMENT, "val_size is 20");
  EXPECT_HPU_ERROR(hpu::FashionMNIST(0, dir.path()), HPU_ERROR_INVALID_ARGUMENT, "batch_size is 0");
}

TEST(TensorDataset, GathersAndChecks) {
  hpu::TensorDataset d({0, 1, 2, 3, 4, 5}, {7, 8, 9}, {2});
  size_t idx[] = {2, 0};
  hpu::Batch b;
  d.gather(idx, 2, b);
  EXPECT_EQ(b.size, 2u);
  EXPECT_EQ(b.x, (std::vector<float>{4, 5, 0, 1}));
  EXPECT_EQ(b.y, (std::vector<int32_t>{9, 7}));
  EXPECT_EQ(b.x_shape(), (std::vector<int64_t>{2, 2}));
  size_t bad[] = {3};
  EXPECT_HPU_ERROR(d.gather(bad, 1, b), HPU_ERROR_INVALID_ARGUMENT, "sample index 3");
  EXPECT_HPU_ERROR(hpu::TensorDataset({0, 1, 2}, {1, 2}, {2}), HPU_ERROR_INVALID_ARGUMENT, "x has 3 values");
  EXPECT_HPU_ERROR(d.slice(2, 4), HPU_ERROR_INVALID_ARGUMENT, "slice [2, 4)");
}

// load() gathers batch b's samples and labels of `order` onto the device;
// the last batch may be short; a sample number past the set is an error.
TEST(DeviceBatch, GathersTheBatchOntoTheDevice) {
  hpu::Device dev(0);
  hpuStream_t s = dev.default_stream();
  hpu::TensorDataset set({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}, {2});
  const std::vector<size_t> order{4, 1, 3, 0, 2};
  hpu::DeviceBatch batch;
  auto loaded = [&](int64_t i) {
    EXPECT_EQ(batch.load(set, order, i, 2, dev.get(), s), i < 2 ? 2u : 1u);
    EXPECT_EQ(batch.x.shape(), (std::vector<int64_t>{i < 2 ? 2 : 1, 2}));
    return std::make_pair(batch.x.to_vector<float>(s), batch.y.to_vector<int32_t>(s));
  };
  using V = std::pair<std::vector<float>, std::vector<int32_t>>;
  EXPECT_EQ(loaded(0), (V{{8, 9, 2, 3}, {14, 11}}));
  EXPECT_EQ(loaded(1), (V{{6, 7, 0, 1}, {13, 10}}));
  EXPECT_EQ(loaded(2), (V{{4, 5}, {12}}));  // the last, short batch
  EXPECT_EQ(loaded(0), (V{{8, 9, 2, 3}, {14, 11}}));
  const std::vector<size_t> bad{1, 5};
  EXPECT_HPU_ERROR(batch.load(set, bad, 0, 2, dev.get(), s), HPU_ERROR_INVALID_ARGUMENT, "sample index 5");
  batch.settle();
}
