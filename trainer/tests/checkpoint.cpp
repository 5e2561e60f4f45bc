#include <hpu/trainer.hpp>

#include "test_util.hpp"

#include <dirent.h>

using namespace trainer_test;

namespace {

hpu::Checkpoint sample() {
  hpu::Checkpoint c;
  c.meta = R"({"epoch":3,"global_step":120})";
  hpu::CheckpointTensor w;
  w.dtype = HPU_FLOAT32;
  w.shape = {2, 3};
  for (int i = 0; i < 24; ++i) w.bytes.push_back(uint8_t(i * 7));
  c.tensors["model/w"] = w;
  hpu::CheckpointTensor s;
  s.dtype = HPU_INT64;
  s.shape = {};
  s.bytes.assign(8, 1);
  c.tensors["optimizer/step"] = s;
  hpu::CheckpointTensor e;
  e.dtype = HPU_BFLOAT16;
  e.shape = {0, 4};
  c.tensors["empty"] = e;
  return c;
}

size_t files_in(const std::string &dir) {
  size_t n = 0;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

}  // namespace

TEST(Checkpoint, RoundTrips) {
  TempDir dir;
  hpu::save_checkpoint_file(dir / "sub/a.ckpt", sample());
  hpu::Checkpoint b = hpu::load_checkpoint_file(dir / "sub/a.ckpt");
  EXPECT_EQ(b.meta, sample().meta);
  ASSERT_EQ(b.tensors.size(), 3u);
  for (const auto &[name, t] : sample().tensors) {
    EXPECT_EQ(b.tensors[name].dtype, t.dtype) << name;
    EXPECT_EQ(b.tensors[name].shape, t.shape) << name;
    EXPECT_EQ(b.tensors[name].bytes, t.bytes) << name;
  }
}

TEST(Checkpoint, EveryTruncationAndEveryFlippedByteIsRejected) {
  TempDir dir;
  hpu::save_checkpoint_file(dir / "a.ckpt", sample());
  const std::string full = slurp(dir / "a.ckpt");
  for (size_t n = 0; n < full.size(); ++n) {
    spit(dir / "cut.ckpt", full.substr(0, n));
    try {
      hpu::load_checkpoint_file(dir / "cut.ckpt");
      ADD_FAILURE() << "accepted a checkpoint cut at " << n;
    } catch (const hpu::Error &e) {
      EXPECT_EQ(e.status(), HPU_ERROR_IO) << e.what();
    }
  }
  for (size_t i = 0; i < full.size(); ++i) {
    std::string bad = full;
    bad[i] = char(bad[i] ^ 0x10);
    spit(dir / "bad.ckpt", bad);
    try {
      hpu::load_checkpoint_file(dir / "bad.ckpt");
      ADD_FAILURE() << "accepted a checkpoint with byte " << i << " flipped";
    } catch (const hpu::Error &e) {
      // A flipped version field reads as a newer format; everything else is corrupt.
      EXPECT_TRUE(e.status() == HPU_ERROR_IO || e.status() == HPU_ERROR_UNSUPPORTED) << e.what();
    }
  }
  spit(dir / "long.ckpt", full + "x");
  EXPECT_HPU_ERROR(hpu::load_checkpoint_file(dir / "long.ckpt"), HPU_ERROR_IO, "truncated or padded");
}

TEST(Checkpoint, NewerFormatsAndForeignFilesAreNamed) {
  TempDir dir;
  hpu::save_checkpoint_file(dir / "a.ckpt", sample());
  std::string s = slurp(dir / "a.ckpt");
  s[8] = char(hpu::kCheckpointFormatVersion + 1);
  spit(dir / "new.ckpt", s);
  EXPECT_HPU_ERROR(hpu::load_checkpoint_file(dir / "new.ckpt"), HPU_ERROR_UNSUPPORTED, "format version 2");
  spit(dir / "foreign.ckpt", "PK\x03\x04 a zip file, as torch.save writes");
  EXPECT_HPU_ERROR(hpu::load_checkpoint_file(dir / "foreign.ckpt"), HPU_ERROR_IO, "not an hpu checkpoint");
  EXPECT_HPU_ERROR(hpu::load_checkpoint_file(dir / "none.ckpt"), HPU_ERROR_NOT_FOUND, "none.ckpt");
}

TEST(Checkpoint, SaveRejectsInconsistentTensorsAndIsAtomic) {
  TempDir dir;
  hpu::Checkpoint c = sample();
  c.tensors["model/w"].bytes.pop_back();
  EXPECT_HPU_ERROR(hpu::save_checkpoint_file(dir / "a.ckpt", c), HPU_ERROR_INVALID_ARGUMENT, "model/w has 23 bytes");
  c = sample();
  c.meta = "[1]";
  EXPECT_HPU_ERROR(hpu::save_checkpoint_file(dir / "a.ckpt", c), HPU_ERROR_INVALID_ARGUMENT, "not a JSON object");
  EXPECT_FALSE(file_exists(dir / "a.ckpt"));
  // Overwriting replaces the file whole and leaves no temporary behind.
  hpu::save_checkpoint_file(dir / "a.ckpt", sample());
  c = sample();
  c.meta = R"({"epoch":4})";
  hpu::save_checkpoint_file(dir / "a.ckpt", c);
  EXPECT_EQ(hpu::load_checkpoint_file(dir / "a.ckpt").meta, c.meta);
  EXPECT_EQ(files_in(dir.path()), 1u);
  EXPECT_HPU_ERROR(hpu::save_checkpoint_file("/proc/nope/a.ckpt", sample()), HPU_ERROR_IO, "/proc/nope");
}

TEST(Checkpoint, TheTrainerSavesAndRestoresItsStateAndCallbacks) {
  TempDir dir;
  auto stop = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "val_loss", .patience = 5});
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 9;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.callbacks = {stop};
  hpu::Trainer t(o);
  t.state().current_epoch = 4;
  t.state().global_step = 77;
  t.state().callback_metrics["val_loss"] = 0.5;
  stop->on_validation_end(t);
  t.state().callback_metrics["val_loss"] = 0.7;
  stop->on_validation_end(t);
  EXPECT_EQ(stop->wait_count(), 1);
  t.save_checkpoint(dir / "t.ckpt");

  auto stop2 = std::make_shared<hpu::EarlyStopping>(hpu::EarlyStoppingOptions{.monitor = "val_loss", .patience = 5});
  o.callbacks = {stop2};
  hpu::Trainer u(o);
  u.restore_checkpoint(hpu::load_checkpoint_file(dir / "t.ckpt"));
  EXPECT_EQ(u.current_epoch(), 4);
  EXPECT_EQ(u.global_step(), 77);
  EXPECT_EQ(stop2->wait_count(), 1);
  EXPECT_DOUBLE_EQ(*stop2->best_score(), 0.5);
}
