#include <hpu/trainer.hpp>

#include "test_util.hpp"

#include <jansson.h>

#include <cmath>

using namespace trainer_test;

TEST(CSVLogger, WritesLightningsLayoutAndRewritesTheHeaderForNewKeys) {
  TempDir dir;
  hpu::CSVLogger log(dir.path());
  EXPECT_EQ(log.log_dir(), dir.path() + "/lightning_logs/version_0");
  log.log_metrics({{"loss", 2.5}}, 0);
  log.log_metrics({{"loss", 1.25}}, 1);
  EXPECT_EQ(slurp(log.metrics_path()), "step,loss\n0,2.5\n");  // step 1's row is still open
  log.log_metrics({{"val_acc", 0.875}}, 1);                      // joins step 1's row
  log.log_metrics({{"loss", 1.0}}, 2);
  EXPECT_EQ(slurp(log.metrics_path()), "step,loss,val_acc\n0,2.5,\n1,1.25,0.875\n");
  log.log_metrics({{"val_acc", NAN}}, 3);
  log.finalize();
  EXPECT_EQ(slurp(log.metrics_path()), "step,loss,val_acc\n0,2.5,\n1,1.25,0.875\n2,1,\n3,,nan\n");
  log.log_hyperparams(R"({"lr": 0.001, "name": "a: b"})");
  EXPECT_EQ(slurp(log.log_dir() + "/hparams.yaml"), "lr: 0.001\nname: 'a: b'\n");
  // The next logger in the same folder takes the next version.
  hpu::CSVLogger second(dir.path());
  EXPECT_EQ(second.log_dir(), dir.path() + "/lightning_logs/version_1");
  hpu::CSVLogger fixed(dir.path(), "runs", 7);
  EXPECT_EQ(fixed.log_dir(), dir.path() + "/runs/version_7");
  EXPECT_HPU_ERROR(hpu::CSVLogger(dir.path(), "x", -1), HPU_ERROR_INVALID_ARGUMENT, "version is -1");
}

TEST(JsonLinesLogger, WritesOneObjectPerCall) {
  TempDir dir;
  hpu::JsonLinesLogger log(dir.path(), "jl");
  log.log_metrics({{"loss", 0.5}, {"lr-AdamW", 0.001}}, 10);
  log.log_metrics({{"loss", INFINITY}}, 11);
  const std::string text = slurp(log.metrics_path());
  size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  json_error_t err;
  json_t *a = json_loads(text.substr(0, nl).c_str(), 0, &err);
  ASSERT_TRUE(a) << err.text;
  EXPECT_EQ(json_integer_value(json_object_get(a, "step")), 10);
  EXPECT_DOUBLE_EQ(json_real_value(json_object_get(a, "loss")), 0.5);
  EXPECT_DOUBLE_EQ(json_real_value(json_object_get(a, "lr-AdamW")), 0.001);
  json_decref(a);
  json_t *b = json_loads(text.substr(nl + 1).c_str(), JSON_DISABLE_EOF_CHECK, &err);
  ASSERT_TRUE(b) << err.text;
  EXPECT_TRUE(json_is_null(json_object_get(b, "loss")));
  json_decref(b);
  log.log_hyperparams(R"({"batch_size": 256})");
  EXPECT_NE(slurp(log.log_dir() + "/hparams.json").find("\"batch_size\": 256"), std::string::npos);
}

TEST(Loggers, TheTrainerGivesItsLoggersOneVersionAndLogsOnRankZero) {
  TempDir dir;
  auto csv = std::make_shared<hpu::CSVLogger>(dir.path());
  auto jl = std::make_shared<hpu::JsonLinesLogger>(dir.path());
  hpu::TrainerOptions o;
  o.devices = 1;
  o.enable_progress_bar = false;
  o.logger = {csv, jl};
  hpu::Trainer t(o);
  EXPECT_EQ(csv->log_dir(), jl->log_dir());
  t.log_metrics({{"loss", 3.0}}, 0);
  EXPECT_DOUBLE_EQ(t.state().callback_metrics.at("loss"), 3.0);
  csv->finalize();
  EXPECT_EQ(slurp(csv->metrics_path()), "step,epoch,loss\n0,0,3\n");  // "epoch" added while fitting
  EXPECT_NE(slurp(jl->metrics_path()).find("\"loss\":3"), std::string::npos);
}
