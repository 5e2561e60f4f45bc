// Trainer::predict and predict_step: a row per sample in data set order,
// whatever the ranks' layout; the predictions file; hpu-train predict and a
// job's "predict" command.
#include <hpu/trainer.h>
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "launch_util.hpp"
#include "npy.hpp"
#include "test_util.hpp"

#include <jansson.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

using namespace trainer_test;

namespace {

hpu::TrainerOptions opts(const TempDir &dir, int devices = 1) {
  hpu::TrainerOptions o;
  o.devices = devices;
  o.seed = 5;
  o.max_epochs = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.logger = false;
  return o;
}

// 512 training samples; a test set of 127, which no world size of 2 or 4 divides.
hpu::InMemoryData odd_data(int batch) { return hpu::InMemoryData(blobs(512, 1), blobs(64, 2), blobs(127, 3), 4, batch); }

// A model fitted for one epoch, saved to `path`.
void fit_and_save(const TempDir &dir, const std::string &path) {
  hpu::Trainer t(opts(dir));
  hpu::InMemoryData data = odd_data(32);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  t.save_checkpoint(path);
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

std::string replace_all(std::string s, const std::string &from, const std::string &to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size())) s.replace(i, from.size(), to);
  return s;
}

std::string tiny_job(const std::string &root, const std::string &top = "") {
  return R"({"model": {"layers": [{"type": "flatten"},
      {"type": "linear", "in_features": 784, "out_features": 16}, {"type": "relu"},
      {"type": "linear", "in_features": 16, "out_features": 10}]},
    "data": {"batch_size": 32, "val_size": 64},
    "optimizer": {"name": "sgd", "lr": 0.05},
    "trainer": {"devices": 1, "max_epochs": 1, "seed": 3, "limit_train_batches": 4, "limit_val_batches": 2,
                "limit_test_batches": 2, "limit_predict_batches": 3, "enable_progress_bar": false,
                "logger": false, "default_root_dir": ")" +
         root + "\"}" + top + "}";
}

}  // namespace

TEST(TrainerPredict, ARowPerSampleInDataSetOrderAgreeingWithTheTestAccuracy) {
  TempDir dir;
  hpu::Trainer t(opts(dir));
  hpu::InMemoryData data = odd_data(32);
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  const hpu::Predictions p = t.predict(model, data);
  const std::vector<std::string> cols = {"pred", "prob_0", "prob_1", "prob_2", "prob_3"};
  EXPECT_EQ(p.columns, cols);
  ASSERT_EQ(p.rows(), data.test_data().size());
  EXPECT_EQ(t.state().num_predict_batches, 4);
  double correct = 0;
  for (size_t r = 0; r < p.rows(); ++r) {
    const double *row = &p.values[r * 5];
    double sum = 0;
    int best = 0;
    for (int k = 0; k < 4; ++k) {
      sum += row[1 + k];
      if (row[1 + k] > row[1 + best]) best = k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
    EXPECT_EQ(row[0], best) << "row " << r;
    correct += row[0] == data.test_data().labels()[r];
  }
  // The test loop scores the same weights on the same samples.
  const hpu::Metrics m = t.test(model, data);
  EXPECT_DOUBLE_EQ(m.at("test_acc"), correct / double(p.rows()));
}

TEST(TrainerPredict, TheSameRowsWhateverTheLayoutAndFromTheCheckpointsWeights) {
  TempDir dir;
  const std::string ckpt = dir / "model.ckpt";
  fit_and_save(dir, ckpt);
  std::vector<hpu::Predictions> out;
  for (int devices : {1, 2, 4}) {
    hpu::Trainer t(opts(dir, devices));
    hpu::InMemoryData data = odd_data(8);
    hpu::Classifier model(mlp(), adamw());  // fresh weights: the checkpoint's replace them
    out.push_back(t.predict(model, data, ckpt));
    EXPECT_EQ(t.config().world_size, devices);
  }
  ASSERT_EQ(out[0].rows(), 127u);
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i].columns, out[0].columns);
    EXPECT_EQ(out[i].values, out[0].values) << "layout " << i;
  }
}

