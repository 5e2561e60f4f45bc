// The dtype each op runs in under autocast, for each list; backward in the
// forward's dtype; lists replaced from code and (in a child) from files.
#include <unistd.h>

#include <thread>

#include "child.hpp"
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class OpsAutocast : public OpsTest {
 protected:
  void SetUp() override {
    OpsTest::SetUp();
    ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  }
  void TearDown() override {
    EXPECT_HPU_OK(hpuAutocastPop());
    OpsTest::TearDown();
  }
  // The type of an op's output.
  hpuDataType_t ran(hpuStatus_t status, hpuTensor_t *out) {
    EXPECT_HPU_OK(status);
    return *out ? dtype_of(keep(*out)) : static_cast<hpuDataType_t>(-1);
  }
};

}  // namespace

TEST_F(OpsAutocast, LowerPrecisionListRunsInBf16) {
  hpuTensor_t a = T(HPU_FLOAT32, {4, 4}, random_values(16, 1)), b3 = T(HPU_FLOAT32, {2, 4, 4}, random_values(32, 2));
  hpuTensor_t v = T(HPU_FLOAT32, {4}, random_values(4, 3));
  hpuTensor_t o[12] = {};
  EXPECT_EQ(ran(hpuMm(nullptr, a, a, &o[0]), &o[0]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuBmm(nullptr, b3, b3, &o[1]), &o[1]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuAddmm(nullptr, v, a, a, 1, 1, &o[2]), &o[2]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuMatmul(nullptr, b3, a, &o[3]), &o[3]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuLinear(nullptr, a, a, v, &o[4]), &o[4]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuSoftmax(nullptr, a, -1, &o[5]), &o[5]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuLogSoftmax(nullptr, a, -1, &o[6]), &o[6]), HPU_BFLOAT16);
  hpuTensor_t mean = nullptr, rstd = nullptr;
  EXPECT_EQ(ran(hpuLayerNorm(nullptr, a, v, v, nullptr, &o[7], &mean, &rstd), &o[7]), HPU_BFLOAT16);
  EXPECT_EQ(dtype_of(keep(mean)), HPU_FLOAT32);
  keep(rstd);
  EXPECT_EQ(ran(hpuDropout(nullptr, a, 0.1, 1, &o[8], nullptr), &o[8]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuMean(nullptr, a, nullptr, 0, 0, &o[9]), &o[9]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuMul(nullptr, a, a, &o[10]), &o[10]), HPU_BFLOAT16);  // lower beats promote
  // The result is the bf16 computation: inputs rounded to bf16 first.
  std::vector<double> av = read(a), want(16, 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 4; ++k) want[i * 4 + j] += round_to(HPU_BFLOAT16, av[i * 4 + k]) * round_to(HPU_BFLOAT16, av[k * 4 + j]);
  EXPECT_TRUE(near(read(o[0]), round_all(HPU_BFLOAT16, want), 1e-6));
}

TEST_F(OpsAutocast, Fp32ListRunsInF32) {
  hpuTensor_t x = T(HPU_BFLOAT16, {3, 4}, random_values(12, 4, 0.5, 1.2));
  hpuTensor_t t = T(HPU_INT64, {3}, {0, 1, 3}), idx = T(HPU_INT32, {2}, {0, 2});
  hpuTensor_t o[8] = {};
  EXPECT_EQ(ran(hpuExp(nullptr, x, &o[0]), &o[0]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuLog(nullptr, x, &o[1]), &o[1]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuTan(nullptr, x, &o[2]), &o[2]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuDiv(nullptr, x, x, &o[3]), &o[3]), HPU_FLOAT32);  // fp32 beats promote
  EXPECT_EQ(ran(hpuNllLoss(nullptr, x, t, nullptr, nullptr, &o[4]), &o[4]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuCrossEntropyLoss(nullptr, x, t, nullptr, nullptr, &o[5]), &o[5]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuEmbedding(nullptr, x, idx, -1, &o[6]), &o[6]), HPU_FLOAT32);
}

TEST_F(OpsAutocast, PromoteListAndUnlistedOps) {
  hpuTensor_t h = T(HPU_BFLOAT16, {2, 3}, random_values(6, 5)), f = T(HPU_FLOAT32, {2, 3}, random_values(6, 6));
  hpuTensor_t o[9] = {};
  EXPECT_EQ(ran(hpuAdd(nullptr, h, f, &o[0]), &o[0]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuSub(nullptr, h, h, &o[1]), &o[1]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuRelu(nullptr, f, &o[2]), &o[2]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuGelu(nullptr, h, &o[3]), &o[3]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuTanh(nullptr, f, &o[4]), &o[4]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuSigmoid(nullptr, h, &o[5]), &o[5]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuSum(nullptr, f, nullptr, 0, 0, &o[6]), &o[6]), HPU_FLOAT32);
  EXPECT_EQ(ran(hpuCast(nullptr, f, HPU_FLOAT64, &o[7]), &o[7]), HPU_FLOAT64);  // explicit
  hpuTensor_t d = T(HPU_FLOAT64, {2, 3}, random_values(6, 7));
  EXPECT_EQ(ran(hpuExp(nullptr, d, &o[8]), &o[8]), HPU_FLOAT64);  // f64 is never cast
}

