#include <hpu/trainer/module.hpp>

#include "error.hpp"
#include "json.hpp"
#include "predict.hpp"
#include "param_names.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <typeinfo>

namespace hpu {

Classifier::Classifier(const Sequential &net, OptimizerSpec opt, SchedulerSpec sched)
    : net_(static_cast<Sequential *>(net.clone().release())), opt_(std::move(opt)), sched_(std::move(sched)) {}

Classifier::Classifier(const ModelSpec &spec) : Classifier(build(spec.layers), spec.optimizer, spec.scheduler) {
  layers_ = spec.layers;
}

std::unique_ptr<Classifier> Classifier::load_from_checkpoint(const std::string &path, hpuDevice_t dev) {
  const Checkpoint ck = load_checkpoint_file(path);
  detail::Json meta = detail::parse_object(ck.meta, "checkpoint meta", HPU_ERROR_IO);
  json_t *hp = json_object_get(meta.get(), "hyper_parameters");
  if (!json_is_object(hp) || !json_object_get(hp, "model"))
    detail::fail(HPU_ERROR_INVALID_ARGUMENT,
                 "%s: the checkpoint's hyper_parameters describe no model layers (it was saved from a model built in "
                 "code: build that model and call hpu::load_from_checkpoint(model, path, dev))",
                 path.c_str());
  auto model = std::make_unique<Classifier>(
      parse_model_spec(detail::dump(hp, JSON_COMPACT | JSON_PRESERVE_ORDER), path + " (hyper_parameters)"));
  detail::load_into(*model, ck, path, dev);
  return model;
}

Sequential Classifier::build(const std::vector<LayerSpec> &layers) {
  Sequential s;
  for (const LayerSpec &l : layers) {
    if (l.type == "linear") s.add(Linear(l.in_features, l.out_features, l.bias));
    else if (l.type == "relu") s.add(ReLU());
    else if (l.type == "gelu") s.add(GELU());
    else if (l.type == "tanh") s.add(Tanh());
    else if (l.type == "dropout") s.add(Dropout(l.p));
    else if (l.type == "layernorm") s.add(LayerNorm(l.normalized_shape, l.eps));
    else if (l.type == "embedding") s.add(Embedding(l.num_embeddings, l.embedding_dim));
    else if (l.type == "flatten") s.add(Flatten());
    else if (l.type == "residual") s.add(Residual(build(l.layers)));
    else detail::fail(HPU_ERROR_INVALID_ARGUMENT, "unknown layer type \"%s\"", l.type.c_str());
  }
  return s;
}

void Classifier::setup_device(hpuDevice_t dev, Rng &rng) { net_->init(dev, rng); }

std::vector<Parameter *> Classifier::parameters() {
  std::vector<Parameter *> out;
  net_->parameters(out, "net.");
  return out;
}

Tensor Classifier::training_step(Context &ctx, const Tensor &x, const Tensor &y, Metrics &) {
  return cross_entropy(ctx, net_->forward(ctx, x), y);
}

Metrics Classifier::evaluation_step(Context &ctx, const Tensor &x, const Tensor &y) {
  Tensor logits = net_->forward(ctx, x);
  Tensor loss = cross_entropy(ctx, logits, y);
  // Accuracy on the host: N x C scores are small next to the forward pass.
  hpuTensor_t f = nullptr;
  check(hpuCast(ctx.stream, logits.get(), HPU_FLOAT32, &f));
  Tensor scores(f);
  const std::vector<int64_t> shape = scores.shape();
  const std::vector<float> s = scores.to_vector<float>(ctx.stream);
  const std::vector<int32_t> labels = y.to_vector<int32_t>(ctx.stream);
  const int64_t n = shape[0], c = shape[1];
  double correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t k = 1; k < c; ++k)
      if (s[size_t(i * c + k)] > s[size_t(i * c + best)]) best = k;
    correct += best == labels[size_t(i)];
  }
  hpuTensor_t lf = nullptr;
  check(hpuCast(ctx.stream, loss.get(), HPU_FLOAT32, &lf));
  const float l = Tensor(lf).to_vector<float>(ctx.stream)[0];
  return {{"loss", double(l) * double(n)}, {"acc", correct}};
}

