// profiler="hpu": one trace per fit in default_root_dir, and its summary.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "test_util.hpp"

using namespace trainer_test;

namespace {

hpu::TrainerOptions opts(const TempDir &dir) {
  hpu::TrainerOptions o;
  o.devices = 1;
  o.seed = 3;
  o.max_epochs = 1;
  o.limit_train_batches = 4;
  o.limit_val_batches = 1;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.logger = false;
  o.profiler = "hpu";
  return o;
}

}  // namespace

TEST(Profiler, EachFitWritesATraceAndItsSummary) {
  TempDir dir;
  hpu::Trainer t(opts(dir));
  hpu::InMemoryData data = blob_data();
  hpu::Classifier model(mlp(), adamw());
  t.fit(model, data);
  ASSERT_TRUE(file_exists(dir / "hpu_trace_fit0.json"));
  const std::string trace = slurp(dir / "hpu_trace_fit0.json");
  EXPECT_NE(trace.find("traceEvents"), std::string::npos) << trace.substr(0, 200);
  const std::string summary = slurp(dir / "hpu_trace_fit0.summary.txt");
  EXPECT_NE(summary.find("hpuLinearBackward"), std::string::npos) << summary;  // the step's ops
  EXPECT_NE(summary.find("hpuAdamwStep"), std::string::npos) << summary;
  t.fit(model, data);
  EXPECT_TRUE(file_exists(dir / "hpu_trace_fit1.json"));
  EXPECT_TRUE(file_exists(dir / "hpu_trace_fit1.summary.txt"));
}

TEST(Profiler, OffByDefaultAndBadValuesAreErrors) {
  TempDir dir;
  hpu::TrainerOptions o = opts(dir);
  o.profiler = "";
  {
    hpu::Trainer t(o);
    hpu::InMemoryData data = blob_data();
    hpu::Classifier model(mlp(), adamw());
    t.fit(model, data);
  }
  EXPECT_FALSE(file_exists(dir / "hpu_trace_fit0.json"));
  o.profiler = "pytorch";
  EXPECT_HPU_ERROR(hpu::Trainer{o}, HPU_ERROR_INVALID_ARGUMENT, "profiler is \"pytorch\"");
}
