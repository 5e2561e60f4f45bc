// Helpers shared by the nn and optimizer kernels: loading any floating buffer
// into an accumulator type (f32, or f64 when the data is f64) and storing back.
#pragma once

#include <hpu/types.h>

#include <algorithm>
#include <cstring>

#include "kernels/elementwise.hpp"

namespace hpu::kernels::nn {

// dst[i] = src[i] as Acc, for a floating dt.
template <class Acc>
void load(hpuDataType_t dt, const void *src, Acc *dst, size_t n);
template <class Acc>
void store(hpuDataType_t dt, const Acc *src, void *dst, size_t n);

template <>
inline void load<float>(hpuDataType_t dt, const void *src, float *dst, size_t n) {
  load_f32(dt, src, dst, n);
}
template <>
inline void store<float>(hpuDataType_t dt, const float *src, void *dst, size_t n) {
  store_f32(dt, src, dst, n);
}

template <>
inline void load<double>(hpuDataType_t dt, const void *src, double *dst, size_t n) {
  if (n == 0) return;  // dst may be an empty vector's NULL, which memcpy must not get
  if (dt == HPU_FLOAT64) {
    std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  float tmp[256];
  size_t es = dt == HPU_FLOAT32 ? 4 : 2;
  for (size_t i = 0; i < n; i += 256) {
    size_t m = std::min<size_t>(256, n - i);
    load_f32(dt, static_cast<const char *>(src) + i * es, tmp, m);
    for (size_t j = 0; j < m; ++j) dst[i + j] = tmp[j];
  }
}
template <>
inline void store<double>(hpuDataType_t dt, const double *src, void *dst, size_t n) {
  if (n == 0) return;
  if (dt == HPU_FLOAT64) {
    std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  float tmp[256];
  size_t es = dt == HPU_FLOAT32 ? 4 : 2;
  for (size_t i = 0; i < n; i += 256) {
    size_t m = std::min<size_t>(256, n - i);
    for (size_t j = 0; j < m; ++j) tmp[j] = static_cast<float>(src[i + j]);
    store_f32(dt, tmp, static_cast<char *>(dst) + i * es, m);
  }
}

// Calls fn(Acc{}) with double when dt is f64, else float.
template <class Fn>
void with_acc(hpuDataType_t dt, Fn &&fn) {
  if (dt == HPU_FLOAT64)
    fn(double{});
  else
    fn(float{});
}

// Element size of a floating dt.
inline size_t fsize(hpuDataType_t dt) { return dt == HPU_FLOAT64 ? 8 : dt == HPU_FLOAT32 ? 4 : 2; }

inline const char *at(const void *p, hpuDataType_t dt, int64_t i) {
  return static_cast<const char *>(p) + i * static_cast<int64_t>(fsize(dt));
}
inline char *at(void *p, hpuDataType_t dt, int64_t i) {
  return static_cast<char *>(p) + i * static_cast<int64_t>(fsize(dt));
}

// Class index i of an i32 or i64 buffer.
inline int64_t index_at(hpuDataType_t dt, const void *p, int64_t i) {
  return dt == HPU_INT32 ? static_cast<const int32_t *>(p)[i] : static_cast<const int64_t *>(p)[i];
}

}  // namespace hpu::kernels::nn
