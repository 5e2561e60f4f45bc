// f32 <-> bf16/f16 conversions: the scalar path against an independent
// reference, and every vector path this CPU supports against the scalar path
// over all 2^32 f32 bit patterns (ties, subnormals, infinities, NaNs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include "kernels/convert.hpp"
#include "kernels/convert_vec.hpp"
#include "kernels/cpu.hpp"

using namespace hpu::kernels;

namespace {

bool full_run() { return std::getenv("HPU_TEST_FULL") != nullptr; }

std::vector<Isa> vector_paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

// Round-to-nearest-even of the f32 `u` to `bits` significant upper bits, by
// comparing distances in double: an independent check of the scalar bf16 path.
uint16_t reference_bf16(uint32_t u) {
  float f = f32_from_bits(u);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
  double d = f, dl = f32_from_bits(lo);
  if ((lo & 0x7F800000u) == 0x7F800000u) return static_cast<uint16_t>(lo >> 16);  // inf
  double dh = ((hi & 0x7FFFFFFFu) == 0x7F800000u) ? std::copysign(std::ldexp(1.0, 128), d) : f32_from_bits(hi);
  double el = std::fabs(d - dl), eh = std::fabs(dh - d);
  if (el < eh || (el == eh && ((lo >> 16) & 1) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}

// Every vector path against the scalar path over the f32 patterns
// pattern(0) .. pattern(total - 1), on several threads.
template <class Pattern>
void compare_paths(uint64_t total, Pattern pattern) {
  const auto paths = vector_paths();
  const unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<uint64_t> mismatches(threads, 0);
  std::vector<uint32_t> first_bad(threads, 0);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      constexpr size_t kChunk = 1 << 16;
      std::vector<float> src(kChunk);
      std::vector<uint16_t> want_b(kChunk), want_h(kChunk), got(kChunk);
      const ConvertPaths &scalar = convert_paths(Isa::scalar);
      for (uint64_t c = total * t / threads; c < total * (t + 1) / threads; c += kChunk) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total * (t + 1) / threads - c));
        for (size_t i = 0; i < n; ++i) src[i] = f32_from_bits(pattern(c + i));
        scalar.f32_to_bf16(src.data(), want_b.data(), n);
        scalar.f32_to_f16(src.data(), want_h.data(), n);
        for (Isa isa : paths) {
          const ConvertPaths &p = convert_paths(isa);
          p.f32_to_bf16(src.data(), got.data(), n);
          if (std::memcmp(got.data(), want_b.data(), n * 2) != 0)
            for (size_t i = 0; i < n; ++i)
              if (got[i] != want_b[i] && mismatches[t]++ == 0) first_bad[t] = f32_bits(src[i]);
          p.f32_to_f16(src.data(), got.data(), n);
          if (std::memcmp(got.data(), want_h.data(), n * 2) != 0)
            for (size_t i = 0; i < n; ++i)
              if (got[i] != want_h[i] && mismatches[t]++ == 0) first_bad[t] = f32_bits(src[i]);
        }
      }
    });
  }
  for (auto &th : pool) th.join();
  for (unsigned t = 0; t < threads; ++t)
    EXPECT_EQ(mismatches[t], 0u) << "first mismatching f32 pattern 0x" << std::hex << first_bad[t];
}

}  // namespace

TEST(Convert, ScalarBf16MatchesReference) {
  // Every pattern near the bf16 rounding boundaries of a spread of exponents,
  // plus a stride over all patterns.
  uint64_t checked = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += full_run() ? 1 : 4093, ++checked)
    ASSERT_EQ(f32_to_bf16(f32_from_bits(static_cast<uint32_t>(u))), reference_bf16(static_cast<uint32_t>(u)))
        << std::hex << u;
  for (uint32_t hi : {0x0000u, 0x0001u, 0x007Fu, 0x0080u, 0x3F80u, 0x7F7Fu, 0x7F80u, 0x8001u, 0xFF7Fu})
    for (uint32_t lo = 0; lo < 0x10000u; ++lo) {
      uint32_t u = (hi << 16) | lo;
      ASSERT_EQ(f32_to_bf16(f32_from_bits(u)), reference_bf16(u)) << std::hex << u;
    }
  EXPECT_GT(checked, 1000000u);
}

