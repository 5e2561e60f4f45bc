// The verbs transport's registration cache: memory regions for device memory,
// registered once per allocator segment and kept, as NCCL's reg cache keeps
// registrations of user buffers. A transfer into or out of device memory then
// needs no registration of its own: the receiver hands its segment's rkey to
// the sender, which RDMA-writes straight from its own segment (zero copy).
//
// Keys are (segment base, generation): a segment the allocator unmapped and
// mapped again at the same address is a new generation, so a stale
// registration (whose pages the real verbs keep pinned) is never handed out.
// Stale and least recently used registrations leave the cache when it holds
// more than its capacity; a registration in use (a transfer holds it) is
// deregistered only when the last user lets it go.
// Memory outside device segments (host buffers) is not registered: transfers
// of it go through the transport's own registered buffers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "comm/transports/verbs/api.hpp"

namespace hpu::comm {

// A segment of device memory holding a range.
struct MemorySegment {
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t generation = 0;
};
using SegmentLookup = bool (*)(const void *ptr, size_t bytes, MemorySegment *out);

// Where the cache finds device memory: the device allocator's segments, unless
// a white-box test sets a lookup of its own (nullptr: the allocator's again).
void set_verbs_segment_lookup(SegmentLookup lookup);

class VerbsRegistration {
 public:
  VerbsRegistration(const VerbsApi &api, ibv_mr *mr) : api_(api), mr_(mr) {}
  ~VerbsRegistration() { api_.dereg_mr(mr_); }
  VerbsRegistration(const VerbsRegistration &) = delete;
  VerbsRegistration &operator=(const VerbsRegistration &) = delete;
  const ibv_mr &mr() const { return *mr_; }

 private:
  const VerbsApi &api_;
  ibv_mr *mr_;
};
using VerbsRegistrationPtr = std::shared_ptr<const VerbsRegistration>;

class VerbsRegCache {
 public:
  VerbsRegCache(const VerbsApi &api, ibv_pd *pd, size_t capacity = 64) : api_(api), pd_(pd), capacity_(capacity) {}

  // A registration (local and remote write) covering [ptr, ptr + bytes): its
  // device memory segment's, registered at the first use; nullptr when the
  // range is not device memory or the adapter refuses to register it (logged).
  // Thread-safe.
  VerbsRegistrationPtr find(const void *ptr, size_t bytes);

  struct Stats {
    uint64_t hits = 0, registrations = 0, stale = 0, evictions = 0;
    size_t entries = 0;
  };
  Stats stats();

 private:
  struct Entry {
    size_t size;
    uint64_t generation;
    VerbsRegistrationPtr reg;
    uint64_t last_use;
  };
  const VerbsApi &api_;
  ibv_pd *pd_;
  size_t capacity_;
  std::mutex mu_;
  std::map<uintptr_t, Entry> entries_;  // by segment base
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace hpu::comm
