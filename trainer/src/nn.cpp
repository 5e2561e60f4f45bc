// Layers: each forward records its backward on the tape, beside it.
#include <hpu/trainer/nn.hpp>

#include "error.hpp"

#include <cmath>
#include <initializer_list>

namespace hpu {

using detail::fail;

namespace {

// Runs an op that returns one new tensor.
template <class F>
Tensor op(F f) {
  hpuTensor_t t = nullptr;
  check(f(&t));
  return Tensor(t);
}

// The type an op runs its inputs in under the calling thread's autocast state.
hpuDataType_t run_type(const char *op, std::initializer_list<hpuDataType_t> inputs) {
  hpuDataType_t t = HPU_FLOAT32;
  check(hpuAutocastGetOpDtype(op, inputs.begin(), inputs.size(), &t));
  return t;
}

Tensor cast(hpuStream_t s, const Tensor &x, hpuDataType_t dt) {
  return x.dtype() == dt ? x : op([&](hpuTensor_t *o) { return hpuCast(s, x.get(), dt, o); });
}

Parameter make_param(hpuDevice_t dev, const std::vector<int64_t> &shape, const std::vector<float> &init) {
  Parameter p;
  p.value = Tensor::from_host(dev, HPU_FLOAT32, shape, init.data());
  p.grad = Tensor::full(dev, HPU_FLOAT32, shape, 0.0);
  return p;
}

std::vector<float> uniform(Rng &rng, size_t n, double bound) {
  std::vector<float> v(n);
  for (auto &x : v) x = float((rng.uniform() * 2.0 - 1.0) * bound);
  return v;
}

// A view of t with its dims swapped.
Tensor transposed(const Tensor &t, int dim0, int dim1) {
  return op([&](hpuTensor_t *o) { return hpuTensorTranspose(o, t.get(), dim0, dim1); });
}

// t as rows of its last dim, a view: t itself when it has 2 dims, else empty
// when it is not contiguous.
Tensor rows_of(const Tensor &t) {
  const std::vector<int64_t> shape = t.shape();
  if (shape.size() == 2) return t;
  int contiguous = 0;
  check(hpuTensorIsContiguous(t.get(), &contiguous));
  return contiguous && !shape.empty() ? t.reshape({-1, shape.back()}) : Tensor();
}

// Whether there is a layer i and it is an M.
template <class M>
bool layer_is(const std::vector<std::unique_ptr<Module>> &layers, size_t i) {
  return i < layers.size() && dynamic_cast<M *>(layers[i].get()) != nullptr;
}

}  // namespace

void Parameter::accumulate(const Tensor &g, hpuStream_t stream) {
  if (!g) return;
  if (zero_pending_)
    check(hpuTensorCopy(grad.get(), g.get(), stream));
  else
    check(hpuAddInplace(stream, g.get(), 1.0, grad.get()));
  zero_pending_ = false;
  if (on_grad) on_grad(false);
}

void Parameter::accumulate_owned(Tensor g, hpuStream_t stream) {
  if (!g || !zero_pending_ || on_grad || g.dtype() != HPU_FLOAT32 || g.shape() != grad.shape())
    return accumulate(g, stream);
  grad = std::move(g);
  zero_pending_ = false;
}

void Parameter::materialize_grad(hpuStream_t stream) {
  if (zero_pending_) grad.fill(0.0, stream);
  zero_pending_ = false;
}

const Tensor &Parameter::low(hpuDataType_t dt, hpuStream_t stream) {
  if (!low_current_ || low_.dtype() != dt) {
    low_ = cast(stream, value, dt);
    low_current_ = true;
  }
  return low_;
}

Tensor Tape::backward(Tensor grad) {
  for (size_t i = steps_.size(); i-- > 0;) grad = steps_[i](grad);
  clear();
  return grad;
}

// ---- Linear -------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  if (in_features < 1 || out_features < 1)
    fail(HPU_ERROR_INVALID_ARGUMENT, "Linear(%lld, %lld): features must be >= 1", (long long)in_features,
         (long long)out_features);
}

void Linear::init(hpuDevice_t dev, Rng &rng) {
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), bias likewise.
  const double bound = 1.0 / std::sqrt(double(in_));
  w_ = make_param(dev, {out_, in_}, uniform(rng, size_t(out_ * in_), bound));
  if (has_bias_) b_ = make_param(dev, {out_}, uniform(rng, size_t(out_), bound));
}

