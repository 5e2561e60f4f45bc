// GEMM on this library's kernels (gemm_f32.hpp, gemm_bf16.hpp) or OpenBLAS;
// the threading decision is explained in gemm.hpp.
#include "kernels/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "kernels/dtype.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm_bf16.hpp"
#include "kernels/gemm_f32.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

// Most blocks a product through OpenBLAS is cut into (see gemm.hpp).
constexpr int64_t kBlasBlocks = 8;

// OpenBLAS must run single-threaded inside libhpu (see gemm.hpp). A process
// that also calls OpenBLAS itself may change the setting; set it back.
void single_threaded_blas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// Scratch f32 buffers of the calling thread, kept between calls unless large.
struct Scratch {
  std::vector<float> a, b, c;
  std::vector<float> grad;  // gemm_then_sink's, kept through the product (trim() leaves it)
  float *get(std::vector<float> &v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
  void trim() {
    for (auto *v : {&a, &b, &c})
      if (v->size() > (size_t(16) << 20)) std::vector<float>().swap(*v);
  }
};
thread_local Scratch t_scratch;

// Widens a rows x cols block (row stride ld) of a 16-bit or f32 matrix into a
// dense f32 block; rows in parallel when `parallel`.
void widen(hpuDataType_t dt, const void *src, int64_t ld, int64_t rows, int64_t cols, float *dst, bool parallel) {
  const size_t es = dtype_size(dt);
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      load_f32(dt, static_cast<const char *>(src) + r * ld * static_cast<int64_t>(es), dst + r * cols,
               static_cast<size_t>(cols));
  };
  if (parallel)
    parallel_for(rows, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(cols, 1)), body);
  else
    body(0, rows);
}

CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

// C = alpha A B + beta C on f32/f64 (dt) with c in the same type.
void blas(hpuDataType_t dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
          int64_t lda, const void *b, int64_t ldb, float beta, void *c, int64_t ldc) {
  if (dt == HPU_FLOAT64)
    cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), m, n, k, alpha, static_cast<const double *>(a), lda,
                static_cast<const double *>(b), ldb, beta, static_cast<double *>(c), ldc);
  else
    cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), m, n, k, alpha, static_cast<const float *>(a), lda,
                static_cast<const float *>(b), ldb, beta, static_cast<float *>(c), ldc);
}

// out (rows x cols, row stride ldc, type c_dt) = acc + beta * out, rounded once.
void finish(const float *acc, int64_t rows, int64_t cols, float beta, void *out, int64_t ldc, hpuDataType_t c_dt) {
  const size_t es = dtype_size(c_dt);
  float old[kBlock];
  for (int64_t r = 0; r < rows; ++r) {
    char *row = static_cast<char *>(out) + r * ldc * static_cast<int64_t>(es);
    const float *src = acc + r * cols;
    for (int64_t j = 0; j < cols; j += kBlock) {
      size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, cols - j));
      char *dst = row + j * static_cast<int64_t>(es);
      if (beta == 0.0f) {
        store_f32(c_dt, src + j, dst, m);
        continue;
      }
      load_f32(c_dt, dst, old, m);
      for (size_t i = 0; i < m; ++i) old[i] = src[j + i] + beta * old[i];
      store_f32(c_dt, old, dst, m);
    }
  }
}

