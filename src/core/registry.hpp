// Handle registry: opaque handles that are validated, never dereferenced.
//
// A handle is a 64-bit value: kind tag (8 bits) | generation (24 bits) |
// slot + 1 (32 bits). User-space pointers have a zero top byte, so no real
// pointer ever decodes as a live handle; a closed handle fails the generation
// check. Lookups hand out shared_ptr so an object outlives calls using it.
//
// A slot's generation never wraps, so a destroyed handle never becomes valid
// again: after 2^24 - 1 uses (the last generation, kLastGeneration) the slot
// is retired, never reused, and costs its few bytes from then on. Wrapping
// would otherwise take only 2^24 create/destroy cycles (a few seconds). The
// 2^32 - 1 slots run out after 2^56 cycles (over 20 years at 10 ns a cycle),
// and then add() fails instead of reusing one. Device handles have no slot
// to retire: they keep a wider generation (device.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"

namespace hpu {

enum class HandleKind : uint8_t {
  device = 0xD1,
  stream = 0x5E,
  event = 0xE7,
  tensor = 0x7E,
  comm = 0xC0,
};

inline uint64_t handle_encode(HandleKind kind, uint32_t generation, uint32_t slot) {
  return (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(generation & 0xFFFFFF) << 32) |
         (static_cast<uint64_t>(slot) + 1);
}

template <class T>
class Registry {
 public:
  static constexpr uint32_t kLastGeneration = 0xFFFFFF;

  // first_generation: the generation of new slots (1; a test starts it near
  // kLastGeneration to reach the retirement quickly).
  Registry(HandleKind kind, const char *what, uint32_t first_generation = 1)
      : kind_(kind), what_(what), first_generation_(first_generation) {}

  uint64_t add(std::shared_ptr<T> obj) {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      if (slots_.size() >= UINT32_MAX)
        fail(HPU_ERROR_OUT_OF_MEMORY, "no %s handles left: all %u slots are retired or in use", what_, UINT32_MAX);
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back({first_generation_, nullptr});
    }
    Slot &s = slots_[slot];
    s.obj = std::move(obj);
    return handle_encode(kind_, s.generation, slot);
  }

  // The object behind a handle, or HPU_ERROR_INVALID_HANDLE naming it, as
  // `name` (the caller's argument name) when given.
  std::shared_ptr<T> get(const void *handle, const char *name = nullptr) const {
    std::lock_guard<std::mutex> lock(mu_);
    return slot_of(handle, name ? name : what_).obj;
  }

  // Removes the handle (later lookups fail) and returns its object.
  std::shared_ptr<T> remove(const void *handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot &s = const_cast<Slot &>(slot_of(handle, what_));
    std::shared_ptr<T> obj = std::move(s.obj);
    s.obj.reset();
    if (s.generation < kLastGeneration) {  // else the slot is retired
      ++s.generation;
      free_.push_back(static_cast<uint32_t>((reinterpret_cast<uintptr_t>(handle) & 0xFFFFFFFFu) - 1));
    }
    return obj;
  }

  // Every live object (a snapshot).
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<T>> out;
    for (const Slot &s : slots_)
      if (s.obj) out.push_back(s.obj);
    return out;
  }

 private:
  struct Slot {
    uint32_t generation;
    std::shared_ptr<T> obj;
  };

  const Slot &slot_of(const void *handle, const char *name) const {
    uint64_t h = reinterpret_cast<uintptr_t>(handle);
    if (h == 0) fail(HPU_ERROR_INVALID_HANDLE, "%s is NULL", name);
    uint32_t slot = static_cast<uint32_t>(h & 0xFFFFFFFFu) - 1;
    uint32_t gen = static_cast<uint32_t>((h >> 32) & kLastGeneration);
    if ((h >> 56) != static_cast<uint64_t>(kind_) || slot >= slots_.size() ||
        slots_[slot].generation != gen || !slots_[slot].obj)
      fail(HPU_ERROR_INVALID_HANDLE, "%s %p is not a live %s handle (closed, foreign or of another kind)",
           name, handle, what_);
    return slots_[slot];
  }

  HandleKind kind_;
  const char *what_;
  uint32_t first_generation_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace hpu