void Linear::parameters(std::vector<Parameter *> &out, const std::string &prefix) {
  w_.name = prefix + "weight";
  out.push_back(&w_);
  if (has_bias_) {
    b_.name = prefix + "bias";
    out.push_back(&b_);
  }
}

Tensor Linear::forward(Context &ctx, const Tensor &x) { return run(ctx, x, {}); }

Tensor Linear::forward_relu(Context &ctx, const Tensor &x) { return run(ctx, x, {.relu = true}); }

Tensor Linear::run(Context &ctx, const Tensor &x, Fuse f) {
  if (!w_.value) fail(HPU_ERROR_INVALID_USAGE, "Linear(%lld, %lld) used before init", (long long)in_, (long long)out_);
  hpuStream_t s = ctx.stream;
  // Under autocast, the input is converted here and the weight's copy comes
  // from the parameter (kept across steps: AdamW writes it beside the f32
  // weights); backward reuses both. The weight and bias gradients still come in
  // f32 from the f32 accumulation of the products (the master weights' type).
  const hpuDataType_t xt = x.dtype(), wt = w_.value.dtype();
  const hpuDataType_t wr = run_type("linear", {wt, xt});
  const Tensor xr = cast(s, x, run_type("linear", {xt, wt})), w = wr == wt ? w_.value : w_.low(wr, s);
  // With a relu: x w^T + b, the relu applied as the product is stored.
  hpuMatmulOptions_t relu = HPU_MATMUL_OPTIONS_INIT;
  relu.bias = b_.value.get();
  relu.activation = HPU_ACTIVATION_RELU;
  const Tensor w_t = f.relu ? transposed(w, 0, 1) : Tensor();
  Tensor y = op([&](hpuTensor_t *o) {
    return f.relu ? hpuMatmulEx(s, xr.get(), w_t.get(), &relu, o) : hpuLinear(s, xr.get(), w.get(), b_.value.get(), o);
  });
  if (ctx.training) {
    const bool input_grad = ctx.tape.needs_input_grad();
    if (w_.adamw_in_backward) ++w_.adamw_in_backward->forwards;
    ctx.tape.push([this, s, xr, w, input_grad, xt, after_relu = f.after_relu](const Tensor &g) {
      hpuTensor_t gx = nullptr, gw = nullptr, gb = nullptr;
      if (input_grad && after_relu) {  // first: the step below overwrites w
        // g w times (x > 0), the relu's backward applied as the product is stored.
        hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
        o.activation_backward = HPU_ACTIVATION_RELU;
        o.activation_input = xr.get();
        o.dtype = xr.dtype();
        check(hpuMatmulEx(s, g.get(), w.get(), &o, &gx));
      } else if (input_grad) {
        check(hpuLinearBackward(s, g.get(), xr.get(), w.get(), &gx, nullptr, nullptr));
      }
      const Tensor g2 = w_.adamw_in_backward ? rows_of(g) : Tensor(), x2 = g2 ? rows_of(xr) : Tensor();
      if (w_.adamw_in_backward && w_.adamw_in_backward->forwards == 1 && x2) {
        // The only gradient of w this step, g^T x: AdamW's update at once.
        Parameter::AdamwStep &u = *w_.adamw_in_backward;
        u.options.param_copy = w_.low_copy() ? w_.low_copy().get() : nullptr;
        hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
        o.c = w_.value.get();
        o.adamw = &u.options;
        o.adamw_exp_avg = u.exp_avg.get(), o.adamw_exp_avg_sq = u.exp_avg_sq.get(), o.adamw_step = u.step;
        check(hpuMatmulEx(s, transposed(g2, 0, 1).get(), x2.get(), &o, nullptr));
        if (has_bias_) check(hpuLinearBackward(s, g.get(), xr.get(), w_.value.get(), nullptr, nullptr, &gb));
        w_.adamw_in_backward.reset();
        w_.stepped_in_backward = true;
      } else {
        check(hpuLinearBackward(s, g.get(), xr.get(), w_.value.get(), nullptr, &gw, has_bias_ ? &gb : nullptr));
      }
      Tensor tx(gx), tw(gw), tb(gb);
      w_.accumulate_owned(std::move(tw), s);
      if (has_bias_) b_.accumulate_owned(std::move(tb), s);
      return tx ? cast(s, tx, xt) : tx;
    });
    // The relu's backward, replayed first: y > 0 exactly where its input is.
    if (f.relu && !f.next_takes_relu)
      ctx.tape.push([s, y](const Tensor &g) {
        return op([&](hpuTensor_t *o) { return hpuReluBackward(s, g.get(), y.get(), o); });
      });
  }
  return y;
}

