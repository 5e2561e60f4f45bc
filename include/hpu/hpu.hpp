// libhpu — thin C++ wrappers over the C API, in the style of oneDNN's dnnl.hpp:
// each handle is a small move-only RAII class, and a failing status becomes an
// hpu::Error carrying the status and the library's message. C++17, header-only.
#pragma once

#include <hpu/hpu.h>

#include <cstddef>
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
  void record(hpuStream_t stream) { check(hpuEventRecord(h_, stream)); }
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
      if (ptr_) hpuMemFree(dev_, ptr_);
      dev_ = o.dev_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (ptr_) hpuMemFree(dev_, ptr_);
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

}  // namespace hpu
