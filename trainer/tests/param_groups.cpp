// Parameter groups (optimizer.hpp's ParamGroup, torch.optim's
// param_groups): a group's own weight decay and learning rate, in SGD and
// AdamW, in the step in the backward too; and the job's
// optimizer.no_weight_decay (no decay on biases and norms).
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

using namespace trainer_test;

namespace {

hpu::Parameter param(const hpu::Device &dev, const std::string &name, std::vector<float> v, float grad) {
  hpu::Parameter p;
  p.name = name;
  p.value = hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {int64_t(v.size())}, v.data());
  p.grad = hpu::Tensor::full(dev.get(), HPU_FLOAT32, {int64_t(v.size())}, grad);
  return p;
}

hpu::ParamGroup no_decay(std::vector<hpu::Parameter *> ps) { return {std::move(ps), std::nullopt, 0.0}; }

}  // namespace

// With zero gradients only weight decay moves a weight: the decayed group's
// shrink, the excluded group's stay as they were, bit for bit.
TEST(ParamGroups, ExcludedParametersAreNotDecayed) {
  hpu::Device dev(0);
  for (const char *name : {"AdamW", "SGD"}) {
    SCOPED_TRACE(name);
    hpu::Parameter w = param(dev, "w", {1.0f, -2.0f}, 0.0f), b = param(dev, "b", {0.5f, 3.0f}, 0.0f);
    std::vector<hpu::ParamGroup> groups = {{{&w}, std::nullopt, std::nullopt}, no_decay({&b})};
    std::unique_ptr<hpu::Optimizer> opt;
    if (std::string(name) == "AdamW") opt = std::make_unique<hpu::AdamW>(groups, 0.1, 0.9, 0.999, 1e-8, 0.5);
    else opt = std::make_unique<hpu::SGD>(groups, 0.1, 0.0, 0.5);
    opt->step(nullptr);
    opt->step(nullptr);
    EXPECT_EQ(b.value.to_vector<float>(), (std::vector<float>{0.5f, 3.0f}));
    const std::vector<float> got = w.value.to_vector<float>();
    EXPECT_NEAR(got[0], 1.0 * 0.95 * 0.95, 1e-6);  // x (1 - lr x weight_decay) per step
    EXPECT_NEAR(got[1], -2.0 * 0.95 * 0.95, 1e-6);
    EXPECT_EQ(opt->params().size(), 2u);
    EXPECT_EQ(opt->param_groups().size(), 2u);
  }
}

// A group's lr is its base rate: a schedule scales it as the optimizer's.
TEST(ParamGroups, AGroupsLearningRateFollowsTheSchedule) {
  hpu::Device dev(0);
  hpu::Parameter a = param(dev, "a", {0.0f}, 1.0f), b = param(dev, "b", {0.0f}, 1.0f);
  hpu::SGD sgd(std::vector<hpu::ParamGroup>{{{&a}, std::nullopt, std::nullopt}, {{&b}, 0.5, std::nullopt}}, 0.1);
  sgd.step(nullptr);
  EXPECT_FLOAT_EQ(a.value.to_vector<float>()[0], -0.1f);
  EXPECT_FLOAT_EQ(b.value.to_vector<float>()[0], -0.5f);
  sgd.set_lr(0.05);  // half the initial rate
  sgd.step(nullptr);
  EXPECT_FLOAT_EQ(a.value.to_vector<float>()[0], -0.15f);
  EXPECT_FLOAT_EQ(b.value.to_vector<float>()[0], -0.75f);
}

TEST(ParamGroups, BadGroupsAreErrorsNamingTheGroup) {
  hpu::Device dev(0);
  hpu::Parameter a = param(dev, "a", {0.0f}, 0.0f), b = param(dev, "b", {0.0f}, 0.0f);
  EXPECT_HPU_ERROR((hpu::AdamW(std::vector<hpu::ParamGroup>{{{&a, &b}}, {{&b}}})), HPU_ERROR_INVALID_ARGUMENT,
                   "parameter b is in param groups 0 and 1");
  EXPECT_HPU_ERROR((hpu::SGD(std::vector<hpu::ParamGroup>{{{&a}, std::nullopt, -1.0}}, 0.1)), HPU_ERROR_INVALID_ARGUMENT,
                   "param group 0: weight_decay is -1; expected >= 0");
  EXPECT_HPU_ERROR((hpu::SGD(std::vector<hpu::ParamGroup>{{{&a}}, {{&b}, -0.5, std::nullopt}}, 0.1)),
                   HPU_ERROR_INVALID_ARGUMENT, "param group 1: lr is -0.5; expected >= 0");
  EXPECT_HPU_ERROR((hpu::SGD(std::vector<hpu::ParamGroup>{{{nullptr}}}, 0.1)), HPU_ERROR_INVALID_ARGUMENT,
                   "param group 0 holds a null parameter");
}

