// Fuzz target: the IDX reader (read_idx; plain or gzip-compressed files, the
// format of the MNIST-style data sets). Any input must give an array whose data
// matches its shape, or an hpu::Error with HPU_ERROR_IO.
#include <hpu/hpu.hpp>
#include <hpu/trainer/idx.hpp>

#include <cstdlib>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    hpu::IdxArray a = hpu::read_idx(fuzz::as_file(data, size));
    if (a.shape.empty() || a.data.size() != a.count() * hpu::idx_type_size(a.type)) abort();
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_IO) abort();
  }
  return 0;
}
