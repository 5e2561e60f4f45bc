// Scalar conversions between f32 and the 16-bit float types. Round to nearest
// even; NaN stays NaN (quiet); infinities and signed zeros are kept. Vector
// paths (convert_vec.cpp) must give the same bits as these.
#pragma once

#include <cstdint>
#include <cstring>

namespace hpu::kernels {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // Subnormal: value = man * 2^-24, exact in f32.
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf (or is inf)
  if (a < 0x38800000u) {
    // Result is subnormal or zero: scale so the f16 subnormal step becomes 1
    // and let the FPU round to nearest even.
    float v = f32_from_bits(a) * 16777216.0f;  // 2^24
    uint32_t m = static_cast<uint32_t>(__builtin_nearbyintf(v));
    return static_cast<uint16_t>(sign | m);  // m == 0x400 rolls into the smallest normal
  }
  uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);  // round to nearest even at bit 13
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

}  // namespace hpu::kernels
