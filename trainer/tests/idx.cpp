#include <hpu/trainer/idx.hpp>

#include "test_util.hpp"

#include <cstring>

using namespace trainer_test;

namespace {

hpu::IdxArray sample(hpu::IdxType type, std::vector<uint32_t> shape) {
  hpu::IdxArray a;
  a.type = type;
  a.shape = shape;
  a.data.resize(a.count() * hpu::idx_type_size(type));
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = uint8_t(i * 37 + 11);
  return a;
}

}  // namespace

TEST(Idx, RoundTripsEveryTypePlainAndGzip) {
  TempDir dir;
  for (auto type : {hpu::IdxType::u8, hpu::IdxType::i8, hpu::IdxType::i16, hpu::IdxType::i32, hpu::IdxType::f32,
                    hpu::IdxType::f64}) {
    for (bool gz : {false, true}) {
      hpu::IdxArray a = sample(type, {3, 4, 5});
      const std::string path = dir / ("a" + std::to_string(int(type)) + (gz ? ".gz" : ""));
      hpu::write_idx(path, a, gz);
      hpu::IdxArray b = hpu::read_idx(path);
      EXPECT_EQ(b.type, type);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
    }
  }
}

TEST(Idx, ReadsBigEndianValues) {
  TempDir dir;
  // One i32 element, 0x01020304, written by hand in IDX's big-endian order.
  spit(dir / "x", std::string("\0\0\x0c\x01\0\0\0\x01\x01\x02\x03\x04", 12));
  hpu::IdxArray a = hpu::read_idx(dir / "x");
  ASSERT_EQ(a.data.size(), 4u);
  int32_t v;
  std::memcpy(&v, a.data.data(), 4);
  EXPECT_EQ(v, 0x01020304);
}

TEST(Idx, MissingFileIsNotFound) {
  EXPECT_HPU_ERROR(hpu::read_idx("/nonexistent/train-images-idx3-ubyte.gz"), HPU_ERROR_NOT_FOUND,
                   "/nonexistent/train-images-idx3-ubyte.gz");
}

TEST(Idx, DirectoryIsAnError) {
  TempDir dir;
  EXPECT_HPU_ERROR(hpu::read_idx(dir.path()), HPU_ERROR_IO, "directory");
}

TEST(Idx, GarbageIsRejectedWithAClearMessage) {
  TempDir dir;
  spit(dir / "g", "hello, this is not an IDX file at all");
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "g"), HPU_ERROR_IO, "not an IDX file");
  spit(dir / "t", std::string("\0\0\x07\x01\0\0\0\x01x", 9));
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "t"), HPU_ERROR_IO, "unknown IDX element type 0x07");
  spit(dir / "d", std::string("\0\0\x08\x00", 4));
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "d"), HPU_ERROR_IO, "0 dimensions");
  spit(dir / "e", "");
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "e"), HPU_ERROR_IO, "truncated IDX header");
}

TEST(Idx, TruncatedFilesAreRejectedAtEveryLength) {
  TempDir dir;
  hpu::IdxArray a = sample(hpu::IdxType::u8, {7, 9});
  hpu::write_idx(dir / "full", a, false);
  const std::string full = slurp(dir / "full");
  for (size_t n = 0; n < full.size(); ++n) {
    spit(dir / "cut", full.substr(0, n));
    EXPECT_HPU_ERROR(hpu::read_idx(dir / "cut"), HPU_ERROR_IO, "truncated");
  }
  spit(dir / "long", full + "x");
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "long"), HPU_ERROR_IO, "trailing bytes");
}

TEST(Idx, TruncatedAndCorruptGzipAreRejected) {
  TempDir dir;
  hpu::IdxArray a = sample(hpu::IdxType::u8, {64, 64});
  hpu::write_idx(dir / "full.gz", a, true);
  const std::string full = slurp(dir / "full.gz");
  for (size_t n : {size_t(12), full.size() / 2, full.size() - 9, full.size() - 1}) {
    spit(dir / "cut.gz", full.substr(0, n));
    try {
      hpu::read_idx(dir / "cut.gz");
      ADD_FAILURE() << "a gzip file cut at " << n << " of " << full.size() << " bytes was accepted";
    } catch (const hpu::Error &e) {
      EXPECT_EQ(e.status(), HPU_ERROR_IO) << e.what();
      EXPECT_NE(std::string(e.what()).find("cut.gz"), std::string::npos) << e.what();
    }
  }
  std::string bad = full;
  for (size_t i = 20; i < 60; ++i) bad[i] = char(bad[i] ^ 0x5a);
  spit(dir / "bad.gz", bad);
  EXPECT_THROW(hpu::read_idx(dir / "bad.gz"), hpu::Error);
}

TEST(Idx, HugeDeclaredSizeFailsWithoutAllocatingIt) {
  TempDir dir;
  // Declares 65535^2 x 16 f64 elements (~550 GB) but holds 3 bytes of data.
  spit(dir / "huge", std::string("\0\0\x0e\x03\0\0\xff\xff\0\0\xff\xff\0\0\0\x10xyz", 19));
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "huge"), HPU_ERROR_IO, "truncated IDX data");
  spit(dir / "over", std::string("\0\0\x0e\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 16));
  EXPECT_HPU_ERROR(hpu::read_idx(dir / "over"), HPU_ERROR_IO, "more than");
}

TEST(Idx, WriteRejectsInconsistentArrays) {
  TempDir dir;
  hpu::IdxArray a = sample(hpu::IdxType::i16, {2, 2});
  a.data.pop_back();
  EXPECT_HPU_ERROR(hpu::write_idx(dir / "x", a, false), HPU_ERROR_INVALID_ARGUMENT, "shape needs 8");
}
