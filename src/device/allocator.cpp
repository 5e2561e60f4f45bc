#include "device/allocator.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <shared_mutex>

#include "core/error.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"
#include "device/device.hpp"

namespace hpu {

namespace {

// Every mapped segment of every device, by base address, for device_of() and
// segment_of().
struct Mapped {
  size_t size;
  Device *device;
  uint64_t generation;
};
struct SegmentMap {
  std::shared_mutex mu;
  std::map<uintptr_t, Mapped> segments;
  uint64_t mapped = 0;  // segments mapped so far: the next one's generation
};

SegmentMap &segment_map() {
  static SegmentMap *map = new SegmentMap();  // never destroyed: used until the last unmap
  return *map;
}

}  // namespace

bool segment_of(const void *ptr, size_t bytes, SegmentInfo *out) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  SegmentMap &m = segment_map();
  std::shared_lock<std::shared_mutex> lock(m.mu);
  auto it = m.segments.upper_bound(p);
  if (it == m.segments.begin()) return false;
  --it;
  uintptr_t base = it->first;
  size_t size = it->second.size;
  if (p - base >= size || bytes > size - (p - base)) return false;
  *out = {base, size, it->second.generation, it->second.device};
  return true;
}

bool in_device_segment(const void *ptr) {
  SegmentInfo s;
  return segment_of(ptr, 1, &s);
}

DeviceMemory device_memory(const void *ptr, size_t bytes, const char *arg, bool pin) {
  SegmentInfo s;
  if (!segment_of(ptr, 1, &s))
    fail(HPU_ERROR_INVALID_HANDLE, "%s %p (+%zu bytes) is not device memory (from hpuMemAlloc)", arg, ptr, bytes);
  // Devices are never destroyed: s.device stays valid even if the segment is
  // unmapped meanwhile, and its allocator then finds no live block.
  Allocator::Found f = s.device->allocator().find(ptr, bytes, pin);
  int ordinal = s.device->ordinal();
  switch (f.state) {
    case Allocator::Found::closed:
      fail(HPU_ERROR_INVALID_HANDLE, "%s %p (+%zu bytes) is memory of device %d, which is closed", arg, ptr, bytes,
           ordinal);
    case Allocator::Found::not_live:
      fail(HPU_ERROR_INVALID_HANDLE, "%s %p (+%zu bytes) is not in a live allocation of device %d (freed, or never "
           "allocated)", arg, ptr, bytes, ordinal);
    case Allocator::Found::overrun: {
      size_t left = f.base + f.bytes - reinterpret_cast<uintptr_t>(ptr);  // < bytes
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s %p (+%zu bytes) runs %zu bytes past the end of its %zu-byte allocation "
           "at %p", arg, ptr, bytes, bytes - left, f.bytes, reinterpret_cast<void *>(f.base));
    }
    case Allocator::Found::live:
      break;
  }
  return {s.device, f.base, f.bytes};
}

Allocator::Allocator(Device *device, uint64_t limit) : device_(device) { stats_.limit = limit; }

Allocator::~Allocator() {
  // Only at shutdown: give every segment back, live blocks included.
  std::vector<Segment *> segs;
  auto collect = [&](Block *b) {
    if (!b->prev) segs.push_back(b->segment);
  };
  for (auto &kv : live_) collect(kv.second);
  for (Block *b : small_free_) collect(b);
  for (Block *b : large_free_) collect(b);
  std::sort(segs.begin(), segs.end());
  segs.erase(std::unique(segs.begin(), segs.end()), segs.end());
  for (Segment *s : segs) {
    {
      std::unique_lock<std::shared_mutex> lock(segment_map().mu);
      segment_map().segments.erase(s->base);
    }
    munmap(reinterpret_cast<void *>(s->base), s->size);
  }
  auto drop = [](Block *b) { delete b; };
  for (auto &kv : live_) drop(kv.second);
  for (Block *b : small_free_) drop(b);
  for (Block *b : large_free_) drop(b);
  for (Segment *s : segs) delete s;
}

Allocator::Block *Allocator::take_free(FreeSet &pool, size_t size) {
  Block key{0, size, 0, false, false, false, nullptr, nullptr, nullptr};
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block *b = *it;
  // A big cached block is not carved up for a much smaller request from
  // another size class: that would pin a dedicated segment.
  if (!b->small && size <= kMediumLimit && b->size > kMediumSegment) return nullptr;
  pool.erase(it);
  return b;
}

