// Reduction kernels: one loop per (type, operation), compiled twice (baseline
// and AVX2) and picked once at run time. The AVX2 loops of the floating types
// are written with vector intrinsics; the integer loops and the average's
// division are vectorised by the compiler (this file is built with
// -fvect-cost-model=cheap: at -O2 GCC leaves a loop of unknown length scalar).
#include "comm/reduce.hpp"

#include <immintrin.h>

#include <type_traits>

#include "kernels/convert.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"

namespace hpu::comm {

namespace {

using kernels::bf16;
using kernels::f16;

// How a stored element is computed with: 16-bit floats in f32.
template <class T>
struct Num {
  using C = T;
  static C load(T v) { return v; }
  static T store(C v) { return v; }
};
template <>
struct Num<bf16> {
  using C = float;
  static float load(bf16 v) { return kernels::bf16_to_f32(v.bits); }
  static bf16 store(float v) { return bf16{kernels::f32_to_bf16(v)}; }
};
template <>
struct Num<f16> {
  using C = float;
  static float load(f16 v) { return kernels::f16_to_f32(v.bits); }
  static f16 store(float v) { return f16{kernels::f32_to_f16(v)}; }
};

template <class C>
using Wide = std::make_unsigned_t<C>;  // integer arithmetic that wraps

struct Sum {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(static_cast<Wide<C>>(a) + static_cast<Wide<C>>(b));
    else
      return a + b;
  }
};
struct Prod {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      using W = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, Wide<C>>;  // no int promotion
      return static_cast<C>(static_cast<W>(static_cast<Wide<C>>(a)) * static_cast<W>(static_cast<Wide<C>>(b)));
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <class C>
  static C f(C a, C b) {
    return (a < b || a != a) ? a : b;  // a NaN on either side wins
  }
};
struct Max {
  template <class C>
  static C f(C a, C b) {
    return (a > b || a != a) ? a : b;
  }
};
struct Or {
  template <class C>
  static C f(C a, C b) {
    return static_cast<C>(a != 0 || b != 0);
  }
};
struct And {
  template <class C>
  static C f(C a, C b) {
    return static_cast<C>(a != 0 && b != 0);
  }
};

template <class T, class Op>
__attribute__((always_inline)) inline void loop(void *out, const void *a, const void *b, size_t n) {
  auto *o = static_cast<T *>(out);
  auto *x = static_cast<const T *>(a);
  auto *y = static_cast<const T *>(b);
  // out may be a or b (in place): each element is read before it is written.
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) o[i] = Num<T>::store(Op::f(Num<T>::load(x[i]), Num<T>::load(y[i])));
}

#define HPU_AVX2 __attribute__((target("avx2,f16c")))

// One vector of f32 or f64 lanes (__m256 or __m256d, written with GCC's vector
// operators so that one body serves both): the scalar rules of Op, lane by lane.
template <class Op, class V>
HPU_AVX2 inline V vop(V a, V b) {
  if constexpr (std::is_same_v<Op, Sum>) return a + b;
  if constexpr (std::is_same_v<Op, Prod>) return a * b;
  if constexpr (std::is_same_v<Op, Min>) return (a < b) | (a != a) ? a : b;  // a NaN on either side wins
  if constexpr (std::is_same_v<Op, Max>) return (a > b) | (a != a) ? a : b;
}

// Eight lanes at a time for the 16-bit floats: widen, combine in f32, round to
// nearest even exactly as kernels/convert.hpp does (NaN stays a quiet NaN).
template <class T>
HPU_AVX2 inline __m256 load8(const T *p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
  if constexpr (std::is_same_v<T, f16>) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <class T>
HPU_AVX2 inline void store8(T *p, __m256 v) {
  __m128i h;
  if constexpr (std::is_same_v<T, f16>) {
    h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    __m256i u = _mm256_castps_si256(v);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    __m256i r = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
    h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i *>(p), h);
}

template <class T, class Op>
HPU_AVX2 void loop_avx2(void *out, const void *a, const void *b, size_t n) {
  constexpr bool logical = std::is_same_v<Op, Or> || std::is_same_v<Op, And>;
  auto *o = static_cast<T *>(out);
  auto *x = static_cast<const T *>(a);
  auto *y = static_cast<const T *>(b);
  size_t i = 0;
  if constexpr ((std::is_same_v<T, bf16> || std::is_same_v<T, f16>)&&!logical) {
    for (; i + 8 <= n; i += 8) store8(o + i, vop<Op>(load8(x + i), load8(y + i)));
    loop<T, Op>(o + i, x + i, y + i, n - i);
  } else if constexpr (std::is_same_v<T, float> && !logical) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, vop<Op>(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    loop<T, Op>(o + i, x + i, y + i, n - i);
  } else if constexpr (std::is_same_v<T, double> && !logical) {
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(o + i, vop<Op>(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i)));
    loop<T, Op>(o + i, x + i, y + i, n - i);
  } else {
    loop<T, Op>(out, a, b, n);
  }
}

