#include <hpu/trainer.hpp>

#include "test_util.hpp"

#include <sys/wait.h>

using namespace trainer_test;

namespace {

const char *kJob = R"({
  "model": {"layers": [
    {"type": "flatten"},
    {"type": "linear", "in_features": 784, "out_features": 64},
    {"type": "gelu"},
    {"type": "dropout", "p": 0.1},
    {"type": "layernorm", "normalized_shape": 64},
    {"type": "linear", "in_features": 64, "out_features": 10}
  ]},
  "data": {"batch_size": 32},
  "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9},
  "scheduler": {"name": "step", "step_size": 2, "gamma": 0.5},
  "trainer": {
    "devices": 1,
    "precision": "32-true",
    "max_epochs": 2,
    "limit_train_batches": 0.25,
    "val_check_interval": 100,
    "callbacks": [{"type": "EarlyStopping", "monitor": "val_loss", "patience": 1}]
  }
})";

// The error parse_job gives for `text`, or "" when it parses.
std::string error_of(const std::string &text, const std::vector<hpu::Override> &ov = {}) {
  try {
    hpu::parse_job(text, "job.json", ov);
  } catch (const hpu::Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_CONFIG) << e.what();
    return e.what();
  }
  return "";
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST(Job, ParsesEveryPart) {
  hpu::Job j = hpu::parse_job(kJob, "job.json");
  ASSERT_EQ(j.layers.size(), 6u);
  EXPECT_EQ(j.layers[1].out_features, 64);
  EXPECT_DOUBLE_EQ(j.layers[3].p, 0.1);
  EXPECT_EQ(j.data.batch_size, 32);
  EXPECT_EQ(j.data.root, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(j.optimizer.name, "sgd");
  EXPECT_DOUBLE_EQ(j.optimizer.momentum, 0.9);
  EXPECT_EQ(j.scheduler.name, "step");
  EXPECT_EQ(j.trainer.devices.count, 1);
  EXPECT_EQ(*j.trainer.max_epochs, 2);
  EXPECT_DOUBLE_EQ(*j.trainer.limit_train_batches.fraction, 0.25);
  EXPECT_EQ(j.trainer.val_check_interval.batches, 100);
  ASSERT_EQ(j.trainer.callbacks.size(), 1u);
  EXPECT_EQ(j.trainer.callbacks[0]->state_key(), "EarlyStopping{monitor=val_loss,mode=min}");
}

TEST(Job, TheExampleJobIsValid) {
  hpu::Job j = hpu::load_job(std::string(HPU_SOURCE_DIR) + "/examples/fashion_mnist.json");
  EXPECT_EQ(j.layers.size(), 6u);
  EXPECT_EQ(j.trainer.precision, "bf16-mixed");
  EXPECT_EQ(j.trainer.devices.count, 2);
  EXPECT_EQ(j.trainer.callbacks.size(), 3u);
  // --check output parses back to the same job.
  hpu::Job again = hpu::parse_job(hpu::job_to_json(j), "again");
  EXPECT_EQ(hpu::job_to_json(again), hpu::job_to_json(j));
}

TEST(Job, ErrorsNameTheKeyAndTheLine) {
  EXPECT_EQ(error_of(replace(kJob, "\"max_epochs\": 2", "\"max_epoch\": 2")),
            "job.json:16: trainer.max_epoch: unknown key; known keys: accelerator, accumulate_grad_batches, callbacks, "
            "check_val_every_n_epoch, default_root_dir, devices, enable_checkpointing, enable_model_summary, "
            "enable_progress_bar, fast_dev_run, gradient_clip_val, limit_predict_batches, limit_test_batches, limit_train_batches, "
            "limit_val_batches, log_every_n_steps, logger, max_epochs, max_steps, max_time, min_epochs, num_nodes, "
            "num_sanity_val_steps, precision, profiler, seed, strategy, val_check_interval");
  EXPECT_NE(error_of(replace(kJob, "\"precision\": \"32-true\"", "\"precision\": \"16-mixed\"")).find(
                "job.json:15: trainer.precision: precision is \"16-mixed\"; accepted values: \"32-true\", \"bf16-mixed\""),
            std::string::npos);
  EXPECT_EQ(error_of(replace(kJob, "\"batch_size\": 32", "\"batch_size\": \"32\"")),
            "job.json:10: data.batch_size: expected an integer, found a string");
  EXPECT_EQ(error_of(replace(kJob, "\"p\": 0.1", "\"p\": 1.5")), "job.json:6: model.layers[3].p: 1.5 is out of range [0, 0.999999]");
  EXPECT_EQ(error_of(replace(kJob, "\"in_features\": 64", "\"in_features\": 32")),
            "job.json:8: model.layers[5].in_features: 32, but the previous layer gives 64 features");
  EXPECT_EQ(error_of(replace(kJob, "\"out_features\": 10", "\"out_features\": 11")),
            "job.json:8: model.layers[5]: the model ends with 11 features; Fashion-MNIST's cross-entropy needs 10 class scores");
  EXPECT_EQ(error_of(replace(kJob, "\"gelu\"", "\"swish\"")),
            "job.json:5: model.layers[2].type: \"swish\" is not one of \"linear\", \"relu\", \"gelu\", \"tanh\", "
            "\"dropout\", \"layernorm\", \"embedding\", \"flatten\", \"residual\"");
  EXPECT_EQ(error_of(replace(kJob, "\"patience\": 1", "\"patience\": -1")),
            "job.json:19: trainer.callbacks[0].patience: -1 is out of range [0, 2147483647]");
  EXPECT_EQ(error_of(replace(kJob, "\"monitor\": \"val_loss\", ", "")),
            "job.json:19: trainer.callbacks[0]: EarlyStopping monitor is empty; name a logged metric");
  EXPECT_EQ(error_of(replace(kJob, "\"devices\": 1", "\"devices\": [1]")),
            "job.json:14: trainer.devices: expected an integer or \"auto\", found an array");
  EXPECT_EQ(error_of(replace(kJob, "\"momentum\": 0.9}", "\"momentum\": 0.9,}")).substr(0, 30), "job.json:11: JSON syntax error");
  EXPECT_EQ(error_of("[]"), "job.json: (document): expected an object, found an array");
  EXPECT_EQ(error_of("{}"), "job.json: (document): missing key \"model\"");
}

TEST(Job, CommandLineOverridesWinAndNameTheFlag) {
  const char *argv[] = {"hpu-train", "job.json", "--devices", "2", "--precision=bf16-mixed", "--max-epochs", "7",
                        "--lr", "0.5", "--no-progress-bar", "--check"};
  hpu::Cli cli = hpu::parse_cli(11, argv);
  EXPECT_EQ(cli.config, "job.json");
  EXPECT_TRUE(cli.check);
  hpu::Job j = hpu::parse_job(kJob, "job.json", cli.overrides);
  EXPECT_EQ(j.trainer.devices.count, 2);
  EXPECT_EQ(j.trainer.precision, "bf16-mixed");
  EXPECT_EQ(*j.trainer.max_epochs, 7);
  EXPECT_DOUBLE_EQ(j.optimizer.lr, 0.5);
  EXPECT_FALSE(j.trainer.enable_progress_bar);
  EXPECT_EQ(error_of(kJob, {{"trainer.precision", "fp8", "--precision"}}),
            "command line --precision: trainer.precision: precision is \"fp8\"; accepted values: \"32-true\", "
            "\"bf16-mixed\"");
  EXPECT_EQ(error_of(kJob, {{"trainer.max_epochs", "many", "--max-epochs"}}),
            "command line --max-epochs: trainer.max_epochs: expected an integer, found a string");
  EXPECT_EQ(hpu::parse_job(kJob, "j", {{"trainer.devices", "auto", "--devices"}}).trainer.devices.text, "auto");
}

TEST(Job, BadCommandLinesAreErrors) {
  const char *unknown[] = {"hpu-train", "--epochs", "3"};
  EXPECT_HPU_ERROR(hpu::parse_cli(3, unknown), HPU_ERROR_INVALID_ARGUMENT, "unknown option --epochs");
  const char *missing[] = {"hpu-train", "--devices"};
  EXPECT_HPU_ERROR(hpu::parse_cli(2, missing), HPU_ERROR_INVALID_ARGUMENT, "option --devices needs a value");
  const char *two[] = {"hpu-train", "a.json", "b.json"};
  EXPECT_HPU_ERROR(hpu::parse_cli(3, two), HPU_ERROR_INVALID_ARGUMENT, "more than one job file");
  EXPECT_HPU_ERROR(hpu::load_job("/nonexistent/job.json"), HPU_ERROR_NOT_FOUND, "/nonexistent/job.json");
}

namespace {

struct RunResult {
  int code;
  std::string out;
};

RunResult run(const std::string &args) {
  TempDir dir;
  std::string cmd = std::string(HPU_TRAIN_EXE) + " " + args + " >" + (dir / "out") + " 2>&1";
  int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir / "out")};
}

}  // namespace

TEST(HpuTrain, CheckValidatesAndPrintsTheResolvedJob) {
  RunResult r = run("--check --devices 1 --precision 32-true");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("strategy=hpu_single precision=32-true"), std::string::npos) << r.out;
  r = run("--check");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("world_size=2 strategy=hpu_ddp precision=bf16-mixed"), std::string::npos) << r.out;
  r = run("--check --precision 16-mixed");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("hpu-train: command line --precision: trainer.precision: precision is \"16-mixed\""),
            std::string::npos)
      << r.out;
  r = run("--check --devices 99");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("devices is 99, but only"), std::string::npos) << r.out;
  r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--max-epochs"), std::string::npos);
  r = run("--bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown option --bogus"), std::string::npos) << r.out;
}
