#include "comm/transports/verbs/reg_cache.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/log.hpp"
#include "device/allocator.hpp"

namespace hpu::comm {

namespace {

// The device allocator's segment holding the range.
bool device_segment(const void *ptr, size_t bytes, MemorySegment *out) {
  SegmentInfo s;
  if (!segment_of(ptr, bytes, &s)) return false;
  *out = {s.base, s.size, s.generation};
  return true;
}

std::atomic<SegmentLookup> g_lookup{device_segment};

}  // namespace

void set_verbs_segment_lookup(SegmentLookup lookup) { g_lookup.store(lookup ? lookup : device_segment); }

VerbsRegistrationPtr VerbsRegCache::find(const void *ptr, size_t bytes) {
  SegmentLookup lookup = g_lookup.load();
  MemorySegment seg;
  if (!lookup(ptr, bytes, &seg)) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(seg.base);
  if (it != entries_.end() && it->second.generation == seg.generation && it->second.size == seg.size) {
    stats_.hits++;
    it->second.last_use = ++clock_;
    return it->second.reg;
  }
  if (it != entries_.end()) {  // the segment was unmapped, and this is a new mapping at its address
    stats_.stale++;
    entries_.erase(it);
  }
  while (entries_.size() >= capacity_) {
    auto lru = entries_.begin();
    for (auto e = entries_.begin(); e != entries_.end(); ++e)
      if (e->second.last_use < lru->second.last_use) lru = e;
    entries_.erase(lru);
    stats_.evictions++;
  }
  ibv_mr *mr = api_.reg_mr(pd_, reinterpret_cast<void *>(seg.base), seg.size,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) {
    HPU_LOG(warn, "comm", "verbs: registering %zu bytes of device memory at %p failed (%s); its transfers are copied",
            seg.size, reinterpret_cast<void *>(seg.base), strerror(errno));
    return nullptr;
  }
  auto reg = std::make_shared<const VerbsRegistration>(api_, mr);
  entries_[seg.base] = {seg.size, seg.generation, reg, ++clock_};
  stats_.registrations++;
  return reg;
}

VerbsRegCache::Stats VerbsRegCache::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.entries = entries_.size();
  return s;
}

}  // namespace hpu::comm