// One product with 16-bit inputs: C rows (or columns) in `blocks` blocks
// over the threads; the operand that is not split is widened once, in
// parallel, and shared.
void gemm_widened(hpuDataType_t dt, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
                  int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt, bool split_cols,
                  int64_t blocks) {
  const size_t es = dtype_size(dt), cs = dtype_size(c_dt);
  const int64_t m = s.m, n = s.n, k = s.k;
  // The shared operand, dense: B when splitting rows, A when splitting columns.
  std::vector<float> shared;
  if (split_cols) {
    shared.resize(static_cast<size_t>(m * k));
    s.trans_a ? widen(dt, a, lda, k, m, shared.data(), blocks > 1) : widen(dt, a, lda, m, k, shared.data(), blocks > 1);
  } else {
    shared.resize(static_cast<size_t>(k * n));
    s.trans_b ? widen(dt, b, ldb, n, k, shared.data(), blocks > 1) : widen(dt, b, ldb, k, n, shared.data(), blocks > 1);
  }
  parallel_blocks(split_cols ? n : m, blocks, [&](int64_t lo, int64_t hi) {
    const int64_t len = hi - lo;
    Scratch &sc = t_scratch;
    single_threaded_blas();
    if (!split_cols) {
      // Rows lo..hi of op(A): rows of A, or columns of the stored k x m A^T.
      float *ab = sc.get(sc.a, static_cast<size_t>(len * k));
      const char *a0 = static_cast<const char *>(a) + (s.trans_a ? lo : lo * lda) * static_cast<int64_t>(es);
      s.trans_a ? widen(dt, a0, lda, k, len, ab, false) : widen(dt, a0, lda, len, k, ab, false);
      char *c0 = static_cast<char *>(c) + lo * ldc * static_cast<int64_t>(cs);
      const int64_t ldab = s.trans_a ? len : k, ldbb = s.trans_b ? k : n;
      if (c_dt == HPU_FLOAT32) {
        cblas_sgemm(CblasRowMajor, tr(s.trans_a), tr(s.trans_b), len, n, k, alpha, ab, ldab, shared.data(), ldbb,
                    beta, reinterpret_cast<float *>(c0), ldc);
      } else {
        float *cb = sc.get(sc.c, static_cast<size_t>(len * n));
        cblas_sgemm(CblasRowMajor, tr(s.trans_a), tr(s.trans_b), len, n, k, alpha, ab, ldab, shared.data(), ldbb,
                    0.0f, cb, n);
        finish(cb, len, n, beta, c0, ldc, c_dt);
      }
    } else {
      // Columns lo..hi of op(B): columns of the stored k x n B, or rows of B^T.
      float *bb = sc.get(sc.b, static_cast<size_t>(len * k));
      const char *b0 = static_cast<const char *>(b) + (s.trans_b ? lo * ldb : lo) * static_cast<int64_t>(es);
      s.trans_b ? widen(dt, b0, ldb, len, k, bb, false) : widen(dt, b0, ldb, k, len, bb, false);
      char *c0 = static_cast<char *>(c) + lo * static_cast<int64_t>(cs);
      const int64_t ldab = s.trans_a ? m : k, ldbb = s.trans_b ? k : len;
      if (c_dt == HPU_FLOAT32) {
        cblas_sgemm(CblasRowMajor, tr(s.trans_a), tr(s.trans_b), m, len, k, alpha, shared.data(), ldab, bb, ldbb,
                    beta, reinterpret_cast<float *>(c0), ldc);
      } else {
        float *cb = sc.get(sc.c, static_cast<size_t>(m * len));
        cblas_sgemm(CblasRowMajor, tr(s.trans_a), tr(s.trans_b), m, len, k, alpha, shared.data(), ldab, bb, ldbb,
                    0.0f, cb, len);
        finish(cb, m, len, beta, c0, ldc, c_dt);
      }
    }
    sc.trim();
  });
}

// C = beta C when k == 0 (no products to add).
void scale_c(void *c, int64_t ldc, int64_t m, int64_t n, float beta, hpuDataType_t c_dt) {
  const size_t cs = dtype_size(c_dt);
  std::vector<float> zero(static_cast<size_t>(n), 0.0f);
  for (int64_t r = 0; r < m; ++r) {
    void *row = static_cast<char *>(c) + r * ldc * static_cast<int64_t>(cs);
    if (c_dt == HPU_FLOAT64) {
      double *d = static_cast<double *>(row);
      for (int64_t j = 0; j < n; ++j) d[j] = beta == 0.0f ? 0.0 : beta * d[j];
    } else {
      finish(zero.data(), 1, n, beta, row, ldc, c_dt);
    }
  }
}

