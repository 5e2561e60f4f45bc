// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): element
// i of a draw uses counter offset + i under key seed, so any thread may compute
// any element and the result depends only on (seed, offset).
#pragma once

#include <hpu/types.h>

#include <cstddef>
#include <cstdint>

namespace hpu::kernels {

struct Philox4 {
  uint32_t v[4];
};

// Four 32-bit random words for (seed, counter).
Philox4 philox(uint64_t seed, uint64_t counter);

// Uniform float in [0, 1) from the first word (24 random bits).
inline float uniform01(const Philox4 &r) { return static_cast<float>(r.v[0] >> 8) * (1.0f / 16777216.0f); }

// dst[i] for i < n, floating dt: uniform in [low, high) / normal(mean, std)
// (Box-Muller on two words), counters offset .. offset + n - 1.
void fill_uniform(void *dst, hpuDataType_t dt, size_t n, uint64_t seed, uint64_t offset, double low, double high);
void fill_normal(void *dst, hpuDataType_t dt, size_t n, uint64_t seed, uint64_t offset, double mean, double std);

}  // namespace hpu::kernels
