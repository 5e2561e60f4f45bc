#include "kernels/random.hpp"

#include <cmath>

#include "core/error.hpp"
#include "kernels/dtype.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/parallel.hpp"

namespace hpu::kernels {

Philox4 philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

namespace {

// Element i = gen(philox(seed, offset + i)) as double, stored as dt.
template <class Gen>
void fill_with(void *dst, hpuDataType_t dt, size_t n, uint64_t seed, uint64_t offset, Gen gen) {
  if (!is_floating(dt)) fail(HPU_ERROR_UNSUPPORTED, "random fill of %s: floating types only", dtype_name(dt));
  const size_t es = dtype_size(dt);
  parallel_for(static_cast<int64_t>(n), 1 << 14, [&](int64_t b, int64_t e) {
    if (dt == HPU_FLOAT64) {
      double *d = static_cast<double *>(dst);
      for (int64_t i = b; i < e; ++i) d[i] = gen(philox(seed, offset + static_cast<uint64_t>(i)), true);
      return;
    }
    float buf[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      size_t m = static_cast<size_t>(std::min<int64_t>(kBlock, e - i));
      for (size_t j = 0; j < m; ++j)
        buf[j] = static_cast<float>(gen(philox(seed, offset + static_cast<uint64_t>(i) + j), false));
      store_f32(dt, buf, static_cast<char *>(dst) + i * es, m);
    }
  });
}

// [0, 1) with 53 random bits (wide) or 24 (float types).
double unit(const Philox4 &r, bool wide) {
  if (!wide) return uniform01(r);
  uint64_t bits = (uint64_t{r.v[0]} << 21) ^ (r.v[1] >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace

void fill_uniform(void *dst, hpuDataType_t dt, size_t n, uint64_t seed, uint64_t offset, double low, double high) {
  fill_with(dst, dt, n, seed, offset, [=](const Philox4 &r, bool wide) {
    double v = low + (high - low) * unit(r, wide);
    return v < high ? v : low;  // rounding may reach high; keep [low, high)
  });
}

void fill_normal(void *dst, hpuDataType_t dt, size_t n, uint64_t seed, uint64_t offset, double mean, double std) {
  fill_with(dst, dt, n, seed, offset, [=](const Philox4 &r, bool) {
    double u1 = (static_cast<double>(r.v[2]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
    double u2 = static_cast<double>(r.v[3]) * (1.0 / 4294967296.0);
    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

}  // namespace hpu::kernels
