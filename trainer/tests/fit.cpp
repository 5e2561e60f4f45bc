#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <cmath>
#include <functional>
#include <cstring>

using namespace trainer_test;

namespace {

hpu::TrainerOptions opts(const TempDir &dir) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 7;
  o.max_epochs = 3;
  o.log_every_n_steps = 4;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  return o;
}

// Counts hook calls.
struct Counter : hpu::Callback {
  std::string state_key() const override { return "Counter"; }
  void on_validation_end(hpu::Trainer &t) override { validations += !t.state().sanity_checking; }
  void on_train_epoch_end(hpu::Trainer &) override { ++epochs; }
  void on_before_optimizer_step(hpu::Trainer &) override { ++steps; }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &out, int64_t) override { losses.push_back(out.at("loss")); }
  int validations = 0, epochs = 0, steps = 0;
  std::vector<double> losses;
};

// Fits `model()` for `epochs` in one run, and for `half` then resumed from
// that run's last checkpoint up to `epochs`: both end with the same weights,
// bit for bit, and the resumed run trained past its checkpoint.
void expect_resume_bit_identical(const TempDir &dir, hpu::TrainerOptions o, int64_t epochs, int64_t half,
                                 const std::function<hpu::Classifier()> &model) {
  hpu::InMemoryData data = blob_data();
  auto run = [&](int64_t n, const std::string &root, const std::string &resume) {
    o.max_epochs = n;
    o.default_root_dir = root;
    o.callbacks = {hpu::ModelCheckpoint({.save_top_k = 0, .save_last = true})};
    hpu::Trainer t(o);
    hpu::Classifier m = model();
    t.fit(m, data, resume);
    return std::make_pair(weights(m), t.callback<hpu::ModelCheckpoint>()->last_model_path());
  };
  auto whole = run(epochs, dir / "whole", "");
  auto part = run(half, dir / "half", "");
  auto resumed = run(epochs, dir / "resumed", part.second);
  expect_bit_identical(whole.first, resumed.first);
  EXPECT_NE(std::memcmp(part.first[0].data(), whole.first[0].data(), part.first[0].size() * 4), 0);
}

double mean(const std::vector<double> &v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

}  // namespace

TEST(Fit, Learns32TrueAndLogsLightningsMetrics) {
  TempDir dir;
  auto counter = std::make_shared<Counter>();
  hpu::TrainerOptions o = opts(dir);
  o.callbacks = {counter};
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_EQ(t.global_step(), 3 * 16);
  EXPECT_EQ(t.current_epoch(), 3);
  EXPECT_EQ(counter->epochs, 3);
  EXPECT_EQ(counter->validations, 3);
  ASSERT_EQ(counter->losses.size(), 48u);
  EXPECT_LT(mean(counter->losses, 40, 48), 0.5 * mean(counter->losses, 0, 8));
  EXPECT_GT(t.state().callback_metrics.at("val_acc"), 0.9);
  hpu::Metrics m = t.test(model, data);
  EXPECT_GT(m.at("test_acc"), 0.9);
  EXPECT_LT(m.at("test_loss"), 0.5);
  const std::string csv = slurp(t.log_dir() + "/metrics.csv");
  for (const char *col : {"step,", "epoch", "train_loss", "val_loss", "val_acc", "test_acc"})
    EXPECT_NE(csv.find(col), std::string::npos) << col << " not in\n" << csv.substr(0, 200);
  // The default ModelCheckpoint saved the last epoch.
  auto *ck = t.callback<hpu::ModelCheckpoint>();
  ASSERT_NE(ck, nullptr);
  EXPECT_TRUE(file_exists(ck->best_model_path())) << ck->best_model_path();
}

TEST(Fit, LearnsBf16Mixed) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir);
  o.precision = "bf16-mixed";
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_GT(t.state().callback_metrics.at("val_acc"), 0.9);
  // Master weights stay f32.
  for (hpu::Parameter *p : model.parameters()) EXPECT_EQ(p->value.dtype(), HPU_FLOAT32);
}