TEST(TrainerPredict, LimitPredictBatchesCountsEachRanksBatches) {
  TempDir dir;
  for (int devices : {1, 2}) {
    hpu::TrainerOptions o = opts(dir, devices);
    o.limit_predict_batches = int64_t(3);
    hpu::Trainer t(o);
    hpu::InMemoryData data = odd_data(10);
    hpu::Classifier model(mlp(), adamw());
    EXPECT_EQ(t.predict(model, data).rows(), size_t(30 * devices));
    o.limit_predict_batches = int64_t(0);
    hpu::Trainer none(o);
    EXPECT_EQ(none.predict(model, data).rows(), 0u);
  }
}

TEST(TrainerPredict, BadUseFailsClearly) {
  TempDir dir;
  hpu::Trainer t(opts(dir));
  hpu::InMemoryData empty(blobs(64, 1), blobs(8, 2), hpu::TensorDataset(), 4, 8);
  hpu::Classifier model(mlp(), adamw());
  EXPECT_HPU_ERROR(t.predict(model, empty), HPU_ERROR_INVALID_ARGUMENT, "predict set is empty");
  // The default predict_step: the module does not predict.
  struct NoPredict : hpu::Classifier {
    NoPredict() : Classifier(mlp(), adamw()) {}
    hpu::Predictions predict_step(hpu::Context &ctx, const hpu::Tensor &x) override {
      return LightningModule::predict_step(ctx, x);
    }
  } plain;
  hpu::InMemoryData data = odd_data(8);
  EXPECT_HPU_ERROR(t.predict(plain, data), HPU_ERROR_UNSUPPORTED, "does not override predict_step");
  EXPECT_HPU_ERROR(t.predict(model, data, dir / "missing.ckpt"), HPU_ERROR_NOT_FOUND, dir / "missing.ckpt");
}

TEST(PredictionsFile, CsvHasAHeaderAndRowsThatReadBackExactly) {
  TempDir dir;
  hpu::Predictions p;
  p.columns = {"pred", "prob,0", "x"};
  p.values = {3, 0.1f, 1e-30, 0, 1.0 / 3.0, -2.5, 7, NAN, 123456789};
  const std::string path = dir / "sub/p.csv";
  hpu::write_predictions(path, p);
  const std::vector<std::string> l = lines(slurp(path));
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0], "pred,\"prob,0\",x");
  EXPECT_EQ(l[1].substr(0, 2), "3,");
  EXPECT_EQ(l[3], "7,nan,123456789");
  EXPECT_EQ(l[1].substr(2, 4), "0.1,");  // the float 0.1f, in as few digits as read back as it
  // Every value reads back as itself: a float as that float, a double as that double.
  for (size_t r = 0; r < 3; ++r) {
    std::stringstream ss(l[r + 1]);
    std::string field;
    for (size_t k = 0; std::getline(ss, field, ','); ++k) {
      const double v = p.values[r * 3 + k];
      if (std::isnan(v)) EXPECT_TRUE(std::isnan(std::strtod(field.c_str(), nullptr)));
      else if (double(float(v)) == v) EXPECT_EQ(std::strtof(field.c_str(), nullptr), float(v)) << field;
      else EXPECT_EQ(std::strtod(field.c_str(), nullptr), v) << field;
    }
  }
}

