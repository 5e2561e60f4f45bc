// Fuzz target: the trainer's checkpoint reader (load_checkpoint_file: magic,
// version, length, CRC-32, JSON meta, named tensors). Any input must give a
// checkpoint whose every tensor holds exactly its shape's bytes, or an
// hpu::Error with HPU_ERROR_IO or HPU_ERROR_UNSUPPORTED. The CRC makes random
// bytes fail early, so inputs whose last four bytes are 'FUZZ' get their CRC
// fixed first: the fuzzer then reaches the payload parser.
#include <hpu/hpu.hpp>
#include <hpu/trainer/checkpoint.hpp>

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> in(data, data + size);
  if (size >= 4 && std::memcmp(data + size - 4, "FUZZ", 4) == 0) {
    uint32_t c = uint32_t(crc32(crc32(0L, Z_NULL, 0), in.data(), uInt(size - 4)));
    for (int i = 0; i < 4; ++i) in[size - 4 + size_t(i)] = uint8_t(c >> (8 * i));
  }
  try {
    hpu::Checkpoint ck = hpu::load_checkpoint_file(fuzz::as_file(in.data(), in.size()));
    for (const auto &[name, t] : ck.tensors) {
      size_t n = hpu::dtype_size(t.dtype);
      for (int64_t d : t.shape) n *= size_t(d);
      if (name.empty() || n != t.bytes.size()) abort();
    }
  } catch (const hpu::Error &e) {
    if (e.status() != HPU_ERROR_IO && e.status() != HPU_ERROR_UNSUPPORTED) abort();
  }
  return 0;
}