TEST_F(OpsAutocast, DisabledRegionF16RegionAndOtherThreads) {
  hpuTensor_t a = T(HPU_FLOAT32, {4, 4}, random_values(16, 8));
  hpuTensor_t o[3] = {};
  ASSERT_HPU_OK(hpuAutocastPush(0, HPU_BFLOAT16));
  EXPECT_EQ(ran(hpuMm(nullptr, a, a, &o[0]), &o[0]), HPU_FLOAT32);
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_FLOAT16));
  EXPECT_EQ(ran(hpuMm(nullptr, a, a, &o[1]), &o[1]), HPU_FLOAT16);
  ASSERT_HPU_OK(hpuAutocastPop());
  ASSERT_HPU_OK(hpuAutocastPop());
  hpuDataType_t other = HPU_INT8;
  std::thread t([&] {  // no region on this thread: as given
    hpuTensor_t y = nullptr;
    if (hpuMm(nullptr, a, a, &y) == HPU_SUCCESS) other = dtype_of(y);
    hpuTensorRelease(y);
  });
  t.join();
  EXPECT_EQ(other, HPU_FLOAT32);
  EXPECT_EQ(ran(hpuMm(nullptr, a, a, &o[2]), &o[2]), HPU_BFLOAT16);
}

TEST_F(OpsAutocast, BackwardRunsInTheForwardsTypeAndReturnsInputTypes) {
  const int rows = 8, in = 16, outf = 4;
  std::vector<double> xv = random_values(rows * in, 9), wv = random_values(outf * in, 10);
  hpuTensor_t x = T(HPU_FLOAT32, {rows, in}, xv), w = T(HPU_FLOAT32, {outf, in}, wv), y = nullptr;
  ASSERT_HPU_OK(hpuLinear(nullptr, x, w, nullptr, &y));
  keep(y);
  ASSERT_EQ(dtype_of(y), HPU_BFLOAT16);
  ASSERT_HPU_OK(hpuAutocastPush(0, HPU_BFLOAT16));  // backward outside autocast, as Lightning runs it
  std::vector<double> gv = round_all(HPU_BFLOAT16, random_values(rows * outf, 11));
  hpuTensor_t gx = nullptr, gw = nullptr;
  ASSERT_HPU_OK(hpuLinearBackward(nullptr, T(HPU_BFLOAT16, {rows, outf}, gv), x, w, &gx, &gw, nullptr));
  keep(gx), keep(gw);
  ASSERT_HPU_OK(hpuAutocastPop());
  EXPECT_EQ(dtype_of(gx), HPU_FLOAT32);
  EXPECT_EQ(dtype_of(gw), HPU_FLOAT32);
  // dw = dy^T x with x rounded to bf16 (the forward's type), summed in f32.
  std::vector<double> want(outf * in, 0), unrounded(outf * in, 0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < outf; ++o)
      for (int i = 0; i < in; ++i) {
        want[o * in + i] += gv[r * outf + o] * round_to(HPU_BFLOAT16, xv[r * in + i]);
        unrounded[o * in + i] += gv[r * outf + o] * static_cast<float>(xv[r * in + i]);
      }
  EXPECT_TRUE(near(read(gw), want, 1e-5));
  EXPECT_FALSE(near(read(gw), unrounded, 1e-5));  // it did not run in f32
}

TEST_F(OpsAutocast, SetOpListChangesLaterOps) {
  hpuTensor_t a = T(HPU_FLOAT32, {2, 2}, random_values(4, 12));
  hpuTensor_t o[2] = {};
  const char *lower[] = {"relu"};
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_LOWER_PRECISION, lower, 1));
  EXPECT_EQ(ran(hpuRelu(nullptr, a, &o[0]), &o[0]), HPU_BFLOAT16);
  EXPECT_EQ(ran(hpuMm(nullptr, a, a, &o[1]), &o[1]), HPU_FLOAT32);
}

TEST(OpsAutocastEnv, SwappedListsRunMmInF32AndTanInBf16) {
  // lightning-habana's CI check, with the two example files swapped.
  char lower[] = "/tmp/hpu-ops-lower-XXXXXX", fp32[] = "/tmp/hpu-ops-fp32-XXXXXX";
  int fl = mkstemp(lower), ff = mkstemp(fp32);
  ASSERT_GE(fl, 0);
  ASSERT_GE(ff, 0);
  const char fp32_ops[] = "cross_entropy\ntan\n", bf16_ops[] = "linear\nrelu\nmm\n";
  ASSERT_EQ(write(fl, fp32_ops, sizeof fp32_ops - 1), static_cast<ssize_t>(sizeof fp32_ops - 1));
  ASSERT_EQ(write(ff, bf16_ops, sizeof bf16_ops - 1), static_cast<ssize_t>(sizeof bf16_ops - 1));
  close(fl), close(ff);
  auto r = hpu_test::run_child({{"LOWER_LIST", lower}, {"FP32_LIST", fp32}}, [] {
    hpuDevice_t dev;
    if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS) return 1;
    hpuTensor_t a = make(dev, HPU_FLOAT32, {2, 2}, {1, 2, 3, 4}), h = make(dev, HPU_BFLOAT16, {2, 2}, {1, 2, 3, 4});
    hpuTensor_t mm = nullptr, mmh = nullptr, tan = nullptr, lin = nullptr;
    hpuAutocastPush(1, HPU_BFLOAT16);
    if (hpuMm(nullptr, a, a, &mm) || hpuMm(nullptr, h, h, &mmh) || hpuTan(nullptr, a, &tan) ||
        hpuLinear(nullptr, h, h, nullptr, &lin))
      return 2;
    hpuAutocastPop();
    int bad = (dtype_of(mm) != HPU_FLOAT32) + (dtype_of(mmh) != HPU_FLOAT32) * 2 + (dtype_of(tan) != HPU_BFLOAT16) * 4 +
              (dtype_of(lin) != HPU_FLOAT32) * 8;
    if (!bad && read(mm) != std::vector<double>{7, 10, 15, 22}) bad = 16;
    for (hpuTensor_t t : {a, h, mm, mmh, tan, lin}) hpuTensorRelease(t);
    hpuDeviceClose(dev);
    return bad ? 10 + bad : 0;
  });
  unlink(lower), unlink(fp32);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