TEST(Fit, MaxStepsLimitsAndAccumulation) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  {
    hpu::TrainerOptions o = opts(dir);
    o.max_steps = 5;
    o.max_epochs.reset();
    hpu::Trainer t(o);
    hpu::Classifier model(mlp(), adamw());
    t.fit(model, data);
    EXPECT_EQ(t.global_step(), 5);
    EXPECT_EQ(t.current_epoch(), 0);
  }
  {
    auto counter = std::make_shared<Counter>();
    hpu::TrainerOptions o = opts(dir);
    o.max_epochs = 2;
    o.limit_train_batches = 5;
    o.limit_val_batches = 0;
    o.accumulate_grad_batches = 2;
    o.callbacks = {counter};
    o.enable_checkpointing = false;
    hpu::Trainer t(o);
    hpu::Classifier model(mlp(), adamw());
    t.fit(model, data);
    EXPECT_EQ(t.state().num_training_batches, 5);
    EXPECT_EQ(counter->losses.size(), 10u);
    EXPECT_EQ(t.global_step(), 6);  // batches 2, 4 and the epoch's last (5), twice
    EXPECT_EQ(counter->validations, 0);
  }
}

TEST(Fit, ValCheckIntervalAndCheckValEveryNEpoch) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  auto counter = std::make_shared<Counter>();
  hpu::TrainerOptions o = opts(dir);
  o.max_epochs = 4;
  o.val_check_interval = 0.25;   // 16 batches: after 4, 8, 12, 16
  o.check_val_every_n_epoch = 2;  // epochs 1 and 3
  o.callbacks = {counter};
  o.enable_checkpointing = false;
  hpu::Trainer t(o);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_EQ(counter->validations, 8);
  auto c2 = std::make_shared<Counter>();
  o.val_check_interval = 5;  // every 5 batches
  o.check_val_every_n_epoch = 1;
  o.max_epochs = 1;
  o.callbacks = {c2};
  hpu::Trainer u(o);
  hpu::Classifier m2(mlp(), adamw());
  u.fit(m2, data);
  EXPECT_EQ(c2->validations, 3);
}

TEST(Fit, EarlyStoppingEndsTheFit) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o = opts(dir);
  o.max_epochs = 50;
  o.callbacks = {hpu::EarlyStopping({.monitor = "val_acc", .mode = "max", .stopping_threshold = 0.5})};
  hpu::Trainer t(o);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  EXPECT_EQ(t.current_epoch(), 1);
  EXPECT_TRUE(t.state().should_stop);
}

TEST(Fit, GradientClippingBoundsTheUpdate) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o = opts(dir);
  o.max_steps = 1;
  o.gradient_clip_val = 1e-3;
  hpu::Trainer t(o);
  hpu::OptimizerSpec sgd;
  sgd.name = "sgd";
  sgd.lr = 1.0;
  hpu::Classifier model(mlp(), sgd);
  hpu::Trainer probe(o);  // the same seed gives the same initial weights
  hpu::Classifier initial(mlp(), sgd);
  probe.validate(initial, data);
  t.fit(model, data);
  auto a = weights(initial), b = weights(model);
  double sq = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) sq += double(b[i][k] - a[i][k]) * (b[i][k] - a[i][k]);
  EXPECT_GT(std::sqrt(sq), 0.0);
  EXPECT_LE(std::sqrt(sq), 1.01e-3);
}

TEST(Fit, AResumedRunEndsWithBitIdenticalWeights) {
  TempDir dir;
  expect_resume_bit_identical(dir, opts(dir), 4, 2,
                              [] { return hpu::Classifier(mlp(true), sgd_momentum(), fixed_cosine()); });
}

// bf16-mixed with AdamW: the uninterrupted run's forwards read the bf16
// weights AdamW wrote beside the f32 ones; the resumed run converts the loaded
// weights. Equal weights at the end: the two copies hold the same bits.
TEST(Fit, ABf16MixedAdamwRunResumesBitIdentically) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir);
  o.precision = "bf16-mixed";
  expect_resume_bit_identical(dir, o, 3, 1, [] { return hpu::Classifier(mlp(), adamw(), fixed_cosine()); });
}

