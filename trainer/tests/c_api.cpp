// hpuTrainerRunJob, libhpu-trainer's C entry point: a job run in-process gives
// what hpu-train gives for it; failures are statuses with libhpu's last error.
#include <hpu/hpu.h>
#include <hpu/trainer.h>

#include "test_util.hpp"

#include <jansson.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <vector>

using trainer_test::slurp;
using trainer_test::spit;
using trainer_test::TempDir;

namespace {

// A few batches of Fashion-MNIST through a small MLP on one device.
std::string tiny_job(const std::string &root, const std::string &extra_trainer = "") {
  return R"({"model": {"layers": [{"type": "flatten"},
      {"type": "linear", "in_features": 784, "out_features": 16}, {"type": "relu"},
      {"type": "linear", "in_features": 16, "out_features": 10}]},
    "data": {"batch_size": 32, "val_size": 64},
    "optimizer": {"name": "sgd", "lr": 0.05},
    "trainer": {"devices": 1, "max_epochs": 1, "seed": 11, "limit_train_batches": 4, "limit_val_batches": 2,
                "limit_test_batches": 2, "log_every_n_steps": 1, "enable_progress_bar": false,
                "logger": false, "default_root_dir": ")" +
         root + "\"" + extra_trainer + "}}";
}

struct JsonDoc {
  json_t *j = nullptr;
  explicit JsonDoc(const char *text) {
    json_error_t err;
    j = json_loads(text, 0, &err);
  }
  ~JsonDoc() { json_decref(j); }
  double number(const char *section, const char *key) const {
    return json_number_value(json_object_get(json_object_get(j, section), key));
  }
};

}  // namespace

TEST(TrainerCApi, RunsAJobAndReturnsItsMetrics) {
  TempDir dir;
  char *result = nullptr;
  ASSERT_EQ(hpuTrainerRunJob(&result, tiny_job(dir.path()).c_str(), "tiny.json"), HPU_SUCCESS)
      << hpuGetLastErrorMessage();
  ASSERT_NE(result, nullptr);
  JsonDoc doc(result);
  hpuFree(result);
  ASSERT_TRUE(json_is_object(doc.j));
  EXPECT_EQ(json_integer_value(json_object_get(doc.j, "global_step")), 4);
  EXPECT_EQ(json_integer_value(json_object_get(doc.j, "epoch")), 1);
  EXPECT_EQ(json_integer_value(json_object_get(doc.j, "world_size")), 1);
  EXPECT_EQ(json_integer_value(json_object_get(doc.j, "global_rank")), 0);
  for (const char *k : {"train_loss", "val_loss", "val_acc", "test_loss", "test_acc"})
    EXPECT_TRUE(json_is_real(json_object_get(json_object_get(doc.j, "metrics"), k))) << k;
  EXPECT_EQ(json_object_size(json_object_get(doc.j, "test")), 2u);
  EXPECT_EQ(doc.number("metrics", "test_acc"), doc.number("test", "test_acc"));
  const char *best = json_string_value(json_object_get(doc.j, "best_model_path"));
  ASSERT_NE(best, nullptr);
  EXPECT_TRUE(trainer_test::file_exists(best)) << best;
  EXPECT_EQ(std::string(json_string_value(json_object_get(doc.j, "log_dir"))), dir.path());
}

TEST(TrainerCApi, GivesTheTestMetricsHpuTrainPrints) {
  TempDir dir;
  const std::string job = tiny_job(dir.path(), R"(, "enable_checkpointing": false)");
  char *result = nullptr;
  ASSERT_EQ(hpuTrainerRunJob(&result, job.c_str(), nullptr), HPU_SUCCESS) << hpuGetLastErrorMessage();
  JsonDoc doc(result);
  hpuFree(result);

  spit(dir / "job.json", job);
  const std::string cmd = std::string(HPU_TRAIN_EXE) + " " + (dir / "job.json") + " >" + (dir / "out") + " 2>&1";
  const int st = std::system(cmd.c_str());
  const std::string out = slurp(dir / "out");
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  double acc = -1, loss = -1;
  ASSERT_EQ(std::sscanf(out.c_str() + out.find("test_acc "), "test_acc %lf", &acc), 1) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + out.find("test_loss "), "test_loss %lf", &loss), 1) << out;
  EXPECT_NEAR(doc.number("test", "test_acc"), acc, 5e-5);  // hpu-train prints 4 decimals
  EXPECT_NEAR(doc.number("test", "test_loss"), loss, 5e-5);
}

