#include "kernels/elementwise.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/convert_vec.hpp"
#include "kernels/dtype.hpp"
#include "kernels/elementwise_vec.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

namespace {

constexpr int64_t kGrain = 1 << 15;

bool is_16bit_float(hpuDataType_t dt) { return dt == HPU_BFLOAT16 || dt == HPU_FLOAT16; }

// ---- the operations on one element --------------------------------------------

// Integer arithmetic that wraps around as two's complement: in the unsigned
// type, at least unsigned int (so that 16-bit values are not promoted to a
// signed int that overflows); signed overflow is undefined behaviour.
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <Binary OP, class T>
inline T bin(T a, T b) {
  if constexpr (std::is_integral_v<T> && (OP == Binary::add || OP == Binary::sub || OP == Binary::mul)) {
    const Wrap<T> x = static_cast<std::make_unsigned_t<T>>(a), y = static_cast<std::make_unsigned_t<T>>(b);
    return static_cast<T>(OP == Binary::add ? x + y : OP == Binary::sub ? x - y : x * y);
  } else if constexpr (OP == Binary::add) return a + b;
  else if constexpr (OP == Binary::sub) return a - b;
  else if constexpr (OP == Binary::mul) return a * b;
  else if constexpr (OP == Binary::div) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "integer division by zero");
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(a));  // no overflow trap
      }
    }
    return a / b;
  } else if constexpr (OP == Binary::max) return a > b || a != a ? a : b;  // NaN propagates
  else if constexpr (OP == Binary::min) return a < b || a != a ? a : b;
  else return std::pow(a, b);
}

inline float erf_gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
inline double erf_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752)); }

template <Unary OP, class T>
inline T una(T x) {
  if constexpr (std::is_integral_v<T> && (OP == Unary::neg || OP == Unary::abs || OP == Unary::square)) {
    // The minimum's negation and absolute value are itself, as in two's complement.
    if constexpr (OP == Unary::abs) {
      if (x >= 0) return x;
    }
    if constexpr (OP == Unary::square) return bin<Binary::mul>(x, x);
    else return bin<Binary::sub>(T(0), x);
  } else if constexpr (OP == Unary::neg) return -x;
  else if constexpr (OP == Unary::abs) return std::fabs(x);  // -0 and NaN lose their sign
  else if constexpr (OP == Unary::relu) return x < T(0) ? T(0) : x;  // NaN stays NaN
  else if constexpr (OP == Unary::square) return x * x;
  else if constexpr (OP == Unary::exp) return std::exp(x);
  else if constexpr (OP == Unary::log) return std::log(x);
  else if constexpr (OP == Unary::tan) return std::tan(x);
  else if constexpr (OP == Unary::tanh) return std::tanh(x);
  else if constexpr (OP == Unary::sigmoid) return T(1) / (T(1) + std::exp(-x));
  else if constexpr (OP == Unary::gelu) return erf_gelu(x);
  else if constexpr (OP == Unary::sqrt) return std::sqrt(x);
  else if constexpr (OP == Unary::rsqrt) return T(1) / std::sqrt(x);
  else return T(1) / x;  // reciprocal
}

// d f(x) / dx
template <Unary OP, class T>
inline T una_grad(T x) {
  if constexpr (OP == Unary::neg) return T(-1);
  else if constexpr (OP == Unary::abs) return x > 0 ? T(1) : x < 0 ? T(-1) : T(0);
  else if constexpr (OP == Unary::relu) return x > 0 ? T(1) : T(0);
  else if constexpr (OP == Unary::square) return T(2) * x;
  else if constexpr (OP == Unary::exp) return std::exp(x);
  else if constexpr (OP == Unary::log) return T(1) / x;
  else if constexpr (OP == Unary::tan) {
    T t = std::tan(x);
    return T(1) + t * t;
  } else if constexpr (OP == Unary::tanh) {
    T t = std::tanh(x);
    return T(1) - t * t;
  } else if constexpr (OP == Unary::sigmoid) {
    T s = T(1) / (T(1) + std::exp(-x));
    return s * (T(1) - s);
  } else if constexpr (OP == Unary::gelu) {
    T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752)));
    T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143268);
    return cdf + x * pdf;
  } else if constexpr (OP == Unary::sqrt) return T(0.5) / std::sqrt(x);
  else if constexpr (OP == Unary::rsqrt) return T(-0.5) / (x * std::sqrt(x));
  else return T(-1) / (x * x);  // reciprocal
}

// ---- the engine: dense loops in the compute type ---------------------------------

