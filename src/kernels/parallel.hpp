// Parallel loops inside one kernel, within the process-wide compute budget.
#pragma once

#include <cstdint>
#include <functional>

namespace hpu::kernels {

// Runs fn(begin, end) over chunks covering [0, n), each at least `grain`
// long, on the calling thread plus as many helper threads as the
// ComputeBudget lends at the moment (try_acquire; none when it is busy).
// Helpers look for their next job for up to 50 us, then sleep; the caller
// waits for its helpers likewise. Returns when every chunk is done; an
// exception thrown by fn is rethrown here. Chunks are contiguous and split evenly, so a
// given (n, grain, thread count) always gives the same chunks.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)> &fn);

// parallel_for over at most `threads` even chunks: fn(begin, end) on as many
// of them as the ComputeBudget lends threads (one: fn(0, n) on the caller).
void parallel_for_threads(int64_t n, int64_t threads, const std::function<void(int64_t begin, int64_t end)> &fn);

// Runs fn(begin, end) once for each of `blocks` even blocks of [0, n)
// (block i is [n i / blocks, n (i + 1) / blocks)), the blocks shared out as
// parallel_for shares chunks. Unlike parallel_for's chunks, the blocks depend
// on n and blocks alone, never on how many threads are idle: for work whose
// bits depend on how it is cut (a product through OpenBLAS).
void parallel_blocks(int64_t n, int64_t blocks, const std::function<void(int64_t begin, int64_t end)> &fn);

// The threads the calling thread's last parallel loop ran on (its chunks'
// count; 1 before any): what a kernel's split chose, for tests.
int parallel_last_threads();

}  // namespace hpu::kernels