Unary unary_of(Activation a) {
  switch (a) {
    case Activation::relu: return Unary::relu;
    case Activation::none: break;
  }
  fail(HPU_ERROR_INTERNAL, "gemm: no pass for activation %d", static_cast<int>(a));
}

// s's activations over C (m rows of n, row stride ldc) in passes: the
// activation as kernels::unary's, its backward as unary_backward.
void epilogue_pass(const GemmShape &s, void *c, int64_t ldc, hpuDataType_t c_dt) {
  const Epilogue &ep = s.ep;
  const int64_t cs = static_cast<int64_t>(dtype_size(c_dt));
  // Dense C (and backward input): one pass over all of it, split over the threads.
  const bool dense = ldc == s.n && (!ep.backward_input || ep.ld_backward == s.n);
  const int64_t rows = dense ? 1 : s.m;
  const size_t n = static_cast<size_t>(dense ? s.m * s.n : s.n);
  for (int64_t r = 0; r < rows; ++r) {
    void *row = static_cast<char *>(c) + r * ldc * cs;
    if (ep.activation != Activation::none) unary(unary_of(ep.activation), c_dt, row, row, n);
    if (ep.backward != Activation::none)
      unary_backward(unary_of(ep.backward), c_dt,
                     static_cast<const char *>(ep.backward_input) + r * ep.ld_backward * cs, row, row, n);
  }
}

// gemm with a sink where the kernel does not feed it: the results into a
// scratch buffer, then to the sink from there.
void gemm_then_sink(hpuDataType_t dt, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
                    int64_t ldb, int64_t ldc) {
  GemmShape plain = s;
  plain.ep = {};
  float *results = t_scratch.get(t_scratch.grad, static_cast<size_t>(s.m * s.n));
  gemm(dt, plain, alpha, a, lda, b, ldb, 0.0f, results, s.n, HPU_FLOAT32);
  parallel_for(s.m, std::max<int64_t>(1, 16384 / s.n), [&](int64_t lo, int64_t hi) {
    Epilogue part = s.ep;
    part.at += lo * ldc;
    gemm_sink_rows(part, results + lo * s.n, s.n, hi - lo, s.n, ldc);
  });
  if (t_scratch.grad.size() > (size_t(16) << 20)) std::vector<float>().swap(t_scratch.grad);
}

}  // namespace

GemmPathCost gemm_path_cost(GemmPath path) {
  switch (path) {
    case GemmPath::amx: return {1e12, 32, 16, 32};
    case GemmPath::avx512_bf16: return {4e11, 1, 16, 2};
    case GemmPath::avx512_f32: return {2e11, 1, 16, 1};
    case GemmPath::avx2_f32: return {1e11, 1, 8, 1};
    case GemmPath::blas: break;
  }
  return {1e11, 1, 1, 1};
}

const char *gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::amx: return "amx";
    case GemmPath::avx512_bf16: return "avx512 bf16";
    case GemmPath::avx512_f32: return "avx512 f32";
    case GemmPath::avx2_f32: return "avx2 f32";
    case GemmPath::blas: break;
  }
  return "openblas";
}

GemmPlan gemm_plan(hpuDataType_t dt, const GemmShape &s) {
  GemmPlan plan{GemmPath::blas, false, 0.0, 1};
  if (dt == HPU_BFLOAT16 && gemm_bf16_native_supported())
    plan.path = gemm_bf16_amx_supported() ? GemmPath::amx : GemmPath::avx512_bf16;
  else
    plan.path = gemm_f32_native_path(dt);
  // Split the longer side of C (columns only when C is short and wide).
  plan.split_cols = s.n > 2 * s.m;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) return plan;
  const GemmPathCost cost = gemm_path_cost(plan.path);
  auto padded = [](int64_t x, int64_t step) { return static_cast<double>((x + step - 1) / step * step); };
  const double flops = 2.0 * padded(s.m, cost.m_step) * padded(s.n, cost.n_step) * padded(s.k, cost.k_step);
  const double bytes = static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n) * static_cast<double>(dtype_size(dt));
  plan.seconds = flops / cost.flops_per_second + bytes / kGemmBytesPerSecond;
  const int64_t lines = plan.split_cols ? s.n : s.m;
  const double most = std::min(plan.seconds / kMinThreadSeconds, static_cast<double>(lines));
  plan.threads = std::max<int64_t>(1, static_cast<int64_t>(most));
  if (plan.path == GemmPath::blas) plan.threads = std::min(plan.threads, kBlasBlocks);
  return plan;
}

