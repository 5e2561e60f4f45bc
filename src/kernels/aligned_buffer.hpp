// A growable 64-byte aligned scratch buffer (one per thread, thread_local),
// kept between calls unless it grew large: the GEMM kernels' packed operands.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace hpu::kernels {

struct AlignedBuffer {
  void *p = nullptr;
  size_t bytes = 0;
  ~AlignedBuffer() { std::free(p); }
  template <class T>
  T *get(size_t count) {
    size_t want = (count * sizeof(T) + 63) & ~size_t(63);
    if (want > bytes) {
      std::free(p);
      p = std::aligned_alloc(64, want);
      if (!p) {
        bytes = 0;
        throw std::bad_alloc();
      }
      bytes = want;
    }
    return static_cast<T *>(p);
  }
  // Frees the buffer when it holds more than 16 MiB.
  void trim() {
    if (bytes > (size_t(16) << 20)) {
      std::free(p);
      p = nullptr;
      bytes = 0;
    }
  }
};

}  // namespace hpu::kernels
