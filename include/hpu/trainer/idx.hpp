// IDX files (the MNIST format), plain or gzip-compressed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpu {

// The element types IDX defines (third byte of the magic number).
enum class IdxType : uint8_t { u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

size_t idx_type_size(IdxType t);

struct IdxArray {
  IdxType type = IdxType::u8;
  std::vector<uint32_t> shape;
  std::vector<uint8_t> data;  // elements in host byte order
  size_t count() const;       // product of shape
};

// Reads an IDX file, gzip-compressed or not (decided by content, not name).
// Throws hpu::Error: HPU_ERROR_NOT_FOUND when the file does not exist,
// HPU_ERROR_IO for a bad magic number, unknown type, truncated or oversized
// content, trailing bytes or a corrupt gzip stream; each message names the path
// and what was expected.
IdxArray read_idx(const std::string &path);

// Writes `a` as an IDX file, gzip-compressed when `gzip` is true (tests, tools).
void write_idx(const std::string &path, const IdxArray &a, bool gzip);

}  // namespace hpu
