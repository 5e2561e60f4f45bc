// Checkpoints as models: their hyperparameters (Lightning's
// save_hyperparameters, CSVLogger's hparams.yaml), load_from_checkpoint in
// C++ and hpuTrainerPredict in C, and validate/test with ckpt_path "best",
// "last" or a path.
#include <hpu/trainer.h>
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <jansson.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

using namespace trainer_test;

namespace {

// fit_util's mlp() as a job's layers, so that checkpoints describe it.
hpu::ModelSpec mlp_spec(int64_t hidden = 32) {
  hpu::ModelSpec s;
  s.layers = {{.type = "linear", .in_features = 16, .out_features = hidden},
              {.type = "gelu"},
              {.type = "layernorm", .normalized_shape = hidden},
              {.type = "linear", .in_features = hidden, .out_features = 4}};
  s.optimizer = adamw();
  return s;
}

hpu::TrainerOptions opts(const TempDir &dir, std::vector<hpu::Ref<hpu::Callback>> callbacks = {}) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 9;
  o.max_epochs = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.logger = false;
  o.callbacks = std::move(callbacks);
  o.enable_checkpointing = !o.callbacks.empty();
  return o;
}

json_t *meta_of(const std::string &path) {
  json_error_t err;
  return json_loads(hpu::load_checkpoint_file(path).meta.c_str(), 0, &err);
}

// hpuTrainerPredict's rows for the samples of `set`, `batch` at a time.
std::vector<double> c_predict(const std::string &ckpt, const hpu::TensorDataset &set, int64_t batch) {
  const int64_t shape[2] = {int64_t(set.size()), 16};
  hpuTrainerPredictOptions_t o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.batch_size = batch;
  char *result = nullptr;
  EXPECT_EQ(hpuTrainerPredict(ckpt.c_str(), set.features().data(), 2, shape, &o, &result), HPU_SUCCESS)
      << hpuGetLastErrorMessage();
  std::vector<double> out;
  if (!result) return out;
  json_error_t err;
  json_t *r = json_loads(result, 0, &err);
  hpuFree(result);
  EXPECT_EQ(json_array_size(json_object_get(r, "columns")), 5u);
  size_t i;
  json_t *row;
  json_array_foreach(json_object_get(r, "predictions"), i, row) {
    size_t k;
    json_t *v;
    json_array_foreach(row, k, v) out.push_back(json_number_value(v));
  }
  json_decref(r);
  return out;
}

}  // namespace

TEST(LoadFromCheckpoint, PredictionsEqualThoseOfTheTrainerThatSavedIt) {
  TempDir dir;
  const std::string ckpt = dir / "model.ckpt";
  hpu::Trainer t(opts(dir));
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(mlp_spec());
  t.fit(model, data);
  t.save_checkpoint(ckpt);
  const hpu::Predictions saved = t.predict(model, data);

  // C++: the model the checkpoint describes, with its weights.
  hpu::Device dev(0);
  std::unique_ptr<hpu::Classifier> loaded = hpu::Classifier::load_from_checkpoint(ckpt, dev.get());
  EXPECT_EQ(loaded->hyperparameters(), model.hyperparameters());
  expect_bit_identical(weights(*loaded), weights(model));
  const hpu::TensorDataset &set = data.test_data();
  EXPECT_EQ(hpu::predict_samples(*loaded, dev.get(), set.features().data(), {int64_t(set.size()), 16}, 32).values,
            saved.values);

  // C: the same rows from host memory.
  EXPECT_EQ(c_predict(ckpt, data.test_data(), 32), saved.values);
}

