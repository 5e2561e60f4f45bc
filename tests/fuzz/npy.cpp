// Fuzz target: the .npy reader (read_npy; numpy's array files, a data
// section's features and labels). Any input must give an array whose data
// matches its shape and dtype, or an hpu::Error with HPU_ERROR_IO.
#include <hpu/hpu.hpp>

#include <cstdlib>

#include "fuzz_input.hpp"
#include "npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    hpu::NpyArray a = hpu::read_npy(fuzz::as_file(data, size));
    if (a.data.size() != a.count() * hpu::npy_type_size(a.dtype)) abort();
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_IO) abort();
  }
  return 0;
}
