// libhpu — thin C++ wrappers over the C API, in the style of oneDNN's dnnl.hpp:
// each handle is a small move-only RAII class, and a failing status becomes an
// hpu::Error carrying the status and the library's message. C++17, header-only.
#pragma once

#include <hpu/hpu.h>

#include <cstddef>
#include <memory>
#include <vector>
#include <stdexcept>
#include <string>
#include <utility>

namespace hpu {

// A failed libhpu call (or a trainer error): the status and a message that names
// the argument and its value.
class Error : public std::runtime_error {
 public:
  Error(hpuStatus_t status, const std::string &message) : std::runtime_error(message), status_(status) {}
  hpuStatus_t status() const noexcept { return status_; }

 private:
  hpuStatus_t status_;
};

// Throws hpu::Error for any status but HPU_SUCCESS, with the thread's last error
// message (which names the function) or, when empty, the status description.
inline void check(hpuStatus_t status) {
  if (status == HPU_SUCCESS) return;
  const char *msg = hpuGetLastErrorMessage();
  throw Error(status, std::string(hpuGetErrorName(status)) + ": " +
                          (msg && *msg ? msg : hpuGetErrorString(status)));
}

inline int device_count() {
  int n = 0;
  check(hpuDeviceCount(&n));
  return n;
}

namespace detail {

// Move-only ownership of one handle, released with `Release` (which accepts NULL).
template <class H, hpuStatus_t (*Release)(H)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(H h) noexcept : h_(h) {}
  UniqueHandle(UniqueHandle &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  UniqueHandle &operator=(UniqueHandle &&o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle &) = delete;
  UniqueHandle &operator=(const UniqueHandle &) = delete;
  ~UniqueHandle() { reset(); }

  H get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  void reset() noexcept {
    if (h_) Release(h_);
    h_ = nullptr;
  }
  H release() noexcept { return std::exchange(h_, nullptr); }

 protected:
  H h_ = nullptr;
};

}  // namespace detail

// An open device; closing happens in the destructor.
class Device : public detail::UniqueHandle<hpuDevice_t, hpuDeviceClose> {
 public:
  Device() = default;
  explicit Device(int ordinal) { check(hpuDeviceOpen(&h_, ordinal)); }

  hpuDeviceProperties_t properties() const {
    hpuDeviceProperties_t p = HPU_DEVICE_PROPERTIES_INIT;
    check(hpuDeviceGetProperties(h_, &p));
    return p;
  }
  hpuMemStats_t mem_stats() const {
    hpuMemStats_t s = HPU_MEM_STATS_INIT;
    check(hpuMemStats(h_, &s));
    return s;
  }
  hpuStream_t default_stream() const {
    hpuStream_t s = nullptr;
    check(hpuDeviceGetDefaultStream(h_, &s));
    return s;
  }
  void synchronize() const { check(hpuDeviceSynchronize(h_)); }
};

// A created stream on a device.
class Stream : public detail::UniqueHandle<hpuStream_t, hpuStreamDestroy> {
 public:
  Stream() = default;
  explicit Stream(const Device &dev) { check(hpuStreamCreate(&h_, dev.get())); }
  void synchronize() const { check(hpuStreamSynchronize(h_)); }
};

// An event for ordering and timing.
class Event : public detail::UniqueHandle<hpuEvent_t, hpuEventDestroy> {
 public:
  Event() { check(hpuEventCreate(&h_)); }
  void record(hpuStream_t stream) { check(hpuEventRecord(stream, h_)); }
  void synchronize() const { check(hpuEventSynchronize(h_)); }
};

// Device memory owned by this object; freed (after queued work) on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Device &dev, size_t bytes) : dev_(dev.get()), bytes_(bytes) {
    check(hpuMemAlloc(&ptr_, dev_, bytes));
  }
  DeviceBuffer(DeviceBuffer &&o) noexcept
      : dev_(o.dev_), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
      if (ptr_) hpuMemFree(ptr_);
      dev_ = o.dev_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (ptr_) hpuMemFree(ptr_);
  }
  void *get() const noexcept { return ptr_; }
  size_t size() const noexcept { return bytes_; }
  void upload(const void *host, size_t bytes) { check(hpuMemcpy(ptr_, host, bytes, HPU_MEMCPY_HOST_TO_DEVICE)); }
  void download(void *host, size_t bytes) const { check(hpuMemcpy(host, ptr_, bytes, HPU_MEMCPY_DEVICE_TO_HOST)); }

 private:
  hpuDevice_t dev_ = nullptr;
  void *ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A tensor handle with shared ownership, as torch.Tensor: copies refer to the