// hpu_ddp's sharded step needs one setting for every element of a slice, so
// an optimizer whose groups differ keeps every parameter (with_params: none).
TEST(ParamGroups, GroupsWithSettingsAreNotSharded) {
  hpu::Device dev(0);
  hpu::Parameter a = param(dev, "a", {0.0f}, 0.0f), b = param(dev, "b", {0.0f}, 0.0f);
  hpu::AdamW plain(std::vector<hpu::Parameter *>{&a, &b});
  EXPECT_FALSE(plain.has_group_settings());
  EXPECT_NE(plain.with_params({&a}), nullptr);
  hpu::AdamW grouped(std::vector<hpu::ParamGroup>{{{&a}}, no_decay({&b})});
  EXPECT_TRUE(grouped.has_group_settings());
  EXPECT_EQ(grouped.with_params({&a}), nullptr);
}

// optimizer.no_weight_decay: biases and LayerNorm's weights in a group of
// their own without decay, the others decayed.
TEST(ParamGroups, NoWeightDecayNamesBiasesAndNorms) {
  hpu::Device dev(0);
  hpu::OptimizerSpec spec = adamw();
  spec.weight_decay = 0.1;
  spec.no_weight_decay = {"bias", "Norm"};
  hpu::Classifier model(mlp(), spec);  // Linear GELU LayerNorm Linear
  hpu::Rng rng(1);
  model.setup_device(dev.get(), rng);
  std::unique_ptr<hpu::Optimizer> opt = model.configure_optimizers(model.parameters());
  ASSERT_EQ(opt->param_groups().size(), 2u);
  std::vector<std::string> off;
  for (hpu::Parameter *p : opt->param_groups()[1].params) off.push_back(p->name);
  EXPECT_EQ(off, (std::vector<std::string>{"net.0.bias", "net.2.weight", "net.2.bias", "net.3.bias"}));
  EXPECT_EQ(opt->param_groups()[1].weight_decay, 0.0);
  EXPECT_EQ(opt->param_groups()[0].params.size(), 2u);

  // The step with zero gradients: only the first group moves.
  std::vector<std::vector<float>> before;
  for (hpu::Parameter *p : opt->params()) {
    before.push_back(p->value.to_vector<float>());
    p->grad.fill(0.0, nullptr);
  }
  opt->step(nullptr);
  for (size_t i = 0; i < opt->params().size(); ++i) {
    const bool decayed = i < 2;  // group 0 first
    EXPECT_EQ(opt->params()[i]->value.to_vector<float>() != before[i], decayed) << opt->params()[i]->name;
  }
}

// In a fit, the groups reach the step in the backward too: the same weights,
// bit for bit, as with the separate step (which takes each parameter's
// settings, as the test above shows); and not those of a run that decays
// everything.
TEST(ParamGroups, TheStepInTheBackwardTakesEachGroupsSettings) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  auto fit = [&](bool exclude, double clip) {
    hpu::Sequential s;
    s.add(hpu::Linear(16, 32)).add(hpu::ReLU()).add(hpu::Linear(32, 4));
    hpu::OptimizerSpec spec = adamw();
    spec.weight_decay = 0.5;
    if (exclude) spec.no_weight_decay = {"bias"};
    hpu::TrainerOptions o = silent_run(dir.path(), 9);
    o.limit_train_batches = 4;
    o.limit_val_batches = 0;
    o.gradient_clip_val = clip;
    hpu::Trainer t(o);
    hpu::Classifier model(s, spec);
    t.fit(model, data);
    return weights(model);
  };
  const auto fused = fit(true, 0.0);
  expect_bit_identical(fused, fit(true, 1e30));
  EXPECT_NE(fused, fit(false, 0.0));
}

TEST(ParamGroups, TheJobKeyIsReadWrittenAndChecked) {
  const std::string head = R"({"model": {"layers": [{"type": "relu"}]}, "optimizer": {"weight_decay": 0.1, )";
  hpu::Job j = hpu::parse_job(head + R"("no_weight_decay": ["bias", "norm"]}})", "job.json");
  EXPECT_EQ(j.optimizer.no_weight_decay, (std::vector<std::string>{"bias", "norm"}));
  EXPECT_NE(hpu::job_to_json(j).find("\"no_weight_decay\": [\n      \"bias\",\n      \"norm\"\n    ]"),
            std::string::npos)
      << hpu::job_to_json(j);
  EXPECT_HPU_ERROR(hpu::parse_job(head + R"("no_weight_decay": "bias"}})", "job.json"), HPU_ERROR_CONFIG,
                   "optimizer.no_weight_decay: expected an array of names (\"bias\", \"norm\"), found a string");
  EXPECT_HPU_ERROR(hpu::parse_job(head + R"("no_weight_decay": ["bias", 3]}})", "job.json"), HPU_ERROR_CONFIG,
                   "optimizer.no_weight_decay[1]: expected a non-empty string, found an integer");
}
