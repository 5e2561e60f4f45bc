#include <hpu/trainer/data.hpp>
#include <hpu/trainer/idx.hpp>

#include "error.hpp"
#include "npy.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <sys/stat.h>

namespace hpu {

using detail::fail;
using detail::shape_text;

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

// ---- features and labels from IDX or .npy files ------------------------------------

namespace {

// An array from either format: its shape and raw elements, read as doubles.
struct RawArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // host byte order
  char kind = 'f';            // 'u' unsigned, 'i' signed, 'f' floating
  size_t width = 4;
  const char *type = "";

  double at(size_t i) const {
    const uint8_t *p = data.data() + i * width;
    auto get = [p](auto v) {
      std::memcpy(&v, p, sizeof v);
      return double(v);
    };
    if (kind == 'f') return width == 4 ? get(float()) : get(double());
    if (kind == 'u') return get(uint8_t());
    switch (width) {
      case 1: return get(int8_t());
      case 2: return get(int16_t());
      case 4: return get(int32_t());
      default: return get(int64_t());
    }
  }
};

RawArray read_array(const std::string &format, const std::string &path) {
  RawArray r;
  if (format == "idx") {
    IdxArray a = read_idx(path);
    r.shape.assign(a.shape.begin(), a.shape.end());
    r.data = std::move(a.data);
    r.width = idx_type_size(a.type);
    switch (a.type) {
      case IdxType::u8: r.kind = 'u', r.type = "u8"; break;
      case IdxType::i8: r.kind = 'i', r.type = "i8"; break;
      case IdxType::i16: r.kind = 'i', r.type = "i16"; break;
      case IdxType::i32: r.kind = 'i', r.type = "i32"; break;
      case IdxType::f32: r.kind = 'f', r.type = "f32"; break;
      case IdxType::f64: r.kind = 'f', r.type = "f64"; break;
    }
    return r;
  }
  NpyArray a = read_npy(path);
  r.shape = a.shape;
  r.data = std::move(a.data);
  r.width = npy_type_size(a.dtype);
  r.type = npy_type_name(a.dtype);
  r.kind = a.dtype == NpyType::f32 || a.dtype == NpyType::f64 ? 'f' : a.dtype == NpyType::u8 ? 'u' : 'i';
  return r;
}

}  // namespace

TensorDataset load_feature_files(const std::string &format, const std::string &features, const std::string &labels,
                                 const Normalize &normalize, bool flatten) {
  if (format != "idx" && format != "npy")
    fail(HPU_ERROR_INVALID_ARGUMENT, "format is \"%s\"; expected \"idx\" or \"npy\"", format.c_str());
  const RawArray x = read_array(format, features), y = read_array(format, labels);
  if (x.shape.empty())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s: features must be an array [N, ...]; found a 0-dim array", features.c_str());
  if (y.kind == 'f' || y.shape.size() != 1)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s: labels must be integers of shape [N]; found %s of shape %s", labels.c_str(),
         y.type, shape_text(y.shape).c_str());
  if (x.shape[0] != y.shape[0])
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s has %lld samples (shape %s) but %s has %lld labels", features.c_str(),
         (long long)x.shape[0], shape_text(x.shape).c_str(), labels.c_str(), (long long)y.shape[0]);
  std::vector<int64_t> sample(x.shape.begin() + 1, x.shape.end());
  if (sample.empty()) sample = {1};
  for (int64_t d : sample)
    if (d == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "%s: samples of shape %s hold no values", features.c_str(),
                     shape_text(sample).c_str());
  if (flatten) {
    int64_t n = 1;
    for (int64_t d : sample) n *= d;
    sample = {n};
  }
  const size_t count = x.data.size() / x.width;
  std::vector<float> xs(count);
  for (size_t i = 0; i < count; ++i) xs[i] = float((x.at(i) * normalize.scale - normalize.mean) / normalize.std);
  std::vector<int32_t> ys(size_t(y.shape[0]));
  for (size_t i = 0; i < ys.size(); ++i) {
    const double v = y.at(i);
    if (v < 0 || v > INT32_MAX)
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: label %.0f at index %zu is not a class index (0 to %d)", labels.c_str(), v,
           i, INT32_MAX);
    ys[i] = int32_t(v);
  }
  return TensorDataset(std::move(xs), std::move(ys), sample);
}

FileData::FileData(FileDataOptions options, int batch_size) : DataModule(batch_size), o_(std::move(options)) {}

namespace {

// The largest label of a set loaded from `file`, checked against `classes`
// when that is set.
int32_t max_label(const TensorDataset &d, const std::string &file, int classes) {
  int32_t top = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    const int32_t l = d.labels()[i];
    if (classes && l >= classes)
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: label %d at index %zu is out of range for num_classes %d", file.c_str(), l,
           i, classes);
    top = std::max(top, l);
  }
  return top;
}

void check_pair(const std::string &split, const std::string &features, const std::string &labels) {
  if (features.empty() != labels.empty())
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s_features and %s_labels go together; only %s_%s is set (%s)", split.c_str(),
         split.c_str(), split.c_str(), features.empty() ? "labels" : "features",
         (features.empty() ? labels : features).c_str());
}

}  // namespace

void FileData::setup() {
  if (loaded_) return;
  const FileDataOptions &o = o_;
  if (o.train_features.empty() || o.train_labels.empty())
    fail(HPU_ERROR_INVALID_ARGUMENT, "train_features and train_labels are required (given: \"%s\", \"%s\")",
         o.train_features.c_str(), o.train_labels.c_str());
  check_pair("val", o.val_features, o.val_labels);
  check_pair("test", o.test_features, o.test_labels);
  if (!o.val_features.empty() && o.val_size)
    fail(HPU_ERROR_INVALID_ARGUMENT, "val_size is %zu beside val_features %s; give one or the other", o.val_size,
         o.val_features.c_str());
  if (o.num_classes < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "num_classes is %d; expected >= 0", o.num_classes);
  if (!(o.normalize.std > 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "normalize std is %g; expected > 0", o.normalize.std);

  TensorDataset all = load_feature_files(o.format, o.train_features, o.train_labels, o.normalize, o.flatten);
  if (all.size() == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "%s has no samples", o.train_features.c_str());
  int32_t top = max_label(all, o.train_labels, o.num_classes);
  if (o.val_size >= all.size())
    fail(HPU_ERROR_INVALID_ARGUMENT, "val_size is %zu; %s has only %zu samples", o.val_size, o.train_features.c_str(),
         all.size());
  train_ = all.slice(0, all.size() - o.val_size);
  val_ = all.slice(all.size() - o.val_size, all.size());
  auto other = [&](const std::string &features, const std::string &labels, TensorDataset &out) {
    if (features.empty()) return;
    out = load_feature_files(o.format, features, labels, o.normalize, o.flatten);
    if (out.sample_shape() != all.sample_shape())
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s has samples of shape %s, but %s has %s", features.c_str(),
           shape_text(out.sample_shape()).c_str(), o.train_features.c_str(), shape_text(all.sample_shape()).c_str());
    top = std::max(top, max_label(out, labels, o.num_classes));
  };
  other(o.val_features, o.val_labels, val_);
  other(o.test_features, o.test_labels, test_);
  num_classes_ = o.num_classes ? o.num_classes : int(top) + 1;
  loaded_ = true;
}

}  // namespace hpu
