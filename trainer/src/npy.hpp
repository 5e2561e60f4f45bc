// NumPy .npy files (format versions 1.0, 2.0 and 3.0): a reader for features
// and labels, a writer for arrays the trainer produces (predictions, tests).
// Only little-endian C-order arrays of the types below; anything else is an
// error naming the file and what it holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace hpu {

// The element types read and written, with their numpy names: uint8, int8,
// int16, int32, int64, float32, float64 (descr '|u1', '|i1', '<i2', '<i4',
// '<i8', '<f4', '<f8').
enum class NpyType : uint8_t { u8, i8, i16, i32, i64, f32, f64 };

size_t npy_type_size(NpyType t);
const char *npy_type_name(NpyType t);  // "float32", ...

// The NpyType of a C++ element type (uint8_t, int8_t, int16_t, int32_t, int64_t,
// float, double).
template <class T>
constexpr NpyType npy_type_of();

struct NpyArray {
  NpyType dtype = NpyType::f32;
  std::vector<int64_t> shape;  // {} for a 0-dim array (one element)
  std::vector<uint8_t> data;   // count() elements in host byte order, C order
  size_t count() const;        // product of shape
};

// Reads a .npy file. Throws hpu::Error: HPU_ERROR_NOT_FOUND when the file does
// not exist; HPU_ERROR_IO naming the path for a bad magic string or version, a
// malformed header, Fortran order, big-endian data, an unsupported dtype, and
// data shorter or longer than the shape declares.
NpyArray read_npy(const std::string &path);

// Writes count(shape) elements of `dtype` from `data` (host byte order) as a
// version 1.0 file, C order, little-endian, the data 64-byte aligned;
// atomically: a failed write leaves `path` as it was. HPU_ERROR_INVALID_ARGUMENT
// for a negative dimension or more than 32 dimensions, HPU_ERROR_IO naming the
// path when it cannot be written.
void write_npy(const std::string &path, const std::vector<int64_t> &shape, NpyType dtype, const void *data);

// The same from a vector, whose size must match the shape
// (HPU_ERROR_INVALID_ARGUMENT naming both otherwise).
template <class T>
void write_npy(const std::string &path, const std::vector<int64_t> &shape, const std::vector<T> &values);

// ---- implementation of the templates ----------------------------------------

namespace detail {
size_t npy_count(const std::vector<int64_t> &shape, const char *what);
void npy_check_size(const std::string &path, const std::vector<int64_t> &shape, size_t values);
}  // namespace detail

template <class T>
constexpr NpyType npy_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return NpyType::u8;
  else if constexpr (std::is_same_v<T, int8_t>) return NpyType::i8;
  else if constexpr (std::is_same_v<T, int16_t>) return NpyType::i16;
  else if constexpr (std::is_same_v<T, int32_t>) return NpyType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return NpyType::i64;
  else if constexpr (std::is_same_v<T, float>) return NpyType::f32;
  else {
    static_assert(std::is_same_v<T, double>, "no .npy type for this element type");
    return NpyType::f64;
  }
}

template <class T>
void write_npy(const std::string &path, const std::vector<int64_t> &shape, const std::vector<T> &values) {
  detail::npy_check_size(path, shape, values.size());
  write_npy(path, shape, npy_type_of<T>(), values.data());
}

}  // namespace hpu