namespace {

// Each parameter's innermost layer type (Module::name()).
void layer_types(Module &m, std::map<const Parameter *, std::string> &out) {
  std::vector<Parameter *> ps;
  m.parameters(ps, "");
  for (Parameter *p : ps) out[p] = m.name();
  for (Module *c : m.children()) layer_types(*c, out);
}

std::string lower(std::string s) {
  for (char &c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

// Whether OptimizerSpec::no_weight_decay's `entry` names p (layer: its type).
bool excluded(const Parameter &p, const std::string &layer, const std::string &entry) {
  const std::string e = lower(entry), name = lower(p.name);
  const size_t dot = name.rfind('.');
  return name.substr(dot == std::string::npos ? 0 : dot + 1) == e || lower(layer).find(e) != std::string::npos;
}

}  // namespace

std::unique_ptr<Optimizer> Classifier::configure_optimizers(const std::vector<Parameter *> &params) {
  // One group, or two: the parameters no_weight_decay names take none.
  std::vector<ParamGroup> groups(1);
  if (!opt_.no_weight_decay.empty() && opt_.weight_decay > 0) {
    std::map<const Parameter *, std::string> types;
    {
      detail::KeepNames keep(params);
      layer_types(*net_, types);
    }
    groups.push_back({{}, std::nullopt, 0.0});
    for (Parameter *p : params) {
      const bool off = std::any_of(opt_.no_weight_decay.begin(), opt_.no_weight_decay.end(),
                                   [&](const std::string &e) { return excluded(*p, types[p], e); });
      groups[off ? 1 : 0].params.push_back(p);
    }
  } else {
    groups[0].params = params;
  }
  if (opt_.name == "sgd") return std::make_unique<SGD>(groups, opt_.lr, opt_.momentum, opt_.weight_decay, opt_.nesterov);
  return std::make_unique<AdamW>(groups, opt_.lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay);
}

std::unique_ptr<LRScheduler> Classifier::configure_scheduler(double base_lr, int64_t total_steps) {
  if (sched_.name == "step")
    return std::make_unique<StepLR>(base_lr, sched_.step_size, sched_.gamma,
                                    sched_.interval == "step" ? Interval::step : Interval::epoch);
  if (sched_.name == "cosine") {
    int64_t total = sched_.total_steps ? sched_.total_steps : total_steps;
    if (total <= sched_.warmup_steps) total = sched_.warmup_steps + 1;
    return std::make_unique<CosineWarmupLR>(base_lr, sched_.warmup_steps, total, sched_.min_lr,
                                            sched_.interval == "epoch" ? Interval::epoch : Interval::step);
  }
  if (sched_.name == "plateau") {
    PlateauOptions p;
    p.monitor = sched_.monitor;
    p.mode = sched_.mode;
    p.factor = sched_.factor;
    p.patience = sched_.patience;
    p.threshold = sched_.threshold;
    p.threshold_mode = sched_.threshold_mode;
    p.cooldown = sched_.cooldown;
    p.min_lr = sched_.min_lr;
    return std::make_unique<ReduceLROnPlateau>(base_lr, p);
  }
  return nullptr;
}

CallbackNeeds Classifier::needs() const {
  return typeid(*this) == typeid(Classifier) ? CallbackNeeds::none() : CallbackNeeds{};
}

std::unique_ptr<LightningModule> Classifier::clone() const {
  auto c = std::make_unique<Classifier>(*net_, opt_, sched_);
  c->layers_ = layers_;
  return c;
}

Predictions Classifier::predict_step(Context &ctx, const Tensor &x) {
  Tensor logits = net_->forward(ctx, x);
  hpuTensor_t p = nullptr, s = nullptr, l = nullptr;
  check(hpuSoftmax(ctx.stream, logits.get(), 1, &p));
  Tensor probs(p);
  check(hpuCast(ctx.stream, probs.get(), HPU_FLOAT32, &s));
  check(hpuCast(ctx.stream, logits.get(), HPU_FLOAT32, &l));
  Tensor scores(l), prob(s);
  const std::vector<int64_t> shape = scores.shape();
  const int64_t n = shape[0], c = shape[1];
  const std::vector<float> sv = scores.to_vector<float>(ctx.stream), pv = prob.to_vector<float>(ctx.stream);
  Predictions out;
  out.columns.push_back("pred");
  for (int64_t k = 0; k < c; ++k) out.columns.push_back("prob_" + std::to_string(k));
  out.values.reserve(size_t(n * (c + 1)));
  for (int64_t i = 0; i < n; ++i) {
    // The class of the highest score, as evaluation_step's accuracy counts it.
    int64_t best = 0;
    for (int64_t k = 1; k < c; ++k)
      if (sv[size_t(i * c + k)] > sv[size_t(i * c + best)]) best = k;
    out.values.push_back(double(best));
    for (int64_t k = 0; k < c; ++k) out.values.push_back(double(pv[size_t(i * c + k)]));
  }
  return out;
}

std::string Classifier::hyperparameters() const { return model_spec_to_json({layers_, opt_, sched_}); }

}  // namespace hpu
