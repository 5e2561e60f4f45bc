// Datasets, batches and data modules; Fashion-MNIST from Debian's package,
// and features and labels from IDX or .npy files of any shape.
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

// What is done to feature values as they are loaded: x' = (x * scale - mean) / std
// (the identity by default; {1 / 255.0, 0, 1} scales bytes to [0, 1]).
struct Normalize {
  double scale = 1.0, mean = 0.0, std = 1.0;
};

// Features and labels from files: `format` "idx" (IDX, plain or gzip, any
// element type: u8, i8, i16, i32, f32, f64) or "npy" (uint8, int8, int16,
// int32, int64, float32, float64). Features are an array [N, ...] of any rank
// (a 1-D file is one value per sample) and any of those types; labels an
// integer array [N] of class indices >= 0.
struct FileDataOptions {
  std::string format = "npy";                  // "npy" | "idx"
  std::string train_features, train_labels;    // required
  std::string val_features, val_labels;        // optional, both or neither
  std::string test_features, test_labels;      // optional, both or neither
  size_t val_size = 0;  // without val files: the last val_size training samples validate
  Normalize normalize;
  bool flatten = false;  // samples as [prod(...)] rather than their shape
  int num_classes = 0;   // 0: the largest label + 1
};

// A data module over FileDataOptions. setup() reads the files; hpu::Error
// naming the file for what read_idx and read_npy refuse (HPU_ERROR_NOT_FOUND,
// HPU_ERROR_IO), and HPU_ERROR_INVALID_ARGUMENT naming the files for features
// and labels of different lengths, labels that are not integers of shape [N]
// or are negative or >= num_classes, samples whose shape differs between the
// files, a val_size that leaves no training samples, or val_size beside val
// files.
class FileData : public DataModule {
 public:
  FileData(FileDataOptions options, int batch_size);
  void setup() override;
  const TensorDataset &train_data() const override { return train_; }
  const TensorDataset &val_data() const override { return val_; }
  const TensorDataset &test_data() const override { return test_; }
  // options().num_classes when set, else the largest label + 1 (after setup).
  int num_classes() const override { return num_classes_; }
  const FileDataOptions &options() const { return o_; }

 private:
  FileDataOptions o_;
  bool loaded_ = false;
  int num_classes_ = 0;
  TensorDataset train_, val_, test_;
};

// Loads one features file and one labels file as FileData does (format "idx"
// or "npy"); the labels' values are not checked against any class count.
TensorDataset load_feature_files(const std::string &format, const std::string &features, const std::string &labels,
                                 const Normalize &normalize, bool flatten);

}  // namespace hpu
