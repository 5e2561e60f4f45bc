// Sums a broadcast result back to an input's shape (the backward of
// broadcasting). Walks g in order with the output's strides, 0 on the dims the
// output broadcasts, so every output element adds its terms in index order.
#include <vector>

#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"

namespace hpu::kernels {

void sum_to(hpuDataType_t g_dt, const void *g, int ndim, const int64_t *shape, const int64_t *out_shape,
            double scale, hpuDataType_t out_dt, void *out) {
  int64_t total = 1, out_n = 1;
  int64_t stride[8] = {0};
  for (int i = ndim - 1; i >= 0; --i) {
    stride[i] = out_shape[i] == 1 ? 0 : out_n;
    out_n *= out_shape[i];
    total *= shape[i];
  }
  nn::with_acc(g_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> sum(out_n, Acc(0));
    int64_t inner = ndim ? shape[ndim - 1] : 1, inner_stride = ndim ? stride[ndim - 1] : 0;
    std::vector<Acc> row(inner);
    int64_t idx[8] = {0};
    for (int64_t base = 0; base < total; base += inner) {
      int64_t o = 0;
      for (int i = 0; i + 1 < ndim; ++i) o += idx[i] * stride[i];
      nn::load<Acc>(g_dt, nn::at(g, g_dt, base), row.data(), inner);
      for (int64_t j = 0; j < inner; ++j) sum[o + j * inner_stride] += row[j];
      for (int i = ndim - 2; i >= 0; --i) {  // next row index, odometer style
        if (++idx[i] < shape[i]) break;
        idx[i] = 0;
      }
    }
    for (Acc &v : sum) v *= static_cast<Acc>(scale);
    nn::store<Acc>(out_dt, sum.data(), out, out_n);
  });
}

}  // namespace hpu::kernels
