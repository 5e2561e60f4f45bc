// nll_loss and cross_entropy_loss (log_softmax + nll, fused) with their
// backwards, over [n, c] or spatial [n, c, inner] inputs, with optional class
// weights (ATen's weight: sample k counts weight[target_k], and a mean divides
// by the counted samples' weights) and, for cross entropy, ATen's
// label_smoothing and class-probability targets. Per-sample losses are
// computed in parallel and reduced in order, so results do not depend on the
// thread count.
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "kernels/nn.hpp"
#include "kernels/nn_common.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

using nn::at;

namespace {

// Samples per spatial tile: a tile's c rows are loaded into one buffer.
constexpr int64_t kTile = 64;
// Values per chunk of samples at least (an exp each, a few ns): small enough
// that the training step's 256 x 10 logits split into two chunks on two
// threads, which is faster forward and backward than one thread.
constexpr int64_t kChunkValues = 1024;

// The class of every sample, -1 for an ignored one; throws on one out of range.
std::vector<int64_t> classes_of(const LossArgs &a) {
  std::vector<int64_t> cls(a.n * a.inner);
  for (int64_t k = 0; k < a.n * a.inner; ++k) {
    int64_t t = nn::index_at(a.target_dt, a.target, k);
    if (t == a.ignore_index) {
      cls[k] = -1;
      continue;
    }
    if (t < 0 || t >= a.c)
      fail(HPU_ERROR_INVALID_ARGUMENT, "target[%lld] is %lld, not a class in 0..%lld nor ignore_index %lld",
           static_cast<long long>(k), static_cast<long long>(t), static_cast<long long>(a.c - 1),
           static_cast<long long>(a.ignore_index));
    cls[k] = t;
  }
  return cls;
}

// The weight of each class (all 1 without weights).
template <class Acc>
std::vector<Acc> class_weights(const LossArgs &a) {
  std::vector<Acc> v(a.c, Acc(1));
  if (a.weights.data) nn::load<Acc>(a.weights.dt, a.weights.data, v.data(), a.c);
  return v;
}

// Calls fn(k, row, probs) for every sample k, in parallel over tiles of
// samples: row holds the sample's c values of x (zeros when x is null), probs
// its c target probabilities (a.probs; else null), and when y is not null,
// what fn leaves in row is stored as y's values of that sample.
template <class Acc, class Fn>
void for_each_sample(const LossArgs &a, hpuDataType_t x_dt, const void *x, hpuDataType_t y_dt, void *y, Fn fn) {
  const int64_t c = a.c, inner = a.inner;
  if (a.n * inner == 0) return;
  const int64_t width = std::min(inner, kTile), tiles = (inner + width - 1) / width;
  const int64_t grain = std::max<int64_t>(1, kChunkValues / std::max<int64_t>(1, c * width));
  parallel_for(a.n * tiles, grain, [&](int64_t u0, int64_t u1) {
    std::vector<Acc> tile(c * width), row(width == 1 ? 0 : c);
    std::vector<Acc> ptile(a.probs ? c * width : 0), prow(a.probs && width > 1 ? c : 0);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i = u / tiles, s0 = (u % tiles) * width, w = std::min(width, inner - s0);
      // Sample s0 + s's value of class j is tile[j * w + s]; a whole [c, inner]
      // slab (w == inner) is one contiguous run.
      auto rows = [&](Acc *buf, auto &&copy) {
        if (w == inner)
          copy(i * c * inner, buf, c * inner);
        else
          for (int64_t j = 0; j < c; ++j) copy((i * c + j) * inner + s0, buf + j * w, w);
      };
      auto load_rows = [&](hpuDataType_t dt, const void *p, Acc *buf) {
        rows(buf, [&](int64_t off, Acc *dst, int64_t len) { nn::load<Acc>(dt, at(p, dt, off), dst, len); });
      };
      if (x)
        load_rows(x_dt, x, tile.data());
      else
        std::fill(tile.begin(), tile.end(), Acc(0));
      if (a.probs) load_rows(a.target_dt, a.target, ptile.data());
      for (int64_t s = 0; s < w; ++s) {
        if (w == 1) {
          fn(i * inner + s0, tile.data(), a.probs ? ptile.data() : nullptr);
          continue;
        }
        for (int64_t j = 0; j < c; ++j) row[j] = tile[j * w + s];
        for (int64_t j = 0; j < static_cast<int64_t>(prow.size()); ++j) prow[j] = ptile[j * w + s];
        fn(i * inner + s0 + s, row.data(), a.probs ? prow.data() : nullptr);
        if (y)
          for (int64_t j = 0; j < c; ++j) tile[j * w + s] = row[j];
      }
      if (y)
        rows(tile.data(),
             [&](int64_t off, Acc *src, int64_t len) { nn::store<Acc>(y_dt, src, at(y, y_dt, off), len); });
    }
  });
}

