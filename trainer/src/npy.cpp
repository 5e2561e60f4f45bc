// .npy reader and writer. The header is a Python dict literal; only the three
// keys numpy writes ('descr', 'fortran_order', 'shape') are understood. Sizes
// come from an untrusted header, so they are checked against the file's size
// before anything is allocated.
#include "npy.hpp"

#include "error.hpp"
#include "fs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <sys/stat.h>

namespace hpu {

using detail::fail;
using detail::format;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxHeader = size_t(1) << 20;
constexpr size_t kMaxDims = 32;

struct TypeInfo {
  NpyType type;
  const char *code;  // descr without its byte-order character
  const char *name;
  size_t size;
};

const TypeInfo kTypes[] = {
    {NpyType::u8, "u1", "uint8", 1},    {NpyType::i8, "i1", "int8", 1},
    {NpyType::i16, "i2", "int16", 2},   {NpyType::i32, "i4", "int32", 4},
    {NpyType::i64, "i8", "int64", 8},   {NpyType::f32, "f4", "float32", 4},
    {NpyType::f64, "f8", "float64", 8},
};

const TypeInfo &info(NpyType t) {
  for (const TypeInfo &i : kTypes)
    if (i.type == t) return i;
  fail(HPU_ERROR_INVALID_ARGUMENT, "unknown NpyType %d", int(t));
}

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

void swap_bytes(uint8_t *data, size_t bytes, size_t width) {
  if (width == 1) return;
  for (size_t i = 0; i + width <= bytes; i += width)
    for (size_t a = i, b = i + width - 1; a < b; ++a, --b) std::swap(data[a], data[b]);
}

struct FileCloser {
  void operator()(FILE *f) const { std::fclose(f); }
};

// The header dict, read by hand: {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), } in any order, with the spacing and quotes Python allows.
class HeaderParser {
 public:
  HeaderParser(const std::string &text, const std::string &path) : s_(text), path_(path) {}

  void parse(std::string &descr, bool &fortran, std::vector<int64_t> &shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    for (;;) {
      if (eat('}')) break;
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        descr = string(), have_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean(), have_order = true;
      } else if (key == "shape") {
        shape = tuple(), have_shape = true;
      } else {
        error(format("unknown header key '%s'", key.c_str()));
      }
      if (eat('}')) break;
      expect(',');
    }
    skip_space();
    if (pos_ != s_.size()) error("text after the header's closing brace");
    if (!have_descr || !have_order || !have_shape)
      error(format("header lacks '%s'", !have_descr ? "descr" : !have_order ? "fortran_order" : "shape"));
  }

 private:
  [[noreturn]] void error(const std::string &what) const {
    fail(HPU_ERROR_IO, "%s: malformed .npy header: %s (header: %s)", path_.c_str(), what.c_str(), s_.c_str());
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) error(format("expected '%c' at offset %zu", c, pos_));
  }
  std::string string() {
    skip_space();
    const char q = pos_ < s_.size() ? s_[pos_] : 0;
    if (q != '\'' && q != '"') error(format("expected a quoted string at offset %zu", pos_));
    const size_t end = s_.find(q, pos_ + 1);
    if (end == std::string::npos) error("unterminated string");
    std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const char *w : {"True", "False"})
      if (s_.compare(pos_, std::strlen(w), w) == 0) {
        pos_ += std::strlen(w);
        return w[0] == 'T';
      }
    error(format("expected True or False at offset %zu", pos_));
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    for (;;) {
      if (eat(')')) break;
      skip_space();
      uint64_t v = 0;
      size_t digits = 0;
      for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_, ++digits) {
        if (v > uint64_t(INT64_MAX) / 10) error("a dimension overflows 64 bits");
        v = v * 10 + uint64_t(s_[pos_] - '0');
      }
      if (!digits) error(format("expected a dimension at offset %zu", pos_));
      if (v > uint64_t(INT64_MAX)) error("a dimension overflows 64 bits");
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long literal
      out.push_back(int64_t(v));
      if (out.size() > kMaxDims) error(format("more than %zu dimensions", kMaxDims));
      if (eat(')')) break;
      expect(',');
    }
    return out;
  }

  const std::string &s_;
  const std::string &path_;
  size_t pos_ = 0;
};

// A shape as numpy writes it: "(2, 3)", "(4,)", "()".
std::string tuple_text(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Reads exactly n bytes or fails naming what was being read.
void read_exact(FILE *f, void *dst, size_t n, const std::string &path, const char *what) {
  const size_t got = std::fread(dst, 1, n, f);
  if (got != n) {
    if (std::ferror(f)) fail(HPU_ERROR_IO, "%s: reading the %s: %s", path.c_str(), what, std::strerror(errno));
    fail(HPU_ERROR_IO, "%s: truncated .npy file: %zu of %zu bytes of the %s", path.c_str(), got, n, what);
  }
}

}  // namespace

size_t npy_type_size(NpyType t) { return info(t).size; }
const char *npy_type_name(NpyType t) { return info(t).name; }

size_t NpyArray::count() const { return detail::npy_count(shape, "NpyArray"); }

namespace detail {

size_t npy_count(const std::vector<int64_t> &shape, const char *what) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "%s: shape %s has a negative dimension", what, tuple_text(shape).c_str());
    if (d && n > SIZE_MAX / size_t(d))
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s: shape %s overflows", what, tuple_text(shape).c_str());
    n *= size_t(d);
  }
  return n;
}