// Calls body(C *const *in, C *out, size_t n) on blocks of the K inputs and the
// output as compute-type arrays: direct pointers for f32/f64/integers, f32
// blocks widened from (and rounded back to) bf16/f16.
template <class C, int K, class Body>
void blocks(hpuDataType_t dt, const void *const *in, void *out, size_t n, Body body) {
  const size_t es = dtype_size(dt);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
    if (!is_16bit_float(dt)) {
      const C *ins[K > 0 ? K : 1];
      for (int k = 0; k < K; ++k) ins[k] = static_cast<const C *>(in[k]) + b;
      body(ins, static_cast<C *>(out) + b, static_cast<size_t>(e - b));
      return;
    }
    if constexpr (std::is_same_v<C, float>) {
      float buf[K > 0 ? K : 1][kBlock], res[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, e - i));
        const float *ins[K > 0 ? K : 1];
        for (int k = 0; k < K; ++k) {
          load_f32(dt, static_cast<const char *>(in[k]) + i * es, buf[k], m);
          ins[k] = buf[k];
        }
        body(ins, res, m);
        store_f32(dt, res, static_cast<char *>(out) + i * es, m);
      }
    }
  });
}

// Runs the vector loop `vec` (elementwise_vec.hpp) over f32 blocks when C is
// f32 and the op has one: call(vec, inputs, out, n) per block. False otherwise
// (the plain loops then run in C).
template <class C, int K, class Fn, class Call>
bool run_vec(Fn vec, hpuDataType_t dt, const void *const *in, void *out, size_t n, Call call) {
  if constexpr (std::is_same_v<C, float>) {
    if (!vec) return false;
    blocks<float, K>(dt, in, out, n, [&](const float *const *x, float *o, size_t m) { call(vec, x, o, m); });
    return true;
  } else {
    return false;
  }
}

// Calls fn(C{}) with the compute type of dt.
template <class Fn>
void compute_type(hpuDataType_t dt, Fn fn) {
  dispatch(dt, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>) fn(float{});
    else fn(T{});
  });
}

template <Binary OP>
void binary_op(hpuDataType_t dt, const void *a, const void *b, void *out, size_t n) {
  const void *in[2] = {a, b};
  compute_type(dt, [&](auto c) {
    using C = decltype(c);
    if constexpr (OP == Binary::pow && std::is_integral_v<C>) {
      fail(HPU_ERROR_UNSUPPORTED, "pow on %s", dtype_name(dt));
    } else if (!run_vec<C, 2>(elementwise_vec().binary[static_cast<int>(OP)], dt, in, out, n,
                               [](auto vec, const float *const *x, float *o, size_t m) { vec(x[0], x[1], o, m); })) {
      blocks<C, 2>(dt, in, out, n, [](const C *const *x, C *o, size_t m) {
        const C *x0 = x[0], *x1 = x[1];
        for (size_t i = 0; i < m; ++i) o[i] = bin<OP>(x0[i], x1[i]);
      });
    }
  });
}

template <Binary OP>
void binary_scalar_op(hpuDataType_t dt, const void *a, double s, void *out, size_t n) {
  const void *in[1] = {a};
  compute_type(dt, [&](auto c) {
    using C = decltype(c);
    if constexpr (OP == Binary::pow && std::is_integral_v<C>) {
      fail(HPU_ERROR_UNSUPPORTED, "pow on %s", dtype_name(dt));
    } else if (const float bf = static_cast<float>(s);
               !run_vec<C, 1>(elementwise_vec().binary_scalar[static_cast<int>(OP)], dt, in, out, n,
                              [bf](auto vec, const float *const *x, float *o, size_t m) { vec(x[0], bf, o, m); })) {
      const C b = static_cast<C>(s);
      blocks<C, 1>(dt, in, out, n, [b](const C *const *x, C *o, size_t m) {
        const C *x0 = x[0];
        for (size_t i = 0; i < m; ++i) o[i] = bin<OP>(x0[i], b);
      });
    }
  });
}

template <Unary OP>
void unary_op(hpuDataType_t dt, const void *x, void *out, size_t n) {
  const void *in[1] = {x};
  compute_type(dt, [&](auto c) {
    using C = decltype(c);
    constexpr bool integral_ok = OP == Unary::neg || OP == Unary::abs || OP == Unary::relu || OP == Unary::square;
    if constexpr (std::is_integral_v<C> && !integral_ok) {
      fail(HPU_ERROR_UNSUPPORTED, "%s on %s", unary_name(OP), dtype_name(dt));
    } else if (!run_vec<C, 1>(elementwise_vec().unary[static_cast<int>(OP)], dt, in, out, n,
                               [](auto vec, const float *const *v, float *o, size_t m) { vec(v[0], o, m); })) {
      blocks<C, 1>(dt, in, out, n, [](const C *const *v, C *o, size_t m) {
        const C *v0 = v[0];
        for (size_t i = 0; i < m; ++i) o[i] = una<OP>(v0[i]);
      });
    }
  });
}

