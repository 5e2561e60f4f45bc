// Lightning's hooks beyond the loop's: on_before_backward/on_after_backward
// (callbacks and the module), on_save_checkpoint/on_load_checkpoint, and
// on_exception; and that a hook reading gradients after backward keeps the
// optimizer's step out of the backward (StepPlan).
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <cstring>

using namespace trainer_test;

namespace {

hpu::TrainerOptions quiet(const TempDir &dir, std::vector<hpu::Ref<hpu::Callback>> callbacks = {}) {
  hpu::TrainerOptions o = silent_run(dir.path(), 3);
  o.limit_train_batches = 3;
  o.limit_val_batches = 0;
  o.num_sanity_val_steps = 0;
  o.callbacks = std::move(callbacks);
  return o;
}

// A plain MLP (Linear ReLU Linear: both weights may take their step in the
// backward).
hpu::Sequential relu_mlp() {
  hpu::Sequential s;
  s.add(hpu::Linear(16, 32));
  s.add(hpu::ReLU());
  s.add(hpu::Linear(32, 4));
  return s;
}

using Grads = std::vector<std::vector<float>>;  // one entry per parameter per batch

void read_grads(const std::vector<hpu::Parameter *> &ps, Grads &out) {
  for (hpu::Parameter *p : ps) out.push_back(p->grad.to_vector<float>());
}

// Records the hooks it sees, by name, in a list its copies share.
struct Recorder : hpu::Callback {
  std::shared_ptr<std::vector<std::string>> seen = std::make_shared<std::vector<std::string>>();
  std::string state_key() const override { return "Recorder"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_train_batch_start(hpu::Trainer &, int64_t) override { seen->push_back("batch_start"); }
  void on_before_backward(hpu::Trainer &, const hpu::Tensor &loss) override {
    // The loss backward starts from: a finite scalar.
    EXPECT_EQ(loss.numel(), 1);
    hpuTensor_t f = nullptr;
    ASSERT_EQ(hpuCast(nullptr, loss.get(), HPU_FLOAT32, &f), HPU_SUCCESS);
    EXPECT_TRUE(std::isfinite(hpu::Tensor(f).to_vector<float>()[0]));
    seen->push_back("before_backward");
  }
  void on_after_backward(hpu::Trainer &) override { seen->push_back("after_backward"); }
  void on_before_optimizer_step(hpu::Trainer &) override { seen->push_back("before_optimizer_step"); }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &, int64_t) override { seen->push_back("batch_end"); }
  void on_exception(hpu::Trainer &, const std::exception &e) override { seen->push_back(std::string("exception: ") + e.what()); }
  void teardown(hpu::Trainer &, hpu::Stage) override { seen->push_back("teardown"); }
};

// A callback that reads the gradients after each backward (it keeps the
// default needs(): all).
struct GradCallback : hpu::Callback {
  std::shared_ptr<Grads> grads = std::make_shared<Grads>();
  std::string state_key() const override { return "GradCallback"; }
  void on_after_backward(hpu::Trainer &t) override { read_grads(t.state().optimizers[0]->params(), *grads); }
};

// A module derived from Classifier that reads its gradients after each
// backward; `declare_none` says (wrongly) that its hooks read none.
struct GradModule : hpu::Classifier {
  GradModule(const hpu::Sequential &net, bool declare_none)
      : Classifier(net, adamw()), declare_none(declare_none) {}
  hpu::CallbackNeeds needs() const override {
    return declare_none ? hpu::CallbackNeeds::none() : hpu::Classifier::needs();
  }
  void on_before_backward(const hpu::Tensor &) override { ++before; }
  void on_after_backward() override {
    ++after;
    read_grads(parameters(), grads);
  }
  bool declare_none;
  int before = 0, after = 0;
  Grads grads;
};

// What Recorder sees of a fit of `batches` training batches without validation.
std::vector<std::string> hooks_of_a_fit(int batches) {
  const std::vector<std::string> one = {"batch_start", "before_backward", "after_backward", "before_optimizer_step",
                                        "batch_end"};
  std::vector<std::string> want;
  for (int b = 0; b < batches; ++b) want.insert(want.end(), one.begin(), one.end());
  want.push_back("teardown");
  return want;
}

void expect_equal(const Grads &a, const Grads &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << "gradient " << i << " differs";
  }
}

}  // namespace

