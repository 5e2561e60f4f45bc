#include <hpu/trainer/checkpoint.hpp>

#include "error.hpp"
#include "fault_inject.hpp"
#include "fs.hpp"
#include "json.hpp"

#include <jansson.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace hpu {

using detail::fail;

namespace {

constexpr char kMagic[8] = {'H', 'P', 'U', 'C', 'K', 'P', 'T', '\0'};
constexpr size_t kHeader = 8 + 4 + 4 + 8;
constexpr size_t kMaxRank = 8;

template <class T>
void put(std::string &out, T v) {
  unsigned char b[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) b[i] = (unsigned char)(uint64_t(v) >> (8 * i));
  out.append(reinterpret_cast<const char *>(b), sizeof(T));
}

uint32_t crc(const void *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const Bytef *b = static_cast<const Bytef *>(p);
  while (n > 0) {
    uInt chunk = uInt(std::min<size_t>(n, 1u << 30));
    c = crc32(c, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return uint32_t(c);
}

// Bounds-checked little-endian reading of the payload.
struct Reader {
  const unsigned char *p, *end;
  const std::string &path;
  template <class T>
  T get(const char *what) {
    need(sizeof(T), what);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(p[i]) << (8 * i);
    p += sizeof(T);
    return T(v);
  }
  void need(uint64_t n, const char *what) {
    if (uint64_t(end - p) < n)
      fail(HPU_ERROR_IO, "%s: corrupt checkpoint: %s needs %llu bytes, %zu remain", path.c_str(), what,
           (unsigned long long)n, size_t(end - p));
  }
};

bool is_json_object(const std::string &text) {
  json_error_t err;
  json_t *j = json_loadb(text.data(), text.size(), 0, &err);
  bool ok = j && json_is_object(j);
  json_decref(j);
  return ok;
}

}  // namespace

size_t dtype_size(hpuDataType_t t) {
  switch (t) {
    case HPU_BOOL: case HPU_UINT8: case HPU_INT8: return 1;
    case HPU_FLOAT16: case HPU_BFLOAT16: return 2;
    case HPU_INT32: case HPU_UINT32: case HPU_FLOAT32: return 4;
    case HPU_INT64: case HPU_UINT64: case HPU_FLOAT64: return 8;
  }
  return 0;
}

void save_checkpoint_file(const std::string &path, const Checkpoint &ckpt) {
  if (!is_json_object(ckpt.meta)) fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint meta is not a JSON object");
  std::string payload;
  put<uint32_t>(payload, uint32_t(ckpt.meta.size()));
  payload += ckpt.meta;
  put<uint32_t>(payload, uint32_t(ckpt.tensors.size()));
  for (const auto &[name, t] : ckpt.tensors) {
    if (name.empty() || name.size() > 0xFFFF)
      fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor name of %zu bytes; expected 1 to 65535", name.size());
    size_t es = dtype_size(t.dtype);
    if (es == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s has dtype %d", name.c_str(), int(t.dtype));
    if (t.shape.size() > kMaxRank)
      fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s has %zu dimensions; at most %zu", name.c_str(),
           t.shape.size(), kMaxRank);
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s has a negative dimension", name.c_str());
      n *= uint64_t(d);
    }
    if (n * es != t.bytes.size())
      fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint tensor %s has %zu bytes; its shape needs %llu", name.c_str(),
           t.bytes.size(), (unsigned long long)(n * es));
    put<uint16_t>(payload, uint16_t(name.size()));
    payload += name;
    put<uint8_t>(payload, uint8_t(t.dtype));
    put<uint8_t>(payload, uint8_t(t.shape.size()));
    for (int64_t d : t.shape) put<int64_t>(payload, d);
    put<uint64_t>(payload, uint64_t(t.bytes.size()));
    payload.append(reinterpret_cast<const char *>(t.bytes.data()), t.bytes.size());
  }
  std::string file(kMagic, 8);
  put<uint32_t>(file, kCheckpointFormatVersion);
  put<uint32_t>(file, 0);
  put<uint64_t>(file, uint64_t(payload.size()));
  file += payload;
  put<uint32_t>(file, crc(file.data(), file.size()));
  const int64_t short_write = detail::injected_fault("checkpoint_short_write");
  detail::write_file_atomic(path, file.data(), file.size(), short_write < 0 ? SIZE_MAX : size_t(short_write));
}