Allocator::Block *Allocator::new_segment(size_t size, bool small) {
  if (stats_.reserved + size > stats_.limit) release_free_segments();
  void *base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    release_free_segments();
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (base == MAP_FAILED)
    fail(HPU_ERROR_OUT_OF_MEMORY, "the host could not map a %s segment for device %d: %s",
         format_bytes(size).c_str(), device_->ordinal(), strerror(errno));
  auto *seg = new Segment{reinterpret_cast<uintptr_t>(base), size};
  {
    std::unique_lock<std::shared_mutex> lock(segment_map().mu);
    segment_map().segments[seg->base] = {size, device_, ++segment_map().mapped};
  }
  stats_.reserved += size;
  stats_.segment_allocs++;
  HPU_LOG(trace, "alloc", "device %d: mapped segment of %s at %p", device_->ordinal(), format_bytes(size).c_str(), base);
  return new Block{seg->base, size, 0, false, false, small, nullptr, nullptr, seg};
}

void Allocator::split(Block *b, size_t size) {
  size_t rest = b->size - size;
  // The small pool splits down to the granularity; the large pool keeps
  // remainders of 1 MiB or less with the block instead of making slivers.
  if (rest < kGranularity || (!b->small && rest <= kSmallLimit)) return;
  auto *r = new Block{b->addr + size, rest, 0, false, false, b->small, b, b->next, b->segment};
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  (b->small ? small_free_ : large_free_).insert(r);
}

void *Allocator::allocate(size_t bytes, uint64_t handle) {
  size_t size = round(bytes);
  if (size < bytes) fail(HPU_ERROR_OUT_OF_MEMORY, "%zu bytes cannot be represented", bytes);
  if (fault::fail_this_allocation())
    fail(HPU_ERROR_OUT_OF_MEMORY, "%zu bytes requested on device %d: failure injected by HPU_FAULT_INJECT", bytes,
         device_->ordinal());
  std::lock_guard<std::mutex> lock(mu_);
  if (handle != 0 && (!open_ || handle != handle_))
    fail(HPU_ERROR_INVALID_HANDLE, "dev %p (device %d) was closed before its %zu bytes could be allocated",
         reinterpret_cast<void *>(handle), device_->ordinal(), bytes);
  if (!open_) fail(HPU_ERROR_INVALID_HANDLE, "device %d is closed (%zu bytes requested)", device_->ordinal(), bytes);
  if (stats_.in_use + size > stats_.limit)
    // Exact byte counts: a rounded figure ("512.0 MiB") can hide the byte
    // that does not fit.
    fail(HPU_ERROR_OUT_OF_MEMORY,
         "%zu bytes requested (%zu in the allocator's %zu-byte granules); device %d has %llu bytes (%s), %llu in use, "
         "%llu free",
         bytes, size, kGranularity, device_->ordinal(), static_cast<unsigned long long>(stats_.limit),
         format_bytes(stats_.limit).c_str(), static_cast<unsigned long long>(stats_.in_use),
         static_cast<unsigned long long>(stats_.limit > stats_.in_use ? stats_.limit - stats_.in_use : 0));
  Block *b = take_parked(size);
  if (!b) {
    bool small = size <= kSmallLimit;
    FreeSet &pool = small ? small_free_ : large_free_;
    unpark_all();  // a miss: let every freed block merge before choosing
    b = take_free(pool, size);
    if (!b) {
      size_t seg = small ? kSmallSegment
                   : size <= kMediumLimit ? kMediumSegment
                                          : (size + kLargeStep - 1) / kLargeStep * kLargeStep;
      b = new_segment(seg, small);
    }
    split(b, size);
    b->allocated = true;
    b->requested = size;
    live_.emplace(b->addr, b);
  }
  b->bytes = bytes;
  stats_.in_use += size;
  stats_.max_in_use = std::max(stats_.max_in_use, stats_.in_use);
  stats_.max_alloc_size = std::max<uint64_t>(stats_.max_alloc_size, size);
  stats_.num_allocs++;
  stats_.total_allocs++;
  return reinterpret_cast<void *>(b->addr);
}