TEST(LoadFromCheckpoint, CheckpointsCarryTheHyperparametersAndCsvLoggerWritesThem) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir, {hpu::ModelCheckpoint{}});
  o.logger = hpu::CSVLogger(dir.path());
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(mlp_spec());
  t.fit(model, data);
  const std::string yaml = slurp(t.log_dir() + "/hparams.yaml");
  EXPECT_NE(yaml.find("\noptimizer:\n  beta1: 0.9\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\n  lr: 0.01\n  name: adamw\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("model:\n  layers:\n  - bias: true\n    in_features: 16\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\n  - type: gelu\n"), std::string::npos) << yaml;
  const std::string best = t.callback<hpu::ModelCheckpoint>()->best_model_path();
  json_t *meta = meta_of(best);
  json_t *hp = json_object_get(meta, "hyper_parameters");
  EXPECT_DOUBLE_EQ(json_number_value(json_object_get(json_object_get(hp, "optimizer"), "lr")), 0.01);
  EXPECT_EQ(json_array_size(json_object_get(json_object_get(hp, "model"), "layers")), 4u);
  json_decref(meta);
}

TEST(LoadFromCheckpoint, MissingFilesAndOtherModelsFailNamingThePath) {
  TempDir dir;
  const std::string ckpt = dir / "model.ckpt", coded = dir / "coded.ckpt";
  {
    hpu::Trainer t(opts(dir));
    hpu::InMemoryData data = blob_data(32);
    hpu::Classifier model(mlp_spec()), in_code(mlp(), adamw());
    t.fit(model, data);
    t.save_checkpoint(ckpt);
    hpu::Trainer t2(opts(dir));
    t2.fit(in_code, data);
    t2.save_checkpoint(coded);
  }
  hpu::Device dev(0);
  EXPECT_HPU_ERROR(hpu::Classifier::load_from_checkpoint(dir / "none.ckpt", dev.get()), HPU_ERROR_NOT_FOUND,
                   dir / "none.ckpt");
  spit(dir / "text.ckpt", "not a checkpoint");
  EXPECT_HPU_ERROR(hpu::Classifier::load_from_checkpoint(dir / "text.ckpt", dev.get()), HPU_ERROR_IO,
                   "not an hpu checkpoint");
  // Built in code: only the optimizer and scheduler are known, so build the
  // model and load the weights into it.
  EXPECT_HPU_ERROR(hpu::Classifier::load_from_checkpoint(coded, dev.get()), HPU_ERROR_INVALID_ARGUMENT,
                   coded + ": the checkpoint's hyper_parameters describe no model layers");
  hpu::Classifier same(mlp(), adamw());
  hpu::load_from_checkpoint(same, coded, dev.get());
  // Another model: a wider hidden layer, or fewer layers.
  hpu::Classifier wider(mlp_spec(64));
  EXPECT_HPU_ERROR(hpu::load_from_checkpoint(wider, ckpt, dev.get()), HPU_ERROR_INVALID_ARGUMENT,
                   ckpt + ": the checkpoint's net.0.weight has shape [32, 16], the model's has shape [64, 16]");
  hpu::Sequential one;
  one.add(hpu::Linear(16, 32));
  hpu::Classifier shorter(one, adamw());
  EXPECT_HPU_ERROR(hpu::load_from_checkpoint(shorter, ckpt, dev.get()), HPU_ERROR_INVALID_ARGUMENT,
                   "which the model lacks");
}

TEST(TestCkptPath, BestLoadsTheBestCheckpointsWeightsNotTheFinalOnes) {
  TempDir dir;
  // The best by the highest val_loss: the first epoch's, not the final weights.
  auto mc = std::make_shared<hpu::ModelCheckpoint>(hpu::ModelCheckpointOptions{.monitor = "val_loss", .mode = "max"});
  hpu::TrainerOptions o = opts(dir, {mc});
  o.max_epochs = 3;
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(mlp_spec());
  t.fit(model, data);
  const auto final_weights = weights(model);
  const hpu::Metrics at_end = t.test(model, data);
  ASSERT_NE(mc->best_model_path().find("epoch=0"), std::string::npos) << mc->best_model_path();

  const hpu::Metrics best = t.test(model, data, "best");
  // The model now holds the checkpoint's weights (as Lightning leaves it).
  hpu::Classifier reference(mlp_spec());
  hpu::Device dev(0);
  hpu::load_from_checkpoint(reference, mc->best_model_path(), dev.get());
  expect_bit_identical(weights(model), weights(reference));
  EXPECT_NE(weights(model), final_weights);
  EXPECT_NE(best.at("test_loss"), at_end.at("test_loss"));
  // validate("best") scores what ModelCheckpoint scored when it saved.
  EXPECT_EQ(t.validate(model, data, "best").at("val_loss"), *mc->best_model_score());
  // A path gives the same as "best".
  TempDir other;
  hpu::Trainer t2(opts(other));
  hpu::Classifier fresh(mlp_spec());
  EXPECT_EQ(t2.test(fresh, data, mc->best_model_path()), best);
}

TEST(TestCkptPath, LastIsSaveLastsCheckpointOrTheCurrentWeights) {
  TempDir dir;
  hpu::InMemoryData data = blob_data(32);
  {
    auto mc = std::make_shared<hpu::ModelCheckpoint>(
        hpu::ModelCheckpointOptions{.monitor = "val_loss", .mode = "max", .save_last = true});
    hpu::TrainerOptions o = opts(dir, {mc});
    o.max_epochs = 2;
    hpu::Trainer t(o);
    hpu::Classifier model(mlp_spec());
    t.fit(model, data);
    const hpu::Metrics now = t.test(model, data);
    EXPECT_EQ(t.test(model, data, "last"), now);  // last.ckpt holds the final weights
    EXPECT_NE(t.test(model, data, "best"), now);
    EXPECT_EQ(t.test(model, data, "last"), now);
  }
  // No last checkpoint: as Lightning, a warning and the current weights.
  hpu::Trainer t(opts(dir, {hpu::ModelCheckpoint{}}));
  hpu::Classifier model(mlp_spec());
  t.fit(model, data);
  EXPECT_EQ(t.test(model, data, "last"), t.test(model, data));
}

TEST(TestCkptPath, BestWithoutACheckpointFailsClearly) {
  TempDir dir;
  hpu::InMemoryData data = blob_data(32);
  hpu::Classifier model(mlp_spec());
  hpu::Trainer none(opts(dir));
  EXPECT_HPU_ERROR(none.test(model, data, "best"), HPU_ERROR_INVALID_ARGUMENT,
                   "test: ckpt_path is \"best\", but the trainer has no ModelCheckpoint callback");
  hpu::Trainer before(opts(dir, {hpu::ModelCheckpoint{}}));
  EXPECT_HPU_ERROR(before.validate(model, data, "best"), HPU_ERROR_INVALID_USAGE,
                   "validate: ckpt_path is \"best\", but ModelCheckpoint has saved no checkpoint yet");
  EXPECT_HPU_ERROR(before.predict(model, data, "best"), HPU_ERROR_INVALID_USAGE, "predict: ckpt_path is \"best\"");
}

// hpu-train's test after fit: the final weights unless test_ckpt_path says.
TEST(TestCkptPath, AJobsTestAfterFitUsesTestCkptPath) {
  TempDir dir;
  const std::string job = std::string(R"({"model": {"layers": [{"type": "flatten"},
      {"type": "linear", "in_features": 784, "out_features": 16}, {"type": "relu"},
      {"type": "linear", "in_features": 16, "out_features": 10}]},
    "data": {"batch_size": 32, "val_size": 64},
    "trainer": {"devices": 1, "max_epochs": 3, "seed": 3, "limit_train_batches": 4, "limit_val_batches": 2,
                "limit_test_batches": 2, "enable_progress_bar": false, "logger": false,
                "callbacks": [{"type": "ModelCheckpoint", "monitor": "val_loss", "mode": "max"}],
                "default_root_dir": ")") +
                          dir.path() + "\"}";
  auto run = [&](const std::string &top) {
    char *out = nullptr;
    EXPECT_EQ(hpuTrainerRunJob((job + top + "}").c_str(), "job.json", &out), HPU_SUCCESS) << hpuGetLastErrorMessage();
    json_error_t err;
    json_t *r = json_loads(out ? out : "{}", 0, &err);
    hpuFree(out);
    return r;
  };
  json_t *final_weights = run(""), *best = run(R"(, "test_ckpt_path": "best")");
  const char *best_path = json_string_value(json_object_get(best, "best_model_path"));
  ASSERT_NE(best_path, nullptr);
  json_t *tested = run(R"(, "command": "test", "ckpt_path": ")" + std::string(best_path) + "\"");
  auto loss = [](json_t *r) { return json_number_value(json_object_get(json_object_get(r, "test"), "test_loss")); };
  EXPECT_EQ(loss(best), loss(tested));
  EXPECT_NE(loss(best), loss(final_weights));
  EXPECT_STREQ(json_string_value(json_object_get(tested, "command")), "test");
  EXPECT_TRUE(json_is_null(json_object_get(final_weights, "predict")));
  EXPECT_EQ(json_object_size(json_object_get(final_weights, "validate")), 0u);
  // The validate command: the validation set's metrics alone.
  json_t *validated = run(R"(, "command": "validate", "ckpt_path": ")" + std::string(best_path) + "\"");
  EXPECT_STREQ(json_string_value(json_object_get(validated, "command")), "validate");
  json_t *val = json_object_get(validated, "validate");
  EXPECT_EQ(json_object_size(val), 2u);
  EXPECT_TRUE(json_is_number(json_object_get(val, "val_loss")));
  EXPECT_EQ(json_object_size(json_object_get(validated, "test")), 0u);
  json_decref(validated);
  json_decref(final_weights);
  json_decref(best);
  json_decref(tested);
}