// The step plan runs a Linear followed by a ReLU as one product with a relu
// epilogue, and the next Linear's input gradient applies the relu's backward
// (hpuMatmulEx), with the bits of the separate ops: the same weights as when a Flatten (a no-op here) keeps
// them apart, in both precisions.
TEST(Fit, ALinearAndItsReluTrainAsOneOpBitForBit) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  for (const char *precision : {"32-true", "bf16-mixed"}) {
    auto fit = [&](bool apart) {
      hpu::Sequential s;
      s.add(hpu::Linear(16, 32));
      if (apart) s.add(hpu::Flatten());
      s.add(hpu::ReLU());
      s.add(hpu::Linear(32, 4));
      hpu::TrainerOptions o = opts(dir);
      o.precision = precision;
      o.max_epochs = 2;
      hpu::Trainer t(o);
      hpu::Classifier model(s, adamw());
      t.fit(model, data);
      return weights(model);
    };
    SCOPED_TRACE(precision);
    expect_bit_identical(fit(false), fit(true));
  }
}

// A Classifier that remembers the step plan its training steps ran with.
struct PlanProbe : hpu::Classifier {
  using hpu::Classifier::Classifier;
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }  // no hooks
  hpu::Tensor training_step(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Tensor &y,
                            hpu::Metrics &log) override {
    plan = ctx.plan;
    return hpu::Classifier::training_step(ctx, x, y, log);
  }
  // The parameters whose update a layer applied in this step's backward.
  int applied() {
    int n = 0;
    for (hpu::Parameter *p : parameters()) n += plan && plan->applied(*p);
    return n;
  }
  hpu::StepPlan *plan = nullptr;
};

// Counts, at each optimizer step, the parameters whose update AdamW already
// applied in the backward (hpuMatmulEx's AdamW epilogue).
struct SteppedInBackward : hpu::Callback {
  explicit SteppedInBackward(PlanProbe &m) : model(m) {}
  std::string state_key() const override { return "SteppedInBackward"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_before_optimizer_step(hpu::Trainer &) override { count += model.applied(); }
  PlanProbe &model;
  int count = 0;
};

// With one device, no accumulation and no clipping, each Linear's weight takes
// its AdamW step in the backward, as its gradient is computed: the same
// weights, bit for bit, as a run whose clipping (at a norm never reached)
// keeps the separate step, in both precisions, with a per-step learning rate
// schedule, also where the weight's input is a relu's output.
TEST(Fit, AdamwStepsInTheBackwardGiveTheSeparateStepsWeights) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  for (const char *precision : {"32-true", "bf16-mixed"}) {
    for (bool relu : {false, true}) {
      auto fit = [&](double clip, int *stepped) {
        hpu::Sequential s = mlp();
        if (relu) {
          s = hpu::Sequential();
          s.add(hpu::Linear(16, 32)).add(hpu::ReLU()).add(hpu::Linear(32, 4));
        }
        hpu::TrainerOptions o = opts(dir);
        o.precision = precision;
        o.max_epochs = 2;
        o.gradient_clip_val = clip;
        PlanProbe model(s, adamw(), fixed_cosine());
        auto probe = std::make_shared<SteppedInBackward>(model);
        o.callbacks = {probe};
        hpu::Trainer t(o);
        t.fit(model, data);
        *stepped = probe->count;
        return weights(model);
      };
      SCOPED_TRACE(std::string(precision) + (relu ? " relu" : ""));
      int fused = 0, apart = 0;
      const auto a = fit(0, &fused), b = fit(1e30, &apart);
      expect_bit_identical(a, b);
      EXPECT_EQ(fused, 2 * 16 * 2);  // both weights, 16 steps an epoch, 2 epochs
      EXPECT_EQ(apart, 0);
    }
  }
}

