// Time in the collectives: every wait of a communicator, its bootstrap and its
// transport is bounded by a deadline on the steady clock.
#pragma once

#include <chrono>

namespace hpu::comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The deadline `seconds` from now.
inline Deadline deadline_in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace hpu::comm
