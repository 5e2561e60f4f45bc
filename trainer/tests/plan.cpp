// The step planner (plan.hpp): which layers it fuses, from the layers' own
// declarations (a user's layers opt in the same way as the built-in ones),
// and when the optimizer may step in the backward.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

using namespace trainer_test;

namespace {

// A user's relu that declares itself one, and one that does not.
struct MyRelu : hpu::ReLU {
  std::unique_ptr<hpu::Module> clone() const override { return std::make_unique<MyRelu>(); }
};
struct OpaqueRelu : hpu::ReLU {
  hpuActivation_t activation() const override { return HPU_ACTIVATION_NONE; }
  std::unique_ptr<hpu::Module> clone() const override { return std::make_unique<OpaqueRelu>(); }
};

// A user's product layer that takes fusions and records the ones it got (in
// a log its copies share).
struct Recording : hpu::Module {
  std::string name() const override { return "Recording"; }
  hpu::Tensor forward(hpu::Context &, const hpu::Tensor &x) override { return x; }
  bool takes_fusion() const override { return true; }
  hpu::Tensor forward_fused(hpu::Context &ctx, const hpu::Tensor &x, const hpu::Fusion &f) override {
    got->push_back(f);
    return forward(ctx, x);
  }
  std::unique_ptr<hpu::Module> clone() const override { return std::make_unique<Recording>(*this); }
  std::shared_ptr<std::vector<hpu::Fusion>> got = std::make_shared<std::vector<hpu::Fusion>>();
};

std::vector<hpu::Fusion> plan_of(const std::vector<hpu::Module *> &layers) { return hpu::plan_layers(layers); }

}  // namespace

TEST(StepPlan, AProductTakesTheActivationAfterItAndTheNextProductItsBackward) {
  hpu::Linear a(4, 4), b(4, 4), c(4, 4);
  hpu::ReLU r1, r2;
  hpu::GELU g;
  hpu::Flatten f;
  // Linear ReLU Linear ReLU: the first relu's backward moves into the second
  // Linear; the last relu's stays with the Linear before it.
  std::vector<hpu::Fusion> p = plan_of({&a, &r1, &b, &r2});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].activation, HPU_ACTIVATION_RELU);
  EXPECT_FALSE(p[0].record_activation_backward);
  EXPECT_TRUE(p[1].skip);
  EXPECT_EQ(p[2].input_activation, HPU_ACTIVATION_RELU);
  EXPECT_EQ(p[2].activation, HPU_ACTIVATION_RELU);
  EXPECT_TRUE(p[2].record_activation_backward);
  EXPECT_TRUE(p[3].skip);
  // A layer between the relu and the next product keeps the backward with
  // the first; an activation without an epilogue (GELU) is not fused; nor is
  // a relu that follows no product.
  p = plan_of({&a, &r1, &f, &b, &g, &r2, &c});
  EXPECT_EQ(p[0].activation, HPU_ACTIVATION_RELU);
  EXPECT_TRUE(p[0].record_activation_backward);
  EXPECT_EQ(p[3].input_activation, HPU_ACTIVATION_NONE);
  EXPECT_EQ(p[3].activation, HPU_ACTIVATION_NONE);
  EXPECT_FALSE(p[4].skip);
  EXPECT_FALSE(p[5].skip);
  EXPECT_EQ(p[6].input_activation, HPU_ACTIVATION_NONE);
  // A user's layers opt in by declaring themselves: an activation that names
  // its hpuActivation_t, a product that takes fusions.
  MyRelu mine;
  OpaqueRelu opaque;
  Recording rec;
  p = plan_of({&rec, &mine, &a, &opaque, &b});
  EXPECT_EQ(p[0].activation, HPU_ACTIVATION_RELU);
  EXPECT_TRUE(p[1].skip);
  EXPECT_EQ(p[2].input_activation, HPU_ACTIVATION_RELU);
  EXPECT_EQ(p[2].activation, HPU_ACTIVATION_NONE);
  EXPECT_FALSE(p[3].skip);
}

