// The trainer's share of HPU_FAULT_INJECT (see hpu(7)). libhpu validates the
// whole specification at initialisation; the trainer, built on the public API
// only, looks up the one fault it implements itself (checkpoint_short_write).
#pragma once

#include <cstdint>

namespace hpu::detail {

// The value of fault `name` in HPU_FAULT_INJECT, or -1 when it is not set.
int64_t injected_fault(const char *name);

}  // namespace hpu::detail
