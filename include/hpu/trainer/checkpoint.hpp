// The checkpoint file: a format version, named tensors (weights, optimizer
// state) and a JSON document (epoch, step, sampler, RNG and callback state),
// protected by a CRC-32 and written atomically (temporary file, fsync, rename).
//
// Layout (little-endian): "HPUCKPT\0", u32 format version, u32 0, u64 payload
// length; payload: u32 meta length, meta (JSON text), u32 tensor count, then per
// tensor: u16 name length, name, u8 dtype (hpuDataType_t), u8 rank, i64 dims,
// u64 byte count, bytes; then u32 CRC-32 of everything before it.
#pragma once

#include <hpu/hpu.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpu {

constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointTensor {
  hpuDataType_t dtype = HPU_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // product(shape) x element size
};

struct Checkpoint {
  std::string meta = "{}";  // a JSON object
  std::map<std::string, CheckpointTensor> tensors;

  // One key of meta, for the checkpoint hooks' own parts
  // (Callback::on_save_checkpoint): its value as JSON text, "" when absent;
  // set_meta adds or replaces it. hpu::Error (HPU_ERROR_INVALID_ARGUMENT)
  // naming the key when `json` is not a JSON value; get_meta's HPU_ERROR_IO
  // when meta is not a JSON object.
  std::string get_meta(const std::string &key) const;
  void set_meta(const std::string &key, const std::string &json);
};

size_t dtype_size(hpuDataType_t t);

// Writes `ckpt` to `path` atomically: readers see the old file or the new one,
// never a partial one. Creates missing parent folders. hpu::Error on failure
// (HPU_ERROR_IO with the path and the system error; HPU_ERROR_INVALID_ARGUMENT
// for a tensor whose byte count does not match its shape or a meta that is not
// a JSON object).
void save_checkpoint_file(const std::string &path, const Checkpoint &ckpt);

// Reads and verifies a checkpoint. hpu::Error: HPU_ERROR_NOT_FOUND when the file
// does not exist, HPU_ERROR_UNSUPPORTED for a newer format version, HPU_ERROR_IO
// for a wrong magic, a truncated file, a checksum mismatch or inconsistent
// contents; messages name the path.
Checkpoint load_checkpoint_file(const std::string &path);

}  // namespace hpu