template <Unary OP>
void unary_backward_op(hpuDataType_t dt, const void *x, const void *g, void *out, size_t n) {
  const void *in[2] = {x, g};
  compute_type(dt, [&](auto c) {
    using C = decltype(c);
    if constexpr (std::is_integral_v<C>) {
      fail(HPU_ERROR_UNSUPPORTED, "%s backward on %s", unary_name(OP), dtype_name(dt));
    } else if (!run_vec<C, 2>(OP == Unary::relu ? elementwise_vec().relu_backward : nullptr, dt, in, out, n,
                               [](auto vec, const float *const *v, float *o, size_t m) { vec(v[0], v[1], o, m); })) {
      blocks<C, 2>(dt, in, out, n, [](const C *const *v, C *o, size_t m) {
        const C *x0 = v[0], *g0 = v[1];
        for (size_t i = 0; i < m; ++i) o[i] = g0[i] * una_grad<OP>(x0[i]);
      });
    }
  });
}

#define HPU_BINARY_CASES(X) X(add) X(sub) X(mul) X(div) X(max) X(min) X(pow)
#define HPU_UNARY_CASES(X) \
  X(neg) X(abs) X(exp) X(log) X(tan) X(tanh) X(sigmoid) X(relu) X(gelu) X(sqrt) X(rsqrt) X(reciprocal) X(square)

}  // namespace

void load_f32(hpuDataType_t dt, const void *src, float *dst, size_t n) {
  if (n == 0) return;  // dst or src may be an empty buffer's NULL, which memcpy must not get
  switch (dt) {
    case HPU_BFLOAT16: bf16_to_f32_n(static_cast<const uint16_t *>(src), dst, n); return;
    case HPU_FLOAT16: f16_to_f32_n(static_cast<const uint16_t *>(src), dst, n); return;
    case HPU_FLOAT32: std::memcpy(dst, src, n * sizeof(float)); return;
    case HPU_FLOAT64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<const double *>(src)[i]);
      return;
    default: fail(HPU_ERROR_UNSUPPORTED, "load_f32 of %s", dtype_name(dt));
  }
}

void store_f32(hpuDataType_t dt, const float *src, void *dst, size_t n) {
  if (n == 0) return;
  switch (dt) {
    case HPU_BFLOAT16: f32_to_bf16_n(src, static_cast<uint16_t *>(dst), n); return;
    case HPU_FLOAT16: f32_to_f16_n(src, static_cast<uint16_t *>(dst), n); return;
    case HPU_FLOAT32: std::memcpy(dst, src, n * sizeof(float)); return;
    case HPU_FLOAT64:
      for (size_t i = 0; i < n; ++i) static_cast<double *>(dst)[i] = src[i];
      return;
    default: fail(HPU_ERROR_UNSUPPORTED, "store_f32 of %s", dtype_name(dt));
  }
}

const char *binary_name(Binary op) {
  switch (op) {
#define X(name) \
  case Binary::name: return #name;
    HPU_BINARY_CASES(X)
#undef X
  }
  return "?";
}

const char *unary_name(Unary op) {
  switch (op) {
#define X(name) \
  case Unary::name: return #name;
    HPU_UNARY_CASES(X)
#undef X
  }
  return "?";
}

bool binary_supports(Binary op, hpuDataType_t dt) {
  if (!dtype_valid(dt) || dt == HPU_BOOL) return false;
  return op != Binary::pow || is_floating(dt);
}

bool unary_supports(Unary op, hpuDataType_t dt) {
  if (is_floating(dt)) return true;
  bool signed_int = dt == HPU_INT8 || dt == HPU_INT32 || dt == HPU_INT64;
  return signed_int && (op == Unary::neg || op == Unary::abs || op == Unary::relu || op == Unary::square);
}

void binary(Binary op, hpuDataType_t dt, const void *a, const void *b, void *out, size_t n) {
  switch (op) {
#define X(name)                                        \
  case Binary::name:                                   \
    return binary_op<Binary::name>(dt, a, b, out, n);
    HPU_BINARY_CASES(X)
#undef X
  }
}

void binary_scalar(Binary op, hpuDataType_t dt, const void *a, double b, void *out, size_t n) {
  switch (op) {
#define X(name)                                               \
  case Binary::name:                                          \
    return binary_scalar_op<Binary::name>(dt, a, b, out, n);
    HPU_BINARY_CASES(X)
#undef X
  }
}