// A callback that may read gradients (the default) keeps every step apart, so
// that each parameter's gradient is stored when it runs.
struct ReadsGradients : hpu::Callback {
  explicit ReadsGradients(PlanProbe &m) : model(m) {}
  std::string state_key() const override { return "ReadsGradients"; }
  void on_before_optimizer_step(hpu::Trainer &) override {
    stepped += model.applied();
    for (hpu::Parameter *p : model.parameters()) missing += !p->grad;
    ++steps;
  }
  PlanProbe &model;
  int stepped = 0, missing = 0, steps = 0;
};

TEST(Fit, ACallbackThatReadsGradientsKeepsTheStepApart) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o = opts(dir);
  o.precision = "bf16-mixed";
  o.max_epochs = 1;
  PlanProbe model(mlp(), adamw());
  auto reader = std::make_shared<ReadsGradients>(model);
  o.callbacks = {reader};
  hpu::Trainer t(o);
  t.fit(model, data);
  EXPECT_EQ(reader->steps, 16);
  EXPECT_EQ(reader->stepped, 0);
  EXPECT_EQ(reader->missing, 0);
}

// Weights the caller writes between two runs are the ones the next run uses,
// also under bf16-mixed, where forwards read a bf16 copy of the weights: the
// validation after halving every weight gives the loss of one whose copies
// are converted afresh, not the loss before.
TEST(Fit, WeightsWrittenBetweenRunsAreUsed) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir);
  o.precision = "bf16-mixed";
  o.max_epochs = 1;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  const double trained = t.validate(model, data).at("val_loss");
  for (hpu::Parameter *p : model.parameters()) {
    std::vector<float> w = p->value.to_vector<float>();
    for (float &x : w) x *= 0.5f;
    p->value.copy_from_host(w.data(), w.size() * sizeof(float));
  }
  const double halved = t.validate(model, data).at("val_loss");
  EXPECT_EQ(halved, t.validate(model, data).at("val_loss"));
  EXPECT_NE(halved, trained);
}

TEST(Fit, ResumingFromAForeignCheckpointIsAnError) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  hpu::TrainerOptions o = opts(dir);
  o.max_epochs = 1;
  hpu::Trainer t(o);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  const std::string ck = t.callback<hpu::ModelCheckpoint>()->best_model_path();
  hpu::Sequential other;
  other.add(hpu::Linear(16, 4));
  hpu::Classifier small(other, adamw());
  hpu::Trainer u(o);
  EXPECT_HPU_ERROR(u.fit(small, data, ck), HPU_ERROR_INVALID_ARGUMENT, "does not match the model");
  hpu::OptimizerSpec sgd;
  sgd.name = "sgd";
  hpu::Classifier sgd_model(mlp(), sgd);
  hpu::Trainer v(o);
  EXPECT_HPU_ERROR(v.fit(sgd_model, data, ck), HPU_ERROR_INVALID_ARGUMENT, "optimizer is AdamW");
  hpu::Trainer w(o);
  hpu::Classifier m3(mlp(), adamw());
  EXPECT_HPU_ERROR(w.fit(m3, data, dir / "missing.ckpt"), HPU_ERROR_NOT_FOUND, "missing.ckpt");
}

TEST(Fit, FashionMNISTBriefly) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir);
  o.max_steps = 60;
  o.max_epochs.reset();
  o.limit_val_batches = 0;
  o.limit_test_batches = 10;
  hpu::Trainer t(o);
  hpu::FashionMNIST data(128);
  hpu::Job job = hpu::parse_job(slurp(std::string(HPU_SOURCE_DIR) + "/examples/fashion_mnist.json"), "job");
  hpu::Classifier model(hpu::Classifier::build(job.layers), job.optimizer);
  auto counter = std::make_shared<Counter>();
  t.callbacks().push_back(counter);
  t.fit(model, data);
  EXPECT_EQ(t.global_step(), 60);
  EXPECT_LT(mean(counter->losses, 50, 60), 0.5 * mean(counter->losses, 0, 5));
  EXPECT_GT(t.test(model, data).at("test_acc"), 0.7);
}