TEST(Hooks, BackwardHooksRunAroundEachBackwardInLightningsOrder) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  auto rec = std::make_shared<Recorder>();
  hpu::Trainer t(quiet(dir, {rec}));
  GradModule model(relu_mlp(), true);
  t.fit(model, data);
  EXPECT_EQ(*rec->seen, hooks_of_a_fit(3));
  EXPECT_EQ(model.before, 3);
  EXPECT_EQ(model.after, 3);
}

// Under hpu_ddp with two replicas (threads), the callbacks see each batch's
// backward once, on replica 0, in the same order.
TEST(Hooks, UnderHpuDdpTheCallbacksSeeEachBackwardOnce) {
  TempDir dir;
  hpu::InMemoryData data = blob_data(16);
  auto rec = std::make_shared<Recorder>();
  hpu::TrainerOptions o = quiet(dir, {rec});
  o.devices = 2;
  hpu::Trainer t(o);
  GradModule model(relu_mlp(), false);
  t.fit(model, data);
  EXPECT_EQ(*rec->seen, hooks_of_a_fit(3));
  EXPECT_EQ(model.after, 3);  // replica 0's; replica 1 is a clone of its own
  ASSERT_EQ(model.grads.size(), 3u * 4u);
  for (const auto &g : model.grads)
    for (float v : g) ASSERT_TRUE(std::isfinite(v));
}

// The gradients a hook reads after backward are those a run whose steps are
// certainly apart (clipping at a norm never reached) computes, bit for bit:
// reading them keeps the AdamW step out of the backward. A module that
// declares it reads none does not, and its Linear weights' gradients are
// then never stored.
TEST(Hooks, AfterBackwardSeesEveryGradientTheStepUses) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  auto run = [&](bool declare_none, double clip) {
    hpu::TrainerOptions o = quiet(dir);
    o.gradient_clip_val = clip;
    hpu::Trainer t(o);
    GradModule model(relu_mlp(), declare_none);
    t.fit(model, data);
    return model.grads;
  };
  const Grads apart = run(false, 1e30);
  ASSERT_EQ(apart.size(), 3u * 4u);  // 3 batches x 4 parameters
  expect_equal(run(false, 0.0), apart);

  const Grads fused = run(true, 0.0);
  bool differs = false;
  for (size_t i = 0; i < fused.size(); ++i) differs |= fused[i] != apart[i];
  EXPECT_TRUE(differs) << "the module declared no reads, yet every gradient was stored";

  // The same for a callback that keeps the default needs().
  auto cb = std::make_shared<GradCallback>();
  hpu::Trainer t(quiet(dir, {cb}));
  hpu::Classifier model(relu_mlp(), adamw());
  t.fit(model, data);
  expect_equal(*cb->grads, apart);
}

TEST(Hooks, AClassDerivedFromClassifierReadsGradientsUnlessItSaysSo) {
  hpu::Classifier plain(relu_mlp());
  EXPECT_FALSE(plain.needs().gradients);
  struct Derived : hpu::Classifier {
    using Classifier::Classifier;
  } derived(relu_mlp());
  EXPECT_TRUE(derived.needs().gradients);
}

// ---- on_save_checkpoint / on_load_checkpoint ------------------------------------

