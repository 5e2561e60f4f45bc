// hpuTrainerRunJob, libhpu-trainer's C entry point: a job run in-process gives
// what hpu-train gives for it; failures are statuses with libhpu's last error.
#include <hpu/hpu.h>
#include <hpu/trainer.h>
#include <hpu/trainer/checkpoint.hpp>

#include "test_util.hpp"

#include <jansson.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

using trainer_test::list_dir;
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
  ASSERT_EQ(hpuTrainerRunJob(tiny_job(dir.path()).c_str(), "tiny.json", &result), HPU_SUCCESS)
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
  ASSERT_EQ(hpuTrainerRunJob(job.c_str(), nullptr, &result), HPU_SUCCESS) << hpuGetLastErrorMessage();
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
  EXPECT_EQ(
      hpuTrainerRunJob("{\"model\": {\"layers\": [{\"type\": \"relu\"}]},\n \"trainer\": {\"max_epochs\": \"two\"}}",
                       "bad.json", &result),
      HPU_ERROR_CONFIG);
  EXPECT_EQ(result, reinterpret_cast<char *>(0x1));
  std::string msg = hpuGetLastErrorMessage();
  EXPECT_EQ(msg.rfind("hpuTrainerRunJob: bad.json:2: trainer.max_epochs", 0), 0u) << msg;

  EXPECT_EQ(hpuTrainerRunJob("{", nullptr, &result), HPU_ERROR_CONFIG);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("<job>"), std::string::npos) << hpuGetLastErrorMessage();

  TempDir dir;
  std::string many = tiny_job(dir.path());
  many.replace(many.find("\"devices\": 1"), 12, "\"devices\": 99");
  EXPECT_EQ(hpuTrainerRunJob(many.c_str(), nullptr, &result), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("devices is 99, but only"), std::string::npos)
      << hpuGetLastErrorMessage();
}

TEST(TrainerCApi, NullArgumentsAreNamed) {
  char *result = nullptr;
  EXPECT_EQ(hpuTrainerRunJob("{}", nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerRunJob: result_json is NULL");
  EXPECT_EQ(hpuTrainerRunJob(nullptr, nullptr, &result), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerRunJob: job_json is NULL");
  EXPECT_EQ(result, nullptr);
}

TEST(TrainerCApi, CancelWithoutAJobIsInvalidUsage) {
  EXPECT_EQ(hpuTrainerCancelJob(), HPU_ERROR_INVALID_USAGE);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerCancelJob: no job is running in this process");
}

TEST(TrainerCApi, ACancelledJobStopsBeforeItsNextBatchAndLeavesWholeCheckpoints) {
  using clock = std::chrono::steady_clock;
  TempDir dir;
  // 1000 steps, a checkpoint after each: far longer than the test waits.
  std::string job = tiny_job(dir.path(), R"(, "callbacks": [{"type": "ModelCheckpoint", "every_n_train_steps": 1,
      "save_top_k": -1, "save_last": true}])");
  const std::string four = R"("limit_train_batches": 4)";
  job.replace(job.find(four), four.size(), R"("limit_train_batches": 1000)");
  const std::string ckpts = dir / "checkpoints";
  char *result = nullptr;
  hpuStatus_t status = HPU_SUCCESS;
  std::string message;
  std::thread worker([&] {
    status = hpuTrainerRunJob(job.c_str(), "cancel.json", &result);
    message = hpuGetLastErrorMessage();
  });
  const auto deadline = clock::now() + std::chrono::seconds(60);
  while (list_dir(ckpts).size() < 2 && clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_GE(list_dir(ckpts).size(), 2u) << "no checkpoint within 60 s";

  // One job at a time.
  char *other = nullptr;
  EXPECT_EQ(hpuTrainerRunJob(job.c_str(), nullptr, &other), HPU_ERROR_INVALID_USAGE);
  EXPECT_STREQ(hpuGetLastErrorMessage(), "hpuTrainerRunJob: another job is running in this process; one runs at a time");

  const auto asked = clock::now();
  ASSERT_EQ(hpuTrainerCancelJob(), HPU_SUCCESS) << hpuGetLastErrorMessage();
  EXPECT_EQ(hpuTrainerCancelJob(), HPU_SUCCESS);  // asking twice is harmless
  worker.join();
  const double stop_s = std::chrono::duration<double>(clock::now() - asked).count();
  EXPECT_LT(stop_s, 10.0);  // one step, with a wide margin for sanitizers and a loaded machine
  EXPECT_EQ(status, HPU_ERROR_ABORTED) << message;
  EXPECT_EQ(message.rfind("hpuTrainerRunJob: cancelled by hpuTrainerCancelJob before training batch ", 0), 0u)
      << message;
  EXPECT_EQ(result, nullptr);

  // Every file left is a whole checkpoint of a step the run finished.
  const std::vector<std::string> files = list_dir(ckpts);
  ASSERT_GE(files.size(), 2u);
  for (const std::string &f : files) {
    ASSERT_EQ(f.substr(f.size() - 5), ".ckpt") << f;
    hpu::Checkpoint c;
    ASSERT_NO_THROW(c = hpu::load_checkpoint_file(ckpts + "/" + f)) << f;
    EXPECT_FALSE(c.tensors.empty()) << f;
  }

  // Nothing is left running or cancelled: the next job runs to its end.
  EXPECT_EQ(hpuTrainerCancelJob(), HPU_ERROR_INVALID_USAGE);
  TempDir next;
  ASSERT_EQ(hpuTrainerRunJob(tiny_job(next.path(), R"(, "enable_checkpointing": false)").c_str(), nullptr, &result),
            HPU_SUCCESS)
      << hpuGetLastErrorMessage();
  hpuFree(result);
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
  ASSERT_EQ(hpuTrainerRunJob(job.c_str(), nullptr, &result), HPU_SUCCESS) << hpuGetLastErrorMessage();
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