TEST(Convert, Bf16SpecialValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F7FFFFFu)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00000001u)), 0x0000);  // smallest subnormal
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00018000u)), 0x0002);  // subnormal tie to even
  uint16_t nan = f32_to_bf16(f32_from_bits(0x7F800001u));      // signalling NaN whose payload is below bit 16
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0xFFC00000u)), 0xFFC0);
}

TEST(Convert, F16SpecialValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);                    // tie above max rounds to inf
  EXPECT_EQ(f32_to_f16(5.9604644775390625e-08f), 0x0001);     // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.98023223876953125e-08f), 0x0000);    // half of it: tie to even (0)
  EXPECT_EQ(f32_to_f16(8.94069671630859375e-08f), 0x0002);    // 1.5 steps: tie to even (2)
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(Convert, WideningMatchesScalarOnAll16BitPatterns) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> want(65536), got(65536);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    const ConvertPaths &p = convert_paths(isa);
    p.bf16_to_f32(h.data(), got.data(), h.size());
    for (uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(f32_bits(got[i]), f32_bits(bf16_to_f32(h[i]))) << isa_name(isa);
    p.f16_to_f32(h.data(), got.data(), h.size());
    for (uint32_t i = 0; i < 65536; ++i) {
      float w = f16_to_f32(h[i]);
      if (std::isnan(w))
        ASSERT_TRUE(std::isnan(got[i])) << isa_name(isa) << " " << i;
      else
        ASSERT_EQ(f32_bits(got[i]), f32_bits(w)) << isa_name(isa) << " " << i;
      // Round trip: every f16 survives f16 -> f32 -> f16 (NaNs stay NaN).
      uint16_t back = f32_to_f16(w);
      if (std::isnan(w))
        ASSERT_TRUE(std::isnan(f16_to_f32(back)));
      else
        ASSERT_EQ(back, h[i]);
    }
  }
}

// All 2^32 patterns with HPU_TEST_FULL=1. Otherwise every 61st pattern (61
// is prime to 2^16, so the low 16 bits, which the rounding looks at, take
// every value) plus every pattern whose top 16 bits are those of zeros,
// subnormals, 1.0, the largest finites, infinities and NaNs.
bool all_f32_patterns() { return full_run(); }

TEST(Convert, VectorPathsMatchScalarOnF32Patterns) {
  if (vector_paths().empty()) GTEST_SKIP() << "this CPU has no AVX2 or AVX-512";
  if (all_f32_patterns()) {
    compare_paths(uint64_t{1} << 32, [](uint64_t i) { return static_cast<uint32_t>(i); });
    return;
  }
  compare_paths((uint64_t{1} << 32) / 61, [](uint64_t i) { return static_cast<uint32_t>(i * 61); });
  static const uint32_t highs[] = {0x0000, 0x0001, 0x007F, 0x0080, 0x3380, 0x387F, 0x3880, 0x3F80, 0x477F,
                                   0x4780, 0x7F7F, 0x7F80, 0x7FC0, 0x7FFF};
  for (uint32_t sign : {0u, 0x8000u})
    compare_paths(std::size(highs) << 16, [sign](uint64_t i) {
      return ((highs[i >> 16] | sign) << 16) | static_cast<uint32_t>(i & 0xFFFF);
    });
}

TEST(Convert, OddLengthsAndTails) {
  std::vector<float> src(67);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f + static_cast<float>(i) / 3.0f;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(15), size_t(16), size_t(17), size_t(67)}) {
      std::vector<uint16_t> out(src.size() + 1, 0xABCD);
      convert_paths(isa).f32_to_bf16(src.data(), out.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], f32_to_bf16(src[i]));
      EXPECT_EQ(out[n], 0xABCD) << isa_name(isa) << " wrote past " << n;
    }
  }
}
