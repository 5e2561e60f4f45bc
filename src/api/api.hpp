// The C boundary's helpers for src/api/ (the macros and the thread's last
// error are in core/boundary.hpp).
#pragma once

#include <hpu/hpu.h>

#include <cstring>

#include "core/boundary.hpp"

namespace hpu::api {

// Copies a filled struct to the caller's, honouring its struct_size: a caller
// built against an older (smaller) struct gets the fields it knows.
template <class T>
void copy_sized(T *out, const T &filled, const char *name) {
  HPU_CHECK_ARG(out != nullptr, "%s is NULL", name);
  size_t n = out->struct_size;
  HPU_CHECK_ARG(n > sizeof(size_t) && n <= (size_t(1) << 16),
                "%s->struct_size is %zu; set it with the matching _INIT macro (%zu)", name, n, sizeof(T));
  if (n > sizeof(T)) n = sizeof(T);
  std::memcpy(reinterpret_cast<char *>(out) + sizeof(size_t), reinterpret_cast<const char *>(&filled) + sizeof(size_t),
              n - sizeof(size_t));
}

}  // namespace hpu::api
