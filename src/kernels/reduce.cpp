#include "kernels/reduce.hpp"

// GCC 12 warns about the deliberately undefined lanes inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/cast.hpp"
#include "kernels/convert_avx512.hpp"
#include "kernels/cpu.hpp"
#include "kernels/dtype.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/elementwise_vec.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

// The type values are accumulated in.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double,
                               std::conditional_t<std::is_integral_v<T>, int64_t, float>>;

// a + b; integers wrap around as two's complement (as MPI's and NCCL's sums
// do), added as unsigned values: signed overflow is undefined behaviour.
template <class A>
inline A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// Sum of get(i) for i in [b, e): pairwise over blocks of 8 partial sums, so
// that long f32 sums keep their accuracy and the inner loop vectorises.
template <class A, class Get>
A pairwise_sum(const Get &get, int64_t b, int64_t e) {
  if (e - b <= 64) {
    A s[8] = {};
    for (int64_t i = b; i < e; ++i) s[(i - b) & 7] = add<A>(s[(i - b) & 7], get(i));
    return add(add(add(s[0], s[1]), add(s[2], s[3])), add(add(s[4], s[5]), add(s[6], s[7])));
  }
  int64_t mid = b + (((e - b) / 2 + 7) & ~int64_t(7));
  return add(pairwise_sum<A>(get, b, mid), pairwise_sum<A>(get, mid, e));
}

// Reduces get(0) .. get(n - 1), n > 0, as type A. NaN propagates through max/min.
template <Reduce OP, class A, class Get>
A reduce_run(int64_t n, const Get &get) {
  if constexpr (OP == Reduce::sum || OP == Reduce::mean) {
    return pairwise_sum<A>(get, 0, n);
  } else {
    A r = get(0);
    for (int64_t i = 1; i < n; ++i) {
      A v = get(i);
      if constexpr (std::is_floating_point_v<A>) {
        if (v != v) return v;
      }
      r = OP == Reduce::max ? (v > r ? v : r) : (v < r ? v : r);
    }
    return r;
  }
}

template <Reduce OP, class A>
A empty_value() {
  if constexpr (OP == Reduce::sum || std::is_integral_v<A>) return A(0);
  else if constexpr (OP == Reduce::mean) return std::numeric_limits<A>::quiet_NaN();
  else if constexpr (OP == Reduce::max) return -std::numeric_limits<A>::infinity();
  else return std::numeric_limits<A>::infinity();
}

constexpr int64_t kChunk = 1 << 16;  // elements per partial result of one long row

template <class T>
constexpr hpuDataType_t float16_dt() {
  return std::is_same_v<T, bf16> ? HPU_BFLOAT16 : HPU_FLOAT16;
}

// Reduces one dense row of n > 0 elements. 16-bit floats are widened in
// blocks; the sum of a block's pairwise tree is added pairwise again.
template <Reduce OP, class T, class A = Acc<T>>
A reduce_row(const T *row, int64_t n) {
  if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
    float buf[kBlock];
    A small[kChunk / kBlock] = {};
    std::vector<A> big;
    const int64_t blocks = (n + static_cast<int64_t>(kBlock) - 1) / static_cast<int64_t>(kBlock);
    if (blocks > static_cast<int64_t>(kChunk / kBlock)) big.resize(static_cast<size_t>(blocks));
    A *parts = big.empty() ? small : big.data();
    int64_t np = 0;
    for (int64_t i = 0; i < n; i += kBlock) {
      size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, n - i));
      load_f32(float16_dt<T>(), row + i, buf, m);
      parts[np++] = reduce_run<OP, A>(static_cast<int64_t>(m), [&](int64_t j) { return buf[j]; });
    }
    return reduce_run<OP, A>(np, [&](int64_t j) { return parts[j]; });
  } else {
    return reduce_run<OP, A>(n, [&](int64_t i) { return static_cast<A>(row[i]); });
  }
}

template <Reduce OP, class A>
A combine(A a, A b) {
  if constexpr (OP == Reduce::sum || OP == Reduce::mean) return add(a, b);
  else if constexpr (std::is_floating_point_v<A>) {
    if (a != a || b != b) return a != a ? a : b;
  }
  return OP == Reduce::max ? (b > a ? b : a) : (b < a ? b : a);
}