void gemm_sink_rows(const Epilogue &ep, const float *results, int64_t ld, int64_t rows, int64_t cols, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) ep.sink->row(*ep.sink, ep.at + r * ldc, cols, results + r * ld);
}

bool gemm_supports(hpuDataType_t dt) {
  return dt == HPU_FLOAT32 || dt == HPU_FLOAT64 || dt == HPU_BFLOAT16 || dt == HPU_FLOAT16;
}

void gemm(hpuDataType_t dt, const GemmShape &s, float alpha, const void *a, int64_t lda, const void *b,
          int64_t ldb, float beta, void *c, int64_t ldc, hpuDataType_t c_dt) {
  if (!gemm_supports(dt)) fail(HPU_ERROR_UNSUPPORTED, "gemm on %s", dtype_name(dt));
  if (c_dt != dt && !(c_dt == HPU_FLOAT32 && (dt == HPU_BFLOAT16 || dt == HPU_FLOAT16)))
    fail(HPU_ERROR_UNSUPPORTED, "gemm with %s inputs and a %s result", dtype_name(dt), dtype_name(c_dt));
  const int64_t m = s.m, n = s.n, k = s.k;
  if (m <= 0 || n <= 0) return;
  const GemmPlan plan = gemm_plan(dt, s);
  const bool native_bf16 = plan.path == GemmPath::amx || plan.path == GemmPath::avx512_bf16;
  const bool native_f32 = plan.path == GemmPath::avx512_f32 || plan.path == GemmPath::avx2_f32;
  const Epilogue &ep = s.ep;
  if (ep.bias && beta != 0.0f) fail(HPU_ERROR_INTERNAL, "gemm's bias needs beta 0");
  if (ep.sink) {
    if (beta != 0.0f || ep.bias || ep.activation != Activation::none || ep.backward != Activation::none)
      fail(HPU_ERROR_INTERNAL, "gemm's sink needs beta 0 and no other epilogue");
    if (!native_bf16 || k <= 0) return gemm_then_sink(dt, s, alpha, a, lda, b, ldb, ldc);
  }
  if (ep.bias && !(native_bf16 && k > 0)) {  // C filled with the bias, then beta 1
    const size_t cs = dtype_size(c_dt);
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(static_cast<char *>(c) + r * ldc * static_cast<int64_t>(cs), ep.bias, static_cast<size_t>(n) * cs);
    GemmShape t = s;
    t.ep.bias = nullptr;
    return gemm(dt, t, alpha, a, lda, b, ldb, 1.0f, c, ldc, c_dt);
  }
  const bool epilogue = ep.activation != Activation::none || ep.backward != Activation::none;
  if (k <= 0) {
    scale_c(c, ldc, m, n, beta, c_dt);
    if (epilogue) epilogue_pass(s, c, ldc, c_dt);
    return;
  }
  const bool split_cols = plan.split_cols;
  const int64_t len = split_cols ? n : m;
  // The activations as the native bf16 kernel stores a bf16 C (relu and its
  // backward), or in a pass afterwards.
  const bool in_kernel = native_bf16 && c_dt == HPU_BFLOAT16 &&
                         (ep.activation == Activation::none || ep.activation == Activation::relu) &&
                         (ep.backward == Activation::none || ep.backward == Activation::relu);
  const bool epilogue_pass_after = epilogue && !in_kernel;
  if (dt != HPU_FLOAT32 && dt != HPU_FLOAT64 && !native_bf16 && !native_f32) {
    gemm_widened(dt, s, alpha, a, lda, b, ldb, beta, c, ldc, c_dt, split_cols, plan.threads);
    if (epilogue_pass_after) epilogue_pass(s, c, ldc, c_dt);
    return;
  }
  const int64_t es = static_cast<int64_t>(dtype_size(dt)), cs = static_cast<int64_t>(dtype_size(c_dt));
  const auto block = [&](int64_t lo, int64_t hi) {
    // The block of C from line lo to hi, and the parts of A and B it needs.
    GemmShape part = s;
    if (!in_kernel) part.ep.activation = part.ep.backward = Activation::none;
    const char *ap = static_cast<const char *>(a), *bp = static_cast<const char *>(b);
    char *cp = static_cast<char *>(c);
    const char *xp = static_cast<const char *>(ep.backward_input);
    if (split_cols) {
      part.n = hi - lo;
      part.n_total = s.n;
      bp += (s.trans_b ? lo * ldb : lo) * es;
      cp += lo * cs;
      if (xp) part.ep.backward_input = xp + lo * cs;
      if (ep.bias) part.ep.bias = static_cast<const char *>(ep.bias) + lo * cs;
      part.ep.at += lo;
    } else {
      part.m = hi - lo;
      ap += (s.trans_a ? lo : lo * lda) * es;
      cp += lo * ldc * cs;
      if (xp) part.ep.backward_input = xp + lo * ep.ld_backward * cs;
      part.ep.at += lo * ldc;
    }
    if (native_bf16) {
      gemm_bf16_native(part, alpha, reinterpret_cast<const uint16_t *>(ap), lda,
                       reinterpret_cast<const uint16_t *>(bp), ldb, beta, cp, ldc, c_dt);
    } else if (native_f32) {
      gemm_f32_native(part, dt, alpha, ap, lda, bp, ldb, beta, cp, ldc, c_dt);
    } else {
      single_threaded_blas();
      blas(dt, s.trans_a, s.trans_b, part.m, part.n, k, alpha, ap, lda, bp, ldb, beta, cp, ldc);
    }
  };
  if (native_bf16 || native_f32)
    parallel_for_threads(len, plan.threads, block);
  else
    parallel_blocks(len, plan.threads, block);
  if (epilogue_pass_after) epilogue_pass(s, c, ldc, c_dt);
}

