// Tensors inside libhpu: a dtype, a shape and strides over shared device memory.
//
// How ops use them:
//   auto x = tensor_from_handle(x_handle, "x");           // INVALID_HANDLE naming "x"
//   auto s = stream_for(stream_handle, *x);               // NULL -> x's default stream
//   auto y = Tensor::empty(x->device(), HPU_FLOAT32, shape);  // output, owned memory
//   s->enqueue([x, y] { kernels::...(x->data(), y->data(), x->numel()); });
//   *y_handle = tensor_handle(y);                         // only after the last check
// Capturing the shared_ptrs in the queued function keeps the memory alive until
// the work has run, whatever the caller releases meanwhile. Kernels want
// contiguous buffers: contiguous(s, x) gives x itself or a queued dense copy.
#pragma once

#include <hpu/tensor.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "device/device.hpp"
#include "kernels/dtype.hpp"

namespace hpu {

using kernels::dtype_name;
using kernels::dtype_size;
using kernels::is_floating;

constexpr int kMaxDims = HPU_TENSOR_MAX_DIMS;
// Most elements a shape may describe: numel x an element size (<= 8 bytes)
// fits in int64, with room to spare.
constexpr int64_t kMaxElements = int64_t(1) << 60;

// Sizes or strides of up to kMaxDims dims; a small value type.
struct Dims {
  int n = 0;
  std::array<int64_t, kMaxDims> v{};

  Dims() = default;
  Dims(std::initializer_list<int64_t> list);
  // Checks ndim, sizes >= 0 and that the sizes multiply to at most
  // kMaxElements (sizes of 0 counted as 1, so that contiguous strides fit
  // too), naming `arg` and the value in the error.
  static Dims shape(int ndim, const int64_t *sizes, const char *arg);

  int64_t operator[](int i) const { return v[i]; }
  int64_t &operator[](int i) { return v[i]; }
  const int64_t *data() const { return v.data(); }
  int64_t numel() const;              // product of the entries (1 for n == 0)
  // True when the sizes, 0 counted as 1, multiply to at most kMaxElements:
  // numel, contiguous strides and byte counts then fit in int64.
  bool within_limit() const;
  std::string str() const;            // "[2, 3]"
  bool operator==(const Dims &o) const;
  bool operator!=(const Dims &o) const { return !(*this == o); }
  // Row-major strides for this shape.
  Dims contiguous_strides() const;
};

// The offset, in elements from element 0, of the furthest element that a
// tensor of `shape` and `strides` (each >= 0) reaches: the sum over its dims of
// (size - 1) x stride, dims of size 0 left out. Computed without overflow: *last
// gets the sum and the result is -1 when it is at most `max`; otherwise the
// result is the dim that takes the sum past `max`.
int furthest_element(const Dims &shape, const Dims &strides, int64_t max, int64_t *last);

// Device memory shared by a tensor and its views. Owned memory goes back to
// the device when the last user lets go (deferred past queued work that may
// still use it); borrowed memory (hpuTensorWrap) is left alone.
struct Storage {
  Device &device;
  void *data;
  size_t bytes;
  bool owned;
  // Memory from hpuMemAlloc (hpuTensorWrap): where its allocation starts.
  // Every tensor handle over the storage pins that allocation against
  // hpuMemFree (tensor_handle() to release_tensor_handle()).
  uintptr_t wrapped = 0;
  // Memory imported from another library (DLPack, adopt()): tells its
  // producer that libhpu is done with it.
  std::function<void()> release;

  Storage(Device &d, void *p, size_t n, bool own) : device(d), data(p), bytes(n), owned(own) {}
  ~Storage();
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;
  // Takes imported memory over: `done` runs once, when the storage goes, and
  // until then the device counts an import (its last close is refused).
  void adopt(std::function<void()> done);
};

class Tensor {
 public:
  // A new contiguous tensor with owned memory from dev's allocator; contents
  // unspecified. Throws HPU_ERROR_OUT_OF_MEMORY with the device's figures, or
  // HPU_ERROR_INVALID_ARGUMENT when shape is past the limit (an op's result
  // broadcast or multiplied from its inputs' shapes can be).
  static std::shared_ptr<Tensor> empty(Device &dev, hpuDataType_t dtype, const Dims &shape);

  // offset and strides in elements.
  Tensor(std::shared_ptr<Storage> storage, hpuDataType_t dtype, const Dims &shape, const Dims &strides,
         int64_t offset);

  // A view: same storage, another shape/strides/offset (elements).
  std::shared_ptr<Tensor> view(const Dims &shape, const Dims &strides, int64_t offset) const;

  Device &device() const { return storage_->device; }
  const std::shared_ptr<Storage> &storage() const { return storage_; }
  hpuDataType_t dtype() const { return dtype_; }
  int ndim() const { return shape_.n; }
  const Dims &shape() const { return shape_; }
  const Dims &strides() const { return strides_; }
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t offset() const { return offset_; }
  int64_t numel() const { return numel_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }
  bool contiguous() const;

  // Address of element 0 (nullptr when the tensor has no elements).
  void *data() const;
  template <class T>
  T *data_as() const {
    return static_cast<T *>(data());
  }

  // "bf16[2, 3]", for messages.
  std::string str() const;

 private:
  std::shared_ptr<Storage> storage_;
  hpuDataType_t dtype_;
  Dims shape_, strides_;
  int64_t offset_;
  int64_t numel_;
};

// Registers a tensor and returns its new handle.
hpuTensor_t tensor_handle(std::shared_ptr<Tensor> t);
// The tensor behind a handle; HPU_ERROR_INVALID_HANDLE naming `arg` otherwise.
std::shared_ptr<Tensor> tensor_from_handle(hpuTensor_t t, const char *arg);
// One more reference to a handle: it stays live until released once more.
void retain_tensor_handle(hpuTensor_t t);
// Drops a reference to a handle (NULL accepted); the last one forgets it, and
// the tensor lives on while others (views, queued work) use it.
void release_tensor_handle(hpuTensor_t t);

// Checks that `dt` is an hpuDataType_t, naming `arg`.
void check_dtype(int dt, const char *arg);

// The stream work on `t` runs on: `stream`, or the default stream of t's
// device when NULL. HPU_ERROR_INVALID_ARGUMENT when the stream belongs to
// another device than t.
std::shared_ptr<Stream> stream_for(hpuStream_t stream, const Tensor &t);

// t itself when contiguous, else a new contiguous tensor with a dense copy
// queued on s.
std::shared_ptr<Tensor> contiguous(Stream &s, const std::shared_ptr<Tensor> &t);

// Queues dst[i] = convert(src[i]) on s (same shape; any strides, dtypes and
// devices). Throws INVALID_ARGUMENT when the shapes differ.
void enqueue_copy(Stream &s, const std::shared_ptr<Tensor> &dst, const std::shared_ptr<Tensor> &src);

}  // namespace hpu