TEST(StepPlan, SequentialRunsAUsersLayersWithTheirFusion) {
  hpu::Device dev(0);
  Recording first, second;
  hpu::Sequential s;
  s.add(first).add(MyRelu()).add(second);
  hpu::Context ctx;
  ctx.training = false;
  const float v[2] = {-1, 2};
  const hpu::Tensor x = hpu::Tensor::from_host(dev.get(), HPU_FLOAT32, {1, 2}, v);
  // The relu is the first layer's to apply, and Recording applies none: x
  // comes through as it is.
  EXPECT_EQ(s.forward(ctx, x).to_vector<float>(), (std::vector<float>{-1, 2}));
  ASSERT_EQ(first.got->size(), 1u);
  EXPECT_EQ((*first.got)[0].activation, HPU_ACTIVATION_RELU);
  ASSERT_EQ(second.got->size(), 1u);
  EXPECT_EQ((*second.got)[0].input_activation, HPU_ACTIVATION_RELU);
}

TEST(StepPlan, TheOptimizerStepsInTheBackwardOnlyWhenNothingElseReadsTheGradients) {
  hpu::StepPlan plan;
  plan.plan_fit({});
  EXPECT_TRUE(plan.optimizer_in_backward());
  hpu::StepReaders r;
  r.gradients_shared = true;
  plan.plan_fit(r);
  EXPECT_FALSE(plan.optimizer_in_backward());
  r = {};
  r.accumulate_grad_batches = 2;
  plan.plan_fit(r);
  EXPECT_FALSE(plan.optimizer_in_backward());
  r = {};
  r.clipped = true;
  plan.plan_fit(r);
  EXPECT_FALSE(plan.optimizer_in_backward());
  r = {};
  r.callbacks_read_gradients = true;
  plan.plan_fit(r);
  EXPECT_FALSE(plan.optimizer_in_backward());
}

TEST(StepPlan, AnUpdateGoesToTheBackwardOfAParametersOnlyForward) {
  hpu::StepPlan plan;
  hpu::Parameter p, q;
  plan.offer(p, {});
  EXPECT_EQ(plan.update_in_backward(p), nullptr);  // no forward used it
  plan.used(p);
  EXPECT_NE(plan.update_in_backward(p), nullptr);
  plan.used(p);
  EXPECT_EQ(plan.update_in_backward(p), nullptr);  // used twice: its gradient has two parts
  plan.used(q);
  EXPECT_EQ(plan.update_in_backward(q), nullptr);  // not offered
  plan.step_done();
  plan.offer(p, {});
  plan.used(p);
  plan.apply(p);
  EXPECT_TRUE(plan.applied(p));
  EXPECT_FALSE(plan.applied(q));
  EXPECT_EQ(plan.update_in_backward(p), nullptr);  // applied once
  plan.step_done();
  EXPECT_FALSE(plan.applied(p));
}

// A user's relu that opts in trains to the same weights, bit for bit, as one
// that does not, in both precisions, with the step in the backward.
TEST(StepPlan, AUsersActivationThatOptsInTrainsBitForBit) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  for (const char *precision : {"32-true", "bf16-mixed"}) {
    auto fit = [&](bool opt_in) {
      hpu::Sequential s;
      s.add(hpu::Linear(16, 32));
      if (opt_in)
        s.add(MyRelu());
      else
        s.add(OpaqueRelu());
      s.add(hpu::Linear(32, 4));
      hpu::TrainerOptions o;
      o.devices = 1;
      o.seed = 7;
      o.max_epochs = 2;
      o.default_root_dir = dir.path();
      o.enable_progress_bar = false;
      o.enable_checkpointing = false;
      o.logger = false;
      o.precision = precision;
      hpu::Trainer t(o);
      hpu::Classifier model(s, adamw());
      t.fit(model, data);
      return weights(model);
    };
    SCOPED_TRACE(precision);
    expect_bit_identical(fit(true), fit(false));
  }
}