// ---- activations ----------------------------------------------------------------

// An elementwise activation: its op, and its backward from the forward's input.
template <hpuStatus_t (*Forward)(hpuStream_t, hpuTensor_t, hpuTensor_t *),
          hpuStatus_t (*Backward)(hpuStream_t, hpuTensor_t, hpuTensor_t, hpuTensor_t *)>
Tensor activation(Context &ctx, const Tensor &x) {
  hpuStream_t s = ctx.stream;
  Tensor y = op([&](hpuTensor_t *o) { return Forward(s, x.get(), o); });
  if (ctx.training && ctx.tape.needs_input_grad())
    ctx.tape.push([s, x](const Tensor &g) { return op([&](hpuTensor_t *o) { return Backward(s, g.get(), x.get(), o); }); });
  return y;
}

Tensor ReLU::forward(Context &ctx, const Tensor &x) { return activation<hpuRelu, hpuReluBackward>(ctx, x); }
Tensor GELU::forward(Context &ctx, const Tensor &x) { return activation<hpuGelu, hpuGeluBackward>(ctx, x); }

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0.0 && p < 1.0)) fail(HPU_ERROR_INVALID_ARGUMENT, "Dropout p is %g; expected 0 <= p < 1", p);
}

Tensor Dropout::forward(Context &ctx, const Tensor &x) {
  if (!ctx.training || p_ == 0.0) return x;
  hpuStream_t s = ctx.stream;
  hpuTensor_t out = nullptr, mask = nullptr;
  check(hpuDropout(s, x.get(), p_, 1, &out, &mask));
  Tensor y(out), m(mask);
  const hpuDataType_t in_type = x.dtype();
  const double p = p_;
  if (ctx.tape.needs_input_grad())
    ctx.tape.push([s, m, p, in_type](const Tensor &g) {
      return op([&](hpuTensor_t *o) { return hpuDropoutBackward(s, g.get(), m.get(), p, in_type, o); });
    });
  return y;
}

// ---- LayerNorm -------------------------------------------------------------------

LayerNorm::LayerNorm(int64_t normalized_shape, double eps) : d_(normalized_shape), eps_(eps) {
  if (normalized_shape < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "LayerNorm normalized_shape is %lld", (long long)normalized_shape);
}

void LayerNorm::init(hpuDevice_t dev, Rng &) {
  w_ = make_param(dev, {d_}, std::vector<float>(size_t(d_), 1.0f));
  b_ = make_param(dev, {d_}, std::vector<float>(size_t(d_), 0.0f));
}

void LayerNorm::parameters(std::vector<Parameter *> &out, const std::string &prefix) {
  w_.name = prefix + "weight";
  b_.name = prefix + "bias";
  out.push_back(&w_);
  out.push_back(&b_);
}

Tensor LayerNorm::forward(Context &ctx, const Tensor &x) {
  hpuStream_t s = ctx.stream;
  hpuTensor_t y = nullptr, mean = nullptr, rstd = nullptr;
  check(hpuLayerNorm(s, x.get(), w_.value.get(), b_.value.get(), eps_, &y, &mean, &rstd));
  Tensor ty(y), tm(mean), tr(rstd);
  if (ctx.training) {
    const bool input_grad = ctx.tape.needs_input_grad();
    ctx.tape.push([this, s, x, tm, tr, input_grad](const Tensor &g) {
      hpuTensor_t gx = nullptr, gw = nullptr, gb = nullptr;
      check(hpuLayerNormBackward(s, g.get(), x.get(), tm.get(), tr.get(), w_.value.get(), input_grad ? &gx : nullptr,
                                 &gw, &gb));
      Tensor tx(gx), tw(gw), tb(gb);
      w_.accumulate_owned(std::move(tw), s);
      b_.accumulate_owned(std::move(tb), s);
      return tx;
    });
  }
  return ty;
}

