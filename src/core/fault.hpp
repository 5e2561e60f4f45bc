// Fault injection: HPU_FAULT_INJECT makes the library itself fail in chosen
// places, so tests can show that every failure surfaces as its documented
// status, leaks nothing, and leaves the process able to go on. A comma-
// separated list of name=value:
//   alloc_fail_after=N       device allocations after the first N fail (OOM)
//   alloc_fail_count=K       ... K of them, then allocations work again (default: all)
//   conn_drop_after_bytes=N  a transport connection is dropped after N bytes sent
//   peer_delay_ms=N          each send of the rank(s) chosen by fault_rank waits N ms
//   peer_stall=1             the chosen rank stops sending (a stalled peer)
//   fault_rank=R             the rank the peer faults apply to (default: every rank)
//   checkpoint_short_write=N a checkpoint write stops after N bytes and fails
//   stop_in_setup=1          the chosen rank stops itself (SIGSTOP) midway through
//                            setting up its process transports (see setup_point)
// An unknown name or a bad value fails initialisation with HPU_ERROR_CONFIG.
#pragma once

#include <cstdint>
#include <string>

namespace hpu::fault {

// The value of a fault, or -1 when it is not set.
int64_t value(const char *name);
bool active(const char *name);

// Counts a device allocation; true when this one must fail.
bool fail_this_allocation();

// A point midway through the setup of a process transport (`what`: "shm",
// "tcp", "verbs"), where this rank's side exists and its peers wait for it:
// with stop_in_setup=1 the rank chosen by fault_rank (every rank if unset)
// logs it and stops its own process there with SIGSTOP, so that a test can
// kill it or leave it stopped at that moment.
void setup_point(const char *what, int rank);

// Parses a specification (the HPU_FAULT_INJECT text); throws HPU_ERROR_CONFIG.
void configure(const std::string &spec);

}  // namespace hpu::fault
