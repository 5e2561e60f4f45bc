// Fuzz target: the autocast op-list file reader and the list replacement it
// feeds. Any input must give a list or an hpu::Error with HPU_ERROR_CONFIG.
#include <cstdlib>

#include "autocast/autocast.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hpu::set_log_level(hpu::LogLevel::off);  // unknown names are warnings
  try {
    auto names = hpu::autocast::read_list_file("FUZZ_LIST", fuzz::as_file(data, size).c_str());
    for (const auto &n : names)
      if (n.empty() || n.find('#') != std::string::npos || n.front() == ' ' || n.back() == ' ') abort();
    hpu::autocast::set_list(HPU_AUTOCAST_LOWER_PRECISION, names, "fuzz");
    hpu::autocast::reset_lists();
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_CONFIG && e.status() != HPU_ERROR_INVALID_ARGUMENT) abort();
  }
  return 0;
}
