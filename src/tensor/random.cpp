#include "tensor/random.hpp"

#include <mutex>
#include <unordered_map>

#include "device/device.hpp"

namespace hpu {

namespace {

struct Generators {
  std::mutex mu;
  std::unordered_map<const Device *, RandomKey> keys;  // devices live as long as the process
};

Generators &generators() {
  static auto *g = new Generators();  // never destroyed
  return *g;
}

}  // namespace

RandomKey random_reserve(Device &dev, uint64_t count) {
  Generators &g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  RandomKey &k = g.keys[&dev];
  RandomKey at = k;
  k.offset += count;
  return at;
}

RandomKey random_state(Device &dev) {
  Generators &g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.keys[&dev];
}

void random_set_state(Device &dev, RandomKey key) {
  Generators &g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  g.keys[&dev] = key;
}

}  // namespace hpu
