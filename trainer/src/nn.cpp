// Layers: each forward records its backward on the tape, beside it.
#include <hpu/trainer/nn.hpp>

#include "error.hpp"

#include <cmath>
#include <initializer_list>
#include <memory>
#include <unordered_map>

namespace hpu {

using detail::fail;
using detail::shape_text;

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

// hpuMatmulEx outside any autocast region: its operands come in the types
// the caller decided (Linear: autocast's decision for "linear"), and a
// backward product runs in its gradient's type, as the ops' backwards do.
// Returns the result (empty with options.c).
Tensor matmul_ex(hpuStream_t s, const Tensor &a, const Tensor &b, const hpuMatmulOptions_t &options) {
  check(hpuAutocastPush(0, HPU_BFLOAT16));
  hpuTensor_t out = nullptr;
  const hpuStatus_t st = hpuMatmulEx(s, a.get(), b.get(), &options, options.c ? nullptr : &out);
  hpuAutocastPop();
  check(st);
  return out ? Tensor(out) : Tensor();
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

}  // namespace

void Parameter::accumulate(const Tensor &g, hpuStream_t stream) {
  if (!g) return;
  if (zero_pending_)
    check(hpuTensorCopy(stream, grad.get(), g.get()));
  else
    check(hpuAddInplace(stream, grad.get(), g.get(), 1.0));
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

Tensor Linear::forward(Context &ctx, const Tensor &x) { return forward_fused(ctx, x, {}); }

Tensor Linear::forward_fused(Context &ctx, const Tensor &x, const Fusion &f) {
  if (!w_.value) fail(HPU_ERROR_INVALID_USAGE, "Linear(%lld, %lld) used before init", (long long)in_, (long long)out_);
  hpuStream_t s = ctx.stream;
  StepPlan *plan = ctx.plan;
  // Under autocast, the input is converted here and the weight's copy comes
  // from the plan (kept across steps: AdamW writes it beside the f32
  // weights); backward reuses both. The weight and bias gradients still come in
  // f32 from the f32 accumulation of the products (the master weights' type).
  const hpuDataType_t xt = x.dtype(), wt = w_.value.dtype();
  const hpuDataType_t wr = run_type("linear", {wt, xt});
  const Tensor xr = cast(s, x, run_type("linear", {xt, wt}));
  const Tensor w = wr == wt ? w_.value : plan ? plan->low(w_, wr, s) : cast(s, w_.value, wr);
  // x w^T + b, the plan's activation applied as the product is stored.
  hpuMatmulOptions_t o = HPU_MATMUL_OPTIONS_INIT;
  o.bias = b_.value.get();
  o.activation = f.activation;
  const Tensor y = matmul_ex(s, xr, transposed(w, 0, 1), o);
  if (!ctx.training) return y;
  const bool input_grad = ctx.tape.needs_input_grad();
  if (plan) plan->used(w_);
  ctx.tape.push([this, s, plan, xr, w, input_grad, xt, input_activation = f.input_activation](const Tensor &g) {
    hpuTensor_t gx = nullptr, gw = nullptr, gb = nullptr;
    Tensor tx;
    if (input_grad && input_activation != HPU_ACTIVATION_NONE && g.dtype() == w.dtype()) {
      // g w times the input activation's derivative, as the product is
      // stored; first: the update below overwrites w.
      hpuMatmulOptions_t back = HPU_MATMUL_OPTIONS_INIT;
      back.activation_backward = input_activation;
      back.activation_input = xr.get();
      back.dtype = xr.dtype();
      tx = matmul_ex(s, g, w, back);
    } else if (input_grad) {
      check(hpuLinearBackward(s, g.get(), xr.get(), w.get(), &gx, nullptr, nullptr));
      tx = Tensor(gx);
      if (input_activation == HPU_ACTIVATION_RELU)
        tx = op([&](hpuTensor_t *out) { return hpuReluBackward(s, tx.get(), xr.get(), out); });
    }
    const UpdateInBackward *u = plan ? plan->update_in_backward(w_) : nullptr;
    const Tensor g2 = u && g.dtype() == xr.dtype() ? rows_of(g) : Tensor(), x2 = g2 ? rows_of(xr) : Tensor();
    if (x2) {
      // The only gradient of w this step, g^T x: the optimizer's update at once.
      hpuAdamwOptions_t adamw = u->options;
      const Tensor *copy = plan->copy_of(w_);
      adamw.param_copy = copy ? copy->get() : nullptr;
      hpuMatmulOptions_t step = HPU_MATMUL_OPTIONS_INIT;
      step.c = w_.value.get();
      step.adamw = &adamw;
      step.adamw_exp_avg = u->exp_avg.get(), step.adamw_exp_avg_sq = u->exp_avg_sq.get(), step.adamw_step = u->step;
      matmul_ex(s, transposed(g2, 0, 1), x2, step);
      if (has_bias_) check(hpuLinearBackward(s, g.get(), xr.get(), w_.value.get(), nullptr, nullptr, &gb));
      plan->apply(w_);
    } else {
      check(hpuLinearBackward(s, g.get(), xr.get(), w_.value.get(), nullptr, &gw, has_bias_ ? &gb : nullptr));
    }
    Tensor tw(gw), tb(gb);
    w_.accumulate_owned(std::move(tw), s);
    if (has_bias_) b_.accumulate_owned(std::move(tb), s);
    return tx ? cast(s, tx, xt) : tx;
  });
  // The activation's backward, replayed first, unless the next layer's input
  // gradient applies it: a relu's output y > 0 exactly where its input is.
  if (f.activation == HPU_ACTIVATION_RELU && f.record_activation_backward)
    ctx.tape.push([s, y](const Tensor &g) {
      return op([&](hpuTensor_t *out) { return hpuReluBackward(s, g.get(), y.get(), out); });
    });
  return y;
}

// ---- activations ----------------------------------------------------------------

// An elementwise activation: its op, and its backward from the forward's input.
template <hpuStatus_t (*Forward)(hpuStream_t, hpuTensor_t, hpuTensor_t *),
          hpuStatus_t (*Backward)(hpuStream_t, hpuTensor_t, hpuTensor_t, hpuTensor_t *)>
Tensor elementwise(Context &ctx, const Tensor &x) {
  hpuStream_t s = ctx.stream;
  Tensor y = op([&](hpuTensor_t *o) { return Forward(s, x.get(), o); });
  if (ctx.training && ctx.tape.needs_input_grad())
    ctx.tape.push([s, x](const Tensor &g) { return op([&](hpuTensor_t *o) { return Backward(s, g.get(), x.get(), o); }); });
  return y;
}

Tensor ReLU::forward(Context &ctx, const Tensor &x) { return elementwise<hpuRelu, hpuReluBackward>(ctx, x); }
Tensor GELU::forward(Context &ctx, const Tensor &x) { return elementwise<hpuGelu, hpuGeluBackward>(ctx, x); }
Tensor Tanh::forward(Context &ctx, const Tensor &x) { return elementwise<hpuTanh, hpuTanhBackward>(ctx, x); }

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
  hpuLayerNormOptions_t options = HPU_LAYER_NORM_OPTIONS_INIT;
  options.eps = eps_;
  check(hpuLayerNorm(s, x.get(), w_.value.get(), b_.value.get(), &options, &y, &mean, &rstd));
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
  std::vector<Module *> layers;
  for (auto &l : layers_) layers.push_back(l.get());
  const std::vector<Fusion> plan = plan_layers(layers);
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (plan[i].skip) continue;
    h = layers[i]->takes_fusion() ? layers[i]->forward_fused(ctx, h, plan[i]) : layers[i]->forward(ctx, h);
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

// ---- Residual ---------------------------------------------------------------------

Tensor Residual::forward(Context &ctx, const Tensor &x) {
  hpuStream_t s = ctx.stream;
  // The body records on a tape of its own, replayed by one step of ctx's.
  Context body_ctx;
  body_ctx.stream = s;
  body_ctx.training = ctx.training;
  body_ctx.plan = ctx.plan;
  const bool input_grad = ctx.training && ctx.tape.needs_input_grad();
  if (input_grad) body_ctx.tape.require_input_grad();
  const Tensor h = body_.forward(body_ctx, x);
  if (h.shape() != x.shape())
    fail(HPU_ERROR_INVALID_ARGUMENT, "Residual: its body maps shape %s to %s; x + body(x) needs the same shape",
         shape_text(x.shape()).c_str(), shape_text(h.shape()).c_str());
  Tensor y = op([&](hpuTensor_t *o) { return hpuAdd(s, x.get(), h.get(), o); });
  if (ctx.training && (input_grad || body_ctx.tape.size() > 0)) {
    auto tape = std::make_shared<Tape>(std::move(body_ctx.tape));
    ctx.tape.push([s, x, h, tape, input_grad](const Tensor &g) {
      hpuTensor_t gx = nullptr, gh = nullptr;
      check(hpuAddBackward(s, g.get(), x.get(), h.get(), input_grad ? &gx : nullptr, &gh));
      Tensor skip(gx);
      const Tensor through = tape->backward(Tensor(gh));
      if (!input_grad || !through) return skip;
      const Tensor sum = op([&](hpuTensor_t *o) { return hpuAdd(s, skip.get(), through.get(), o); });
      return cast(s, sum, x.dtype());
    });
  }
  return y;
}

std::unique_ptr<Module> Residual::clone() const {
  auto body = body_.clone();
  return std::make_unique<Residual>(std::move(*static_cast<Sequential *>(body.get())));
}

std::vector<Module *> Sequential::children() {
  std::vector<Module *> out;
  for (auto &l : layers_) out.push_back(l.get());
  return out;
}

Tensor cross_entropy(Context &ctx, const Tensor &logits, const Tensor &labels) {
  hpuStream_t s = ctx.stream;
  Tensor loss = op([&](hpuTensor_t *o) {
    return hpuCrossEntropyLoss(s, logits.get(), labels.get(), nullptr, nullptr, o);
  });
  if (ctx.training && ctx.tape.needs_input_grad())
    ctx.tape.push([s, logits, labels](const Tensor &g) {
      return op([&](hpuTensor_t *o) {
        return hpuCrossEntropyLossBackward(s, g.get(), logits.get(), labels.get(), nullptr, nullptr, o);
      });
    });
  return loss;
}

// ---- optimizers ------------------------------------------------------------------

Optimizer::Optimizer(double lr, std::vector<Parameter *> params)
    : Optimizer(lr, std::vector<ParamGroup>{ParamGroup{std::move(params), std::nullopt, std::nullopt}}) {}

Optimizer::Optimizer(double lr, std::vector<ParamGroup> groups) : lr_(lr), initial_lr_(lr), groups_(std::move(groups)) {
  std::unordered_map<const Parameter *, size_t> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup &pg = groups_[g];
    if (pg.lr && !(*pg.lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "param group %zu: lr is %g; expected >= 0", g, *pg.lr);
    if (pg.weight_decay && !(*pg.weight_decay >= 0))
      fail(HPU_ERROR_INVALID_ARGUMENT, "param group %zu: weight_decay is %g; expected >= 0", g, *pg.weight_decay);
    for (Parameter *p : pg.params) {
      if (!p) fail(HPU_ERROR_INVALID_ARGUMENT, "param group %zu holds a null parameter", g);
      auto [it, fresh] = seen.emplace(p, g);
      if (!fresh)
        fail(HPU_ERROR_INVALID_ARGUMENT, "parameter %s is in param groups %zu and %zu", p->name.c_str(), it->second, g);
      params_.push_back(p);
      group_of_.push_back(g);
    }
  }
}

bool Optimizer::has_group_settings() const {
  for (const ParamGroup &g : groups_)
    if (!g.params.empty() && (g.lr || g.weight_decay)) return true;
  return false;
}

double Optimizer::lr_of(size_t i, double lr) const { return group_rate(groups_[group_of_[i]], lr); }

double Optimizer::group_lr(size_t g) const {
  if (g >= groups_.size()) fail(HPU_ERROR_INVALID_ARGUMENT, "param group %zu: the optimizer has %zu", g, groups_.size());
  return group_rate(groups_[g], lr_);
}

double Optimizer::group_rate(const ParamGroup &g, double lr) const {
  if (!g.lr) return lr;
  return initial_lr_ > 0 ? *g.lr * (lr / initial_lr_) : *g.lr;
}

double Optimizer::weight_decay_of(size_t i, double weight_decay) const {
  const ParamGroup &g = groups_[group_of_[i]];
  return g.weight_decay ? *g.weight_decay : weight_decay;
}

void Optimizer::zero_grad(hpuStream_t stream) {
  (void)stream;  // the zeros are written lazily (Parameter::zero_grad)
  for (Parameter *p : params_) p->zero_grad();
}

SGD::SGD(std::vector<Parameter *> params, double lr, double momentum, double weight_decay, bool nesterov)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), std::nullopt, std::nullopt}}, lr, momentum,
          weight_decay, nesterov) {}

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(lr, std::move(groups)), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
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
  for (size_t i = 0; i < ps.size(); ++i) {
    o.lr = lr_of(i, lr());
    o.weight_decay = weight_decay_of(i, weight_decay_);
    check(hpuSgdStep(stream, ps[i]->value.get(), ps[i]->grad.get(), buf_.empty() ? nullptr : buf_[i].get(), steps_, &o));
  }
}

