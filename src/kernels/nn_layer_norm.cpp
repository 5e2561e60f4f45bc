// Layer normalisation over the last dim, forward and backward.
#include <cmath>
#include <vector>

#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

using nn::at;

namespace {

template <class Acc>
std::vector<Acc> load_param(hpuDataType_t dt, const void *p, int64_t d, Acc fill) {
  std::vector<Acc> v(d, fill);
  if (p) nn::load<Acc>(dt, p, v.data(), d);
  return v;
}

int64_t grain_rows(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)); }

}  // namespace

void layer_norm(hpuDataType_t x_dt, const void *x, hpuDataType_t w_dt, const void *w, hpuDataType_t b_dt,
                const void *b, double eps, int64_t rows, int64_t d, hpuDataType_t y_dt, void *y, float *mean,
                float *rstd) {
  nn::with_acc(x_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> wv = load_param<Acc>(w_dt, w, d, 1), bv = load_param<Acc>(b_dt, b, d, 0);
    parallel_for(rows, grain_rows(d), [&](int64_t r0, int64_t r1) {
      std::vector<Acc> v(d);
      for (int64_t r = r0; r < r1; ++r) {
        nn::load<Acc>(x_dt, at(x, x_dt, r * d), v.data(), d);
        Acc mu = 0, var = 0;
        for (Acc e : v) mu += e;
        mu /= static_cast<Acc>(d);
        for (Acc e : v) var += (e - mu) * (e - mu);
        var /= static_cast<Acc>(d);
        Acc rs = 1 / std::sqrt(var + static_cast<Acc>(eps));
        for (int64_t j = 0; j < d; ++j) v[j] = (v[j] - mu) * rs * wv[j] + bv[j];
        nn::store<Acc>(y_dt, v.data(), at(y, y_dt, r * d), d);
        mean[r] = static_cast<float>(mu);
        rstd[r] = static_cast<float>(rs);
      }
    });
  });
}

void layer_norm_backward(hpuDataType_t dy_dt, const void *dy, hpuDataType_t x_dt, const void *x, const float *mean,
                         const float *rstd, hpuDataType_t w_dt, const void *w, int64_t rows, int64_t d,
                         hpuDataType_t dx_dt, void *dx, hpuDataType_t dw_dt, void *dw, void *db) {
  nn::with_acc(dy_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> wv = load_param<Acc>(w_dt, w, d, 1);
    if (dx)
      parallel_for(rows, grain_rows(d), [&](int64_t r0, int64_t r1) {
        std::vector<Acc> g(d), xh(d);
        for (int64_t r = r0; r < r1; ++r) {
          nn::load<Acc>(dy_dt, at(dy, dy_dt, r * d), g.data(), d);
          nn::load<Acc>(x_dt, at(x, x_dt, r * d), xh.data(), d);
          Acc mu = mean[r], rs = rstd[r], mg = 0, mgx = 0;
          for (int64_t j = 0; j < d; ++j) {
            xh[j] = (xh[j] - mu) * rs;
            g[j] *= wv[j];
            mg += g[j];
            mgx += g[j] * xh[j];
          }
          mg /= static_cast<Acc>(d);
          mgx /= static_cast<Acc>(d);
          for (int64_t j = 0; j < d; ++j) g[j] = rs * (g[j] - mg - xh[j] * mgx);
          nn::store<Acc>(dx_dt, g.data(), at(dx, dx_dt, r * d), d);
        }
      });
    if (!dw && !db) return;
    // Parameter gradients sum over rows in order (the same bits for any thread count).
    std::vector<Acc> sw(d, 0), sb(d, 0), g(d), xh(d);
    for (int64_t r = 0; r < rows; ++r) {
      nn::load<Acc>(dy_dt, at(dy, dy_dt, r * d), g.data(), d);
      nn::load<Acc>(x_dt, at(x, x_dt, r * d), xh.data(), d);
      Acc mu = mean[r], rs = rstd[r];
      for (int64_t j = 0; j < d; ++j) {
        sw[j] += g[j] * (xh[j] - mu) * rs;
        sb[j] += g[j];
      }
    }
    if (dw) nn::store<Acc>(dw_dt, sw.data(), dw, d);
    if (db) nn::store<Acc>(dw_dt, sb.data(), db, d);
  });
}

}  // namespace hpu::kernels