TEST(PredictionsFile, NpyIsAFloat64ArrayOfTheRowsInOrder) {
  TempDir dir;
  hpu::Predictions p;
  p.columns = {"pred", "prob_0"};
  p.values = {3, 0.1f, 1, 1.0 / 3.0, 7, -2.5};
  hpu::write_predictions(dir / "p.npy", p);
  const hpu::NpyArray a = hpu::read_npy(dir / "p.npy");
  EXPECT_EQ(a.dtype, hpu::NpyType::f64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  ASSERT_EQ(a.data.size(), p.values.size() * sizeof(double));
  std::vector<double> back(p.values.size());
  std::memcpy(back.data(), a.data.data(), a.data.size());
  EXPECT_EQ(back, p.values);
}

TEST(PredictionsFile, AnUnsupportedExtensionIsNamed) {
  TempDir dir;
  hpu::Predictions p;
  p.columns = {"pred"};
  p.values = {1};
  EXPECT_HPU_ERROR(hpu::write_predictions(dir / "p.parquet", p), HPU_ERROR_UNSUPPORTED,
                   "the extension \".parquet\" is not a supported format (supported: .csv, .npy)");
  EXPECT_HPU_ERROR(hpu::write_predictions(dir / "preds", p), HPU_ERROR_UNSUPPORTED, "a name without an extension");
  EXPECT_HPU_ERROR(hpu::write_predictions(dir / "a.b/preds", p), HPU_ERROR_UNSUPPORTED, "a name without an extension");
  EXPECT_FALSE(file_exists(dir / "p.parquet"));
}

// hpu-train fit, then hpu-train predict with its best checkpoint; the same
// rows as hpuTrainerRunJob's "predict" command.
TEST(HpuTrainPredict, WritesTheCsvOfTheCheckpointsPredictions) {
  TempDir dir;
  spit(dir / "job.json", tiny_job(dir.path(), R"(, "test": false)"));
  const std::string exe = HPU_TRAIN_EXE;
  ASSERT_EQ(std::system((exe + " fit " + (dir / "job.json") + " >" + (dir / "fit.out") + " 2>&1").c_str()), 0)
      << slurp(dir / "fit.out");
  std::vector<std::string> ckpts = list_dir(dir / "checkpoints");
  ASSERT_EQ(ckpts.size(), 1u) << slurp(dir / "fit.out");
  const std::string ckpt = dir / ("checkpoints/" + ckpts[0]);
  const std::string cmd = exe + " predict " + (dir / "job.json") + " --ckpt-path " + ckpt + " --output " +
                          (dir / "out/p.csv") + " >" + (dir / "predict.out") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "predict.out");
  const std::vector<std::string> l = lines(slurp(dir / "out/p.csv"));
  ASSERT_EQ(l.size(), 1u + 3 * 32);  // limit_predict_batches 3 of 32
  EXPECT_EQ(l[0], "pred,prob_0,prob_1,prob_2,prob_3,prob_4,prob_5,prob_6,prob_7,prob_8,prob_9");
  EXPECT_NE(slurp(dir / "predict.out").find("predictions 96 rows to " + (dir / "out/p.csv")), std::string::npos);

  // The job's "predict" command through the C API: the same file.
  const std::string job = tiny_job(dir.path(), R"(, "command": "predict", "ckpt_path": ")" + ckpt +
                                                   R"(", "predict": {"output": ")" + (dir / "c.csv") + "\"}");
  char *result = nullptr;
  ASSERT_EQ(hpuTrainerRunJob(job.c_str(), "predict.json", &result), HPU_SUCCESS) << hpuGetLastErrorMessage();
  json_error_t err;
  json_t *r = json_loads(result, 0, &err);
  hpuFree(result);
  EXPECT_STREQ(json_string_value(json_object_get(r, "command")), "predict");
  json_t *pred = json_object_get(r, "predict");
  EXPECT_EQ(json_integer_value(json_object_get(pred, "rows")), 96);
  EXPECT_EQ(json_array_size(json_object_get(pred, "columns")), 11u);
  EXPECT_EQ(json_string_value(json_object_get(pred, "output")), dir / "c.csv");
  json_decref(r);
  EXPECT_EQ(slurp(dir / "c.csv"), slurp(dir / "out/p.csv"));
}

