#include <hpu/trainer.hpp>

#include "test_util.hpp"

using hpu::TrainerOptions;

namespace {

hpu::TrainerConfig resolve(const TrainerOptions &o, int visible = 8) { return hpu::resolve_options(o, visible); }

}  // namespace

TEST(Options, DefaultsFollowLightning) {
  TrainerOptions o;
  o.seed = 1;
  auto c = resolve(o, 8);
  EXPECT_EQ(c.accelerator, "hpu");
  EXPECT_EQ(c.devices, 8);  // "auto": every visible device
  EXPECT_EQ(c.strategy, "hpu_ddp");
  EXPECT_EQ(c.precision, "32-true");
  EXPECT_EQ(c.max_epochs, 1000);  // neither max_epochs nor max_steps
  EXPECT_EQ(c.max_steps, -1);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.default_root_dir, ".");
}

TEST(Options, StrategyAutoPicksSingleOrDdp) {
  TrainerOptions o;
  o.devices = 1;
  EXPECT_EQ(resolve(o).strategy, "hpu_single");
  o.devices = 2;
  EXPECT_EQ(resolve(o).strategy, "hpu_ddp");
  o.devices = 1;
  o.num_nodes = 2;
  auto c = resolve(o);
  EXPECT_EQ(c.strategy, "hpu_ddp");
  EXPECT_EQ(c.world_size, 2);
  o.num_nodes = 1;
  o.strategy = "hpu_ddp";
  EXPECT_EQ(resolve(o).strategy, "hpu_ddp");  // DDP on one device is allowed
  o.devices = 2;
  o.strategy = "hpu_single";
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "strategy is \"hpu_single\", but devices x num_nodes is 2");
  o.strategy = "ddp_spawn";
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT,
                   "strategy is \"ddp_spawn\"; accepted values: \"auto\", \"hpu_single\", \"hpu_ddp\"");
}

TEST(Options, PrecisionErrorListsTheAcceptedValues) {
  TrainerOptions o;
  o.precision = "bf16-mixed";
  EXPECT_EQ(resolve(o).precision, "bf16-mixed");
  for (const char *bad : {"16-mixed", "bf16", "64", ""}) {
    o.precision = bad;
    EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT,
                     "precision is \"" + std::string(bad) + "\"; accepted values: \"32-true\", \"bf16-mixed\"");
  }
}

TEST(Options, AcceleratorAndDevices) {
  TrainerOptions o;
  o.accelerator = "gpu";
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "accelerator is \"gpu\"; accepted values: \"hpu\", \"auto\"");
  o.accelerator = "hpu";
  o.devices = "3";
  EXPECT_EQ(resolve(o).devices, 3);
  o.devices = -1;
  EXPECT_EQ(resolve(o, 5).devices, 5);
  o.devices = 9;
  EXPECT_HPU_ERROR(resolve(o, 8), HPU_ERROR_INVALID_ARGUMENT, "devices is 9, but only 8 HPUs are visible");
  o.devices = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "devices is 0");
  o.devices = "two";
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "devices is \"two\"");
  o.devices = 1;
  o.num_nodes = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "num_nodes is 0");
}

TEST(Options, StepsEpochsAndLimits) {
  TrainerOptions o;
  o.max_steps = 100;
  EXPECT_EQ(resolve(o).max_epochs, -1);  // max_steps alone: no epoch limit
  o.max_epochs = 3;
  EXPECT_EQ(resolve(o).max_epochs, 3);
  o.max_epochs = -2;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "max_epochs is -2");
  o.max_epochs.reset();
  o.max_steps = -5;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "max_steps is -5");
  o.max_steps = -1;
  o.limit_train_batches = 1.5;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "limit_train_batches is 1.5");
  o.limit_train_batches = -3;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "limit_train_batches is -3");
  o.limit_train_batches = 1.0;
  o.val_check_interval = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "val_check_interval is 0");
  o.val_check_interval = 1.0;
  o.log_every_n_steps = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "log_every_n_steps is 0");
  o.log_every_n_steps = 1;
  o.accumulate_grad_batches = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "accumulate_grad_batches is 0");
  o.accumulate_grad_batches = 1;
  o.gradient_clip_val = -1;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "gradient_clip_val is -1");
  o.gradient_clip_val = 0;
  o.check_val_every_n_epoch = 0;
  EXPECT_HPU_ERROR(resolve(o), HPU_ERROR_INVALID_ARGUMENT, "check_val_every_n_epoch is 0");
}

TEST(Options, LimitBatchesFollowsLightningRounding) {
  EXPECT_EQ(hpu::limit_batches(1.0, 215), 215);
  EXPECT_EQ(hpu::limit_batches(0.5, 215), 107);
  EXPECT_EQ(hpu::limit_batches(0.001, 215), 1);  // a positive fraction keeps one batch
  EXPECT_EQ(hpu::limit_batches(0.0, 215), 0);
  EXPECT_EQ(hpu::limit_batches(10, 215), 10);
  EXPECT_EQ(hpu::limit_batches(1000, 215), 215);
}

TEST(Options, SeedIsKeptOrDrawn) {
  TrainerOptions o;
  o.seed = 1234;
  EXPECT_EQ(resolve(o).seed, 1234u);
  o.seed.reset();
  EXPECT_NE(resolve(o).seed, resolve(o).seed);  // drawn afresh (64 random bits)
}

TEST(Trainer, TheIssuesExampleCompilesAndResolves) {
  trainer_test::TempDir dir;
  hpu::Trainer trainer({.accelerator = "hpu", .devices = 2, .strategy = "auto", .precision = "bf16-mixed",
                        .max_epochs = 5, .default_root_dir = dir.path(),
                        .callbacks = {hpu::DeviceStatsMonitor{}}});
  EXPECT_EQ(trainer.config().strategy, "hpu_ddp");
  EXPECT_EQ(trainer.config().devices, 2);
  EXPECT_EQ(trainer.devices().size(), 2u);
  EXPECT_TRUE(trainer.is_global_zero());
  // Lightning adds a progress bar and a ModelCheckpoint unless disabled.
  EXPECT_NE(trainer.callback<hpu::DeviceStatsMonitor>(), nullptr);
  EXPECT_NE(trainer.callback<hpu::ProgressBar>(), nullptr);
  EXPECT_NE(trainer.callback<hpu::ModelCheckpoint>(), nullptr);
  ASSERT_EQ(trainer.loggers().size(), 1u);  // a CSVLogger by default
  EXPECT_EQ(trainer.log_dir(), dir.path() + "/lightning_logs/version_0");
}

TEST(Trainer, DisabledPartsAreNotAddedAndConflictsAreErrors) {
  TrainerOptions o;
  o.devices = 1;
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.logger = false;
  hpu::Trainer t(o);
  EXPECT_EQ(t.callback<hpu::ProgressBar>(), nullptr);
  EXPECT_EQ(t.callback<hpu::ModelCheckpoint>(), nullptr);
  EXPECT_TRUE(t.loggers().empty());
  o.callbacks = {hpu::ProgressBar{}};
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT, "enable_progress_bar is false");
  o.callbacks = {hpu::ModelCheckpoint{}};
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT, "enable_checkpointing is false");
  o.enable_checkpointing = true;
  o.callbacks = {hpu::ModelCheckpoint{}, hpu::ModelCheckpoint{}};
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT, "two callbacks have the state key");
}

TEST(Trainer, TooManyDevicesIsAnError) {
  TrainerOptions o;
  o.devices = hpu::device_count() + 1;
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT, "HPUs are visible");
}
