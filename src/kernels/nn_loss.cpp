// nll_loss and cross_entropy_loss (log_softmax + nll, fused) with their
// backwards. Per-sample losses are computed in parallel and reduced in order,
// so results do not depend on the thread count.
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

using nn::at;

namespace {

// The class of sample i, or -1 when it is ignored; throws when out of range.
int64_t class_of(hpuDataType_t t_dt, const void *target, int64_t i, int64_t c, int64_t ignore_index) {
  int64_t t = nn::index_at(t_dt, target, i);
  if (t == ignore_index) return -1;
  if (t < 0 || t >= c)
    fail(HPU_ERROR_INVALID_ARGUMENT, "target[%lld] is %lld, not a class in 0..%lld nor ignore_index %lld",
         static_cast<long long>(i), static_cast<long long>(t), static_cast<long long>(c - 1),
         static_cast<long long>(ignore_index));
  return t;
}

int64_t grain_rows(int64_t c) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, c)); }

// Writes per-sample losses (NONE) or their sum / mean over counted samples.
template <class Acc>
void reduce_losses(const std::vector<Acc> &per, const std::vector<char> &counted, hpuReduction_t reduction,
                   hpuDataType_t loss_dt, void *loss) {
  if (reduction == HPU_REDUCTION_NONE) {
    nn::store<Acc>(loss_dt, per.data(), loss, per.size());
    return;
  }
  Acc total = 0;
  int64_t count = 0;
  for (size_t i = 0; i < per.size(); ++i) total += per[i], count += counted[i];
  if (reduction == HPU_REDUCTION_MEAN) total = count ? total / static_cast<Acc>(count) : static_cast<Acc>(NAN);
  nn::store<Acc>(loss_dt, &total, loss, 1);
}

// d(loss_i)/d(loss) factor for each sample: grad_loss[i] (NONE), or the one
// grad_loss divided by the counted samples (MEAN).
template <class Acc>
std::vector<Acc> sample_scales(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t t_dt, const void *target,
                               int64_t n, int64_t c, hpuReduction_t reduction, int64_t ignore_index,
                               std::vector<int64_t> &cls) {
  std::vector<Acc> s(n);
  cls.resize(n);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += (cls[i] = class_of(t_dt, target, i, c, ignore_index)) >= 0;
  if (reduction == HPU_REDUCTION_NONE) {
    nn::load<Acc>(g_dt, grad_loss, s.data(), n);
  } else {
    Acc g;
    nn::load<Acc>(g_dt, grad_loss, &g, 1);
    if (reduction == HPU_REDUCTION_MEAN) g = count ? g / static_cast<Acc>(count) : static_cast<Acc>(NAN);
    for (auto &x : s) x = g;
  }
  for (int64_t i = 0; i < n; ++i)
    if (cls[i] < 0) s[i] = 0;
  return s;
}

}  // namespace

void nll_loss(hpuDataType_t in_dt, const void *input, hpuDataType_t t_dt, const void *target, int64_t n, int64_t c,
              hpuReduction_t reduction, int64_t ignore_index, hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> per(n, 0);
    std::vector<char> counted(n, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t t = class_of(t_dt, target, i, c, ignore_index);
      if (t < 0) continue;
      Acc v;
      nn::load<Acc>(in_dt, at(input, in_dt, i * c + t), &v, 1);
      per[i] = -v;
      counted[i] = 1;
    }
    reduce_losses(per, counted, reduction, loss_dt, loss);
  });
}

void nll_loss_backward(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t t_dt, const void *target, int64_t n,
                       int64_t c, hpuReduction_t reduction, int64_t ignore_index, hpuDataType_t gi_dt,
                       void *grad_input) {
  nn::with_acc(g_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls;
    std::vector<Acc> s = sample_scales<Acc>(g_dt, grad_loss, t_dt, target, n, c, reduction, ignore_index, cls);
    parallel_for(n, grain_rows(c), [&](int64_t i0, int64_t i1) {
      std::vector<Acc> row(c);
      for (int64_t i = i0; i < i1; ++i) {
        std::fill(row.begin(), row.end(), Acc(0));
        if (cls[i] >= 0) row[cls[i]] = -s[i];
        nn::store<Acc>(gi_dt, row.data(), at(grad_input, gi_dt, i * c), c);
      }
    });
  });
}

void cross_entropy(hpuDataType_t in_dt, const void *input, hpuDataType_t t_dt, const void *target, int64_t n,
                   int64_t c, hpuReduction_t reduction, int64_t ignore_index, hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls(n);
    std::vector<char> counted(n);
    for (int64_t i = 0; i < n; ++i) counted[i] = (cls[i] = class_of(t_dt, target, i, c, ignore_index)) >= 0;
    std::vector<Acc> per(n, 0);
    parallel_for(n, grain_rows(c), [&](int64_t i0, int64_t i1) {
      std::vector<Acc> row(c);
      for (int64_t i = i0; i < i1; ++i) {
        if (cls[i] < 0) continue;
        nn::load<Acc>(in_dt, at(input, in_dt, i * c), row.data(), c);
        Acc mx = -INFINITY, sum = 0;
        for (Acc v : row) mx = std::max(mx, v);
        if (std::isinf(mx)) mx = 0;
        for (Acc v : row) sum += std::exp(v - mx);
        per[i] = mx + std::log(sum) - row[cls[i]];
      }
    });
    reduce_losses(per, counted, reduction, loss_dt, loss);
  });
}

void cross_entropy_backward(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t in_dt, const void *input,
                            hpuDataType_t t_dt, const void *target, int64_t n, int64_t c, hpuReduction_t reduction,
                            int64_t ignore_index, hpuDataType_t gi_dt, void *grad_input) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls;
    std::vector<Acc> s = sample_scales<Acc>(g_dt, grad_loss, t_dt, target, n, c, reduction, ignore_index, cls);
    parallel_for(n, grain_rows(c), [&](int64_t i0, int64_t i1) {
      std::vector<Acc> row(c);
      for (int64_t i = i0; i < i1; ++i) {
        if (cls[i] < 0) {
          std::fill(row.begin(), row.end(), Acc(0));
        } else {
          // d/dx (logsumexp(x) - x_t) = softmax(x) - onehot(t).
          nn::load<Acc>(in_dt, at(input, in_dt, i * c), row.data(), c);
          Acc mx = -INFINITY, sum = 0;
          for (Acc v : row) mx = std::max(mx, v);
          if (std::isinf(mx)) mx = 0;
          for (Acc &v : row) sum += (v = std::exp(v - mx));
          for (Acc &v : row) v = v / sum * s[i];
          row[cls[i]] -= s[i];
        }
        nn::store<Acc>(gi_dt, row.data(), at(grad_input, gi_dt, i * c), c);
      }
    });
  });
}

}  // namespace hpu::kernels
