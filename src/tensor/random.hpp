// The per-device random generator: Philox4x32-10 keyed by a seed, with a
// counter offset. Work that draws random numbers reserves its counters on the
// calling thread when it is enqueued (reserve), then computes element i from
// counter offset + i on whatever thread runs it (kernels/random.hpp), so
// results depend only on the order of calls.
#pragma once

#include <cstdint>

namespace hpu {

class Device;

struct RandomKey {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// Takes `count` counters from dev's generator; returns where they start.
RandomKey random_reserve(Device &dev, uint64_t count);
RandomKey random_state(Device &dev);
void random_set_state(Device &dev, RandomKey key);

}  // namespace hpu