namespace {

// Saves a counter of its own (a meta key) and a tensor; on load, records what
// it found.
struct CountingCallback : hpu::Callback {
  int batches = 0;
  std::shared_ptr<std::string> loaded = std::make_shared<std::string>();
  std::string state_key() const override { return "CountingCallback"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &, int64_t) override { ++batches; }
  void on_save_checkpoint(const hpu::Trainer &t, hpu::Checkpoint &ck) override {
    EXPECT_NE(ck.get_meta("global_step"), "");  // the trainer's part is there already
    ck.set_meta("counting", "{\"batches\": " + std::to_string(batches) + "}");
    hpu::CheckpointTensor c;
    c.dtype = HPU_INT32;
    c.shape = {1};
    const int32_t v = int32_t(t.global_step());
    c.bytes.assign(reinterpret_cast<const uint8_t *>(&v), reinterpret_cast<const uint8_t *>(&v) + 4);
    ck.tensors["counting/step"] = c;
  }
  void on_load_checkpoint(hpu::Trainer &t, const hpu::Checkpoint &ck) override {
    // Before the trainer restores its state: the step is still this fit's start.
    *loaded = ck.get_meta("counting") + " at step " + std::to_string(t.global_step());
    EXPECT_EQ(ck.tensors.count("counting/step"), 1u);
  }
};

struct SavingModule : hpu::Classifier {
  SavingModule() : Classifier(relu_mlp(), adamw()) {}
  void on_save_checkpoint(hpu::Checkpoint &ck) override { ck.set_meta("module_note", "\"saved by the module\""); }
  void on_load_checkpoint(const hpu::Checkpoint &ck) override {
    ++loads;
    note = ck.get_meta("module_note");
    // Before the weights are restored: they are still this module's own.
    first_weight = parameters()[0]->value.to_vector<float>()[0];
  }
  std::string note;
  float first_weight = 0;
  int loads = 0;
};

}  // namespace

TEST(Hooks, CheckpointHooksAddAndReadTheirOwnParts) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  const std::string path = dir / "hooks.ckpt";
  auto cb = std::make_shared<CountingCallback>();
  {
    hpu::Trainer t(quiet(dir, {cb}));
    SavingModule model;
    t.fit(model, data);
    t.save_checkpoint(path);
  }
  hpu::Checkpoint ck = hpu::load_checkpoint_file(path);
  EXPECT_EQ(ck.get_meta("counting"), "{\"batches\":3}");
  EXPECT_EQ(ck.get_meta("module_note"), "\"saved by the module\"");
  EXPECT_EQ(ck.get_meta("absent"), "");
  ASSERT_EQ(ck.tensors.count("counting/step"), 1u);
  int32_t step = 0;
  std::memcpy(&step, ck.tensors["counting/step"].bytes.data(), 4);
  EXPECT_EQ(step, 3);

  // Resuming: both hooks read their parts before the trainer restores anything.
  auto cb2 = std::make_shared<CountingCallback>();
  hpu::TrainerOptions o = quiet(dir, {cb2});
  o.max_epochs = 2;
  hpu::Trainer t(o);
  SavingModule model;
  t.fit(model, data, path);
  EXPECT_EQ(*cb2->loaded, "{\"batches\":3} at step 0");
  EXPECT_EQ(model.note, "\"saved by the module\"");
  hpu::Checkpoint mine = hpu::load_checkpoint_file(path);
  float saved = 0;
  std::memcpy(&saved, mine.tensors["state_dict/" + model.parameters()[0]->name].bytes.data(), 4);
  EXPECT_NE(model.first_weight, saved);  // same seed, but the saved weights had trained
}