void Allocator::merge_into_free(Block *b) {
  FreeSet &pool = b->small ? small_free_ : large_free_;
  if (Block *n = b->next; n && !n->allocated) {
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  if (Block *p = b->prev; p && !p->allocated) {
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  pool.insert(b);
}

Allocator::Block *Allocator::user_block(void *ptr) {
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end() || it->second->parked)
    fail(HPU_ERROR_INVALID_HANDLE, "ptr %p is not a live allocation of device %d (already freed, "
         "an interior pointer, or another device's)", ptr, device_->ordinal());
  Block *b = it->second;
  if (b->released)
    fail(HPU_ERROR_INVALID_HANDLE, "ptr %p has already been freed (the free waits for queued work)", ptr);
  if (b->pins > 0)
    fail(HPU_ERROR_BUSY, "ptr %p (%zu bytes) is wrapped by %d live tensor handle%s (hpuTensorWrap and its views); "
         "release them first", ptr, b->bytes, b->pins, b->pins == 1 ? "" : "s");
  return b;
}

void Allocator::free(void *ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  free_block(user_block(ptr));
}

void Allocator::release(void *ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  user_block(ptr)->released = true;
}

void Allocator::free_released(void *ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end() || !it->second->released)
    fail(HPU_ERROR_INTERNAL, "ptr %p of device %d is not waiting to be freed", ptr, device_->ordinal());
  it->second->released = false;
  free_block(it->second);
}

void Allocator::free_block(Block *b) {
  stats_.in_use -= b->requested;
  stats_.num_frees++;
  stats_.total_frees++;
  std::vector<Block *> &same_size = parked_[b->requested];
  if (same_size.size() < kParkedPerSize) {
    b->parked = true;
    same_size.push_back(b);
    parked_count_++;
    return;
  }
  live_.erase(b->addr);
  b->allocated = false;
  merge_into_free(b);
}

Allocator::Block *Allocator::take_parked(size_t size) {
  if (parked_count_ == 0) return nullptr;
  auto it = parked_.find(size);
  if (it == parked_.end() || it->second.empty()) return nullptr;
  Block *b = it->second.back();
  it->second.pop_back();
  parked_count_--;
  b->parked = false;
  return b;
}

void Allocator::unpark_all() {
  if (parked_count_ == 0) return;
  for (auto &kv : parked_) {
    for (Block *b : kv.second) {
      live_.erase(b->addr);
      b->parked = false;
      b->allocated = false;
      merge_into_free(b);
    }
    kv.second.clear();
  }
  parked_count_ = 0;
}

void Allocator::open(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  handle_ = handle;
}

void Allocator::close() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t live = live_.size() - parked_count_;
  if (live > 0)
    fail(HPU_ERROR_BUSY, "device %d still has %zu allocation%s (%s) alive; free them first", device_->ordinal(), live,
         live == 1 ? "" : "s", format_bytes(stats_.in_use).c_str());
  open_ = false;
}

Allocator::Found Allocator::find(const void *ptr, size_t bytes, bool pin) {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return {Found::closed};
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return {Found::not_live};
  Block *b = (--it)->second;
  if (b->parked || b->released || p - b->addr >= b->bytes) return {Found::not_live};
  if (bytes > b->bytes - (p - b->addr)) return {Found::overrun, b->addr, b->bytes};
  if (pin) b->pins++;
  return {Found::live, b->addr, b->bytes};
}

void Allocator::pin(uintptr_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(base);
  if (it == live_.end() || it->second->parked || it->second->released)
    fail(HPU_ERROR_INTERNAL, "pinning %p of device %d, which is not a live allocation", reinterpret_cast<void *>(base),
         device_->ordinal());
  it->second->pins++;
}

void Allocator::unpin(uintptr_t base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(base);
  if (it != live_.end() && it->second->pins > 0) it->second->pins--;
}

void Allocator::release_free_segments() {
  unpark_all();
  for (FreeSet *pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block *b = *it;
      if (b->prev || b->next) {  // part of a segment still in use
        ++it;
        continue;
      }
      it = pool->erase(it);
      Segment *s = b->segment;
      {
        std::unique_lock<std::shared_mutex> lock(segment_map().mu);
        segment_map().segments.erase(s->base);
      }
      munmap(reinterpret_cast<void *>(s->base), s->size);
      stats_.reserved -= s->size;
      stats_.segment_frees++;
      delete s;
      delete b;
    }
  }
}

void Allocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  release_free_segments();
}

MemStats Allocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.max_in_use = 0;
}

void Allocator::reset_accumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs = 0;
  stats_.num_frees = 0;
  stats_.max_alloc_size = 0;
  stats_.max_in_use = stats_.in_use;
}

}  // namespace hpu