void gemm_batched(hpuDataType_t dt, const GemmShape &s, int64_t batch, float alpha, const void *a, int64_t lda,
                  int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b, float beta, void *c, int64_t ldc,
                  int64_t stride_c, hpuDataType_t c_dt) {
  const int64_t es = static_cast<int64_t>(dtype_size(dt)), cs = static_cast<int64_t>(dtype_size(c_dt));
  auto one = [&](int64_t i) {
    GemmShape si = s;  // the epilogue's arrays are laid out as C: matrix i stride_c elements on
    if (s.ep.backward_input) si.ep.backward_input = static_cast<const char *>(s.ep.backward_input) + i * stride_c * cs;
    si.ep.at += i * stride_c;
    gemm(dt, si, alpha, static_cast<const char *>(a) + i * stride_a * es, lda,
         static_cast<const char *>(b) + i * stride_b * es, ldb, beta, static_cast<char *>(c) + i * stride_c * cs,
         ldc, c_dt);
  };
  // Products too small to split run side by side, at least
  // kMinThreadSeconds of them per thread; larger ones one after another,
  // each split over the threads.
  const GemmPlan plan = gemm_plan(dt, s);
  if (plan.threads == 1 && batch > 1) {
    parallel_for(batch, static_cast<int64_t>(std::ceil(kMinThreadSeconds / std::max(plan.seconds, 1e-9))),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t i = lo; i < hi; ++i) one(i);
                 });
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace hpu::kernels
