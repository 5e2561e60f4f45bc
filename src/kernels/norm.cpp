#include "kernels/norm.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

constexpr int64_t kChunk = 1 << 15;  // elements per partial sum

double chunk_squares(hpuDataType_t dt, const char *x, int64_t n) {
  double acc = 0;
  if (dt == HPU_FLOAT64) {
    const double *d = reinterpret_cast<const double *>(x);
    for (int64_t i = 0; i < n; ++i) acc += d[i] * d[i];
    return acc;
  }
  const size_t es = dtype_size(dt);
  float b[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, n - i));
    load_f32(dt, x + i * es, b, m);
    for (size_t j = 0; j < m; ++j) acc += static_cast<double>(b[j]) * b[j];
  }
  return acc;
}

template <class T>
void argmax_rows(const T *x, int64_t outer, int64_t n, int64_t inner, int64_t *out) {
  parallel_for(outer * inner, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T *p = x + (r / inner) * n * inner + r % inner;
      int64_t best = 0;
      T v = p[0];
      for (int64_t j = 1; j < n; ++j) {
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(v)) break;
        T w = p[j * inner];
        bool nan = false;
        if constexpr (std::is_floating_point_v<T>) nan = std::isnan(w);
        if (nan || w > v) {
          v = w;
          best = j;
        }
      }
      out[r] = best;
    }
  });
}

}  // namespace

double sum_squares(hpuDataType_t dt, const void *x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const char *p = static_cast<const char *>(x);
  const size_t es = dtype_size(dt);
  std::vector<double> partial(static_cast<size_t>(chunks));
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      partial[c] = chunk_squares(dt, p + c * kChunk * es, std::min(kChunk, n - c * kChunk));
  });
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

void argmax(hpuDataType_t dt, const void *x, int64_t outer, int64_t n, int64_t inner, int64_t *out) {
  dispatch(dt, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_arithmetic_v<T>) argmax_rows(static_cast<const T *>(x), outer, n, inner, out);
  });
}

}  // namespace hpu::kernels
