// The trainer's deterministic random numbers: xoshiro256** seeded by splitmix64.
// The same seed gives the same stream on every platform and compiler (unlike
// std::shuffle or the std distributions), so runs and shards are reproducible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpu {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();                // 64 random bits
  uint64_t below(uint64_t n);     // uniform in [0, n), n > 0, without modulo bias
  double uniform();               // uniform in [0, 1)
  float normal();                 // standard normal (Box-Muller)
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4> &s) { s_ = s; }

 private:
  std::array<uint64_t, 4> s_{};
};

// Mixes several values into one seed (splitmix64 steps).
uint64_t mix_seed(uint64_t a, uint64_t b);

// A uniformly random permutation of 0..n-1 (Fisher-Yates) drawn from `rng`.
std::vector<size_t> permutation(size_t n, Rng &rng);

}  // namespace hpu