Checkpoint load_checkpoint_file(const std::string &path) {
  const std::string file = detail::read_file(path);
  const auto *b = reinterpret_cast<const unsigned char *>(file.data());
  if (file.size() < 8 || std::memcmp(b, kMagic, 8) != 0)
    fail(HPU_ERROR_IO, "%s: not an hpu checkpoint (wrong magic number)", path.c_str());
  if (file.size() < kHeader + 4)
    fail(HPU_ERROR_IO, "%s: truncated checkpoint: %zu bytes, the header alone needs %zu", path.c_str(), file.size(),
         kHeader + 4);
  Reader h{b + 8, b + kHeader, path};
  uint32_t version = h.get<uint32_t>("version");
  h.get<uint32_t>("reserved");
  uint64_t payload = h.get<uint64_t>("length");
  if (version == 0 || version > kCheckpointFormatVersion)
    fail(HPU_ERROR_UNSUPPORTED, "%s: checkpoint format version %u; this build reads versions 1 to %u", path.c_str(),
         version, kCheckpointFormatVersion);
  if (payload > file.size() || file.size() != kHeader + payload + 4)
    fail(HPU_ERROR_IO, "%s: truncated or padded checkpoint: %zu bytes, the header declares %llu", path.c_str(),
         file.size(), (unsigned long long)(kHeader + payload + 4));
  Reader tail{b + kHeader + payload, b + file.size(), path};
  uint32_t stored = tail.get<uint32_t>("checksum");
  uint32_t actual = crc(b, kHeader + payload);
  if (stored != actual)
    fail(HPU_ERROR_IO, "%s: corrupt checkpoint: CRC-32 is 0x%08x, the file records 0x%08x", path.c_str(), actual,
         stored);

  Checkpoint ck;
  Reader r{b + kHeader, b + kHeader + payload, path};
  uint32_t meta_len = r.get<uint32_t>("meta length");
  r.need(meta_len, "meta");
  ck.meta.assign(reinterpret_cast<const char *>(r.p), meta_len);
  r.p += meta_len;
  if (!is_json_object(ck.meta)) fail(HPU_ERROR_IO, "%s: corrupt checkpoint: meta is not a JSON object", path.c_str());
  uint32_t count = r.get<uint32_t>("tensor count");
  for (uint32_t i = 0; i < count; ++i) {
    uint16_t name_len = r.get<uint16_t>("name length");
    r.need(name_len, "name");
    std::string name(reinterpret_cast<const char *>(r.p), name_len);
    r.p += name_len;
    CheckpointTensor t;
    const uint8_t code = r.get<uint8_t>("dtype");  // checked before it becomes an hpuDataType_t
    if (code >= HPU_NUM_DATA_TYPES || dtype_size(hpuDataType_t(code)) == 0)
      fail(HPU_ERROR_IO, "%s: corrupt checkpoint: tensor %s has dtype %d", path.c_str(), name.c_str(), int(code));
    t.dtype = hpuDataType_t(code);
    const size_t es = dtype_size(t.dtype);
    uint8_t rank = r.get<uint8_t>("rank");
    if (rank > kMaxRank)
      fail(HPU_ERROR_IO, "%s: corrupt checkpoint: tensor %s has %u dimensions", path.c_str(), name.c_str(), rank);
    uint64_t n = 1;
    for (uint8_t d = 0; d < rank; ++d) {
      int64_t dim = r.get<int64_t>("dimension");
      if (dim < 0 || (dim > 0 && n > (uint64_t(1) << 48) / uint64_t(dim)))
        fail(HPU_ERROR_IO, "%s: corrupt checkpoint: tensor %s has dimension %lld", path.c_str(), name.c_str(),
             (long long)dim);
      t.shape.push_back(dim);
      n *= uint64_t(dim);
    }
    uint64_t bytes = r.get<uint64_t>("byte count");
    if (bytes != n * es)
      fail(HPU_ERROR_IO, "%s: corrupt checkpoint: tensor %s has %llu bytes, its shape needs %llu", path.c_str(),
           name.c_str(), (unsigned long long)bytes, (unsigned long long)(n * es));
    r.need(bytes, "tensor data");
    t.bytes.assign(r.p, r.p + bytes);
    r.p += bytes;
    if (!ck.tensors.emplace(std::move(name), std::move(t)).second)
      fail(HPU_ERROR_IO, "%s: corrupt checkpoint: a tensor name appears twice", path.c_str());
  }
  if (r.p != r.end) fail(HPU_ERROR_IO, "%s: corrupt checkpoint: %zu unread payload bytes", path.c_str(), size_t(r.end - r.p));
  return ck;
}

std::string Checkpoint::get_meta(const std::string &key) const {
  detail::Json m = detail::parse_object(meta, "checkpoint meta", HPU_ERROR_IO);
  json_t *v = json_object_get(m.get(), key.c_str());
  return v ? detail::dump(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER) : "";
}

void Checkpoint::set_meta(const std::string &key, const std::string &json) {
  detail::Json m = detail::parse_object(meta, "checkpoint meta", HPU_ERROR_IO);
  json_error_t err;
  json_t *v = json_loadb(json.data(), json.size(), JSON_DECODE_ANY, &err);
  if (!v) fail(HPU_ERROR_INVALID_ARGUMENT, "checkpoint meta key \"%s\": not a JSON value (%s)", key.c_str(), err.text);
  json_object_set_new(m.get(), key.c_str(), v);
  meta = detail::dump(m.get(), JSON_COMPACT | JSON_PRESERVE_ORDER);
}

}  // namespace hpu