// log(sum_j exp(row[j])), shifted by the max so that it does not overflow.
template <class Acc>
Acc log_sum_exp(const Acc *row, int64_t c) {
  Acc mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < c; ++j) mx = std::max(mx, row[j]);
  if (std::isinf(mx)) mx = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - mx);
  return mx + std::log(sum);
}

// Softmax of row in place.
template <class Acc>
void softmax_row(Acc *row, int64_t c) {
  Acc mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < c; ++j) mx = std::max(mx, row[j]);
  if (std::isinf(mx)) mx = 0;
  for (int64_t j = 0; j < c; ++j) sum += (row[j] = std::exp(row[j] - mx));
  for (int64_t j = 0; j < c; ++j) row[j] /= sum;
}

// Writes per-sample losses (NONE) or their sum / mean over counted samples.
// (per holds weighted losses; weight_of[k] the weight sample k counts with, 0 when ignored.)
template <class Acc>
void reduce_losses(const std::vector<Acc> &per, const std::vector<Acc> &weight_of, hpuReduction_t reduction,
                   hpuDataType_t loss_dt, void *loss) {
  if (reduction == HPU_REDUCTION_NONE) {
    nn::store<Acc>(loss_dt, per.data(), loss, per.size());
    return;
  }
  Acc total = 0, weights = 0;
  bool any = false;
  for (size_t k = 0; k < per.size(); ++k) total += per[k], weights += weight_of[k], any |= weight_of[k] != 0;
  if (reduction == HPU_REDUCTION_MEAN) total = any ? total / weights : static_cast<Acc>(NAN);
  nn::store<Acc>(loss_dt, &total, loss, 1);
}

// d(loss)/d(loss_k) for each sample: grad_loss[k] (NONE), or the one
// grad_loss (SUM) divided by `count` (MEAN; NaN when nothing counted).
template <class Acc>
std::vector<Acc> sample_scales(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, Acc count, bool any) {
  const int64_t samples = a.n * a.inner;
  std::vector<Acc> s(samples);
  if (a.reduction == HPU_REDUCTION_NONE) {
    nn::load<Acc>(g_dt, grad_loss, s.data(), samples);
  } else {
    Acc g;
    nn::load<Acc>(g_dt, grad_loss, &g, 1);
    if (a.reduction == HPU_REDUCTION_MEAN) g = any ? g / count : static_cast<Acc>(NAN);
    std::fill(s.begin(), s.end(), g);
  }
  return s;
}

// The scales for class-index targets: a mean divides by the counted samples'
// weights; 0 for an ignored sample.
template <class Acc>
std::vector<Acc> index_scales(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss,
                              const std::vector<int64_t> &cls, const std::vector<Acc> &wc) {
  Acc total = 0;
  bool any = false;
  for (int64_t t : cls)
    if (t >= 0) total += wc[t], any = true;
  std::vector<Acc> s = sample_scales(a, g_dt, grad_loss, total, any);
  for (size_t k = 0; k < cls.size(); ++k)
    if (cls[k] < 0) s[k] = 0;
  return s;
}

// Cross entropy against class probabilities (ATen's soft targets): sample k's
// loss is sum_j wq[j] -log_softmax(x)[j], where wq[j] = weight[j] ((1 - e)
// probs[j] + e / c); a mean divides by the number of samples.
template <class Acc>
void cross_entropy_probs(const LossArgs &a, hpuDataType_t in_dt, const void *input, hpuDataType_t loss_dt,
                         void *loss) {
  const int64_t samples = a.n * a.inner, c = a.c;
  const Acc eps = static_cast<Acc>(a.label_smoothing), eps_c = eps / static_cast<Acc>(c);
  std::vector<Acc> per(samples, 0), counted(samples, 1), wc = class_weights<Acc>(a);
  for_each_sample<Acc>(a, in_dt, input, in_dt, nullptr, [&](int64_t k, Acc *row, const Acc *probs) {
    const Acc lse = log_sum_exp(row, c);
    Acc l = 0;
    for (int64_t j = 0; j < c; ++j) l += wc[j] * ((1 - eps) * probs[j] + eps_c) * (lse - row[j]);
    per[k] = l;
  });
  reduce_losses(per, counted, a.reduction, loss_dt, loss);
}

// d loss_k / dx_j = softmax_j sum_i wq[i] - wq[j].
template <class Acc>
void cross_entropy_probs_backward(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t in_dt,
                                  const void *input, hpuDataType_t gi_dt, void *grad_input) {
  const int64_t samples = a.n * a.inner, c = a.c;
  const Acc eps = static_cast<Acc>(a.label_smoothing), eps_c = eps / static_cast<Acc>(c);
  std::vector<Acc> wc = class_weights<Acc>(a);
  std::vector<Acc> s = sample_scales(a, g_dt, grad_loss, static_cast<Acc>(samples), samples > 0);
  for_each_sample<Acc>(a, in_dt, input, gi_dt, grad_input, [&](int64_t k, Acc *row, const Acc *probs) {
    auto wq = [&](int64_t j) { return wc[j] * ((1 - eps) * probs[j] + eps_c); };
    Acc wq_sum = 0;
    for (int64_t j = 0; j < c; ++j) wq_sum += wq(j);
    softmax_row(row, c);
    for (int64_t j = 0; j < c; ++j) row[j] = s[k] * (wq_sum * row[j] - wq(j));
  });
}

}  // namespace

