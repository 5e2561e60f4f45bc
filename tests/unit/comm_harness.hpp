// Helpers of the collective tests: a group of ranks on the devices of this
// process, device buffers, inputs made of small integers (so that every
// reduction order gives exact results), and the reference results computed
// here, element by element, independently of the library.
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.hpp"

namespace comm_test {

#define HPU_OK(call) ASSERT_EQ((call), HPU_SUCCESS) << #call << ": " << hpuGetLastErrorMessage()

inline bool full_matrix() {
  const char *v = std::getenv("HPU_TEST_FULL");
  return v && *v && std::strcmp(v, "0") != 0;
}

inline size_t dtype_size(hpuDataType_t t) {
  switch (t) {
    case HPU_BOOL: case HPU_UINT8: case HPU_INT8: return 1;
    case HPU_FLOAT16: case HPU_BFLOAT16: return 2;
    case HPU_INT32: case HPU_UINT32: case HPU_FLOAT32: return 4;
    default: return 8;
  }
}

inline const char *dtype_name(hpuDataType_t t) {
  static const char *n[] = {"bool", "u8", "i8", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64"};
  return n[t];
}

inline const char *op_name(hpuRedOp_t op) {
  static const char *n[] = {"sum", "prod", "min", "max", "avg"};
  return n[op];
}

inline bool is_unsigned(hpuDataType_t t) { return t == HPU_UINT8 || t == HPU_UINT32 || t == HPU_UINT64; }

// Element i of rank r's input, as an exact small integer.
inline double input(hpuDataType_t t, hpuRedOp_t op, int r, size_t i) {
  if (t == HPU_BOOL) return (i * 3 + static_cast<size_t>(r)) % 4 == 0 ? 1 : 0;
  if (op == HPU_PROD) {
    double v = (i + static_cast<size_t>(r)) % 3 == 0 ? 2 : 1;
    if (!is_unsigned(t) && (i + 2 * static_cast<size_t>(r)) % 5 == 0) v = -v;
    return v;
  }
  double v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 13 + 3) % 9);
  return is_unsigned(t) ? v : v - 4;
}

// The bytes of value v in type t (integers wrap around, as the library's do).
inline void store(hpuDataType_t t, double v, void *out) {
  auto i = static_cast<int64_t>(v);
  switch (t) {
    case HPU_BOOL: *static_cast<uint8_t *>(out) = v != 0; break;
    case HPU_UINT8: *static_cast<uint8_t *>(out) = static_cast<uint8_t>(i); break;
    case HPU_INT8: *static_cast<int8_t *>(out) = static_cast<int8_t>(i); break;
    case HPU_INT32: *static_cast<int32_t *>(out) = static_cast<int32_t>(i); break;
    case HPU_UINT32: *static_cast<uint32_t *>(out) = static_cast<uint32_t>(i); break;
    case HPU_INT64: *static_cast<int64_t *>(out) = i; break;
    case HPU_UINT64: *static_cast<uint64_t *>(out) = static_cast<uint64_t>(i); break;
    case HPU_FLOAT16: *static_cast<uint16_t *>(out) = hpu::kernels::f32_to_f16(static_cast<float>(v)); break;
    case HPU_BFLOAT16: *static_cast<uint16_t *>(out) = hpu::kernels::f32_to_bf16(static_cast<float>(v)); break;
    case HPU_FLOAT32: *static_cast<float *>(out) = static_cast<float>(v); break;
    case HPU_FLOAT64: *static_cast<double *>(out) = v; break;
  }
}

inline std::vector<uint8_t> encode(hpuDataType_t t, const std::vector<double> &v) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) store(t, v[i], out.data() + i * dtype_size(t));
  return out;
}

// Rank r's input: elements [first, first + count) of its sequence.
inline std::vector<double> inputs(hpuDataType_t t, hpuRedOp_t op, int r, size_t count, size_t first = 0) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input(t, op, r, first + i);
  return v;
}

