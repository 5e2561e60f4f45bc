// The collectives' reduction loops (comm/reduce.cpp): they run at the kernels'
// ISA level, and every level gives the bits of op(first, second) element by
// element. comm_reduce.cmake runs these tests again with HPU_KERNEL_ISA=scalar.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "comm/reduce.hpp"
#include "kernels/convert.hpp"
#include "kernels/cpu.hpp"

using namespace hpu;

TEST(CommReduce, RunsAtTheKernelsLevel) {
  const kernels::Isa want = kernels::best_isa() >= kernels::Isa::avx2 ? kernels::Isa::avx2 : kernels::Isa::scalar;
  EXPECT_EQ(comm::combine_isa(), want) << "kernels at " << kernels::isa_name(kernels::best_isa())
                                       << ", reductions at " << kernels::isa_name(comm::combine_isa());
}

namespace {

float f32_op(hpuRedOp_t op, float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  switch (op) {
    case HPU_PROD: return a * b;
    case HPU_MIN: return a < b ? a : b;
    case HPU_MAX: return a > b ? a : b;
    default: return a + b;
  }
}

}  // namespace

// 37 elements: the vector loops' blocks of 8 and a tail.
TEST(CommReduce, Bf16AndF32GiveTheScalarRulesBits) {
  const size_t n = 37;
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.37f * static_cast<float>(i) - 5.0f;
    b[i] = 1.0f / (static_cast<float>(i) + 0.5f);
  }
  a[3] = NAN;
  for (hpuRedOp_t op : {HPU_SUM, HPU_PROD, HPU_MIN, HPU_MAX}) {
    std::vector<float> out(n);
    comm::Combine c = comm::make_combine(HPU_FLOAT32, op, b.data());
    c.fn(out.data(), a.data(), c.local, n, c.ctx);
    std::vector<uint16_t> ha(n), hb(n), hout(n);
    for (size_t i = 0; i < n; ++i) ha[i] = kernels::f32_to_bf16(a[i]), hb[i] = kernels::f32_to_bf16(b[i]);
    comm::Combine h = comm::make_combine(HPU_BFLOAT16, op, hb.data());
    h.fn(hout.data(), ha.data(), h.local, n, h.ctx);
    for (size_t i = 0; i < n; ++i) {
      float want = f32_op(op, a[i], b[i]);
      EXPECT_EQ(std::memcmp(&out[i], &want, 4), 0) << "f32 op " << op << " element " << i;
      uint16_t want16 = kernels::f32_to_bf16(f32_op(op, kernels::bf16_to_f32(ha[i]), kernels::bf16_to_f32(hb[i])));
      EXPECT_EQ(hout[i], want16) << "bf16 op " << op << " element " << i;
    }
  }
}
