// Fused optimizer steps against torch.optim's update rules written out in
// double, over several steps, with f32 and bf16 gradients; bad input.
#include "ops_harness.hpp"

using namespace ops_test;

namespace {

class Optim : public OpsTest, public ::testing::WithParamInterface<hpuDataType_t> {};

const int64_t kN = 2500;  // more than one block of the kernels

// A tensor's bytes (waits for queued work on its stream).
std::vector<unsigned char> bytes_of(hpuTensor_t t) {
  std::vector<unsigned char> b(static_cast<size_t>(numel(shape_of(t))) * elem_size(dtype_of(t)));
  EXPECT_HPU_OK(hpuTensorCopyToHost(nullptr, t, b.data(), b.size()));
  return b;
}

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

// hpuAdamwStep with options->param_copy updates param and the moments bit for
// bit as it does without, and the copy holds the new param rounded to nearest
// even: the independent bf16 rounding of the harness, and hpuCast's bits for
// f16.
TEST_P(Optim, AdamwWithCopyWritesTheRoundedNewParam) {
  hpuDataType_t gdt = GetParam();
  const int64_t n = 40007;  // several parallel chunks, blocks and a tail
  for (hpuDataType_t cdt : {HPU_BFLOAT16, HPU_FLOAT16}) {
    const std::vector<double> p0 = round_all(HPU_FLOAT32, random_values(n, 3)), zero(n, 0);
    hpuTensor_t p1 = T(HPU_FLOAT32, {n}, p0), m1 = T(HPU_FLOAT32, {n}, zero), v1 = T(HPU_FLOAT32, {n}, zero);
    hpuTensor_t p2 = T(HPU_FLOAT32, {n}, p0), m2 = T(HPU_FLOAT32, {n}, zero), v2 = T(HPU_FLOAT32, {n}, zero);
    hpuTensor_t copy = nullptr;
    ASSERT_HPU_OK(hpuTensorCreate(&copy, dev, cdt, 1, &n));
    keep(copy);
    hpuAdamwOptions_t o = HPU_ADAMW_OPTIONS_INIT;
    o.lr = 1e-2, o.weight_decay = 0.1;
    for (int step = 1; step <= 3; ++step) {
      hpuTensor_t g = T(gdt, {n}, round_all(gdt, random_values(n, 30 + step)));
      ASSERT_HPU_OK(hpuAdamwStep(nullptr, p1, g, m1, v1, step, &o));
      hpuAdamwOptions_t with_copy = o;
      with_copy.param_copy = copy;
      ASSERT_HPU_OK(hpuAdamwStep(nullptr, p2, g, m2, v2, step, &with_copy));
      if (cdt == HPU_BFLOAT16) {
        const std::vector<double> want = read(p1), got = read(copy);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += got[i] != from_bf16(to_bf16(float(want[i])));
        EXPECT_EQ(wrong, 0) << "step " << step;
      } else {
        hpuTensor_t cast = nullptr;
        ASSERT_HPU_OK(hpuCast(nullptr, p1, cdt, &cast));
        EXPECT_EQ(bytes_of(copy), bytes_of(keep(cast))) << "step " << step;
      }
    }
    EXPECT_EQ(bytes_of(p2), bytes_of(p1));
    EXPECT_EQ(bytes_of(m2), bytes_of(m1));
    EXPECT_EQ(bytes_of(v2), bytes_of(v1));
  }
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
  a = HPU_ADAMW_OPTIONS_INIT;
  hpuTensor_t c = T(HPU_BFLOAT16, {4}, {0, 0, 0, 0}), c2 = T(HPU_BFLOAT16, {2, 2}, {0, 0, 0, 0}), ct = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&ct, c2, 0, 1));
  keep(ct);
  a.param_copy = reinterpret_cast<hpuTensor_t>(0x1234);
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_INVALID_HANDLE, "options->param_copy");
  a.param_copy = s;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_UNSUPPORTED, "options->param_copy is f32[4]",
                  "bf16 or f16");
  a.param_copy = g3;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_INVALID_ARGUMENT,
                  "options->param_copy is f32[3]", "expected shape [4]");
  a.param_copy = c2;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 1, &a), HPU_ERROR_INVALID_ARGUMENT,
                  "options->param_copy is bf16[2, 2]", "expected shape [4]");
  hpuTensor_t p22 = T(HPU_FLOAT32, {2, 2}, {1, 2, 3, 4}), s22 = T(HPU_FLOAT32, {2, 2}, {0, 0, 0, 0});
  a.param_copy = ct;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p22, s22, s22, s22, 1, &a), HPU_ERROR_INVALID_ARGUMENT,
                  "options->param_copy is bf16[2, 2]", "not contiguous");
  a.param_copy = c;
  EXPECT_HPU_FAIL(hpuAdamwStep(nullptr, p, g, s, s, 0, &a), HPU_ERROR_INVALID_ARGUMENT, "step 0");
  EXPECT_EQ(read(p), (std::vector<double>{1, 2, 3, 4}));  // nothing ran
  EXPECT_EQ(read(c), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(read(p22), (std::vector<double>{1, 2, 3, 4}));
}
