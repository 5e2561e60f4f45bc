// Ctrl-C on hpu-train: it stops before the next batch, its loggers write every
// row they were given, no temporary checkpoint remains, and it exits 130.
#include <hpu/trainer.hpp>

#include <jansson.h>

#include "csv_util.hpp"
#include "launch_util.hpp"
#include "test_util.hpp"

#include <sstream>

using namespace trainer_test;

namespace {

// Many small steps (far more than the test waits for), each logged by both
// file loggers and checkpointed.
const char *const kLongJob = R"({
  "model": {"layers": [{"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 10}]},
  "data": {"batch_size": 16, "val_size": 64},
  "trainer": {"devices": 1, "max_epochs": 1000, "seed": 4, "log_every_n_steps": 1, "limit_val_batches": 0,
              "enable_progress_bar": false, "logger": ["csv", "jsonl"], "default_root_dir": "ROOT",
              "callbacks": [{"type": "ModelCheckpoint", "every_n_train_steps": 1, "save_top_k": 1,
                             "save_last": true}]},
  "test": false
})";

size_t count_lines(const std::string &path) {
  const std::string text = slurp(path);
  return size_t(std::count(text.begin(), text.end(), '\n'));
}

// metrics.jsonl's values by step (several lines may share a step).
std::map<int64_t, std::map<std::string, double>> jsonl_rows(const std::string &text) {
  std::map<int64_t, std::map<std::string, double>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json_error_t err;
    json_t *o = json_loads(line.c_str(), 0, &err);
    if (!o) {
      ADD_FAILURE() << "metrics.jsonl line \"" << line << "\": " << err.text;
      continue;
    }
    const int64_t step = json_integer_value(json_object_get(o, "step"));
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) if (std::string(k) != "step") rows[step][k] = json_number_value(v);
    json_decref(o);
  }
  return rows;
}

}  // namespace

TEST(Interrupt, SigintStopsAtABatchBoundaryFinalizesTheLogsAndExits130) {
  TempDir dir;
  std::string job = kLongJob;
  job.replace(job.find("ROOT"), 4, dir / "root");
  spit(dir / "long.json", job);
  const std::string logs = dir / "root/lightning_logs/version_0";
  const pid_t pid = spawn({dir / "long.json"}, {}, dir / "out");
  // Interrupt once it has logged a few steps.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(logs + "/metrics.jsonl") < 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(count_lines(logs + "/metrics.jsonl"), 5u) << slurp(dir / "out");
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  // One step and one checkpoint to finish; the limit is for a loaded machine.
  EXPECT_EQ(wait_for(pid, std::chrono::seconds(30)), 130) << slurp(dir / "out");
  const std::string out = slurp(dir / "out");
  EXPECT_NE(out.find("hpu-train: interrupted; stopping before the next batch"), std::string::npos) << out;
  EXPECT_NE(out.find("hpu-train: interrupted: cancelled by hpuTrainerCancelJob before training batch"),
            std::string::npos)
      << out;

  // The CSV logger wrote every step the JSON-lines logger did (its last row is
  // written at finalize), with the same values, and parses whole.
  const auto csv = csv_rows(slurp(logs + "/metrics.csv"));
  const auto jsonl = jsonl_rows(slurp(logs + "/metrics.jsonl"));
  ASSERT_GE(jsonl.size(), 5u);
  EXPECT_EQ(csv.size(), jsonl.size());
  for (const auto &[step, values] : jsonl) {
    ASSERT_EQ(csv.count(step), 1u) << "step " << step << " is missing from metrics.csv";
    for (const auto &[k, v] : values) {
      ASSERT_EQ(csv.at(step).count(k), 1u) << "step " << step << ": " << k;
      EXPECT_EQ(csv.at(step).at(k), v) << "step " << step << ": " << k;
    }
  }
  // Only whole checkpoints remain.
  const std::string ckpts = logs + "/checkpoints";
  const std::vector<std::string> files = list_dir(ckpts);
  ASSERT_FALSE(files.empty());
  for (const std::string &f : files) {
    EXPECT_EQ(f.find(".tmp."), std::string::npos) << f;
    EXPECT_NO_THROW(hpu::load_checkpoint_file(ckpts + "/" + f)) << f;
  }
}
