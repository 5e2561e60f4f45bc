// Fuzz target: the JSON configuration reader (HPU_CONFIG). Any input must give
// a Config or an hpu::Error with HPU_ERROR_CONFIG; anything else is a bug.
#include <cstdlib>

#include "core/config.hpp"
#include "core/error.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setenv("HPU_CONFIG", fuzz::as_file(data, size).c_str(), 1);
  try {
    hpu::Config c = hpu::load_config();
    if (c.num_devices < 1 || c.memory_fraction <= 0 || c.memory_fraction > 1) abort();
    for (int d : c.visible_devices)
      if (d < 0 || d >= c.num_devices) abort();
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_CONFIG) abort();
  }
  return 0;
}
