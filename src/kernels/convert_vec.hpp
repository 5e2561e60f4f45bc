// Array conversions between f32 and bf16/f16, vectorised. Every path gives the
// same bits as the scalar functions of convert.hpp (tests check all 2^32 f32
// patterns). The plain functions use best_isa(); convert_paths(isa) gives one
// path explicitly (for tests and benchmarks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu.hpp"

namespace hpu::kernels {

struct ConvertPaths {
  void (*f32_to_bf16)(const float *src, uint16_t *dst, size_t n);
  void (*bf16_to_f32)(const uint16_t *src, float *dst, size_t n);
  void (*f32_to_f16)(const float *src, uint16_t *dst, size_t n);
  void (*f16_to_f32)(const uint16_t *src, float *dst, size_t n);
};

// The functions of one path; isa must be supported.
const ConvertPaths &convert_paths(Isa isa);

void f32_to_bf16_n(const float *src, uint16_t *dst, size_t n);
void bf16_to_f32_n(const uint16_t *src, float *dst, size_t n);
void f32_to_f16_n(const float *src, uint16_t *dst, size_t n);
void f16_to_f32_n(const uint16_t *src, float *dst, size_t n);

}  // namespace hpu::kernels
