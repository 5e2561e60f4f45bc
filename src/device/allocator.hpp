// The caching allocator of one device.
//
// Requests are rounded up to HPU_MEM_GRANULARITY (512 B) and served from
// segments mapped lazily from the system (mmap, MAP_NORESERVE: only touched
// pages cost RAM, so a 96 GiB device fits on any host):
//   small pool  rounded size <= 1 MiB         2 MiB segments, split in 512 B steps
//   large pool  1 MiB < size <= 10 MiB         20 MiB segments
//               size > 10 MiB                  a segment of its own (2 MiB steps)
// Free blocks are kept per pool, best fit first, split on allocation and merged
// with free neighbours on free. Whole free segments stay cached until
// empty_cache(), so a steady loop reaches a state with no system calls.
// A freed block is first parked (up to kParkedPerSize per size) and handed
// straight back to the next request of its size: the common loop of equal
// sizes then costs a hash lookup instead of a split and a merge. A request
// that finds no parked block of its size first returns every parked block to
// its pool (merging it), so placement is what it would be without parking.
//
// Statistics follow Habana's semantics and count rounded sizes. An allocation
// fails with HPU_ERROR_OUT_OF_MEMORY exactly when InUse + rounded > Limit.
//
// Device pointers are checked against the live allocations (find()): a range
// must lie inside the bytes one allocation asked for. Freed blocks (parked,
// cached or waiting for queued work) are not live, and neither is anything of
// a closed allocator. Allocations, frees and the close are ordered by the
// allocator's lock, so a close never misses an allocation made on another
// thread.
#pragma once

#include <hpu/memory.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace hpu {

class Device;

struct MemStats {
  uint64_t limit = 0, in_use = 0, max_in_use = 0;
  uint64_t num_allocs = 0, num_frees = 0, max_alloc_size = 0;
  uint64_t total_allocs = 0, total_frees = 0;
  uint64_t reserved = 0, segment_allocs = 0, segment_frees = 0;
};

class Allocator {
 public:
  Allocator(Device *device, uint64_t limit);
  ~Allocator();
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;

  static constexpr size_t kGranularity = HPU_MEM_GRANULARITY;
  static constexpr size_t kSmallLimit = size_t(1) << 20;
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kMediumLimit = size_t(10) << 20;
  static constexpr size_t kMediumSegment = size_t(20) << 20;
  static constexpr size_t kLargeStep = size_t(2) << 20;
  static constexpr size_t kParkedPerSize = 16;

  static size_t round(size_t bytes) { return (bytes + kGranularity - 1) & ~(kGranularity - 1); }

  // handle: the device handle the caller checked (0: none); the allocation
  // fails with HPU_ERROR_INVALID_HANDLE when the allocator is closed, or was
  // reopened since (under another handle).
  void *allocate(size_t bytes, uint64_t handle = 0);
  // Throws HPU_ERROR_INVALID_HANDLE when ptr is not a live allocation of this
  // device, HPU_ERROR_BUSY when tensor handles wrap it (pin()).
  void free(void *ptr);
  // A free that waits for queued work: ptr stops being live at once (the
  // checks refuse it, free() and release() call it freed) but keeps its memory
  // until free_released(). Throws as free() does.
  void release(void *ptr);
  void free_released(void *ptr);
  void empty_cache();

  // Opening and closing, with the device (handle: its handle for this open).
  // close() throws HPU_ERROR_BUSY, and stays open, while an allocation is live
  // (released ones included); from then on allocations fail until open().
  void open(uint64_t handle);
  void close();

  // Where a device range [ptr, ptr + bytes) lies (bytes >= 1).
  struct Found {
    enum State { closed, not_live, overrun, live } state;
    uintptr_t base = 0;  // the live allocation holding ptr (overrun, live)
    size_t bytes = 0;    // its size as requested
  };
  // pin: also pin() the allocation when the range lies inside it.
  Found find(const void *ptr, size_t bytes, bool pin = false);
  // Tensor handles over the allocation starting at base (hpuTensorWrap and
  // its views) pin it: free() and release() refuse it until unpinned.
  void pin(uintptr_t base);
  void unpin(uintptr_t base);

  MemStats stats();
  void reset_peak();
  void reset_accumulated();

 private:
  struct Segment;
  struct Block {
    uintptr_t addr;
    size_t size;       // bytes this block spans
    size_t requested;  // rounded request, what the statistics count
    bool allocated = false;  // not in a free pool: live, released, or parked
    bool parked = false;     // freed, held for the next request of its size
    bool small;
    Block *prev = nullptr, *next = nullptr;  // neighbours within the segment
    Segment *segment;
    size_t bytes = 0;       // the request itself: where the allocation ends for the checks
    bool released = false;  // freed by the caller, its memory kept for queued work
    int pins = 0;           // tensor handles wrapping it
  };
  struct Segment {
    uintptr_t base;
    size_t size;
  };
  struct BySize {
    bool operator()(const Block *a, const Block *b) const {
      return a->size != b->size ? a->size < b->size : a->addr < b->addr;
    }
  };
  using FreeSet = std::set<Block *, BySize>;

  Block *take_free(FreeSet &pool, size_t size);
  Block *take_parked(size_t size);
  void unpark_all();
  Block *new_segment(size_t size, bool small);
  void release_free_segments();
  void split(Block *block, size_t size);
  void merge_into_free(Block *block);
  Block *user_block(void *ptr);  // a live block to free, else throws
  void free_block(Block *block);

  Device *device_;
  std::mutex mu_;
  MemStats stats_;
  FreeSet small_free_, large_free_;
  std::map<uintptr_t, Block *> live_;  // live, released and parked blocks by address
  std::unordered_map<size_t, std::vector<Block *>> parked_;  // by rounded size
  size_t parked_count_ = 0;
  bool open_ = false;
  uint64_t handle_ = 0;
};

// The live allocation holding a device range.
struct DeviceMemory {
  Device *device;
  uintptr_t base;  // where the allocation starts
  size_t bytes;    // its size as requested
};

// The live allocation of an open device holding [ptr, ptr + bytes) (bytes >= 1,
// the range as the caller gave it; pin: pin it too, see Allocator::pin).
// Otherwise throws with a message naming `arg`, the pointer and the bytes:
// HPU_ERROR_INVALID_HANDLE when ptr is not in a live allocation of an open
// device, HPU_ERROR_INVALID_ARGUMENT when the range runs past its end.
DeviceMemory device_memory(const void *ptr, size_t bytes, const char *arg, bool pin = false);

// True when ptr lies in memory mapped for some device (live or not): a host
// pointer of a copy must not.
bool in_device_segment(const void *ptr);

// The mapped segment holding [ptr, ptr + bytes): its range, and a generation no
// later mapping reuses (a segment unmapped and another mapped at the same
// address differ in it: what RDMA registrations of device memory are keyed by).
// False when no segment of any device holds the whole range.
struct SegmentInfo {
  uintptr_t base;
  size_t size;
  uint64_t generation;
  Device *device;
};
bool segment_of(const void *ptr, size_t bytes, SegmentInfo *out);

}  // namespace hpu
