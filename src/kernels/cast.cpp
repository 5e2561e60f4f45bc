#include "kernels/cast.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/convert.hpp"
#include "kernels/convert_vec.hpp"
#include "kernels/dtype.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

constexpr int64_t kGrain = 1 << 16;

// The arithmetic type an element is read as.
template <class T>
using Wide = std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

template <class T>
Wide<T> read(T v) {
  if constexpr (std::is_same_v<T, bf16>) return bf16_to_f32(v.bits);
  else if constexpr (std::is_same_v<T, f16>) return f16_to_f32(v.bits);
  else return v;
}

// One element of type S as type D (see cast.hpp for the rules).
template <class D, class S>
D convert(S s, bool to_bool) {
  auto v = read(s);
  using V = decltype(v);
  if constexpr (std::is_same_v<D, uint8_t>) {
    if (to_bool) return v != V(0) ? 1 : 0;
  }
  if constexpr (std::is_same_v<D, bf16>) {
    return bf16{f32_to_bf16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, f16>) {
    return f16{f32_to_f16(static_cast<float>(v))};
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<V>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<V>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else if constexpr (std::is_signed_v<V>) {  // integer to integer, saturating
    auto x = static_cast<int64_t>(v);
    if (x < static_cast<int64_t>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (x > 0 && static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<D>::max()))
      return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    if (static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<D>::max()))
      return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  }
}

template <class D, class S>
void convert_n(const S *src, D *dst, size_t n, bool to_bool) {
  for (size_t i = 0; i < n; ++i) dst[i] = convert<D>(src[i], to_bool);
}

// The vectorised pairs; false when (src_dt, dst_dt) is not one of them.
bool convert_fast(const void *src, hpuDataType_t src_dt, void *dst, hpuDataType_t dst_dt, size_t n) {
  auto s16 = static_cast<const uint16_t *>(src);
  auto sf = static_cast<const float *>(src);
  auto d16 = static_cast<uint16_t *>(dst);
  auto df = static_cast<float *>(dst);
  if (src_dt == HPU_FLOAT32 && dst_dt == HPU_BFLOAT16) f32_to_bf16_n(sf, d16, n);
  else if (src_dt == HPU_BFLOAT16 && dst_dt == HPU_FLOAT32) bf16_to_f32_n(s16, df, n);
  else if (src_dt == HPU_FLOAT32 && dst_dt == HPU_FLOAT16) f32_to_f16_n(sf, d16, n);
  else if (src_dt == HPU_FLOAT16 && dst_dt == HPU_FLOAT32) f16_to_f32_n(s16, df, n);
  else return false;
  return true;
}

void cast_serial(const void *src, hpuDataType_t src_dt, void *dst, hpuDataType_t dst_dt, size_t n) {
  if (src_dt == dst_dt || (src_dt == HPU_BOOL && dst_dt == HPU_UINT8)) {
    std::memcpy(dst, src, n * dtype_size(dst_dt));
    return;
  }
  if (convert_fast(src, src_dt, dst, dst_dt, n)) return;
  bool to_bool = dst_dt == HPU_BOOL;
  dispatch(src_dt, [&](auto s) {
    using S = decltype(s);
    dispatch(dst_dt, [&](auto d) {
      using D = decltype(d);
      convert_n(static_cast<const S *>(src), static_cast<D *>(dst), n, to_bool);
    });
  });
}

}  // namespace

void cast(const void *src, hpuDataType_t src_dt, void *dst, hpuDataType_t dst_dt, size_t n) {
  size_t ss = dtype_size(src_dt), ds = dtype_size(dst_dt);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
    cast_serial(static_cast<const char *>(src) + b * ss, src_dt, static_cast<char *>(dst) + b * ds, dst_dt,
                static_cast<size_t>(e - b));
  });
}

void copy_strided(const void *src, hpuDataType_t src_dt, const int64_t *src_strides, void *dst,
                  hpuDataType_t dst_dt, const int64_t *dst_strides, int ndim, const int64_t *shape) {
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= shape[d];
  if (total == 0) return;
  if (ndim == 0) {
    cast_serial(src, src_dt, dst, dst_dt, 1);
    return;
  }
  const int64_t inner = shape[ndim - 1];
  const int64_t rows = total / inner;
  const size_t ss = dtype_size(src_dt), ds = dtype_size(dst_dt);
  const bool dense_rows = src_strides[ndim - 1] == 1 && dst_strides[ndim - 1] == 1;
  bool to_bool = dst_dt == HPU_BOOL && src_dt != HPU_BOOL;
  dispatch(src_dt, [&](auto s) {
    using S = decltype(s);
    dispatch(dst_dt, [&](auto d) {
      using D = decltype(d);
      parallel_for(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          // Offsets of row r: its index over the outer dims, in each layout.
          int64_t so = 0, dof = 0, rem = r;
          for (int dim = ndim - 2; dim >= 0; --dim) {
            int64_t i = rem % shape[dim];
            rem /= shape[dim];
            so += i * src_strides[dim];
            dof += i * dst_strides[dim];
          }
          const char *sp = static_cast<const char *>(src) + so * static_cast<int64_t>(ss);
          char *dp = static_cast<char *>(dst) + dof * static_cast<int64_t>(ds);
          if (dense_rows) {
            cast_serial(sp, src_dt, dp, dst_dt, static_cast<size_t>(inner));
          } else {
            const S *sv = reinterpret_cast<const S *>(sp);
            D *dv = reinterpret_cast<D *>(dp);
            const int64_t sst = src_strides[ndim - 1], dst_ = dst_strides[ndim - 1];
            for (int64_t i = 0; i < inner; ++i) dv[i * dst_] = convert<D>(sv[i * sst], to_bool);
          }
        }
      });
    });
  });
}

void fill(void *dst, hpuDataType_t dt, size_t n, double value) {
  dispatch(dt, [&](auto d) {
    using D = decltype(d);
    D v = convert<D>(value, dt == HPU_BOOL);
    D *p = static_cast<D *>(dst);
    parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = v;
    });
  });
}

}  // namespace hpu::kernels
