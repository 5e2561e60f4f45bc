// Reductions. The input is seen as a dense [outer, n, inner] array and reduced
// over its middle dim into a dense [outer, inner] output: all elements
// (outer = inner = 1), rows (inner = 1), or columns (outer = 1) are special
// cases. bf16/f16/f32 accumulate in f32 (pairwise, so long sums stay
// accurate), f64 in f64, integers in int64. Output dtype may differ from
// input (e.g. bf16 in, f32 out).
#pragma once

#include <hpu/types.h>

#include <cstdint>

namespace hpu::kernels {

enum class Reduce { sum, mean, max, min };

const char *reduce_name(Reduce op);
bool reduce_supports(Reduce op, hpuDataType_t dt);

// n == 0: sum 0, mean NaN, max -inf, min +inf (integers: 0).
void reduce(Reduce op, hpuDataType_t dt, const void *in, int64_t outer, int64_t n, int64_t inner, void *out,
            hpuDataType_t out_dt);

}  // namespace hpu::kernels