TEST(TrainerCApi, BadJobIsAStatusWithTheKeyAndLine) {
  char *result = reinterpret_cast<char *>(0x1);  // untouched on failure
  EXPECT_EQ(hpuTrainerRunJob(&result, "{\"model\": {\"layers\": [{\"type\": \"relu\"}]},\n \"trainer\": {\"max_epochs\": \"two\"}}",
                             "bad.json"),
            HPU_ERROR_CONFIG);
  EXPECT_EQ(result, reinterpret_cast<char *>(0x1));
  std::string msg = hpuGetLastErrorMessage();
  EXPECT_EQ(msg.rfind("hpuTrainerRunJob: bad.json:2: trainer.max_epochs", 0), 0u) << msg;

  EXPECT_EQ(hpuTrainerRunJob(&result, "{", nullptr), HPU_ERROR_CONFIG);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("<job>"), std::string::npos) << hpuGetLastErrorMessage();

  TempDir dir;
  EXPECT_EQ(hpuTrainerRunJob(&result, tiny_job(dir.path(), R"(, "devices": 99)").c_str(), nullptr),
            HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("devices is 99, but only"), std::string::npos)
      << hpuGetLastErrorMessage();
}

TEST(TrainerCApi, NullArgumentsAreNamed) {
  char *result = nullptr;
  EXPECT_EQ(hpuTrainerRunJob(nullptr, "{}", nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerRunJob: result_json is NULL");
  EXPECT_EQ(hpuTrainerRunJob(&result, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerRunJob: job_json is NULL");
  EXPECT_EQ(result, nullptr);
}

TEST(TrainerCApi, TrainerLinesGoThroughTheLogCallback) {
  struct Seen {
    std::vector<std::string> lines;
  } seen;
  auto cb = [](hpuLogLevel_t, const char *line, void *user) {
    if (std::strstr(line, " trainer: ")) static_cast<Seen *>(user)->lines.push_back(line);
  };
  ASSERT_EQ(hpuSetLogCallback(cb, &seen), HPU_SUCCESS);
  hpuLogLevel_t saved;
  ASSERT_EQ(hpuGetLogLevel(&saved), HPU_SUCCESS);
  ASSERT_EQ(hpuSetLogLevel(HPU_LOG_INFO), HPU_SUCCESS);
  TempDir dir;
  char *result = nullptr;
  // ModelCheckpoint monitoring val_acc, stopped by max_steps before any validation: a warning.
  const std::string job = tiny_job(dir.path(), R"(, "max_steps": 2, "callbacks": [{"type": "ModelCheckpoint", "monitor": "val_acc"}])");
  ASSERT_EQ(hpuTrainerRunJob(&result, job.c_str(), nullptr), HPU_SUCCESS) << hpuGetLastErrorMessage();
  hpuFree(result);
  hpuSetLogLevel(saved);
  hpuSetLogCallback(nullptr, nullptr);
  bool job_line = false, skipped = false;
  for (const auto &l : seen.lines) {
    job_line |= l.find(" INFO trainer: job: 1 device(s) per process, world size 1") != std::string::npos;
    skipped |= l.find(" WARN trainer: ModelCheckpoint(monitor=\"val_acc\") skipped a save") != std::string::npos;
  }
  EXPECT_TRUE(job_line && skipped) << ::testing::PrintToString(seen.lines);
}
