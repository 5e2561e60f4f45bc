#include <hpu/trainer/data.hpp>
#include <hpu/trainer/idx.hpp>

#include "error.hpp"

#include <algorithm>
#include <sys/stat.h>

namespace hpu {

using detail::fail;

std::vector<int64_t> Batch::x_shape() const {
  std::vector<int64_t> s{int64_t(size)};
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  return s;
}

TensorDataset::TensorDataset(std::vector<float> x, std::vector<int32_t> y, std::vector<int64_t> sample_shape)
    : x_(std::move(x)), y_(std::move(y)), sample_shape_(std::move(sample_shape)) {
  sample_numel_ = 1;
  for (int64_t d : sample_shape_) {
    if (d < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "sample_shape has a dimension of %lld; expected >= 1", (long long)d);
    sample_numel_ *= size_t(d);
  }
  if (x_.size() != y_.size() * sample_numel_)
    fail(HPU_ERROR_INVALID_ARGUMENT, "x has %zu values; %zu labels of %zu values each need %zu", x_.size(), y_.size(),
         sample_numel_, y_.size() * sample_numel_);
}

void TensorDataset::gather(const size_t *indices, size_t n, Batch &out) const {
  out.size = n;
  out.sample_shape = sample_shape_;
  out.x.resize(n * sample_numel_);
  out.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    size_t k = indices[i];
    if (k >= size()) fail(HPU_ERROR_INVALID_ARGUMENT, "sample index %zu out of range (dataset has %zu)", k, size());
    std::copy_n(x_.data() + k * sample_numel_, sample_numel_, out.x.data() + i * sample_numel_);
    out.y[i] = y_[k];
  }
}

TensorDataset TensorDataset::slice(size_t begin, size_t end) const {
  if (begin > end || end > size())
    fail(HPU_ERROR_INVALID_ARGUMENT, "slice [%zu, %zu) out of range (dataset has %zu)", begin, end, size());
  return TensorDataset(std::vector<float>(x_.begin() + begin * sample_numel_, x_.begin() + end * sample_numel_),
                       std::vector<int32_t>(y_.begin() + begin, y_.begin() + end), sample_shape_);
}

void DataModule::set_batch_size(int b) {
  if (b < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "batch_size is %d; expected >= 1", b);
  batch_size_ = b;
}

InMemoryData::InMemoryData(TensorDataset train, TensorDataset val, TensorDataset test, int num_classes, int batch_size)
    : DataModule(batch_size), train_(std::move(train)), val_(std::move(val)), test_(std::move(test)),
      num_classes_(num_classes) {
  if (num_classes < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "num_classes is %d; expected >= 1", num_classes);
}

TensorDataset load_idx_pair(const std::string &images, const std::string &labels, float mean, float std) {
  IdxArray im = read_idx(images);
  IdxArray lb = read_idx(labels);
  if (im.type != IdxType::u8 || im.shape.size() != 3)
    fail(HPU_ERROR_IO, "%s: expected unsigned bytes of shape [n, rows, cols], found type 0x%02x with %zu dimensions",
         images.c_str(), unsigned(im.type), im.shape.size());
  if (lb.type != IdxType::u8 || lb.shape.size() != 1)
    fail(HPU_ERROR_IO, "%s: expected unsigned bytes of shape [n], found type 0x%02x with %zu dimensions",
         labels.c_str(), unsigned(lb.type), lb.shape.size());
  if (im.shape[0] != lb.shape[0])
    fail(HPU_ERROR_IO, "%s has %u images but %s has %u labels", images.c_str(), im.shape[0], labels.c_str(),
         lb.shape[0]);
  std::vector<float> x(im.data.size());
  const float scale = 1.0f / (255.0f * std), shift = mean / std;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(im.data[i]) * scale - shift;
  std::vector<int32_t> y(lb.data.begin(), lb.data.end());
  return TensorDataset(std::move(x), std::move(y), {int64_t(im.shape[1]), int64_t(im.shape[2])});
}

namespace {

// "<root>/<base>.gz", else "<root>/<base>"; the error names the package.
std::string find_file(const std::string &root, const std::string &base) {
  struct stat st;
  for (const std::string &p : {root + "/" + base + ".gz", root + "/" + base})
    if (::stat(p.c_str(), &st) == 0) return p;
  if (::stat(root.c_str(), &st) != 0)
    fail(HPU_ERROR_NOT_FOUND,
         "Fashion-MNIST not found: %s does not exist; install Debian's package dataset-fashion-mnist "
         "(apt-get install dataset-fashion-mnist) or give the folder holding the IDX files",
         root.c_str());
  fail(HPU_ERROR_NOT_FOUND,
       "Fashion-MNIST incomplete: %s/%s(.gz) is missing; reinstall Debian's package dataset-fashion-mnist "
       "(apt-get install --reinstall dataset-fashion-mnist)",
       root.c_str(), base.c_str());
}

}  // namespace

FashionMNIST::FashionMNIST(int batch_size, std::string root, size_t val_size)
    : DataModule(batch_size), root_(root.empty() ? kDefaultRoot : std::move(root)), val_size_(val_size) {}

void FashionMNIST::setup() {
  if (loaded_) return;
  constexpr float kMean = 0.2860f, kStd = 0.3530f;
  const std::string train_images = find_file(root_, "train-images-idx3-ubyte");
  const std::string train_labels = find_file(root_, "train-labels-idx1-ubyte");
  const std::string test_images = find_file(root_, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_file(root_, "t10k-labels-idx1-ubyte");
  TensorDataset all = load_idx_pair(train_images, train_labels, kMean, kStd);
  if (val_size_ >= all.size())
    fail(HPU_ERROR_INVALID_ARGUMENT, "val_size is %zu; the training set has only %zu images", val_size_, all.size());
  train_ = all.slice(0, all.size() - val_size_);
  val_ = all.slice(all.size() - val_size_, all.size());
  test_ = load_idx_pair(test_images, test_labels, kMean, kStd);
  loaded_ = true;
}

}  // namespace hpu