// Column sums of f32, bf16 and f16 add whole rows at a time on the f32 vector path.
template <Reduce OP, class T>
constexpr bool kVectorSum = (OP == Reduce::sum || OP == Reduce::mean) &&
                            (std::is_same_v<T, float> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>);

// The lanes of `live` of 16 values of T (f32, bf16 or f16) from p, as f32
// (exact); the other lanes 0.
template <class T>
HPU_AVX512 inline __m512 load16(const T *p, __mmask16 live) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_maskz_loadu_ps(live, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(live, p);
    if constexpr (std::is_same_v<T, bf16>) return _mm512_castsi512_ps(bf16_widen16(h));
    else return _mm512_cvtph_ps(h);
  }
}

// r[0 .. 16 (NV - 1) + last) = the column sums of n > 0 rows of T (row stride
// ld) from in: row 0, plus row 1, plus row 2 ... in f32, the scalar loop's
// bits, with NV vectors of sums held in registers while the rows pass.
template <class T, int NV>
HPU_AVX512 void column_strip(const T *in, int64_t n, int64_t ld, float *r, int last) {
  const __mmask16 all = 0xFFFF, tail = static_cast<__mmask16>((1u << last) - 1);
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = load16(in + 16 * v, v + 1 < NV ? all : tail);
  for (int64_t i = 1; i < n; ++i) {
    const T *row = in + i * ld;
    for (int v = 0; v < NV; ++v) acc[v] = _mm512_add_ps(acc[v], load16(row + 16 * v, v + 1 < NV ? all : tail));
  }
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(r + 16 * v, v + 1 < NV ? all : tail, acc[v]);
}

// Column sums of cols columns of n > 0 rows (row stride ld) into r, 256
// columns at a time (then 128, then what is left): the sums stay in registers
// while the rows stream past, instead of each row being widened into a block
// and added to the sums there (a linear's bias gradient).
template <class T>
HPU_AVX512 void column_sums_avx512(const T *in, int64_t n, int64_t ld, int64_t cols, float *r) {
  int64_t j = 0;
  for (; j + 256 <= cols; j += 256) column_strip<T, 16>(in + j, n, ld, r + j, 16);
  for (; j + 128 <= cols; j += 128) column_strip<T, 8>(in + j, n, ld, r + j, 16);
  if (j == cols) return;
  const int64_t vectors = (cols - j + 15) / 16;
  const int last = static_cast<int>(cols - j - 16 * (vectors - 1));
  switch (vectors) {
    case 1: return column_strip<T, 1>(in + j, n, ld, r + j, last);
    case 2: return column_strip<T, 2>(in + j, n, ld, r + j, last);
    case 3: return column_strip<T, 3>(in + j, n, ld, r + j, last);
    case 4: return column_strip<T, 4>(in + j, n, ld, r + j, last);
    case 5: return column_strip<T, 5>(in + j, n, ld, r + j, last);
    case 6: return column_strip<T, 6>(in + j, n, ld, r + j, last);
    case 7: return column_strip<T, 7>(in + j, n, ld, r + j, last);
    default: return column_strip<T, 8>(in + j, n, ld, r + j, last);
  }
}

