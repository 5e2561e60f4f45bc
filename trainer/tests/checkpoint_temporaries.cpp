// A fit removes the temporary checkpoint files a killed run left in its
// checkpoint folder ("<name>.ckpt.tmp.XXXXXX"), and nothing else.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

#include <algorithm>

using namespace trainer_test;

namespace {

void fit_into(const std::string &root, const std::string &ckpts) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 2;
  o.max_epochs = 1;
  o.limit_train_batches = hpu::BatchCount{int64_t(2)};
  o.limit_val_batches = hpu::BatchCount{0};
  o.default_root_dir = root;
  o.enable_progress_bar = false;
  o.callbacks = {hpu::ModelCheckpoint({.dirpath = ckpts, .save_top_k = -1, .every_n_train_steps = 1})};
  hpu::Trainer t(o);
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
}

bool listed(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST(CheckpointTemporaries, TheNextFitRemovesStaleOnesAndKeepsEverythingElse) {
  TempDir dir;
  const std::string ckpts = dir / "ckpts";
  fit_into(dir / "first", ckpts);
  const std::vector<std::string> real = list_dir(ckpts);
  ASSERT_EQ(real.size(), 2u);
  std::map<std::string, std::string> bytes;
  for (const std::string &name : real) bytes[name] = slurp(ckpts + "/" + name);

  // What a run killed inside write_file_atomic leaves, and names that only
  // look alike.
  const std::string stale = real[0] + ".tmp.Ab3xYz", stale_last = "last.ckpt.tmp.000000";
  const std::vector<std::string> kept = {"notes.ckpt.tmp.txt", "model.ckpt.tmp.12345", "metrics.csv.tmp.Ab3xYz",
                                         "model.ckpt.tmp.Ab3xYz.bak"};
  for (const std::string &name : {stale, stale_last}) spit(ckpts + "/" + name, "torn");
  for (const std::string &name : kept) spit(ckpts + "/" + name, "user's");

  fit_into(dir / "second", ckpts);
  const std::vector<std::string> after = list_dir(ckpts);
  EXPECT_FALSE(listed(after, stale));
  EXPECT_FALSE(listed(after, stale_last));
  for (const std::string &name : kept) EXPECT_TRUE(listed(after, name)) << name;
  // The first run's checkpoints are untouched (the second saved beside them).
  for (const auto &[name, b] : bytes) {
    ASSERT_TRUE(listed(after, name)) << name;
    EXPECT_EQ(slurp(ckpts + "/" + name), b) << name;
    EXPECT_NO_THROW(hpu::load_checkpoint_file(ckpts + "/" + name)) << name;
  }
  EXPECT_EQ(after.size(), real.size() + kept.size() + 2);
}
