// The .npy reader and writer (trainer/src/npy.hpp): round trips, files written
// by hand in every header form numpy uses, each rejected input, and numpy
// itself reading ours and writing what we read (when /usr/bin/python3 has it).
#include "npy.hpp"

#include "test_util.hpp"

#include <cstdio>
#include <cstring>
#include <iterator>

using namespace trainer_test;

namespace {

// A .npy file from a header dict and raw data, as numpy lays it out.
std::string npy_bytes(const std::string &dict, const std::string &data, int major = 1) {
  std::string header = dict;
  const size_t len_size = major == 1 ? 2 : 4;
  while ((10 - 2 + len_size + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(major) + char(0);
  for (size_t i = 0; i < len_size; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <class T>
std::string raw(std::initializer_list<T> v) {
  return std::string(reinterpret_cast<const char *>(std::data(v)), v.size() * sizeof(T));
}

template <class T>
std::vector<T> values(const hpu::NpyArray &a) {
  std::vector<T> out(a.count());
  EXPECT_EQ(a.data.size(), out.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

template <class T>
void round_trip(const TempDir &dir, const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::is_floating_point_v<T> ? T(double(int(i * 7 % 23) - 11) * 0.25) : T(int64_t(i * 7 % 23) - 11);
  const std::string path = dir / (std::string(hpu::npy_type_name(hpu::npy_type_of<T>())) + ".npy");
  hpu::write_npy(path, shape, v);
  const hpu::NpyArray a = hpu::read_npy(path);
  EXPECT_EQ(a.dtype, hpu::npy_type_of<T>());
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(values<T>(a), v) << path;
  // numpy's layout: version 1.0, the data 64-byte aligned after a header
  // that ends in a newline.
  const std::string bytes = slurp(path);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes[10 + header_len - 1], '\n');
  EXPECT_EQ(bytes.size(), 10 + header_len + n * sizeof(T));
}

bool python_has_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

}  // namespace

TEST(Npy, RoundTripsEveryTypeAndShape) {
  TempDir dir;
  for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{{}, {5}, {2, 3, 4}, {0, 3}}) {
    round_trip<uint8_t>(dir, shape);
    round_trip<int8_t>(dir, shape);
    round_trip<int16_t>(dir, shape);
    round_trip<int32_t>(dir, shape);
    round_trip<int64_t>(dir, shape);
    round_trip<float>(dir, shape);
    round_trip<double>(dir, shape);
  }
}

TEST(Npy, WriterNamesTheFileAndWritesTheHeaderNumpyWrites) {
  TempDir dir;
  hpu::write_npy(dir / "a.npy", {2, 3}, std::vector<float>(6, 1.5f));
  EXPECT_NE(slurp(dir / "a.npy").find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  hpu::write_npy(dir / "b.npy", {4}, std::vector<uint8_t>(4, 7));
  EXPECT_NE(slurp(dir / "b.npy").find("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }"),
            std::string::npos);
  EXPECT_HPU_ERROR(hpu::write_npy(dir / "c.npy", {2, 3}, std::vector<float>(5)), HPU_ERROR_INVALID_ARGUMENT,
                   "shape (2, 3) holds 6 elements, but 5 values were given");
  EXPECT_HPU_ERROR(hpu::write_npy(dir / "c.npy", {2, -1}, hpu::NpyType::f32, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                   "shape (2, -1) has a negative dimension");
  EXPECT_FALSE(file_exists(dir / "c.npy"));
  // A folder that cannot exist: a file is in the way.
  EXPECT_HPU_ERROR(hpu::write_npy(dir / "a.npy/x.npy", {1}, std::vector<float>(1)), HPU_ERROR_IO, dir / "a.npy/x.npy");
}

TEST(Npy, ReadsEveryHeaderFormNumpyWrites) {
  TempDir dir;
  // Version 2.0 (4-byte header length), double quotes, keys in another order,
  // no trailing comma, Python 2's long dimensions.
  spit(dir / "v2.npy", npy_bytes("{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"<i8\"}",
                                 raw<int64_t>({-3, 1LL << 40}), 2));
  hpu::NpyArray a = hpu::read_npy(dir / "v2.npy");
  EXPECT_EQ(a.dtype, hpu::NpyType::i64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<int64_t>(a), (std::vector<int64_t>{-3, 1LL << 40}));
  // Version 3.0 (utf-8 header), native byte order, a 0-dim array.
  spit(dir / "v3.npy", npy_bytes("{'descr': '=f8', 'fortran_order': False, 'shape': (), }", raw<double>({2.5}), 3));
  a = hpu::read_npy(dir / "v3.npy");
  EXPECT_EQ(a.dtype, hpu::NpyType::f64);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(values<double>(a), std::vector<double>{2.5});
  // A 1-byte type with '<' or '|'.
  spit(dir / "i1.npy", npy_bytes("{'descr': '<i1', 'fortran_order': False, 'shape': (3,), }", raw<int8_t>({-1, 0, 1})));
  EXPECT_EQ(values<int8_t>(hpu::read_npy(dir / "i1.npy")), (std::vector<int8_t>{-1, 0, 1}));
}

TEST(Npy, RejectsWhatItCannotReadNamingFileAndCause) {
  TempDir dir;
  const std::string f4 = raw<float>({1, 2, 3, 4, 5, 6});
  struct Case {
    std::string name, bytes, needle;
  } cases[] = {
      {"fortran.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4), "Fortran order"},
      {"big.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
       "dtype '>f4' is big-endian"},
      {"complex.npy", npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", f4),
       "dtype '<c8' is not supported; expected uint8, int8, int16, int32, int64, float32 or float64"},
      {"bool.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", "abc"),
       "dtype '|b1' is not supported"},
      {"record.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", f4),
       "expected a quoted string"},
      {"short.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", f4),
       "truncated .npy data: shape (2, 4) needs 8 elements of float32 (4 bytes each), the file has 24 bytes"},
      {"long.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", f4),
       "4 bytes after the 20 data bytes that shape (5,) of float32 declares"},
      {"noshape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", f4), "header lacks 'shape'"},
      {"badkey.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", f4),
       "unknown header key 'x'"},
      {"negative.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }", f4),
       "expected a dimension"},
      {"huge.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }", f4),
       "truncated .npy data: shape (1000000, 1000000) needs 1000000000000 elements"},
      {"overflow.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", f4),
       "shape (4294967296, 4294967296) declares more elements than memory can hold"},
      {"magic.npy", "PK\x03\x04 a zip file, not an array", "not a .npy file"},
      {"version.npy", std::string("\x93NUMPY\x04\x00", 8) + "xx", "version 4.0 is not supported"},
      {"cut.npy", std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 17), "truncated .npy file: 7 of 118 bytes of the header"},
      {"empty.npy", "", "truncated .npy file: 0 of 8 bytes"},
  };
  for (const Case &c : cases) {
    spit(dir / c.name, c.bytes);
    SCOPED_TRACE(c.name);
    EXPECT_HPU_ERROR(hpu::read_npy(dir / c.name), HPU_ERROR_IO, dir / c.name + ": ");
    EXPECT_HPU_ERROR(hpu::read_npy(dir / c.name), HPU_ERROR_IO, c.needle);
  }
  EXPECT_HPU_ERROR(hpu::read_npy(dir / "missing.npy"), HPU_ERROR_NOT_FOUND, dir / "missing.npy");
  EXPECT_HPU_ERROR(hpu::read_npy(dir.path()), HPU_ERROR_IO, "is a directory");
}

