// Data-type conversion of buffers: dense (cast) and strided (copy_strided).
// Floating to integer truncates toward zero and saturates; NaN becomes 0;
// to bf16/f16 rounds to nearest even (convert.hpp); to bool is x != 0.
#pragma once

#include <hpu/types.h>

#include <cstddef>
#include <cstdint>

namespace hpu::kernels {

// dst[i] = src[i] for i < n; same dtype is a memcpy. Parallel over the
// compute budget for large n.
void cast(const void *src, hpuDataType_t src_dt, void *dst, hpuDataType_t dst_dt, size_t n);

// dst[idx] = src[idx] over every index of `shape` (ndim <= 8), strides in
// elements (0 allowed in src for broadcasting).
void copy_strided(const void *src, hpuDataType_t src_dt, const int64_t *src_strides, void *dst,
                  hpuDataType_t dst_dt, const int64_t *dst_strides, int ndim, const int64_t *shape);

// Every element of a dense buffer set to value converted to dt.
void fill(void *dst, hpuDataType_t dt, size_t n, double value);

}  // namespace hpu::kernels