// ---- Embedding -------------------------------------------------------------------

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim) : v_(num_embeddings), d_(embedding_dim) {
  if (v_ < 1 || d_ < 1)
    fail(HPU_ERROR_INVALID_ARGUMENT, "Embedding(%lld, %lld): sizes must be >= 1", (long long)v_, (long long)d_);
}

void Embedding::init(hpuDevice_t dev, Rng &rng) {
  std::vector<float> w(size_t(v_ * d_));
  for (auto &x : w) x = rng.normal();
  w_ = make_param(dev, {v_, d_}, w);
}

void Embedding::parameters(std::vector<Parameter *> &out, const std::string &prefix) {
  w_.name = prefix + "weight";
  out.push_back(&w_);
}

Tensor Embedding::forward(Context &ctx, const Tensor &indices) {
  hpuStream_t s = ctx.stream;
  Tensor y = op([&](hpuTensor_t *o) { return hpuEmbedding(s, w_.value.get(), indices.get(), -1, o); });
  if (ctx.training)
    ctx.tape.push([this, s, indices](const Tensor &g) {
      Tensor gw = op([&](hpuTensor_t *o) { return hpuEmbeddingBackward(s, g.get(), indices.get(), w_.value.get(), -1, o); });
      w_.accumulate_owned(std::move(gw), s);
      return Tensor();  // indices have no gradient
    });
  return y;
}

// ---- Flatten, Sequential ---------------------------------------------------------

Tensor Flatten::forward(Context &ctx, const Tensor &x) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.empty()) fail(HPU_ERROR_INVALID_ARGUMENT, "Flatten needs a batch dimension; got a 0-dim tensor");
  Tensor y = x.reshape({shape[0], -1});
  if (ctx.training && ctx.tape.needs_input_grad())
    ctx.tape.push([shape](const Tensor &g) { return g ? g.reshape(shape) : g; });
  return y;
}

Tensor Sequential::forward(Context &ctx, const Tensor &x) {
  // A Linear followed by a ReLU runs as one op; when another Linear follows,
  // that one's backward does the relu's.
  Tensor h = x;
  bool after_relu = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto *linear = dynamic_cast<Linear *>(layers_[i].get());
    if (!linear) {
      h = layers_[i]->forward(ctx, h);
      after_relu = false;
      continue;
    }
    Linear::Fuse f;
    f.after_relu = after_relu;
    f.relu = layer_is<ReLU>(layers_, i + 1);
    f.next_takes_relu = f.relu && layer_is<Linear>(layers_, i + 2);
    h = linear->run(ctx, h, f);
    after_relu = f.next_takes_relu;
    if (f.relu) ++i;
  }
  return h;
}

void Sequential::init(hpuDevice_t dev, Rng &rng) {
  for (auto &l : layers_) l->init(dev, rng);
}

void Sequential::parameters(std::vector<Parameter *> &out, const std::string &prefix) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->parameters(out, prefix + std::to_string(i) + ".");
}

std::unique_ptr<Module> Sequential::clone() const {
  auto s = std::make_unique<Sequential>();
  for (const auto &l : layers_) s->add(l->clone());
  return s;
}

Tensor cross_entropy(Context &ctx, const Tensor &logits, const Tensor &labels) {
  hpuStream_t s = ctx.stream;
  Tensor loss = op([&](hpuTensor_t *o) {
    return hpuCrossEntropyLoss(s, logits.get(), labels.get(), HPU_REDUCTION_MEAN, -100, o);
  });
  if (ctx.training && ctx.tape.needs_input_grad())
    ctx.tape.push([s, logits, labels](const Tensor &g) {
      return op([&](hpuTensor_t *o) {
        return hpuCrossEntropyLossBackward(s, g.get(), logits.get(), labels.get(), HPU_REDUCTION_MEAN, -100, o);
      });
    });
  return loss;
}

// ---- optimizers ------------------------------------------------------------------

void Optimizer::zero_grad(hpuStream_t stream) {
  (void)stream;  // the zeros are written lazily (Parameter::zero_grad)
  for (Parameter *p : params_) p->zero_grad();
}