TEST(Parameter, TakesAFreshGradientAfterZeroGradAndAddsTheNextOnes) {
  hpu::Device dev(0);
  auto f32 = [&](std::vector<float> v) { return hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {2}, v.data()); };
  hpu::Parameter p;
  p.value = f32({0, 0});
  p.grad = f32({9, 9});
  p.zero_grad();
  hpu::Tensor g = f32({1, 2});
  const hpuTensor_t fresh = g.get();
  p.accumulate_owned(std::move(g), nullptr);
  EXPECT_EQ(p.grad.get(), fresh);  // taken, not copied
  p.accumulate_owned(f32({3, 4}), nullptr);
  EXPECT_EQ(p.grad.get(), fresh);  // added into
  EXPECT_EQ(p.grad.to_vector<float>(), (std::vector<float>{4, 6}));
  // A gradient of another type, or a grad that must stay in place (on_grad:
  // hpu_ddp's buckets), is copied in.
  int seen = 0;
  p.on_grad = [&](bool) { ++seen; };
  p.zero_grad();
  p.accumulate_owned(f32({5, 6}), nullptr);
  EXPECT_EQ(p.grad.get(), fresh);
  EXPECT_EQ(seen, 1);
  p.on_grad = nullptr;
  p.zero_grad();
  p.accumulate_owned(hpu::Tensor::full(dev.get(), HPU_BFLOAT16, {2}, 0.5), nullptr);
  EXPECT_EQ(p.grad.get(), fresh);
  EXPECT_EQ(p.grad.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
}

// The bf16 copy of a parameter: made once, kept while the value is unchanged,
// and written by AdamW's step with the bits a conversion of the new value has.
TEST(StepPlan, KeepsTheLowCopyUntilTheValuesChange) {
  hpu::Device dev(0);
  auto f32 = [&](std::vector<float> v) { return hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {3}, v.data()); };
  auto bits = [](const hpu::Tensor &t) { return t.to_vector<uint16_t>(); };
  auto bf16_of = [&](const hpu::Tensor &t) {
    hpuTensor_t c = nullptr;
    EXPECT_EQ(hpuCast(nullptr, t.get(), HPU_BFLOAT16, &c), HPU_SUCCESS);
    return bits(hpu::Tensor(c));
  };
  hpu::StepPlan plan;
  hpu::Parameter p, q;
  p.value = f32({1.00390625f, -2.5f, 0.1f});  // 1 + 2^-8 rounds to 1 in bf16
  q.value = f32({1.00390625f, -2.5f, 0.1f});
  p.grad = f32({0.5f, -0.25f, 1.0f});
  q.grad = f32({0.5f, -0.25f, 1.0f});
  EXPECT_EQ(plan.copy_of(p), nullptr);
  const hpuTensor_t first = plan.low(p, HPU_BFLOAT16, nullptr).get();
  EXPECT_EQ(plan.low(p, HPU_BFLOAT16, nullptr).get(), first);  // kept
  EXPECT_EQ(bits(*plan.copy_of(p)), bf16_of(p.value));
  p.value.fill(3.0);
  plan.values_changed();
  EXPECT_EQ(bits(plan.low(p, HPU_BFLOAT16, nullptr)), bf16_of(p.value));  // converted again
  p.value = f32({1.00390625f, -2.5f, 0.1f});
  plan.values_changed();
  const hpuTensor_t copy = plan.low(p, HPU_BFLOAT16, nullptr).get();
  // AdamW writes the copy in its step (p has one; q does not) and leaves it
  // current: the next low() returns it without converting.
  hpu::AdamW with_copy({&p}, 0.1), without({&q}, 0.1);
  with_copy.set_plan(&plan);
  plan.values_changed();  // as Trainer does before a step
  with_copy.step(nullptr);
  without.step(nullptr);
  EXPECT_EQ(plan.low(p, HPU_BFLOAT16, nullptr).get(), copy);
  EXPECT_EQ(p.value.to_vector<float>(), q.value.to_vector<float>());
  EXPECT_EQ(bits(*plan.copy_of(p)), bf16_of(q.value));
  EXPECT_NE(bits(*plan.copy_of(p)), bf16_of(f32({1.00390625f, -2.5f, 0.1f})));  // the step moved the weights
}
