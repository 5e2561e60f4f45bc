// Datasets, batches and data modules; Fashion-MNIST from Debian's package.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpu {

// A batch on the host: `size` samples of `sample_shape` floats, and a label each.
struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> sample_shape;
  size_t size = 0;
  std::vector<int64_t> x_shape() const;  // {size, sample_shape...}
};

// Samples held in memory: features (float) and integer labels.
class TensorDataset {
 public:
  TensorDataset() = default;
  TensorDataset(std::vector<float> x, std::vector<int32_t> y, std::vector<int64_t> sample_shape);
  size_t size() const { return y_.size(); }
  size_t sample_numel() const { return sample_numel_; }
  const std::vector<int64_t> &sample_shape() const { return sample_shape_; }
  const std::vector<float> &features() const { return x_; }
  const std::vector<int32_t> &labels() const { return y_; }
  // Fills `out` with the samples at `indices` (each < size(), else hpu::Error).
  void gather(const size_t *indices, size_t n, Batch &out) const;
  // Samples [begin, end) as a new dataset.
  TensorDataset slice(size_t begin, size_t end) const;

 private:
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::vector<int64_t> sample_shape_;
  size_t sample_numel_ = 0;
};

// Lightning's LightningDataModule, reduced to what the trainer uses.
class DataModule {
 public:
  virtual ~DataModule() = default;
  virtual void setup() {}  // loads the data; called by the trainer before use
  virtual const TensorDataset &train_data() const = 0;
  virtual const TensorDataset &val_data() const = 0;   // may be empty
  virtual const TensorDataset &test_data() const = 0;  // may be empty
  // What Trainer::predict runs on (its labels are not used); the test set by default.
  virtual const TensorDataset &predict_data() const { return test_data(); }
  virtual int num_classes() const = 0;
  int batch_size() const { return batch_size_; }
  void set_batch_size(int b);

 protected:
  explicit DataModule(int batch_size) { set_batch_size(batch_size); }

 private:
  int batch_size_ = 1;
};

// A data module over in-memory datasets (tests, small experiments).
class InMemoryData : public DataModule {
 public:
  InMemoryData(TensorDataset train, TensorDataset val, TensorDataset test, int num_classes, int batch_size);
  const TensorDataset &train_data() const override { return train_; }
  const TensorDataset &val_data() const override { return val_; }
  const TensorDataset &test_data() const override { return test_; }
  int num_classes() const override { return num_classes_; }

 private:
  TensorDataset train_, val_, test_;
  int num_classes_;
};

// Fashion-MNIST: 60000 training and 10000 test images of 28x28, 10 classes.
// Images are scaled to [0, 1] and normalised with the training set's mean
// (0.2860) and standard deviation (0.3530). The last `val_size` training images
// form the validation set. The default folder is Debian's
// /usr/share/datasets/fashion-mnist (package dataset-fashion-mnist); files may
// be gzip-compressed (*.gz) or not. A missing folder or file is an hpu::Error
// (HPU_ERROR_NOT_FOUND) naming the path and the package to install.
class FashionMNIST : public DataModule {
 public:
  static constexpr const char *kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  explicit FashionMNIST(int batch_size = 64, std::string root = kDefaultRoot, size_t val_size = 5000);
  void setup() override;
  const TensorDataset &train_data() const override { return train_; }
  const TensorDataset &val_data() const override { return val_; }
  const TensorDataset &test_data() const override { return test_; }
  int num_classes() const override { return 10; }
  const std::string &root() const { return root_; }

 private:
  std::string root_;
  size_t val_size_;
  bool loaded_ = false;
  TensorDataset train_, val_, test_;
};

// Reads an MNIST-format pair of IDX files (images u8 [n, h, w], labels u8 [n])
// into a dataset normalised with (x / 255 - mean) / std.
TensorDataset load_idx_pair(const std::string &images, const std::string &labels, float mean, float std);

}  // namespace hpu
