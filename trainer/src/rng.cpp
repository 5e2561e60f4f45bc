#include <hpu/trainer/rng.hpp>

#include <cmath>

namespace hpu {
namespace {

uint64_t splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Rng::reseed(uint64_t seed) {
  for (auto &w : s_) w = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  // Lemire's nearly-divisionless method, rejecting the biased low range.
  unsigned __int128 m = (unsigned __int128)next() * n;
  uint64_t low = uint64_t(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = (unsigned __int128)next() * n;
      low = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

float Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a;
  uint64_t h = splitmix64(x);
  x = h ^ b;
  return splitmix64(x);
}

std::vector<size_t> permutation(size_t n, Rng &rng) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng.below(i)]);
  return p;
}

}  // namespace hpu