void npy_check_size(const std::string &path, const std::vector<int64_t> &shape, size_t values) {
  const size_t n = npy_count(shape, "write_npy");
  if (n != values)
    fail(HPU_ERROR_INVALID_ARGUMENT, "write_npy: %s: shape %s holds %zu elements, but %zu values were given",
         path.c_str(), tuple_text(shape).c_str(), n, values);
}

}  // namespace detail

NpyArray read_npy(const std::string &path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(errno == ENOENT ? HPU_ERROR_NOT_FOUND : HPU_ERROR_IO, "%s: %s", path.c_str(), std::strerror(errno));
  struct stat st;
  if (::fstat(fileno(f.get()), &st) != 0) fail(HPU_ERROR_IO, "%s: %s", path.c_str(), std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(HPU_ERROR_IO, "%s: is a directory, not a .npy file", path.c_str());

  uint8_t pre[kMagicSize + 2];
  read_exact(f.get(), pre, sizeof pre, path, "magic string and version");
  if (std::memcmp(pre, kMagic, kMagicSize) != 0)
    fail(HPU_ERROR_IO, "%s: not a .npy file: it does not start with \"\\x93NUMPY\"", path.c_str());
  const unsigned major = pre[kMagicSize], minor = pre[kMagicSize + 1];
  if (major < 1 || major > 3 || minor != 0)
    fail(HPU_ERROR_IO, "%s: .npy format version %u.%u is not supported (expected 1.0, 2.0 or 3.0)", path.c_str(),
         major, minor);
  uint8_t len[4] = {0, 0, 0, 0};
  const size_t len_size = major == 1 ? 2 : 4;
  read_exact(f.get(), len, len_size, path, "header length");
  const size_t header_len = size_t(len[0]) | size_t(len[1]) << 8 | size_t(len[2]) << 16 | size_t(len[3]) << 24;
  if (header_len > kMaxHeader)
    fail(HPU_ERROR_IO, "%s: .npy header length %zu exceeds %zu bytes", path.c_str(), header_len, kMaxHeader);
  std::string header(header_len, '\0');
  read_exact(f.get(), header.data(), header_len, path, "header");

  std::string descr;
  bool fortran = false;
  NpyArray a;
  HeaderParser(header, path).parse(descr, fortran, a.shape);
  if (fortran)
    fail(HPU_ERROR_IO, "%s: the array is in Fortran order; save it in C order (numpy.ascontiguousarray)",
         path.c_str());
  const TypeInfo *type = nullptr;
  const char order = descr.empty() ? 0 : descr[0];
  for (const TypeInfo &i : kTypes)
    if (descr.size() == 3 && descr.compare(1, 2, i.code) == 0) type = &i;
  if (!type || (order != '<' && order != '>' && order != '|' && order != '='))
    fail(HPU_ERROR_IO, "%s: dtype '%s' is not supported; expected uint8, int8, int16, int32, int64, float32 or float64",
         path.c_str(), descr.c_str());
  if (type->size > 1 && (order == '>' || order == '|' || (order == '=' && !host_is_little_endian())))
    fail(HPU_ERROR_IO, "%s: dtype '%s' is big-endian; save it little-endian (array.astype('<%s'))", path.c_str(),
         descr.c_str(), type->code);
  a.dtype = type->type;

  const size_t offset = kMagicSize + 2 + len_size + header_len;
  size_t count = 1;
  for (int64_t d : a.shape) {
    if (d && count > SIZE_MAX / size_t(d))
      fail(HPU_ERROR_IO, "%s: shape %s declares more elements than memory can hold", path.c_str(),
           tuple_text(a.shape).c_str());
    count *= size_t(d);
  }
  const uint64_t file_bytes = uint64_t(st.st_size) > offset ? uint64_t(st.st_size) - offset : 0;
  if (count > file_bytes / type->size)
    fail(HPU_ERROR_IO, "%s: truncated .npy data: shape %s needs %zu elements of %s (%zu bytes each), the file has %llu "
         "bytes after its header", path.c_str(), tuple_text(a.shape).c_str(), count, type->name, type->size,
         (unsigned long long)file_bytes);
  if (file_bytes != count * type->size)
    fail(HPU_ERROR_IO, "%s: %llu bytes after the %zu data bytes that shape %s of %s declares", path.c_str(),
         (unsigned long long)(file_bytes - count * type->size), count * type->size, tuple_text(a.shape).c_str(),
         type->name);
  a.data.resize(count * type->size);
  if (count) read_exact(f.get(), a.data.data(), a.data.size(), path, "data");
  if (!host_is_little_endian()) swap_bytes(a.data.data(), a.data.size(), type->size);
  return a;
}

void write_npy(const std::string &path, const std::vector<int64_t> &shape, NpyType dtype, const void *data) {
  const TypeInfo &type = info(dtype);
  const size_t count = detail::npy_count(shape, "write_npy");
  if (shape.size() > kMaxDims)
    fail(HPU_ERROR_INVALID_ARGUMENT, "write_npy: %s: shape has %zu dimensions; at most %zu are supported", path.c_str(),
         shape.size(), kMaxDims);
  std::string header = format("{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }",
                              type.size == 1 ? '|' : '<', type.code, tuple_text(shape).c_str());
  // Padded with spaces and a newline so that the data starts 64-byte
  // aligned; at most 32 dimensions keep it within version 1.0's 65535 bytes.
  const size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicSize);
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  const size_t offset = out.size();
  out.resize(offset + count * type.size);
  if (count) std::memcpy(&out[offset], data, count * type.size);
  if (!host_is_little_endian()) swap_bytes(reinterpret_cast<uint8_t *>(&out[offset]), count * type.size, type.size);
  detail::write_file_atomic(path, out.data(), out.size());
}

}  // namespace hpu
