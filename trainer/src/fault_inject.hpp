// The trainer's share of HPU_FAULT_INJECT (see hpu(7)): the one fault it
// implements itself (checkpoint_short_write). libhpu validates the whole
// specification at initialisation; the trainer reads it through hpuConfigGet,
// so the HPU_CONFIG file sets it as it sets libhpu's own faults.
#pragma once

#include <cstdint>

namespace hpu::detail {

// The value of fault `name` in HPU_FAULT_INJECT, or -1 when it is not set.
int64_t injected_fault(const char *name);

// Replaces the specification for this process (tests change it while libhpu,
// which reads its settings once, keeps its own); nullptr goes back to libhpu's.
void override_injected_faults(const char *spec);

}  // namespace hpu::detail