// As Lightning's: the module's on_load_checkpoint runs whenever a checkpoint
// loads into it, before its weights do, not only when fit resumes.
TEST(Hooks, TheModulesOnLoadCheckpointRunsWheneverACheckpointLoadsIntoIt) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  const std::string path = dir / "hooks.ckpt";
  float saved = 0;
  {
    hpu::Trainer t(quiet(dir));
    SavingModule model;
    t.fit(model, data);
    t.save_checkpoint(path);
    std::memcpy(&saved, hpu::load_checkpoint_file(path).tensors["state_dict/" + model.parameters()[0]->name].bytes.data(), 4);
  }
  auto expect_loaded_once = [&](const SavingModule &m, const char *entry) {
    SCOPED_TRACE(entry);
    EXPECT_EQ(m.loads, 1);
    EXPECT_EQ(m.note, "\"saved by the module\"");
    EXPECT_NE(m.first_weight, saved);  // the hook ran before the weights loaded
  };
  hpu::Trainer t(quiet(dir));
  SavingModule validated, tested, predicted, loaded;
  t.validate(validated, data, path);
  expect_loaded_once(validated, "validate");
  t.test(tested, data, path);
  expect_loaded_once(tested, "test");
  t.predict(predicted, data, path);
  expect_loaded_once(predicted, "predict");
  hpu::Device dev(0);
  hpu::load_from_checkpoint(loaded, path, dev.get());
  expect_loaded_once(loaded, "load_from_checkpoint");

  // restore_checkpoint: the model the trainer last ran (predicted).
  t.restore_checkpoint(hpu::load_checkpoint_file(path));
  EXPECT_EQ(predicted.loads, 2);
  EXPECT_EQ(tested.loads, 1);
  // Without a ckpt_path nothing loads.
  t.test(tested, data);
  EXPECT_EQ(tested.loads, 1);
}

TEST(Hooks, SetMetaRejectsTextThatIsNotJson) {
  hpu::Checkpoint ck;
  EXPECT_HPU_ERROR(ck.set_meta("mine", "{not json"), HPU_ERROR_INVALID_ARGUMENT, "checkpoint meta key \"mine\"");
  ck.set_meta("n", "2");
  EXPECT_EQ(ck.get_meta("n"), "2");
  ck.set_meta("n", "[1, 2]");
  EXPECT_EQ(ck.get_meta("n"), "[1,2]");
}

// ---- on_exception ---------------------------------------------------------------

namespace {

struct Thrower : hpu::Callback {
  int64_t at = 1;
  bool in_hook = false;  // also throw from on_exception
  std::string state_key() const override { return "Thrower"; }
  hpu::CallbackNeeds needs() const override { return hpu::CallbackNeeds::none(); }
  void on_train_batch_end(hpu::Trainer &, const hpu::Metrics &, int64_t b) override {
    if (b == at) throw hpu::Error(HPU_ERROR_INVALID_USAGE, "thrower: batch " + std::to_string(b));
  }
  void on_validation_batch_start(hpu::Trainer &, int64_t) override {
    throw hpu::Error(HPU_ERROR_INVALID_USAGE, "thrower: validation");
  }
  void on_exception(hpu::Trainer &, const std::exception &) override {
    if (in_hook) throw std::runtime_error("from on_exception");
  }
};

}  // namespace

TEST(Hooks, OnExceptionSeesTheErrorBeforeItPropagates) {
  TempDir dir;
  hpu::InMemoryData data = blob_data();
  auto rec = std::make_shared<Recorder>();
  auto thrower = std::make_shared<Thrower>();
  hpu::Trainer t(quiet(dir, {thrower, rec}));
  hpu::Classifier model(relu_mlp(), adamw());
  EXPECT_HPU_ERROR(t.fit(model, data), HPU_ERROR_INVALID_USAGE, "thrower: batch 1");
  ASSERT_FALSE(rec->seen->empty());
  EXPECT_NE(rec->seen->back().find("exception: "), std::string::npos);
  EXPECT_NE(rec->seen->back().find("thrower: batch 1"), std::string::npos) << rec->seen->back();
  // The error propagates from the hook; teardown did not run.
  for (const std::string &h : *rec->seen) EXPECT_NE(h, "teardown");

  // validate too; an error from on_exception itself is dropped.
  thrower->in_hook = true;
  rec->seen->clear();
  hpu::TrainerOptions o = quiet(dir, {thrower, rec});
  o.limit_val_batches = 1;
  hpu::Trainer v(o);
  EXPECT_HPU_ERROR(v.validate(model, data), HPU_ERROR_INVALID_USAGE, "thrower: validation");
  ASSERT_FALSE(rec->seen->empty());
  EXPECT_EQ(rec->seen->back(), "exception: thrower: validation");
}
