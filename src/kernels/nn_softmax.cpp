// softmax and log_softmax over the middle dim of [outer, n, inner]: one slab
// of n x inner elements at a time, in the accumulator type.
#include <cmath>
#include <vector>

#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

using nn::at;

namespace {

int64_t grain_for(int64_t slab) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, slab)); }

}  // namespace

void softmax(bool log, hpuDataType_t x_dt, const void *x, hpuDataType_t y_dt, void *y, int64_t outer, int64_t n,
             int64_t inner) {
  int64_t slab = n * inner;
  nn::with_acc(x_dt, [&](auto acc) {
    using Acc = decltype(acc);
    parallel_for(outer, grain_for(slab), [&](int64_t o0, int64_t o1) {
      std::vector<Acc> v(slab), mx(inner), sum(inner);
      for (int64_t o = o0; o < o1; ++o) {
        nn::load<Acc>(x_dt, at(x, x_dt, o * slab), v.data(), slab);
        for (int64_t i = 0; i < inner; ++i) mx[i] = -INFINITY, sum[i] = 0;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], v[j * inner + i]);
        for (int64_t i = 0; i < inner; ++i)  // a row of -inf: avoid inf - inf
          if (std::isinf(mx[i])) mx[i] = 0;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            Acc e = std::exp(v[j * inner + i] - mx[i]);
            sum[i] += e;
            if (!log) v[j * inner + i] = e;
          }
        for (int64_t i = 0; i < inner; ++i) sum[i] = log ? mx[i] + std::log(sum[i]) : 1 / sum[i];
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            Acc &e = v[j * inner + i];
            e = log ? e - sum[i] : e * sum[i];
          }
        nn::store<Acc>(y_dt, v.data(), at(y, y_dt, o * slab), slab);
      }
    });
  });
}

void softmax_backward(bool log, hpuDataType_t dt, const void *dy, const void *y, hpuDataType_t dx_dt, void *dx,
                      int64_t outer, int64_t n, int64_t inner) {
  int64_t slab = n * inner;
  nn::with_acc(dt, [&](auto acc) {
    using Acc = decltype(acc);
    parallel_for(outer, grain_for(slab), [&](int64_t o0, int64_t o1) {
      std::vector<Acc> g(slab), v(slab), dot(inner);
      for (int64_t o = o0; o < o1; ++o) {
        nn::load<Acc>(dt, at(dy, dt, o * slab), g.data(), slab);
        nn::load<Acc>(dt, at(y, dt, o * slab), v.data(), slab);
        for (int64_t i = 0; i < inner; ++i) dot[i] = 0;
        // softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy).
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) dot[i] += log ? g[j * inner + i] : g[j * inner + i] * v[j * inner + i];
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            Acc yy = v[j * inner + i], gg = g[j * inner + i];
            v[j * inner + i] = log ? gg - std::exp(yy) * dot[i] : yy * (gg - dot[i]);
          }
        nn::store<Acc>(dx_dt, v.data(), at(dx, dx_dt, o * slab), slab);
      }
    });
  });
}

}  // namespace hpu::kernels
