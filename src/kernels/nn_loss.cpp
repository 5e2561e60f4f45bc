// nll_loss and cross_entropy_loss (log_softmax + nll, fused) with their
// backwards, with optional class weights (ATen's weight: sample i counts
// weight[target_i], and a mean divides by the counted samples' weights).
// Per-sample losses are computed in parallel and reduced in order, so results
// do not depend on the thread count.
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

// The weight of each class (all 1 without weights).
template <class Acc>
std::vector<Acc> class_weights(const LossWeights &w, int64_t c) {
  std::vector<Acc> v(c, Acc(1));
  if (w.data) nn::load<Acc>(w.dt, w.data, v.data(), c);
  return v;
}

int64_t grain_rows(int64_t c) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, c)); }

// Writes per-sample losses (NONE) or their sum / mean over counted samples.
// (per holds weighted losses; weight_of[i] the weight sample i counts with, 0 when ignored.)
template <class Acc>
void reduce_losses(const std::vector<Acc> &per, const std::vector<Acc> &weight_of, hpuReduction_t reduction,
                   hpuDataType_t loss_dt, void *loss) {
  if (reduction == HPU_REDUCTION_NONE) {
    nn::store<Acc>(loss_dt, per.data(), loss, per.size());
    return;
  }
  Acc total = 0, weights = 0;
  bool any = false;
  for (size_t i = 0; i < per.size(); ++i) total += per[i], weights += weight_of[i], any |= weight_of[i] != 0;
  if (reduction == HPU_REDUCTION_MEAN) total = any ? total / weights : static_cast<Acc>(NAN);
  nn::store<Acc>(loss_dt, &total, loss, 1);
}

// d(loss_i)/d(loss) factor for each sample: grad_loss[i] (NONE), or the one
// grad_loss divided by the counted samples' weights (MEAN), each factor
// times the weight of its class.
template <class Acc>
std::vector<Acc> sample_scales(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t t_dt, const void *target,
                               const LossWeights &weights, int64_t n, int64_t c, hpuReduction_t reduction,
                               int64_t ignore_index, std::vector<int64_t> &cls) {
  std::vector<Acc> s(n), wc = class_weights<Acc>(weights, c);
  cls.resize(n);
  Acc total = 0;
  bool any = false;
  for (int64_t i = 0; i < n; ++i)
    if ((cls[i] = class_of(t_dt, target, i, c, ignore_index)) >= 0) total += wc[cls[i]], any = true;
  if (reduction == HPU_REDUCTION_NONE) {
    nn::load<Acc>(g_dt, grad_loss, s.data(), n);
  } else {
    Acc g;
    nn::load<Acc>(g_dt, grad_loss, &g, 1);
    if (reduction == HPU_REDUCTION_MEAN) g = any ? g / total : static_cast<Acc>(NAN);
    for (auto &x : s) x = g;
  }
  for (int64_t i = 0; i < n; ++i) s[i] = cls[i] < 0 ? Acc(0) : s[i] * wc[cls[i]];
  return s;
}

}  // namespace

void nll_loss(hpuDataType_t in_dt, const void *input, hpuDataType_t t_dt, const void *target,
              const LossWeights &weights, int64_t n, int64_t c, hpuReduction_t reduction, int64_t ignore_index,
              hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<Acc> per(n, 0), weight_of(n, 0), wc = class_weights<Acc>(weights, c);
    for (int64_t i = 0; i < n; ++i) {
      int64_t t = class_of(t_dt, target, i, c, ignore_index);
      if (t < 0) continue;
      Acc v;
      nn::load<Acc>(in_dt, at(input, in_dt, i * c + t), &v, 1);
      per[i] = -v * wc[t];
      weight_of[i] = wc[t];
    }
    reduce_losses(per, weight_of, reduction, loss_dt, loss);
  });
}

void nll_loss_backward(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t t_dt, const void *target,
                       const LossWeights &weights, int64_t n, int64_t c, hpuReduction_t reduction,
                       int64_t ignore_index, hpuDataType_t gi_dt, void *grad_input) {
  nn::with_acc(g_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls;
    std::vector<Acc> s =
        sample_scales<Acc>(g_dt, grad_loss, t_dt, target, weights, n, c, reduction, ignore_index, cls);
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

void cross_entropy(hpuDataType_t in_dt, const void *input, hpuDataType_t t_dt, const void *target,
                   const LossWeights &weights, int64_t n, int64_t c, hpuReduction_t reduction, int64_t ignore_index,
                   hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls(n);
    std::vector<Acc> per(n, 0), weight_of(n, 0), wc = class_weights<Acc>(weights, c);
    for (int64_t i = 0; i < n; ++i)
      if ((cls[i] = class_of(t_dt, target, i, c, ignore_index)) >= 0) weight_of[i] = wc[cls[i]];
    parallel_for(n, grain_rows(c), [&](int64_t i0, int64_t i1) {
      std::vector<Acc> row(c);
      for (int64_t i = i0; i < i1; ++i) {
        if (cls[i] < 0) continue;
        nn::load<Acc>(in_dt, at(input, in_dt, i * c), row.data(), c);
        Acc mx = -INFINITY, sum = 0;
        for (Acc v : row) mx = std::max(mx, v);
        if (std::isinf(mx)) mx = 0;
        for (Acc v : row) sum += std::exp(v - mx);
        per[i] = (mx + std::log(sum) - row[cls[i]]) * weight_of[i];
      }
    });
    reduce_losses(per, weight_of, reduction, loss_dt, loss);
  });
}

void cross_entropy_backward(hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t in_dt, const void *input,
                            hpuDataType_t t_dt, const void *target, const LossWeights &weights, int64_t n, int64_t c,
                            hpuReduction_t reduction, int64_t ignore_index, hpuDataType_t gi_dt, void *grad_input) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls;
    std::vector<Acc> s =
        sample_scales<Acc>(g_dt, grad_loss, t_dt, target, weights, n, c, reduction, ignore_index, cls);
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
