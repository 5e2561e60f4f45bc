// libhpu's AVX-512 f32 kernel (gemm_f32.hpp) packs op(A) when A is stored
// transposed and reads it in place otherwise; both sum each element's
// products with FMA, k in order within each k block, so op(A) given either
// way round gives the same bits. Shapes off the tiles (8 x 48, 12 x 32,
// 12 x 16), C one and several slivers wide, k over several blocks (384),
// beta 0 and not.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/gemm.hpp"
#include "kernels/gemm_f32.hpp"

using namespace hpu::kernels;

namespace {

// C = alpha op(A) B + beta C0 with op(A) stored as given (A m x k, or its
// transpose k x m when trans_a).
std::vector<float> product(int64_t m, int64_t n, int64_t k, bool trans_a, const std::vector<float> &a,
                           const std::vector<float> &b, float alpha, float beta, const std::vector<float> &c0) {
  GemmShape s{};
  s.m = m, s.n = n, s.k = k, s.trans_a = trans_a, s.trans_b = false;
  std::vector<float> c = c0;
  gemm_f32_native(s, alpha, a.data(), trans_a ? m : k, b.data(), n, beta, c.data(), n);
  return c;
}

}  // namespace

TEST(GemmF32, TransposedAGivesTheSameBitsAsInPlace) {
  if (!gemm_f32_native_supported()) GTEST_SKIP() << "no AVX-512 here: f32 products run on OpenBLAS";
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 49, 17},  {13, 16, 30}, {25, 32, 9},
                               {37, 101, 1000}, {64, 96, 385}, {9, 200, 768}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto &sh : shapes) {
    const int64_t m = sh[0], n = sh[1], k = sh[2];
    std::vector<float> a(m * k), at(k * m), b(k * n), c0(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p] = u(rng);
    for (float &x : b) x = u(rng);
    for (float &x : c0) x = u(rng);
    for (float beta : {0.0f, 0.5f}) {
      const std::vector<float> in_place = product(m, n, k, false, a, b, -0.75f, beta, c0);
      const std::vector<float> packed = product(m, n, k, true, at, b, -0.75f, beta, c0);
      EXPECT_EQ(std::memcmp(in_place.data(), packed.data(), in_place.size() * sizeof(float)), 0)
          << "m " << m << " n " << n << " k " << k << " beta " << beta;
    }
  }
}
