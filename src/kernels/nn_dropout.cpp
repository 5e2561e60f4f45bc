// Dropout from the counter-based generator: element i uses counter offset + i.
#include <vector>

#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"
#include "kernels/random.hpp"

namespace hpu::kernels {

using nn::at;

void dropout(hpuDataType_t x_dt, const void *x, hpuDataType_t y_dt, void *y, uint8_t *mask, int64_t n, double p,
             uint64_t seed, uint64_t offset) {
  nn::with_acc(x_dt, [&](auto acc) {
    using Acc = decltype(acc);
    Acc scale = p < 1 ? static_cast<Acc>(1 / (1 - p)) : Acc(0);
    parallel_for(n, 16384, [&](int64_t i0, int64_t i1) {
      Acc v[kBlock];
      for (int64_t b = i0; b < i1; b += kBlock) {
        int64_t m = std::min<int64_t>(kBlock, i1 - b);
        nn::load<Acc>(x_dt, at(x, x_dt, b), v, m);
        for (int64_t j = 0; j < m; ++j) {
          bool keep = uniform01(philox(seed, offset + b + j)) >= p;
          v[j] = keep ? v[j] * scale : Acc(0);
          if (mask) mask[b + j] = keep;
        }
        nn::store<Acc>(y_dt, v, at(y, y_dt, b), m);
      }
    });
  });
}

void dropout_backward(hpuDataType_t dy_dt, const void *dy, const uint8_t *mask, double scale, hpuDataType_t dx_dt,
                      void *dx, int64_t n) {
  nn::with_acc(dy_dt, [&](auto acc) {
    using Acc = decltype(acc);
    parallel_for(n, 16384, [&](int64_t i0, int64_t i1) {
      Acc v[kBlock];
      for (int64_t b = i0; b < i1; b += kBlock) {
        int64_t m = std::min<int64_t>(kBlock, i1 - b);
        nn::load<Acc>(dy_dt, at(dy, dy_dt, b), v, m);
        for (int64_t j = 0; j < m; ++j) v[j] = mask[b + j] ? v[j] * static_cast<Acc>(scale) : Acc(0);
        nn::store<Acc>(dx_dt, v, at(dx, dx_dt, b), m);
      }
    });
  });
}

}  // namespace hpu::kernels