void SGD::state(std::vector<std::pair<std::string, Tensor>> &out) {
  for (size_t i = 0; i < buf_.size(); ++i) out.emplace_back("momentum_buffer/" + params()[i]->name, buf_[i]);
}

std::unique_ptr<Optimizer> SGD::with_params(std::vector<Parameter *> params) const {
  if (has_group_settings()) return nullptr;
  auto o = std::make_unique<SGD>(std::move(params), initial_lr(), momentum_, weight_decay_, nesterov_);
  o->set_lr(lr());
  o->set_steps(steps_);
  return o;
}

AdamW::AdamW(std::vector<Parameter *> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), std::nullopt, std::nullopt}}, lr, beta1, beta2, eps,
            weight_decay) {}

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(lr, std::move(groups)), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  if (!(lr >= 0)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW lr is %g; expected >= 0", lr);
  if (!(beta1 >= 0 && beta1 < 1)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW beta1 is %g; expected in [0, 1)", beta1);
  if (!(beta2 >= 0 && beta2 < 1)) fail(HPU_ERROR_INVALID_ARGUMENT, "AdamW beta2 is %g; expected in [0, 1)", beta2);
  for (Parameter *p : this->params()) {
    m_.push_back(Tensor::full(p->value.device(), HPU_FLOAT32, p->value.shape(), 0.0));
    v_.push_back(Tensor::full(p->value.device(), HPU_FLOAT32, p->value.shape(), 0.0));
  }
}

hpuAdamwOptions_t AdamW::options(size_t i, double lr) const {
  hpuAdamwOptions_t o = HPU_ADAMW_OPTIONS_INIT;
  o.lr = lr_of(i, lr);
  o.beta1 = beta1_;
  o.beta2 = beta2_;
  o.eps = eps_;
  o.weight_decay = weight_decay_of(i, weight_decay_);
  return o;
}

bool AdamW::offer_step_in_backward(double lr) {
  if (!plan()) return false;
  const auto &ps = params();
  for (size_t i = 0; i < ps.size(); ++i) plan()->offer(*ps[i], UpdateInBackward{m_[i], v_[i], steps_ + 1, options(i, lr)});
  return true;
}

void AdamW::step(hpuStream_t stream) {
  ++steps_;
  const auto &ps = params();
  for (size_t i = 0; i < ps.size(); ++i) {
    Parameter &p = *ps[i];
    StepPlan *plan = this->plan();
    if (plan && plan->applied(p)) {  // with the copy, when there is one
      plan->copy_written(p);
      continue;
    }
    // With the forward's low-precision weights, written in the same pass.
    hpuAdamwOptions_t with_copy = options(i, lr());
    const Tensor *copy = plan ? plan->copy_of(p) : nullptr;
    with_copy.param_copy = copy ? copy->get() : nullptr;
    check(hpuAdamwStep(stream, p.value.get(), p.grad.get(), m_[i].get(), v_[i].get(), steps_, &with_copy));
    if (plan) plan->copy_written(p);
  }
}

void AdamW::state(std::vector<std::pair<std::string, Tensor>> &out) {
  for (size_t i = 0; i < m_.size(); ++i) {
    out.emplace_back("exp_avg/" + params()[i]->name, m_[i]);
    out.emplace_back("exp_avg_sq/" + params()[i]->name, v_[i]);
  }
}

std::unique_ptr<Optimizer> AdamW::with_params(std::vector<Parameter *> params) const {
  if (has_group_settings()) return nullptr;
  auto o = std::make_unique<AdamW>(std::move(params), initial_lr(), beta1_, beta2_, eps_, weight_decay_);
  o->set_lr(lr());
  o->set_steps(steps_);
  return o;
}

}  // namespace hpu