template <Reduce OP, class T>
void reduce_typed(const T *in, int64_t outer, int64_t n, int64_t inner, void *out, hpuDataType_t out_dt) {
  using A = Acc<T>;
  const int64_t outputs = outer * inner;
  std::vector<A> res(static_cast<size_t>(outputs), empty_value<OP, A>());
  if (n > 0 && inner == 1 && n > kChunk && outer < 4) {
    // Few long rows: partial results of fixed chunks in parallel, so the
    // result does not depend on the number of threads.
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<A> parts(static_cast<size_t>(outer * chunks));
    parallel_for(outer * chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        int64_t row = c / chunks, at = (c % chunks) * kChunk;
        parts[static_cast<size_t>(c)] = reduce_row<OP>(in + row * n + at, std::min(kChunk, n - at));
      }
    });
    for (int64_t row = 0; row < outer; ++row)
      res[static_cast<size_t>(row)] =
          reduce_run<OP, A>(chunks, [&](int64_t c) { return parts[static_cast<size_t>(row * chunks + c)]; });
  } else if (n > 0 && inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kChunk / n), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) res[static_cast<size_t>(row)] = reduce_row<OP>(in + row * n, n);
    });
  } else if (n > 0) {
    // Columns: accumulate n rows of a span of `inner` into the results.
    const bool avx512 = vector_isa(best_isa()) == Isa::avx512;
    const int64_t spans = (inner + kBlock - 1) / static_cast<int64_t>(kBlock);
    parallel_for(outer * spans, std::max<int64_t>(1, kChunk / (n * static_cast<int64_t>(kBlock))),
                 [&](int64_t b, int64_t e) {
                   float buf[kBlock];
                   const auto add = elementwise_vec().binary[static_cast<int>(Binary::add)];
                   for (int64_t t = b; t < e; ++t) {
                     int64_t o = t / spans, at = (t % spans) * static_cast<int64_t>(kBlock);
                     size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, inner - at));
                     A *r = res.data() + o * inner + at;
                     if constexpr (kVectorSum<OP, T>) {
                       if (avx512) {
                         column_sums_avx512(in + o * n * inner + at, n, inner, static_cast<int64_t>(m), r);
                         continue;
                       }
                     }
                     for (int64_t i = 0; i < n; ++i) {
                       const T *src = in + (o * n + i) * inner + at;
                       if constexpr (kVectorSum<OP, T>) {
                         // r += row i on the f32 vector path (the same bits as the scalar loop).
                         const float *row = buf;
                         if constexpr (std::is_same_v<T, float>) row = src;
                         else load_f32(float16_dt<T>(), src, buf, m);
                         if (i == 0) std::copy(row, row + m, r);
                         else add(r, row, r, m);
                       } else if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) {
                         load_f32(float16_dt<T>(), src, buf, m);
                         for (size_t j = 0; j < m; ++j) r[j] = i == 0 ? buf[j] : combine<OP, A>(r[j], buf[j]);
                       } else {
                         for (size_t j = 0; j < m; ++j)
                           r[j] = i == 0 ? static_cast<A>(src[j]) : combine<OP, A>(r[j], static_cast<A>(src[j]));
                       }
                     }
                   }
                 });
  }
  if constexpr (OP == Reduce::mean) {
    if (n > 0)
      for (A &r : res) r = static_cast<A>(r / static_cast<A>(n));
  }
  hpuDataType_t acc_dt = std::is_same_v<A, double> ? HPU_FLOAT64 : std::is_same_v<A, float> ? HPU_FLOAT32 : HPU_INT64;
  cast(res.data(), acc_dt, out, out_dt, static_cast<size_t>(outputs));
}

template <Reduce OP>
void reduce_op(hpuDataType_t dt, const void *in, int64_t outer, int64_t n, int64_t inner, void *out,
               hpuDataType_t out_dt) {
  dispatch(dt, [&](auto v) {
    using T = decltype(v);
    reduce_typed<OP, T>(static_cast<const T *>(in), outer, n, inner, out, out_dt);
  });
}

}  // namespace

const char *reduce_name(Reduce op) {
  switch (op) {
    case Reduce::sum: return "sum";
    case Reduce::mean: return "mean";
    case Reduce::max: return "max";
    case Reduce::min: return "min";
  }
  return "?";
}

bool reduce_supports(Reduce op, hpuDataType_t dt) {
  if (!dtype_valid(dt)) return false;
  return op != Reduce::mean || is_floating(dt);
}

void reduce(Reduce op, hpuDataType_t dt, const void *in, int64_t outer, int64_t n, int64_t inner, void *out,
            hpuDataType_t out_dt) {
  if (!reduce_supports(op, dt)) fail(HPU_ERROR_UNSUPPORTED, "%s over %s", reduce_name(op), dtype_name(dt));
  switch (op) {
    case Reduce::sum: return reduce_op<Reduce::sum>(dt, in, outer, n, inner, out, out_dt);
    case Reduce::mean: return reduce_op<Reduce::mean>(dt, in, outer, n, inner, out, out_dt);
    case Reduce::max: return reduce_op<Reduce::max>(dt, in, outer, n, inner, out, out_dt);
    case Reduce::min: return reduce_op<Reduce::min>(dt, in, outer, n, inner, out, out_dt);
  }
}

}  // namespace hpu::kernels