// The reduction of the ranks' inputs, as the bytes the library must produce.
inline std::vector<uint8_t> reference(hpuDataType_t t, hpuRedOp_t op, int nranks, size_t count, size_t first = 0) {
  std::vector<uint8_t> out(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) {
    double acc = input(t, op, 0, first + i);
    for (int r = 1; r < nranks; ++r) {
      double x = input(t, op, r, first + i);
      if (t == HPU_BOOL)
        acc = (op == HPU_PROD || op == HPU_MIN) ? (acc != 0 && x != 0) : (acc != 0 || x != 0);
      else if (op == HPU_SUM || op == HPU_AVG)
        acc += x;
      else if (op == HPU_PROD)
        acc *= x;
      else if (op == HPU_MIN)
        acc = x < acc ? x : acc;
      else
        acc = x > acc ? x : acc;
    }
    void *o = out.data() + i * dtype_size(t);
    if (op == HPU_AVG && t != HPU_BOOL) {
      switch (t) {
        case HPU_FLOAT32: *static_cast<float *>(o) = static_cast<float>(acc) / static_cast<float>(nranks); continue;
        case HPU_FLOAT64: *static_cast<double *>(o) = acc / nranks; continue;
        case HPU_FLOAT16:
        case HPU_BFLOAT16: store(t, static_cast<float>(acc) / static_cast<float>(nranks), o); continue;
        default: acc = static_cast<double>(static_cast<int64_t>(acc) / nranks); break;  // toward zero
      }
    }
    store(t, acc, o);
  }
  return out;
}

// Device memory of one rank.
class Buffer {
 public:
  Buffer(hpuDevice_t dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    EXPECT_EQ(hpuMemAlloc(&ptr_, dev, bytes), HPU_SUCCESS) << hpuGetLastErrorMessage();
  }
  ~Buffer() { hpuMemFree(dev_, ptr_); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *ptr() const { return static_cast<char *>(ptr_); }
  size_t bytes() const { return bytes_; }
  void upload(const std::vector<uint8_t> &host, size_t offset = 0) {
    if (!host.empty()) {
      EXPECT_EQ(hpuMemcpy(ptr() + offset, host.data(), host.size(), HPU_MEMCPY_HOST_TO_DEVICE), HPU_SUCCESS);
    }
  }
  void fill(int byte) {
    if (bytes_) {
      EXPECT_EQ(hpuMemset(ptr_, byte, bytes_), HPU_SUCCESS);
    }
  }
  std::vector<uint8_t> download(size_t offset = 0, size_t bytes = SIZE_MAX) const {
    if (bytes == SIZE_MAX) bytes = bytes_ - offset;
    std::vector<uint8_t> host(bytes);
    if (bytes) {
      EXPECT_EQ(hpuMemcpy(host.data(), ptr() + offset, bytes, HPU_MEMCPY_DEVICE_TO_HOST), HPU_SUCCESS);
    }
    return host;
  }

 private:
  hpuDevice_t dev_;
  void *ptr_ = nullptr;
  size_t bytes_;
};

// n ranks on devices 0..n-1 of this process, made with hpuCommInitAll.
class Group {
 public:
  explicit Group(int n) : n_(n), devs_(static_cast<size_t>(n)), comms_(static_cast<size_t>(n)), streams_(static_cast<size_t>(n)) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(hpuDeviceOpen(&devs_[static_cast<size_t>(i)], i), HPU_SUCCESS) << hpuGetLastErrorMessage();
      EXPECT_EQ(hpuDeviceGetDefaultStream(devs_[static_cast<size_t>(i)], &streams_[static_cast<size_t>(i)]), HPU_SUCCESS);
    }
    EXPECT_EQ(hpuCommInitAll(comms_.data(), n, devs_.data()), HPU_SUCCESS) << hpuGetLastErrorMessage();
  }
  ~Group() {
    for (auto c : comms_) hpuCommDestroy(c);
    for (auto d : devs_) hpuDeviceClose(d);
  }
  Group(const Group &) = delete;
  Group &operator=(const Group &) = delete;

  int size() const { return n_; }
  hpuDevice_t dev(int r) const { return devs_[static_cast<size_t>(r)]; }
  hpuComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  hpuStream_t stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  // Synchronizes every rank's stream; the statuses, rank by rank.
  std::vector<hpuStatus_t> sync() const {
    std::vector<hpuStatus_t> s;
    for (auto st : streams_) s.push_back(hpuStreamSynchronize(st));
    return s;
  }

 private:
  int n_;
  std::vector<hpuDevice_t> devs_;
  std::vector<hpuComm_t> comms_;
  std::vector<hpuStream_t> streams_;
};

}  // namespace comm_test