template <class T, class Op>
void loop_base(void *out, const void *a, const void *b, size_t n) {
  loop<T, Op>(out, a, b, n);
}

using LoopFn = void (*)(void *, const void *, const void *, size_t);

bool use_avx2() { return combine_isa() == kernels::Isa::avx2; }

template <class T, class Op>
LoopFn pick() {
  return use_avx2() ? &loop_avx2<T, Op> : &loop_base<T, Op>;
}

template <class T>
LoopFn pick_op(hpuDataType_t dtype, hpuRedOp_t op) {
  if constexpr (std::is_same_v<T, uint8_t>)  // HPU_BOOL is stored as uint8_t
    if (dtype == HPU_BOOL) return op == HPU_PROD || op == HPU_MIN ? pick<T, And>() : pick<T, Or>();
  switch (op) {
    case HPU_PROD: return pick<T, Prod>();
    case HPU_MIN: return pick<T, Min>();
    case HPU_MAX: return pick<T, Max>();
    case HPU_SUM:
    case HPU_AVG: break;
  }
  return pick<T, Sum>();
}

struct Kernel {
  LoopFn loop = nullptr;
  bool local_first = false;
};

struct KernelTable {
  Kernel k[HPU_NUM_DATA_TYPES][HPU_NUM_RED_OPS][2];
  KernelTable() {
    for (int d = 0; d < HPU_NUM_DATA_TYPES; ++d)
      for (int o = 0; o < HPU_NUM_RED_OPS; ++o)
        for (int lf = 0; lf < 2; ++lf) {
          auto dt = static_cast<hpuDataType_t>(d);
          auto op = static_cast<hpuRedOp_t>(o);
          k[d][o][lf].loop = kernels::dispatch(dt, [&](auto t) { return pick_op<decltype(t)>(dt, op); });
          k[d][o][lf].local_first = lf != 0;
        }
  }
};

const KernelTable &table() {
  static const KernelTable *t = new KernelTable();
  return *t;
}

void combine_fn(void *out, const void *in, const void *local, size_t n, const void *ctx) {
  auto *k = static_cast<const Kernel *>(ctx);
  if (k->local_first)
    k->loop(out, local, in, n);
  else
    k->loop(out, in, local, n);
}

template <class T>
__attribute__((always_inline)) inline void divide(void *buf, size_t n, int nranks) {
  auto *p = static_cast<T *>(buf);
  if constexpr (std::is_integral_v<T> && sizeof(T) <= 4) {
    // x / d rounded toward zero, through f64, which vectors can divide: the
    // quotient of two integers below 2^32 is never rounded across an integer.
    const double d = nranks;
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<double>(p[i]) / d);
  } else {
    using C = typename Num<T>::C;
    const C d = static_cast<C>(nranks);
    for (size_t i = 0; i < n; ++i) p[i] = Num<T>::store(static_cast<C>(Num<T>::load(p[i]) / d));
  }
}

template <class T>
HPU_AVX2 void divide_avx2(void *buf, size_t n, int nranks) {
  divide<T>(buf, n, nranks);
}

template <class T>
void divide_base(void *buf, size_t n, int nranks) {
  divide<T>(buf, n, nranks);
}

}  // namespace

size_t dtype_bytes(hpuDataType_t dtype) { return kernels::dtype_size(dtype); }

kernels::Isa combine_isa() {
  return kernels::best_isa() >= kernels::Isa::avx2 ? kernels::Isa::avx2 : kernels::Isa::scalar;
}

Combine make_combine(hpuDataType_t dtype, hpuRedOp_t op, const void *local, bool local_first) {
  Combine c;
  c.fn = combine_fn;
  c.ctx = &table().k[dtype][op][local_first ? 1 : 0];
  c.local = local;
  c.elem_size = dtype_bytes(dtype);
  return c;
}

void combine_rank_order(const Combine &cb, const char *const *in, int n, void *out, size_t count) {
  cb.fn(out, in[1], in[0], count, cb.ctx);
  for (int q = 2; q < n; ++q) cb.fn(out, in[q], out, count, cb.ctx);
}

void finish_average(void *buf, size_t n, hpuDataType_t dtype, hpuRedOp_t op, int nranks) {
  if (op != HPU_AVG || nranks == 1 || n == 0) return;
  kernels::dispatch(dtype, [&](auto t) {
    using T = decltype(t);
    (use_avx2() ? divide_avx2<T> : divide_base<T>)(buf, n, nranks);
  });
}

}  // namespace hpu::comm
