// The C boundary's helpers for src/api/ (the macros and the thread's last
// error are in core/boundary.hpp): the caller's sized structs read and
// written.
#pragma once

#include <hpu/hpu.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "core/boundary.hpp"

namespace hpu::api {

// A copy of `s` the caller releases with hpuFree.
inline char *c_string(const std::string &s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// A caller's struct_size n for a struct of `size` bytes named `name`, checked
// (more than the size field, at most 64 KiB), and capped at `size`: a caller
// built against an older (smaller) struct has only the fields it knows.
inline size_t struct_size(size_t n, size_t size, const char *name) {
  HPU_CHECK_ARG(n > sizeof(size_t) && n <= (size_t(1) << 16),
                "%s->struct_size is %zu; set it with the matching _INIT macro (%zu)", name, n, size);
  return std::min(n, size);
}

// Copies a filled struct to the caller's, honouring its struct_size: a caller
// built against an older (smaller) struct gets the fields it knows.
template <class T>
void copy_sized(T *out, const T &filled, const char *name) {
  HPU_CHECK_ARG(out != nullptr, "%s is NULL", name);
  size_t n = struct_size(out->struct_size, sizeof(T), name);
  std::memcpy(reinterpret_cast<char *>(out) + sizeof(size_t), reinterpret_cast<const char *>(&filled) + sizeof(size_t),
              n - sizeof(size_t));
}

// *in read as a struct of the caller's struct_size over `defaults` (a caller
// built against an older header passes a shorter struct).
template <class T>
T read_sized(const T *in, T defaults, const char *arg) {
  HPU_CHECK_ARG(in != nullptr, "%s is NULL", arg);
  size_t n = struct_size(in->struct_size, sizeof(T), arg);
  std::memcpy(reinterpret_cast<char *>(&defaults) + sizeof(size_t), reinterpret_cast<const char *>(in) + sizeof(size_t),
              n - sizeof(size_t));
  return defaults;
}

// As read_sized, for options that may be NULL: then the defaults.
template <class T>
T read_optional_sized(const T *in, T defaults, const char *arg) {
  return in ? read_sized(in, defaults, arg) : defaults;
}

}  // namespace hpu::api
