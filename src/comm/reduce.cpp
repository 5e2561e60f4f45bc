// Reduction kernels: one loop per (type, operation), compiled twice (baseline
// and AVX2) and picked once at run time.
#include "comm/reduce.hpp"

#include <type_traits>

#include "kernels/convert.hpp"
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

template <class T, class Op>
__attribute__((target("avx2,f16c"))) void loop_avx2(void *out, const void *a, const void *b, size_t n) {
  loop<T, Op>(out, a, b, n);
}

template <class T, class Op>
void loop_base(void *out, const void *a, const void *b, size_t n) {
  loop<T, Op>(out, a, b, n);
}

using LoopFn = void (*)(void *, const void *, const void *, size_t);

bool use_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}

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
void divide(void *buf, size_t n, int nranks) {
  auto *p = static_cast<T *>(buf);
  using C = typename Num<T>::C;
  const C d = static_cast<C>(nranks);
  for (size_t i = 0; i < n; ++i) p[i] = Num<T>::store(static_cast<C>(Num<T>::load(p[i]) / d));
}

}  // namespace

size_t dtype_bytes(hpuDataType_t dtype) { return kernels::dtype_size(dtype); }
const char *dtype_label(hpuDataType_t dtype) { return kernels::dtype_name(dtype); }

const char *redop_label(hpuRedOp_t op) {
  static const char *const names[HPU_NUM_RED_OPS] = {"sum", "prod", "min", "max", "avg"};
  return op >= 0 && op < HPU_NUM_RED_OPS ? names[op] : "?";
}

Combine make_combine(hpuDataType_t dtype, hpuRedOp_t op, const void *local, bool local_first) {
  Combine c;
  c.fn = combine_fn;
  c.ctx = &table().k[dtype][op][local_first ? 1 : 0];
  c.local = local;
  c.elem_size = dtype_bytes(dtype);
  return c;
}

void finish_average(void *buf, size_t n, hpuDataType_t dtype, hpuRedOp_t op, int nranks) {
  if (op != HPU_AVG || nranks == 1 || n == 0) return;
  kernels::dispatch(dtype, [&](auto t) { divide<decltype(t)>(buf, n, nranks); });
}

}  // namespace hpu::comm