TEST(HpuTrainPredict, CommandsWithoutACheckpointOrWithABadOutputFailBeforeWorking) {
  TempDir dir;
  char *result = nullptr;
  EXPECT_EQ(hpuTrainerRunJob(tiny_job(dir.path(), R"(, "command": "predict")").c_str(), "j.json", &result),
            HPU_ERROR_CONFIG);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("the \"predict\" command needs ckpt_path"), std::string::npos)
      << hpuGetLastErrorMessage();
  EXPECT_EQ(hpuTrainerRunJob(tiny_job(dir.path(), R"(, "command": "test", "ckpt_path": "best")").c_str(), "j.json",
                             &result),
            HPU_ERROR_CONFIG);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("\"best\" and \"last\" refer to a fit"), std::string::npos)
      << hpuGetLastErrorMessage();
  const std::string job = tiny_job(dir.path(), R"(, "command": "predict", "ckpt_path": "x.ckpt", "predict": {"output": "p.json"})");
  EXPECT_EQ(hpuTrainerRunJob(job.c_str(), "j.json", &result), HPU_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("\".json\" is not a supported format"), std::string::npos)
      << hpuGetLastErrorMessage();
  EXPECT_TRUE(list_dir(dir.path()).empty());
  // "best" with no ModelCheckpoint to have saved one: before training.
  const std::string no_ckpt = replace_all(tiny_job(dir.path(), R"(, "test_ckpt_path": "best")"),
                                          R"("logger": false)", R"("logger": false, "enable_checkpointing": false)");
  EXPECT_EQ(hpuTrainerRunJob(no_ckpt.c_str(), "j.json", &result), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("test: ckpt_path is \"best\", but the trainer has no ModelCheckpoint"),
            std::string::npos)
      << hpuGetLastErrorMessage();
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

// The promise of hpu-train(1): the predictions file is the same whatever the
// layout: one device, or three processes (devices of one process:
// TrainerPredict.TheSameRowsWhateverTheLayout...).
TEST(HpuTrainPredict, TheFileIsTheSameOnOneDeviceAndOnThreeProcesses) {
  TempDir dir;
  std::string job = tiny_job(dir.path(), R"(, "test": false)");
  job.replace(job.find(R"("limit_predict_batches": 3, )"), 28, "");  // every sample
  spit(dir / "job.json", job);
  char *result = nullptr;
  ASSERT_EQ(hpuTrainerRunJob(job.c_str(), "job.json", &result), HPU_SUCCESS) << hpuGetLastErrorMessage();
  hpuFree(result);
  const std::vector<std::string> ckpts = list_dir(dir / "checkpoints");
  ASSERT_EQ(ckpts.size(), 1u);
  auto args = [&](const std::string &name, int devices) {
    return std::vector<std::string>{"predict", dir / "job.json", "--ckpt-path", dir / ("checkpoints/" + ckpts[0]),
                                    "--output", dir / (name + ".csv"), "--devices", std::to_string(devices)};
  };
  const auto limit = std::chrono::seconds(300);
  ASSERT_EQ(wait_for(spawn(args("one", 1), {}, dir / "one.out"), limit), 0) << slurp(dir / "one.out");
  const std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  std::vector<std::string> procs = args("procs", 1);
  procs.insert(procs.end(), {"--num-nodes", "3"});  // each process is a node, as in Lightning
  for (int r = 0; r < 3; ++r)
    pids.push_back(spawn(procs,
                         {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"WORLD_SIZE", "3"},
                          {"RANK", std::to_string(r)}, {"LOCAL_RANK", std::to_string(r)}},
                         dir / ("procs" + std::to_string(r) + ".out")));
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(wait_for(pids[size_t(r)], limit), 0) << slurp(dir / ("procs" + std::to_string(r) + ".out"));
  const std::string one = slurp(dir / "one.csv");
  EXPECT_EQ(lines(one).size(), 1u + 10000);
  EXPECT_EQ(slurp(dir / "procs.csv"), one);
}