// numpy reads what write_npy writes, and read_npy reads what numpy.save
// writes; numpy's Fortran-order and big-endian files are refused as above.
TEST(Npy, AgreesWithNumpy) {
  if (!python_has_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy (Debian: python3-numpy); not cross-checked";
  TempDir dir;
  hpu::write_npy(dir / "ours_f4.npy", {2, 3}, std::vector<float>{0.5f, -1, 2, 3.25f, 4, 1e-3f});
  hpu::write_npy(dir / "ours_i8.npy", {3}, std::vector<int64_t>{-1, 0, int64_t(1) << 40});
  hpu::write_npy(dir / "ours_u1.npy", {2, 2}, std::vector<uint8_t>{0, 1, 254, 255});
  const std::string script = dir / "check.py";
  spit(script,
       "import numpy as np, sys\n"
       "d = sys.argv[1]\n"
       "a = np.load(d + '/ours_f4.npy')\n"
       "assert a.dtype == np.float32 and a.shape == (2, 3), a\n"
       "assert (a == np.array([[0.5, -1, 2], [3.25, 4, 1e-3]], np.float32)).all(), a\n"
       "b = np.load(d + '/ours_i8.npy')\n"
       "assert b.dtype == np.int64 and list(b) == [-1, 0, 1 << 40], b\n"
       "c = np.load(d + '/ours_u1.npy')\n"
       "assert c.dtype == np.uint8 and c.tolist() == [[0, 1], [254, 255]], c\n"
       "np.save(d + '/theirs_f8.npy', np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 8)\n"
       "np.save(d + '/theirs_i2.npy', np.array([-300, 7], np.int16))\n"
       "np.save(d + '/theirs_i1.npy', np.array([-128, 127], np.int8))\n"
       "np.save(d + '/theirs_scalar.npy', np.float32(3.5))\n"
       "np.save(d + '/theirs_fortran.npy', np.asfortranarray(np.ones((2, 3), np.float32)))\n"
       "np.save(d + '/theirs_big.npy', np.ones(3, '>i4'))\n"
       "np.save(d + '/theirs_bool.npy', np.ones(3, bool))\n");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir.path()).c_str()), 0);
  hpu::NpyArray a = hpu::read_npy(dir / "theirs_f8.npy");
  EXPECT_EQ(a.dtype, hpu::NpyType::f64);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4}));
  const std::vector<double> f8 = values<double>(a);
  for (size_t i = 0; i < f8.size(); ++i) EXPECT_EQ(f8[i], double(i) / 8);
  EXPECT_EQ(values<int16_t>(hpu::read_npy(dir / "theirs_i2.npy")), (std::vector<int16_t>{-300, 7}));
  EXPECT_EQ(values<int8_t>(hpu::read_npy(dir / "theirs_i1.npy")), (std::vector<int8_t>{-128, 127}));
  a = hpu::read_npy(dir / "theirs_scalar.npy");
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(values<float>(a), std::vector<float>{3.5f});
  EXPECT_HPU_ERROR(hpu::read_npy(dir / "theirs_fortran.npy"), HPU_ERROR_IO, "Fortran order");
  EXPECT_HPU_ERROR(hpu::read_npy(dir / "theirs_big.npy"), HPU_ERROR_IO, "big-endian");
  EXPECT_HPU_ERROR(hpu::read_npy(dir / "theirs_bool.npy"), HPU_ERROR_IO, "'|b1' is not supported");
}
