// Stateful misuse of handles: a destroyed handle stays dead however many
// objects come after it (the registry's generations, white-box).
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/registry.hpp"
#include "expect.hpp"

namespace {

using hpu::Registry;

// The slot and generation a registry handle carries (registry.hpp's layout).
uint32_t slot_of(const void *h) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(h) & 0xFFFFFFFFu); }
uint32_t generation_of(const void *h) {
  return static_cast<uint32_t>((reinterpret_cast<uintptr_t>(h) >> 32) & 0xFFFFFF);
}

// Destroying a stale handle fails with HPU_ERROR_INVALID_HANDLE.
void expect_dead(Registry<int> &r, const void *h) {
  try {
    r.remove(h);
    ADD_FAILURE() << h << " was accepted";
  } catch (const hpu::Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_INVALID_HANDLE) << e.what();
  }
}

// A slot whose generation reaches the last one is retired instead of wrapping
// to 0 (which would, 2^24 cycles later, give a destroyed handle's bits to a
// live object): create/destroy cycles across that point never hand out a
// generation a slot had before, stale handles are rejected and the live
// object survives their destruction.
TEST(Misuse, HandleGenerationNeverWraps) {
  Registry<int> r(hpu::HandleKind::event, "event", Registry<int>::kLastGeneration - 2);
  std::vector<void *> dead;
  for (int i = 0; i < 6; ++i) {
    void *h = reinterpret_cast<void *>(r.add(std::make_shared<int>(i)));
    for (void *d : dead) {
      if (slot_of(d) == slot_of(h)) {
        EXPECT_GT(generation_of(h), generation_of(d)) << h << " after " << d;
      }
    }
    r.remove(h);
    dead.push_back(h);
  }
  auto live = std::make_shared<int>(42);
  void *h = reinterpret_cast<void *>(r.add(live));
  for (void *d : dead) {
    EXPECT_NE(d, h);
    expect_dead(r, d);
  }
  EXPECT_EQ(r.get(h), live);
  EXPECT_EQ(r.remove(h), live);
}

}  // namespace