SGD::SGD(std::vector<Parameter *> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(lr, std::move(params)), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
  if (!(lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "SGD lr is %g; expected >= 0", lr);
  if (!(momentum >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "SGD momentum is %g; expected >= 0", momentum);
  if (nesterov && momentum == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "SGD nesterov needs a momentum > 0");
  if (momentum > 0)
    for (Parameter *p : this->params()) buf_.push_back(Tensor::full(p->value.device(), HPU_FLOAT32, p->value.shape(), 0.0));
}

void SGD::step(hpuStream_t stream) {
  ++steps_;
  hpuSgdOptions_t o = HPU_SGD_OPTIONS_INIT;
  o.lr = lr();
  o.momentum = momentum_;
  o.weight_decay = weight_decay_;
  o.nesterov = nesterov_;
  const auto &ps = params();
  for (size_t i = 0; i < ps.size(); ++i)
    check(hpuSgdStep(stream, ps[i]->value.get(), ps[i]->grad.get(), buf_.empty() ? nullptr : buf_[i].get(), steps_, &o));
}

void SGD::state(std::vector<std::pair<std::string, Tensor>> &out) {
  for (size_t i = 0; i < buf_.size(); ++i) out.emplace_back("momentum_buffer/" + params()[i]->name, buf_[i]);
}

std::unique_ptr<Optimizer> SGD::with_params(std::vector<Parameter *> params) const {
  auto o = std::make_unique<SGD>(std::move(params), initial_lr(), momentum_, weight_decay_, nesterov_);
  o->set_lr(lr());
  o->set_steps(steps_);
  return o;
}

AdamW::AdamW(std::vector<Parameter *> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(lr, std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  if (!(lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW lr is %g; expected >= 0", lr);
  if (!(beta1 >= 0 && beta1 < 1)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW beta1 is %g; expected in [0, 1)", beta1);
  if (!(beta2 >= 0 && beta2 < 1)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW beta2 is %g; expected in [0, 1)", beta2);
  for (Parameter *p : this->params()) {
    m_.push_back(Tensor::full(p->value.device(), HPU_FLOAT32, p->value.shape(), 0.0));
    v_.push_back(Tensor::full(p->value.device(), HPU_FLOAT32, p->value.shape(), 0.0));
  }
}

hpuAdamwOptions_t AdamW::options(double lr) const {
  hpuAdamwOptions_t o = HPU_ADAMW_OPTIONS_INIT;
  o.lr = lr;
  o.beta1 = beta1_;
  o.beta2 = beta2_;
  o.eps = eps_;
  o.weight_decay = weight_decay_;
  return o;
}

bool AdamW::offer_step_in_backward(double lr) {
  const auto &ps = params();
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i]->adamw_in_backward = Parameter::AdamwStep{m_[i], v_[i], steps_ + 1, options(lr)};
  return true;
}

void AdamW::step(hpuStream_t stream) {
  ++steps_;
  const hpuAdamwOptions_t o = options(lr());
  const auto &ps = params();
  for (size_t i = 0; i < ps.size(); ++i) {
    Parameter &p = *ps[i];
    p.adamw_in_backward.reset();
    if (p.stepped_in_backward) {  // with the copy, when there is one
      p.stepped_in_backward = false;
      p.copy_written();
      continue;
    }
    // With the forward's low-precision weights, written in the same pass.
    hpuAdamwOptions_t with_copy = o;
    with_copy.param_copy = p.low_copy() ? p.low_copy().get() : nullptr;
    check(hpuAdamwStep(stream, p.value.get(), p.grad.get(), m_[i].get(), v_[i].get(), steps_, &with_copy));
    p.copy_written();
  }
}

void AdamW::state(std::vector<std::pair<std::string, Tensor>> &out) {
  for (size_t i = 0; i < m_.size(); ++i) {
    out.emplace_back("exp_avg/" + params()[i]->name, m_[i]);
    out.emplace_back("exp_avg_sq/" + params()[i]->name, v_[i]);
  }
}

std::unique_ptr<Optimizer> AdamW::with_params(std::vector<Parameter *> params) const {
  auto o = std::make_unique<AdamW>(std::move(params), initial_lr(), beta1_, beta2_, eps_, weight_decay_);
  o->set_lr(lr());
  o->set_steps(steps_);
  return o;
}

}  // namespace hpu