void nll_loss(const LossArgs &a, hpuDataType_t in_dt, const void *input, hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    const int64_t samples = a.n * a.inner;
    std::vector<int64_t> cls = classes_of(a);
    std::vector<Acc> per(samples, 0), weight_of(samples, 0), wc = class_weights<Acc>(a);
    for (int64_t k = 0; k < samples; ++k) {
      int64_t t = cls[k];
      if (t < 0) continue;
      Acc v;
      nn::load<Acc>(in_dt, at(input, in_dt, ((k / a.inner) * a.c + t) * a.inner + k % a.inner), &v, 1);
      per[k] = -v * wc[t];
      weight_of[k] = wc[t];
    }
    reduce_losses(per, weight_of, a.reduction, loss_dt, loss);
  });
}

void nll_loss_backward(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t gi_dt,
                       void *grad_input) {
  nn::with_acc(g_dt, [&](auto acc) {
    using Acc = decltype(acc);
    std::vector<int64_t> cls = classes_of(a);
    std::vector<Acc> wc = class_weights<Acc>(a), s = index_scales<Acc>(a, g_dt, grad_loss, cls, wc);
    for_each_sample<Acc>(a, gi_dt, nullptr, gi_dt, grad_input, [&](int64_t k, Acc *row, const Acc *) {
      if (cls[k] >= 0) row[cls[k]] = -s[k] * wc[cls[k]];
    });
  });
}

void cross_entropy(const LossArgs &a, hpuDataType_t in_dt, const void *input, hpuDataType_t loss_dt, void *loss) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    if (a.probs) return cross_entropy_probs<Acc>(a, in_dt, input, loss_dt, loss);
    const int64_t samples = a.n * a.inner, c = a.c;
    const Acc eps = static_cast<Acc>(a.label_smoothing);
    std::vector<int64_t> cls = classes_of(a);
    std::vector<Acc> per(samples, 0), weight_of(samples, 0), wc = class_weights<Acc>(a);
    for (int64_t k = 0; k < samples; ++k)
      if (cls[k] >= 0) weight_of[k] = wc[cls[k]];
    for_each_sample<Acc>(a, in_dt, input, in_dt, nullptr, [&](int64_t k, Acc *row, const Acc *) {
      const int64_t t = cls[k];
      if (t < 0) return;
      const Acc lse = log_sum_exp(row, c);
      Acc l = (lse - row[t]) * wc[t];
      if (eps != 0) {
        Acc smooth = 0;  // sum over classes of weight * -log_softmax
        for (int64_t j = 0; j < c; ++j) smooth += wc[j] * (lse - row[j]);
        l = (1 - eps) * l + eps / static_cast<Acc>(c) * smooth;
      }
      per[k] = l;
    });
    reduce_losses(per, weight_of, a.reduction, loss_dt, loss);
  });
}

void cross_entropy_backward(const LossArgs &a, hpuDataType_t g_dt, const void *grad_loss, hpuDataType_t in_dt,
                            const void *input, hpuDataType_t gi_dt, void *grad_input) {
  nn::with_acc(in_dt, [&](auto acc) {
    using Acc = decltype(acc);
    if (a.probs) return cross_entropy_probs_backward<Acc>(a, g_dt, grad_loss, in_dt, input, gi_dt, grad_input);
    const int64_t c = a.c;
    const Acc eps = static_cast<Acc>(a.label_smoothing), eps_c = eps / static_cast<Acc>(c);
    std::vector<int64_t> cls = classes_of(a);
    std::vector<Acc> wc = class_weights<Acc>(a), s = index_scales<Acc>(a, g_dt, grad_loss, cls, wc);
    Acc wsum = 0;
    for (Acc w : wc) wsum += w;
    for_each_sample<Acc>(a, in_dt, input, gi_dt, grad_input, [&](int64_t k, Acc *row, const Acc *) {
      const int64_t t = cls[k];
      if (t < 0) {
        std::fill(row, row + c, Acc(0));
        return;
      }
      // loss_k = (1 - e) w_t (lse - x_t) + e/c sum_j w_j (lse - x_j), so
      // d/dx_j = ((1 - e) w_t + e/c sum(w)) softmax_j - (1 - e) w_t [j == t] - e/c w_j.
      softmax_row(row, c);
      const Acc sk = s[k], nll_w = (1 - eps) * wc[t], lse_w = nll_w + eps_c * wsum;
      if (eps != 0)
        for (int64_t j = 0; j < c; ++j) row[j] = sk * (lse_w * row[j] - eps_c * wc[j]);
      else
        for (int64_t j = 0; j < c; ++j) row[j] = sk * lse_w * row[j];
      row[t] -= sk * nll_w;
    });
  });
}

}  // namespace hpu::kernels
