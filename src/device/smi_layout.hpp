// The layout of the shared-memory segment through which each process using
// libhpu publishes its devices' figures for hpu-smi. One segment per process,
// /dev/shm/hpu-smi.<pid>, readable by all, written only by its owner, removed
// at exit; hpu-smi recognises and removes the segments of dead processes.
//
// Readers copy the segment and retry while `seq` is odd or changed during the
// copy (a sequence lock), so they never see half an update.
#pragma once

#include <cstdint>

namespace hpu::smi {

constexpr uint64_t kMagic = 0x31494D5355504855ull;  // "HPUSMI1" little-endian-ish tag
constexpr uint32_t kVersion = 1;
constexpr int kMaxDevices = 256;
constexpr const char *kPrefix = "hpu-smi.";  // under /dev/shm

struct DeviceFigures {
  int32_t ordinal;
  int32_t module_id;
  int32_t open;          // open count (0 = closed)
  int32_t streams;       // streams with a worker
  int32_t comms;         // open communicators (reported by the collectives)
  int32_t reserved0;
  char profile[16];
  uint64_t limit, in_use, max_in_use, num_allocs, num_frees, max_alloc_size;
  uint64_t total_system_allocs, total_system_frees, reserved_bytes, segment_allocs, segment_frees;
  uint64_t busy_ns;      // time its streams spent running operations
  double utilization;    // busy share over the last publishing interval, 0..1 per stream
};

struct Segment {
  uint64_t magic;
  uint32_t version;
  int32_t pid;
  uint64_t seq;             // odd while the owner writes
  uint64_t updated_unix_ns; // wall-clock time of the last update
  uint64_t started_unix_ns;
  char process[64];         // the owner's program name
  int32_t num_devices;
  int32_t reserved0;
  DeviceFigures devices[kMaxDevices];
};

}  // namespace hpu::smi