TEST(TrainerPredictCApi, BadArgumentsAreNamed) {
  TempDir dir;
  const std::string ckpt = dir / "model.ckpt", coded = dir / "coded.ckpt";
  hpu::InMemoryData data = blob_data(32);
  {
    hpu::Trainer t(opts(dir));
    hpu::Classifier model(mlp_spec());
    t.fit(model, data);
    t.save_checkpoint(ckpt);
    hpu::Classifier in_code(mlp(), adamw());
    hpu::Trainer t2(opts(dir));
    t2.fit(in_code, data);
    t2.save_checkpoint(coded);
  }
  const float *x = data.test_data().features().data();
  const int64_t shape[2] = {4, 16}, zero[2] = {4, 0}, narrow[2] = {4, 8};
  char *out = nullptr;
  auto expect = [&](hpuStatus_t got, hpuStatus_t want, const std::string &needle) {
    EXPECT_EQ(got, want) << hpuGetLastErrorMessage();
    const std::string msg = hpuGetLastErrorMessage();
    EXPECT_EQ(msg.rfind("hpuTrainerPredict: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(out, nullptr);
  };
  const char *c = ckpt.c_str();
  expect(hpuTrainerPredict(c, x, 2, shape, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT, "result_json is NULL");
  expect(hpuTrainerPredict(nullptr, x, 2, shape, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "ckpt_path is NULL");
  expect(hpuTrainerPredict(c, nullptr, 2, shape, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "x is NULL");
  expect(hpuTrainerPredict(c, x, 1, shape, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "ndim is 1; expected 2 to 8");
  expect(hpuTrainerPredict(c, x, 2, nullptr, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "shape is NULL");
  expect(hpuTrainerPredict(c, x, 2, zero, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT, "shape[1] is 0");
  hpuTrainerPredictOptions_t o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.struct_size = 3;
  expect(hpuTrainerPredict(c, x, 2, shape, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->struct_size is 3");
  o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.device = 99;
  expect(hpuTrainerPredict(c, x, 2, shape, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->device is 99");
  o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.batch_size = -1;
  expect(hpuTrainerPredict(c, x, 2, shape, &o, &out), HPU_ERROR_INVALID_ARGUMENT, "options->batch_size is -1");
  o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.precision = "16-mixed";
  expect(hpuTrainerPredict(c, x, 2, shape, &o, &out), HPU_ERROR_INVALID_ARGUMENT,
         "options->precision is \"16-mixed\"");
  const std::string missing = dir / "none.ckpt";
  expect(hpuTrainerPredict(missing.c_str(), x, 2, shape, nullptr, &out), HPU_ERROR_NOT_FOUND, missing);
  expect(hpuTrainerPredict(coded.c_str(), x, 2, shape, nullptr, &out), HPU_ERROR_INVALID_ARGUMENT,
         "describe no model layers");
  // Samples of another width than the model's first layer.
  EXPECT_NE(hpuTrainerPredict(c, x, 2, narrow, nullptr, &out), HPU_SUCCESS);
  EXPECT_EQ(out, nullptr);

  // bf16-mixed runs under autocast and gives the same columns.
  o = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  o.precision = "bf16-mixed";
  ASSERT_EQ(hpuTrainerPredict(c, x, 2, shape, &o, &out), HPU_SUCCESS) << hpuGetLastErrorMessage();
  EXPECT_NE(std::string(out).find("\"columns\":[\"pred\",\"prob_0\""), std::string::npos) << out;
  hpuFree(out);
}

// hpuTrainerPredict(3): thread-safe, and it may run while a job runs.
TEST(TrainerPredictCApi, ConcurrentCallsAndARunningJobGiveTheSameRows) {
  TempDir dir;
  const std::string ckpt = dir / "model.ckpt";
  hpu::InMemoryData data = blob_data(32);
  {
    hpu::Trainer t(opts(dir));
    hpu::Classifier model(mlp_spec());
    t.fit(model, data);
    t.save_checkpoint(ckpt);
  }
  const std::vector<double> alone = c_predict(ckpt, data.test_data(), 32);
  ASSERT_FALSE(alone.empty());

  // A long job on Fashion-MNIST, running once its first log line came.
  static std::atomic<bool> started{false};
  started = false;
  auto cb = [](hpuLogLevel_t, const char *line, void *) {
    if (std::strstr(line, " trainer: job: ")) started = true;
  };
  hpuLogLevel_t saved;
  ASSERT_EQ(hpuGetLogLevel(&saved), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogCallback(cb, nullptr), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogLevel(HPU_LOG_INFO), HPU_SUCCESS);
  const std::string job = R"({"model": {"layers": [{"type": "flatten"},
      {"type": "linear", "in_features": 784, "out_features": 16}, {"type": "relu"},
      {"type": "linear", "in_features": 16, "out_features": 10}]},
    "trainer": {"devices": 1, "max_epochs": 1000, "enable_progress_bar": false, "logger": false,
                "enable_checkpointing": false, "default_root_dir": ")" + dir.path() + "\"}, \"test\": false}";
  hpuStatus_t job_status = HPU_SUCCESS;
  std::thread runner([&] {
    char *out = nullptr;
    job_status = hpuTrainerRunJob(job.c_str(), "long.json", &out);
    hpuFree(out);
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<double> a, b;
  std::thread other([&] { a = c_predict(ckpt, data.test_data(), 32); });
  b = c_predict(ckpt, data.test_data(), 32);
  other.join();
  EXPECT_EQ(hpuTrainerCancelJob(), HPU_SUCCESS);  // the job was still running
  runner.join();
  hpuSetLogLevel(saved);
  hpuSetLogCallback(nullptr, nullptr);
  EXPECT_EQ(job_status, HPU_ERROR_ABORTED);
  EXPECT_EQ(a, alone);
  EXPECT_EQ(b, alone);
}
