// Fused optimizer steps against torch.optim's update rules written out in
// double, over several steps, with f32 and bf16 gradients; bad input.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class Optim : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {};

const int64_t kN = 2500;  // more than one block of the kernels

}  // namespace

TEST_P(Optim, SgdMatchesTorchRule) {
  hpuDataType_t gdt = GetParam();
  struct Case {
    double momentum, dampening, weight_decay;
    int nesterov;
  };
  for (const Case &c : {Case{0, 0, 0, 0}, Case{0.9, 0, 1e-2, 0}, Case{0.9, 0.1, 0, 0}, Case{0.8, 0, 1e-3, 1}}) {
    std::vector<double> p = round_all(HPU_FLOAT32, random_values(kN, 1)), buf(kN, 0);
    hpuTensor_t param = T(HPU_FLOAT32, {50, 50}, p), mom = T(HPU_FLOAT32, {50, 50}, buf);
    hpuSgdOptions_t o = HPU_SGD_OPTIONS_INIT;
    o.lr = 0.05, o.momentum = c.momentum, o.dampening = c.dampening, o.weight_decay = c.weight_decay,
    o.nesterov = c.nesterov;
    for (int step = 1; step <= 3; ++step) {
      std::vector<double> g = round_all(gdt, random_values(kN, 10 + step));
      ASSERT_HPU_OK(hpuSgdStep(nullptr, param, T(gdt, {50, 50}, g), c.momentum ? mom : nullptr, step, &o));
      for (int64_t i = 0; i < kN; ++i) {
        double d = g[i] + c.weight_decay * p[i];
        if (c.momentum) {
          buf[i] = step == 1 ? d : c.momentum * buf[i] + (1 - c.dampening) * d;
          d = c.nesterov ? d + c.momentum * buf[i] : buf[i];
        }
        p[i] -= 0.05 * d;
      }
    }
    EXPECT_TRUE(near(read(param), p, 1e-5)) << c.momentum << " " << c.nesterov;
    if (c.momentum) {
      EXPECT_TRUE(near(read(mom), buf, 1e-5));
    }
  }
}

TEST_P(Optim, AdamwMatchesTorchRule) {
  hpuDataType_t gdt = GetParam();
  std::vector<double> p = round_all(HPU_FLOAT32, random_values(kN, 2)), m(kN, 0), v(kN, 0);
  hpuTensor_t param = T(HPU_FLOAT32, {kN}, p), ea = T(HPU_FLOAT32, {kN}, m), eas = T(HPU_FLOAT32, {kN}, v);
  hpuAdamwOptions_t o = HPU_ADAMW_OPTIONS_INIT;
  o.lr = 1e-2, o.weight_decay = 0.1;
  for (int step = 1; step <= 4; ++step) {
    std::vector<double> g = round_all(gdt, random_values(kN, 20 + step));
    ASSERT_HPU_OK(hpuAdamwStep(nullptr, param, T(gdt, {kN}, g), ea, eas, step, &o));
    double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.999, step);
    for (int64_t i = 0; i < kN; ++i) {
      p[i] *= 1 - 1e-2 * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      p[i] -= 1e-2 / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + 1e-8);
    }
  }
  EXPECT_TRUE(near(read(param), p, 1e-5));
  EXPECT_TRUE(near(read(ea), m, 1e-5));
  EXPECT_TRUE(near(read(eas), v, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(GradTypes, Optim, ::testing::Values(HPU_FLOAT32, HPU_BFLOAT16));

class OptimBad : public OpsTest {};

TEST_F(OptimBad, BadInput) {
  hpuTensor_t p = T(HPU_FLOAT32, {4}, {1, 2, 3, 4}), g = T(HPU_BFLOAT16, {4}, {1, 1, 1, 1});
  hpuTensor_t pb = T(HPU_BFLOAT16, {4}, {1, 2, 3, 4}), g3 = T(HPU_FLOAT32, {3}, {1, 1, 1});
  hpuTensor_t gi = T(HPU_INT32, {4}, {1, 1, 1, 1}), s = T(HPU_FLOAT32, {4}, {0, 0, 0, 0});
  hpuSgdOptions_t o = HPU_SGD_OPTIONS_INIT;
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, nullptr, 1, nullptr), HPU_ERROR_INVALID_ARGUMENT, "options is NULL");
  hpuSgdOptions_t zero = o;
  zero.struct_size = 0;
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, nullptr, 1, &zero), HPU_ERROR_INVALID_ARGUMENT, "struct_size is 0");
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, pb, g, nullptr, 1, &o), HPU_ERROR_INVALID_ARGUMENT, "param is bf16[4]",
                  "f32");
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g3, nullptr, 1, &o), HPU_ERROR_INVALID_ARGUMENT, "grad is f32[3]",
                  "expected shape [4]");
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, gi, nullptr, 1, &o), HPU_ERROR_UNSUPPORTED, "grad is i32[4]");
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, nullptr, 0, &o), HPU_ERROR_INVALID_ARGUMENT, "step 0");
  o.momentum = 0.9;
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, nullptr, 1, &o), HPU_ERROR_INVALID_ARGUMENT, "momentum_buf is NULL");
  o.lr = -1;
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, s, 1, &o), HPU_ERROR_INVALID_ARGUMENT, "options->lr -1");
  o.lr = 0.1, o.nesterov = 1, o.dampening = 0.5;
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, p, g, s, 1, &o), HPU_ERROR_INVALID_ARGUMENT, "nesterov");
  EXPECT_HPU_FAIL(hpuSgdStep(nullptr, nullptr, g, s, 1, &o), HPU_ERROR_INVALID_HANDLE, "param");

  hpuAdamwOptions_t a = HPU_ADAMW_OPTIONS_INIT;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, pb, 1, &a), HPU_ERROR_INVALID_ARGUMENT, "exp_avg_sq is bf16[4]");
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, g3, s, 1, &a), HPU_ERROR_INVALID_ARGUMENT, "exp_avg is f32[3]");
  a.beta1 = 1.0;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_INVALID_ARGUMENT, "options->beta1 1");
  a = HPU_ADAMW_OPTIONS_INIT;
  a.eps = -1e-8;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_INVALID_ARGUMENT, "options->eps");
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, -3, &a), HPU_ERROR_INVALID_ARGUMENT, "step -3");
  EXPECT_EQ(read(p), (std::vector<double>{1, 2, 3, 4}));  // nothing ran
}
