// The bar: the Fashion-MNIST MLP 784-1024-1024-10 reaches >= 88% test
// accuracy in 5 epochs, in both precisions, with 1 and 2 devices (hpu_ddp).
// Each run takes seconds to tens of seconds, so all four run in the default
// suite (label trainer only: not under the sanitizers).
#include <hpu/trainer.hpp>

#include "test_util.hpp"

using namespace trainer_test;

namespace {

void train_to_88(const char *precision, int devices) {
  TempDir dir;
  hpu::Job job = hpu::parse_job(slurp(std::string(HPU_SOURCE_DIR) + "/examples/fashion_mnist.json"), "job");
  hpu::TrainerOptions o;
  o.devices = devices;
  o.precision = precision;
  o.max_epochs = 5;
  o.seed = 42;
  o.default_root_dir = dir.path();
  o.enable_progress_bar = false;
  hpu::Trainer t(o);
  hpu::FashionMNIST data(256);
  hpu::Classifier model(hpu::Classifier::build(job.layers), job.optimizer, job.scheduler);
  t.fit(model, data);
  const double acc = t.test(model, data).at("test_acc");
  std::printf("%s, %d device(s): test_acc %.4f\n", precision, devices, acc);
  EXPECT_GE(acc, 0.88);
}

}  // namespace

TEST(FashionMNISTFull, Reaches88PercentIn5Epochs32True) { train_to_88("32-true", 1); }
TEST(FashionMNISTFull, Reaches88PercentIn5EpochsBf16Mixed) { train_to_88("bf16-mixed", 1); }
TEST(FashionMNISTFull, Reaches88PercentIn5Epochs32TrueOnTwoDevices) { train_to_88("32-true", 2); }
TEST(FashionMNISTFull, Reaches88PercentIn5EpochsBf16MixedOnTwoDevices) { train_to_88("bf16-mixed", 2); }
