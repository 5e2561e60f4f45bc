// Embedding lookup (a gather of rows) and its backward (a scatter-add).
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "kernels/cast.hpp"
#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

using nn::at;

namespace {

int64_t row_of(hpuDataType_t idx_dt, const void *indices, int64_t i, int64_t v) {
  int64_t r = nn::index_at(idx_dt, indices, i);
  if (r < 0 || r >= v)
    fail(HPU_ERROR_INVALID_ARGUMENT, "indices[%lld] is %lld, not a row of weight (0..%lld)", static_cast<long long>(i),
         static_cast<long long>(r), static_cast<long long>(v - 1));
  return r;
}

}  // namespace

void embedding(hpuDataType_t w_dt, const void *weight, int64_t v, int64_t d, hpuDataType_t idx_dt,
               const void *indices, int64_t n, hpuDataType_t out_dt, void *out) {
  for (int64_t i = 0; i < n; ++i) row_of(idx_dt, indices, i, v);  // check all before writing
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      cast(at(weight, w_dt, nn::index_at(idx_dt, indices, i) * d), w_dt, at(out, out_dt, i * d), out_dt, d);
  });
}

void embedding_backward(hpuDataType_t dy_dt, const void *dy, hpuDataType_t idx_dt, const void *indices, int64_t n,
                        int64_t v, int64_t d, int64_t padding_idx, hpuDataType_t gw_dt, void *grad_weight) {
  nn::with_acc(dy_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> sum(static_cast<size_t>(v * d), Acc(0)), row(d);
    for (int64_t i = 0; i < n; ++i) {
      int64_t r = row_of(idx_dt, indices, i, v);
      if (r == padding_idx) continue;
      nn::load<Acc>(dy_dt, at(dy, dy_dt, i * d), row.data(), d);
      Acc *dst = sum.data() + r * d;
      for (int64_t j = 0; j < d; ++j) dst[j] += row[j];
    }
    nn::store<Acc>(gw_dt, sum.data(), grad_weight, sum.size());
  });
}

}  // namespace hpu::kernels
