// How many threads gemm splits a product over (gemm.hpp's cost rule,
// gemm_plan): the plan follows the work on the path that runs it, the product
// runs on that many threads (as the budget allows: parallel_last_threads),
// and the results are right, with the same bits as on one thread, on both
// sides of every boundary where the rule adds a thread, for row and column
// splits. CTest runs this file at HPU_KERNEL_ISA=avx512 and avx2 too
// (gemm_threads.cmake), for the rule of each path. No timing: the rule is
// checked against its own documented formula, never against a clock.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "device/compute_budget.hpp"
#include "kernels/convert.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"
#include "kernels/gemm.hpp"
#include "kernels/parallel.hpp"

using namespace hpu::kernels;

namespace {

// The path gemm takes for dt at this process's ISA level (gemm.hpp).
GemmPath path_of(hpuDataType_t dt) {
  const Isa isa = best_isa();
  if (dt == HPU_BFLOAT16 && isa == Isa::amx) return GemmPath::amx;
  if (isa == Isa::avx2) return GemmPath::avx2_f32;
  if (vector_isa(isa) != Isa::avx512) return GemmPath::blas;
  if (dt == HPU_BFLOAT16 && __builtin_cpu_supports("avx512bf16")) return GemmPath::avx512_bf16;
  return GemmPath::avx512_f32;
}

// The smallest m (or n, when `cols`) from 1 on whose plan has at least
// `threads` threads, the other sides fixed; 0 if none up to `limit`.
int64_t boundary(hpuDataType_t dt, GemmShape s, bool cols, int64_t threads, int64_t limit) {
  int64_t lo = 1, hi = limit;
  auto enough = [&](int64_t x) {
    (cols ? s.n : s.m) = x;
    return gemm_plan(dt, s).threads >= threads;
  };
  if (!enough(hi)) return 0;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (enough(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

struct Product {
  hpuDataType_t dt;
  GemmShape s;
  std::vector<float> a, b;  // values, rounded to dt
  std::vector<unsigned char> a_bytes, b_bytes;
  int64_t lda, ldb;

  Product(hpuDataType_t t, const GemmShape &shape) : dt(t), s(shape) {
    std::mt19937 rng(static_cast<unsigned>(s.m * 7 + s.n * 3 + s.k));
    std::uniform_real_distribution<float> u(-1, 1);
    const int64_t ar = s.trans_a ? s.k : s.m, ac = s.trans_a ? s.m : s.k;
    const int64_t br = s.trans_b ? s.n : s.k, bc = s.trans_b ? s.k : s.n;
    lda = ac;
    ldb = bc;
    fill(a, a_bytes, ar * ac, rng, u);
    fill(b, b_bytes, br * bc, rng, u);
  }
  template <class Rng, class U>
  void fill(std::vector<float> &v, std::vector<unsigned char> &bytes, int64_t n, Rng &rng, U &u) {
    v.resize(static_cast<size_t>(n));
    bytes.resize(static_cast<size_t>(n) * (dt == HPU_FLOAT32 ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      float x = u(rng);
      if (dt == HPU_BFLOAT16) {
        const uint16_t h = f32_to_bf16(x);
        x = bf16_to_f32(h);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(bytes.data() + 4 * i, &x, 4);
      }
      v[static_cast<size_t>(i)] = x;
    }
  }
  float a_at(int64_t i, int64_t l) const { return a[static_cast<size_t>(s.trans_a ? l * lda + i : i * lda + l)]; }
  float b_at(int64_t l, int64_t j) const { return b[static_cast<size_t>(s.trans_b ? j * ldb + l : l * ldb + j)]; }

  // C (f32) on the current budget, and the threads it ran on.
  std::vector<float> run(int *threads) const {
    std::vector<float> c(static_cast<size_t>(s.m * s.n), -7.0f);
    gemm(dt, s, 1.0f, a_bytes.data(), lda, b_bytes.data(), ldb, 0.0f, c.data(), s.n, HPU_FLOAT32);
    *threads = parallel_last_threads();
    return c;
  }

  // Every element of c within the accumulation's rounding of the exact sum.
  void expect_right(const std::vector<float> &c) const {
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          const double x = static_cast<double>(a_at(i, l)) * b_at(l, j);
          sum += x;
          mag += std::fabs(x);
        }
        const double got = c[static_cast<size_t>(i * s.n + j)];
        ASSERT_LE(std::fabs(got - sum), 4 * 6e-8 * (s.k + 2) * mag + 1e-30) << "at (" << i << ", " << j << ")";
      }
  }
};

std::string describe(hpuDataType_t dt, const GemmShape &s) {
  return std::string(dtype_name(dt)) + " " + std::to_string(s.m) + " x " + std::to_string(s.n) + " x " +
         std::to_string(s.k) + (s.trans_a ? " ta" : "") + (s.trans_b ? " tb" : "");
}

const hpuDataType_t kTypes[] = {HPU_FLOAT32, HPU_BFLOAT16};

}  // namespace

TEST(GemmThreads, PlanIsTheDocumentedRuleOnThePathThatRunsIt) {
  for (hpuDataType_t dt : kTypes) {
    for (GemmShape s : {GemmShape{8, 8, 8}, GemmShape{256, 1024, 10}, GemmShape{256, 10, 1024, false, true},
                        GemmShape{10, 1024, 256, true, false}, GemmShape{1024, 1024, 1024}, GemmShape{3, 5000, 7}}) {
      SCOPED_TRACE(describe(dt, s));
      const GemmPlan plan = gemm_plan(dt, s);
      EXPECT_EQ(plan.path, path_of(dt)) << gemm_path_name(plan.path);
      EXPECT_EQ(plan.split_cols, s.n > 2 * s.m);
      const GemmPathCost cost = gemm_path_cost(plan.path);
      auto padded = [](int64_t x, int64_t step) { return static_cast<double>((x + step - 1) / step * step); };
      const double es = dt == HPU_FLOAT32 ? 4 : 2;
      const double seconds =
          2 * padded(s.m, cost.m_step) * padded(s.n, cost.n_step) * padded(s.k, cost.k_step) / cost.flops_per_second +
          static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n) * es / kGemmBytesPerSecond;
      EXPECT_DOUBLE_EQ(plan.seconds, seconds);
      int64_t want = std::max<int64_t>(1, static_cast<int64_t>(std::min(seconds / kMinThreadSeconds,
                                                                          static_cast<double>(plan.split_cols ? s.n : s.m))));
      if (plan.path == GemmPath::blas) want = std::min<int64_t>(want, 8);
      EXPECT_EQ(plan.threads, want);
    }
    // A small product stays on the calling thread; a large one is split.
    EXPECT_EQ(gemm_plan(dt, {8, 8, 8}).threads, 1);
    EXPECT_GE(gemm_plan(dt, {1024, 1024, 1024}).threads, 2);
  }
}

TEST(GemmThreads, MoreWorkNeverPlansFewerThreads) {
  for (hpuDataType_t dt : kTypes) {
    int64_t last = 1;
    for (int64_t m = 1; m <= 2048; m += 37) {
      const int64_t t = gemm_plan(dt, {m, 512, 512}).threads;
      EXPECT_GE(t, last) << dtype_name(dt) << " m " << m;
      last = t;
    }
  }
}

// Both sides of the boundaries where the plan goes to 2 and to 3 threads,
// splitting rows and splitting columns (short, wide C), with transposes:
// right results on the planned threads, the same bits as on one thread.
TEST(GemmThreads, RightOnBothSidesOfEverySplitBoundary) {
  hpu::ComputeBudget &budget = hpu::ComputeBudget::instance();
  struct Sweep {
    GemmShape s;  // the swept side is set by boundary()
    bool cols;
  };
  const Sweep sweeps[] = {{{0, 96, 512, false, true}, false}, {{0, 64, 300, true, false}, false},
                          {{6, 0, 256, true, false}, true}, {{9, 0, 10, false, false}, true}};
  for (hpuDataType_t dt : kTypes)
    for (const Sweep &w : sweeps)
      for (int64_t threads : {2, 3}) {
        const int64_t at = boundary(dt, w.s, w.cols, threads, 1 << 20);
        ASSERT_GT(at, 1) << describe(dt, w.s);
        for (int64_t x : {at - 1, at}) {
          GemmShape s = w.s;
          (w.cols ? s.n : s.m) = x;
          const GemmPlan plan = gemm_plan(dt, s);
          SCOPED_TRACE(describe(dt, s) + ": plan " + std::to_string(plan.threads) + " thread(s)");
          EXPECT_EQ(plan.threads, x == at ? threads : threads - 1);
          const Product p(dt, s);
          budget.configure(1);
          int ran = 0;
          const std::vector<float> one = p.run(&ran);
          EXPECT_EQ(ran, 1);
          budget.configure(4);
          const std::vector<float> split = p.run(&ran);
          EXPECT_EQ(ran, plan.threads);
          EXPECT_TRUE(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)) == 0);
          p.expect_right(split);
        }
      }
  budget.configure(1);
}

// The caller is a stream worker holding a token; another device's workers
// hold two more of the four: the product runs on what is left.
TEST(GemmThreads, FewerThreadsWhenTheBudgetIsBusy) {
  hpu::ComputeBudget &budget = hpu::ComputeBudget::instance();
  budget.configure(4);
  budget.acquire();
  const GemmShape s{1024, 1024, 256, true, false};
  const Product p(HPU_FLOAT32, s);
  ASSERT_GE(gemm_plan(HPU_FLOAT32, s).threads, 4);
  int ran = 0;
  p.run(&ran);
  EXPECT_EQ(ran, 4);
  budget.acquire();
  budget.acquire();
  p.run(&ran);
  EXPECT_EQ(ran, 2);
  budget.release(3);
  budget.configure(1);
}
