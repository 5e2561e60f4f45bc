// IDX reader and writer over zlib's gz* functions, which read plain files
// transparently. Sizes come from an untrusted header, so memory grows with the
// bytes actually read, never with the declared size.
#include <hpu/trainer/idx.hpp>

#include "error.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <sys/stat.h>

namespace hpu {
namespace {

using detail::fail;

constexpr size_t kMaxDims = 8;
constexpr uint64_t kMaxBytes = uint64_t(1) << 40;

bool valid_type(uint8_t t) {
  switch (t) {
    case 0x08: case 0x09: case 0x0B: case 0x0C: case 0x0D: case 0x0E: return true;
    default: return false;
  }
}

// Reads up to n bytes; returns the count read (short only at end of input).
size_t read_some(gzFile f, void *dst, size_t n, const std::string &path) {
  size_t done = 0;
  while (done < n) {
    unsigned chunk = unsigned(std::min<size_t>(n - done, 1u << 30));
    int r = gzread(f, static_cast<char *>(dst) + done, chunk);
    if (r < 0) {
      int code = 0;
      const char *msg = gzerror(f, &code);
      fail(HPU_ERROR_IO, "%s: corrupt gzip data: %s", path.c_str(), msg);
    }
    if (r == 0) break;
    done += size_t(r);
  }
  return done;
}

struct GzCloser {
  void operator()(gzFile_s *f) const { gzclose(f); }
};

void swap_bytes(std::vector<uint8_t> &data, size_t width) {
  if (width == 1) return;
  for (size_t i = 0; i + width <= data.size(); i += width)
    for (size_t a = i, b = i + width - 1; a < b; ++a, --b) std::swap(data[a], data[b]);
}

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

}  // namespace

size_t idx_type_size(IdxType t) {
  switch (t) {
    case IdxType::u8: case IdxType::i8: return 1;
    case IdxType::i16: return 2;
    case IdxType::i32: case IdxType::f32: return 4;
    case IdxType::f64: return 8;
  }
  return 0;
}

size_t IdxArray::count() const {
  size_t n = 1;
  for (uint32_t d : shape) n *= d;
  return n;
}

IdxArray read_idx(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    fail(errno == ENOENT ? HPU_ERROR_NOT_FOUND : HPU_ERROR_IO, "%s: %s", path.c_str(), std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(HPU_ERROR_IO, "%s: is a directory, not an IDX file", path.c_str());
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) fail(HPU_ERROR_IO, "%s: cannot open: %s", path.c_str(), std::strerror(errno ? errno : EIO));

  uint8_t magic[4];
  size_t got = read_some(f.get(), magic, 4, path);
  if (got < 4) fail(HPU_ERROR_IO, "%s: truncated IDX header: %zu of 4 magic bytes", path.c_str(), got);
  if (magic[0] != 0 || magic[1] != 0)
    fail(HPU_ERROR_IO, "%s: not an IDX file: magic number starts with 0x%02x 0x%02x, expected 0x00 0x00", path.c_str(),
         magic[0], magic[1]);
  if (!valid_type(magic[2]))
    fail(HPU_ERROR_IO, "%s: unknown IDX element type 0x%02x (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)",
         path.c_str(), magic[2]);
  size_t ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims)
    fail(HPU_ERROR_IO, "%s: IDX header declares %zu dimensions; expected 1 to %zu", path.c_str(), ndims, kMaxDims);

  IdxArray a;
  a.type = IdxType(magic[2]);
  uint8_t dims[4 * kMaxDims];
  got = read_some(f.get(), dims, 4 * ndims, path);
  if (got < 4 * ndims)
    fail(HPU_ERROR_IO, "%s: truncated IDX header: %zu of %zu dimension bytes", path.c_str(), got, 4 * ndims);
  const size_t width = idx_type_size(a.type);
  uint64_t bytes = width;
  for (size_t i = 0; i < ndims; ++i) {
    uint32_t d = uint32_t(dims[4 * i]) << 24 | uint32_t(dims[4 * i + 1]) << 16 | uint32_t(dims[4 * i + 2]) << 8 |
                 uint32_t(dims[4 * i + 3]);
    a.shape.push_back(d);
    if (d != 0 && bytes > kMaxBytes / d)
      fail(HPU_ERROR_IO, "%s: IDX dimensions declare more than %llu bytes", path.c_str(),
           (unsigned long long)kMaxBytes);
    bytes *= d;
  }

  const size_t chunk = size_t(16) << 20;
  while (a.data.size() < bytes) {
    size_t old = a.data.size();
    size_t want = std::min<uint64_t>(chunk, bytes - old);
    a.data.resize(old + want);
    size_t r = read_some(f.get(), a.data.data() + old, want, path);
    if (r < want)
      fail(HPU_ERROR_IO, "%s: truncated IDX data: the header declares %llu data bytes, the file has %zu", path.c_str(),
           (unsigned long long)bytes, old + r);
  }
  uint8_t extra;
  if (read_some(f.get(), &extra, 1, path) != 0)
    fail(HPU_ERROR_IO, "%s: trailing bytes after the %llu data bytes the IDX header declares", path.c_str(),
         (unsigned long long)bytes);
  // zlib reports a stream cut inside its trailer (CRC and length) only here.
  int code = Z_OK;
  const char *msg = gzerror(f.get(), &code);
  if (code != Z_OK) fail(HPU_ERROR_IO, "%s: truncated or corrupt gzip stream: %s", path.c_str(), msg);
  if (host_is_little_endian()) swap_bytes(a.data, width);
  return a;
}

void write_idx(const std::string &path, const IdxArray &a, bool gzip) {
  if (a.shape.empty() || a.shape.size() > kMaxDims)
    fail(HPU_ERROR_INVALID_ARGUMENT, "write_idx: shape has %zu dimensions; expected 1 to %zu", a.shape.size(), kMaxDims);
  const size_t width = idx_type_size(a.type);
  if (a.data.size() != a.count() * width)
    fail(HPU_ERROR_INVALID_ARGUMENT, "write_idx: data has %zu bytes, shape needs %zu", a.data.size(),
         a.count() * width);
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), gzip ? "wb6" : "wbT"));
  if (!f) fail(HPU_ERROR_IO, "%s: cannot create: %s", path.c_str(), std::strerror(errno ? errno : EIO));
  std::vector<uint8_t> out = {0, 0, uint8_t(a.type), uint8_t(a.shape.size())};
  for (uint32_t d : a.shape) {
    out.push_back(uint8_t(d >> 24));
    out.push_back(uint8_t(d >> 16));
    out.push_back(uint8_t(d >> 8));
    out.push_back(uint8_t(d));
  }
  std::vector<uint8_t> data = a.data;
  if (host_is_little_endian()) swap_bytes(data, width);
  out.insert(out.end(), data.begin(), data.end());
  if (gzwrite(f.get(), out.data(), unsigned(out.size())) != int(out.size()))
    fail(HPU_ERROR_IO, "%s: write failed", path.c_str());
  if (gzclose(f.release()) != Z_OK) fail(HPU_ERROR_IO, "%s: write failed at close", path.c_str());
}

}  // namespace hpu
