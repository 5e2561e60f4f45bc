// Autocast regions: a stack per thread, so that a region entered on one thread
// never changes the precision of ops enqueued by another.
#include <vector>

#include "autocast/autocast.hpp"
#include "core/error.hpp"

namespace hpu::autocast {

namespace {
thread_local std::vector<State> t_regions;
}

void push(bool enabled, hpuDataType_t dtype) { t_regions.push_back({enabled, dtype}); }

void pop() {
  if (t_regions.empty())
    fail(HPU_ERROR_INVALID_USAGE, "no autocast region to leave on this thread (every pop needs an earlier push)");
  t_regions.pop_back();
}

State current() { return t_regions.empty() ? State{} : t_regions.back(); }

}  // namespace hpu::autocast