void binary_strided(Binary op, hpuDataType_t dt, int ndim, const int64_t *shape, const void *a,
                    const int64_t *a_strides, const void *b, const int64_t *b_strides, void *out) {
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= shape[d];
  if (total == 0) return;
  if (ndim == 0) return binary(op, dt, a, b, out, 1);
  // Rows along the last dim; each row is dense, a broadcast scalar, or strided.
  const int64_t inner = shape[ndim - 1], rows = total / inner;
  const size_t es = dtype_size(dt);
  const int64_t as = a_strides[ndim - 1], bs = b_strides[ndim - 1];
  parallel_for(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t r0, int64_t r1) {
    char abuf[kBlock * 8], bbuf[kBlock * 8];
    for (int64_t r = r0; r < r1; ++r) {
      int64_t ao = 0, bo = 0, rem = r;
      for (int dim = ndim - 2; dim >= 0; --dim) {
        int64_t i = rem % shape[dim];
        rem /= shape[dim];
        ao += i * a_strides[dim];
        bo += i * b_strides[dim];
      }
      const char *ap = static_cast<const char *>(a) + ao * static_cast<int64_t>(es);
      const char *bp = static_cast<const char *>(b) + bo * static_cast<int64_t>(es);
      char *op_ = static_cast<char *>(out) + r * inner * static_cast<int64_t>(es);
      for (int64_t i = 0; i < inner; i += kBlock) {
        size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, inner - i));
        // Gather non-dense operands of this block into dense buffers.
        auto dense = [&](const char *p, int64_t stride, char *buf) -> const char * {
          if (stride == 1) return p + i * static_cast<int64_t>(es);
          for (size_t j = 0; j < m; ++j)
            std::memcpy(buf + j * es, p + (i + static_cast<int64_t>(j)) * stride * static_cast<int64_t>(es), es);
          return buf;
        };
        const char *ad = dense(ap, as, abuf), *bd = dense(bp, bs, bbuf);
        binary(op, dt, ad, bd, op_ + i * static_cast<int64_t>(es), m);
      }
    }
  });
}

void unary(Unary op, hpuDataType_t dt, const void *x, void *out, size_t n) {
  switch (op) {
#define X(name)                                   \
  case Unary::name:                               \
    return unary_op<Unary::name>(dt, x, out, n);
    HPU_UNARY_CASES(X)
#undef X
  }
}

void unary_backward(Unary op, hpuDataType_t dt, const void *x, const void *grad_out, void *grad_in, size_t n) {
  switch (op) {
#define X(name)                                                               \
  case Unary::name:                                                           \
    return unary_backward_op<Unary::name>(dt, x, grad_out, grad_in, n);
    HPU_UNARY_CASES(X)
#undef X
  }
}

void axpby(float alpha, const void *x, hpuDataType_t x_dt, float beta, void *y, hpuDataType_t y_dt, size_t n) {
  const size_t xs = dtype_size(x_dt), ys = dtype_size(y_dt);
  if (y_dt == HPU_FLOAT64) {
    double *yd = static_cast<double *>(y);
    parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
      float xb[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, e - i));
        if (x_dt == HPU_FLOAT64) {
          const double *xd = static_cast<const double *>(x) + i;
          for (size_t j = 0; j < m; ++j) yd[i + j] = double(beta) * yd[i + j] + double(alpha) * xd[j];
        } else {
          load_f32(x_dt, static_cast<const char *>(x) + i * xs, xb, m);
          for (size_t j = 0; j < m; ++j) yd[i + j] = double(beta) * yd[i + j] + double(alpha) * xb[j];
        }
      }
    });
    return;
  }
  auto axpby_f32 = elementwise_vec().axpby;
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t b, int64_t e) {
    float xb[kBlock], yb[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, e - i));
      const char *xp = static_cast<const char *>(x) + i * xs;
      char *yp = static_cast<char *>(y) + i * ys;
      // f32 operands are used in place; the others go through f32 blocks.
      const float *xf = x_dt == HPU_FLOAT32 ? reinterpret_cast<const float *>(xp) : xb;
      float *yf = y_dt == HPU_FLOAT32 ? reinterpret_cast<float *>(yp) : yb;
      if (xf == xb) load_f32(x_dt, xp, xb, m);
      if (yf == yb && beta != 0.0f) load_f32(y_dt, yp, yb, m);
      axpby_f32(alpha, xf, beta, yf, m);
      if (yf == yb) store_f32(y_dt, yb, yp, m);
    }
  });
}

}  // namespace hpu::kernels