// same tensor, released when the last copy goes. Empty when default-constructed.
class Tensor {
 public:
  Tensor() = default;
  // Takes ownership of `t` (from an op's output).
  explicit Tensor(hpuTensor_t t) : p_(t, [](hpuTensor_t x) { hpuTensorRelease(x); }) {}

  static Tensor empty(hpuDevice_t dev, hpuDataType_t dtype, const std::vector<int64_t> &shape) {
    hpuTensor_t t = nullptr;
    check(hpuTensorCreate(&t, dev, dtype, int(shape.size()), shape.data()));
    return Tensor(t);
  }
  static Tensor from_host(hpuDevice_t dev, hpuDataType_t dtype, const std::vector<int64_t> &shape, const void *data) {
    hpuTensor_t t = nullptr;
    check(hpuTensorCreateFromHost(&t, dev, dtype, int(shape.size()), shape.data(), data));
    return Tensor(t);
  }
  static Tensor full(hpuDevice_t dev, hpuDataType_t dtype, const std::vector<int64_t> &shape, double value,
                     hpuStream_t stream = nullptr) {
    Tensor t = empty(dev, dtype, shape);
    t.fill(value, stream);
    return t;
  }

  hpuTensor_t get() const noexcept { return p_.get(); }
  explicit operator bool() const noexcept { return p_ != nullptr; }

  hpuDataType_t dtype() const {
    hpuDataType_t d;
    check(hpuTensorGetDtype(get(), &d));
    return d;
  }
  std::vector<int64_t> shape() const {
    int n = 0;
    int64_t s[HPU_TENSOR_MAX_DIMS];
    check(hpuTensorGetShape(get(), &n, s));
    return std::vector<int64_t>(s, s + n);
  }
  int64_t numel() const {
    int64_t n = 0;
    check(hpuTensorGetNumel(get(), &n));
    return n;
  }
  size_t element_size() const {
    size_t n = 0;
    check(hpuTensorGetElementSize(get(), &n));
    return n;
  }
  hpuDevice_t device() const {
    hpuDevice_t d = nullptr;
    check(hpuTensorGetDevice(get(), &d));
    return d;
  }
  void fill(double value, hpuStream_t stream = nullptr) { check(hpuTensorFill(stream, get(), value)); }
  void copy_from_host(const void *src, size_t bytes, hpuStream_t stream = nullptr) {
    check(hpuTensorCopyFromHost(stream, get(), src, bytes));
  }
  void copy_to_host(void *dst, size_t bytes, hpuStream_t stream = nullptr) const {
    check(hpuTensorCopyToHost(stream, get(), dst, bytes));
  }
  template <class T>
  std::vector<T> to_vector(hpuStream_t stream = nullptr) const {
    std::vector<T> v(static_cast<size_t>(numel()));
    copy_to_host(v.data(), v.size() * sizeof(T), stream);
    return v;
  }
  // A view with a new shape (one entry may be -1).
  Tensor reshape(const std::vector<int64_t> &shape) const {
    hpuTensor_t t = nullptr;
    check(hpuTensorReshape(&t, get(), int(shape.size()), shape.data()));
    return Tensor(t);
  }
  // A contiguous view of `shape` over flat elements [offset, offset + numel).
  Tensor window(int64_t offset, const std::vector<int64_t> &shape) const {
    hpuTensor_t t = nullptr;
    check(hpuTensorWindow(&t, get(), offset, int(shape.size()), shape.data()));
    return Tensor(t);
  }

 private:
  std::shared_ptr<hpuTensor_st> p_;
};

}  // namespace hpu
