// The reduction kernels of the collectives: out[i] = a[i] (+) b[i] for every
// data type and operation, as a transport Combine.
//
// Floating types: sum, prod, min, max (a NaN operand gives NaN); bf16 and f16
// are widened to f32 for each step and rounded to nearest even after it
// (kernels/convert.hpp). Integers wrap around. HPU_BOOL: sum/max are OR,
// prod/min are AND. avg combines as sum; finish_average() divides at the end.
//
// Determinism: a combine computes op(first, second) with a fixed operand
// order (`local_first` picks which operand is first), so two ranks that combine
// the same two values the same way get the same bits, NaN payloads included.
// The loops are compiled for AVX2 as well and picked at run time by the
// kernels' level (HPU_KERNEL_ISA), so scalar means scalar here too; both give
// the same bits (no reassociation, no FMA contraction).
#pragma once

#include <hpu/comm.h>

#include <cstddef>

#include "comm/transports/transport.hpp"
#include "kernels/cpu.hpp"

namespace hpu::comm {

size_t dtype_bytes(hpuDataType_t dtype);

// The level the loops run at: avx2 when the kernels' (kernels::best_isa()) is
// avx2 or above, else scalar.
kernels::Isa combine_isa();

// A Combine that stores into `out` op(in, local) (local_first: op(local, in)).
// The returned Combine's ctx points to static storage.
Combine make_combine(hpuDataType_t dtype, hpuRedOp_t op, const void *local, bool local_first = false);

// The order in which every default path of the collectives combines the
// ranks' values (hpuAllreduce(3)): rank order,
//   out[i] = op(...op(op(in[0][i], in[1][i]), in[2][i])..., in[n-1][i]),
// for n >= 2, through `cb` (make_combine(..., nullptr, /*local_first=*/true)).
// Rank order, because every layout can give it without moving more bytes:
// whichever rank combines an element (one of the threads of a process, a
// process in the shared area, the owner of a piece that received the others'
// contributions to it) holds all n values of it at once and needs no one
// else's partial sums, whose shape (a ring, a tree) would depend on how the
// ranks are connected. `out` may be in[0], no other input.
void combine_rank_order(const Combine &cb, const char *const *in, int n, void *out, size_t count);

// For HPU_AVG: divides n combined sums by nranks (floating: in f32/f64, then
// rounded; integers: rounded toward zero). Does nothing for other ops.
void finish_average(void *buf, size_t n, hpuDataType_t dtype, hpuRedOp_t op, int nranks);

}  // namespace hpu::comm
