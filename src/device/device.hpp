// Emulated devices. Each process owns its devices (as each Gaudi process owns
// its module); they are made at initialisation from the configuration and live
// until the process exits. Opens are counted; the handle of an open device
// encodes its ordinal and an open generation, so a handle from before the last
// close is rejected.
#pragma once

#include <hpu/device.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/registry.hpp"
#include "device/allocator.hpp"
#include "device/stream.hpp"

namespace hpu {

class Device {
 public:
  Device(int ordinal, int module_id, const std::string &profile, uint64_t capacity, uint64_t limit);

  int ordinal() const { return ordinal_; }
  int module_id() const { return module_id_; }
  const std::string &profile() const { return profile_; }
  uint64_t capacity() const { return capacity_; }
  Allocator &allocator() { return allocator_; }

  // Opens (counted) and returns the handle.
  hpuDevice_t open();
  // One close; the last one checks for live memory and streams (HPU_ERROR_BUSY).
  void close();
  bool handle_matches(uint64_t handle) const;
  int open_count() const { return open_count_.load(std::memory_order_relaxed); }
  hpuDevice_t handle() const;

  // Allocation with the deferred-free rule applied. handle: the handle the
  // caller named (NULL: none); the allocation fails with
  // HPU_ERROR_INVALID_HANDLE if the device was closed since it was checked.
  void *allocate(size_t bytes, hpuDevice_t handle = nullptr);
  // Frees now if no queued work in the process may still use the memory,
  // otherwise when the work queued so far has completed.
  void free(void *ptr);
  // Releases deferred frees whose work has completed.
  void collect_deferred();
  MemStats stats();

  std::shared_ptr<Stream> default_stream();
  hpuStream_t default_stream_handle() const { return default_handle_; }
  void synchronize();  // every stream of this device; throws the first sticky error
  void stream_created() { user_streams_.fetch_add(1); }
  // Communicators open on this device (the collectives report them; hpu-smi shows them).
  void comm_opened() { comms_.fetch_add(1); }
  void comm_closed() { comms_.fetch_sub(1); }
  int comm_count() const { return comms_.load(std::memory_order_relaxed); }
  void stream_destroyed() { user_streams_.fetch_sub(1); }
  // Tensors over memory imported from another library (DLPack): the last
  // close fails with HPU_ERROR_BUSY while any is alive, as with its own memory.
  void import_added() { imports_.fetch_add(1); }
  void import_released() { imports_.fetch_sub(1); }

 private:
  struct Deferred {
    void *ptr;
    std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> waits;
  };

  const int ordinal_, module_id_;
  const std::string profile_;
  const uint64_t capacity_;
  Allocator allocator_;

  mutable std::mutex mu_;  // open state, default stream
  std::atomic<int> open_count_{0};
  std::atomic<uint64_t> generation_{0};
  std::shared_ptr<Stream> default_stream_;
  hpuStream_t default_handle_ = nullptr;
  std::atomic<int> user_streams_{0};
  std::atomic<int> comms_{0};
  std::atomic<int> imports_{0};

  std::mutex deferred_mu_;
  std::atomic<bool> has_deferred_{false};
  std::vector<Deferred> deferred_;
};

// Visible devices of this process (valid after initialisation).
int device_count();
Device &device_at(int ordinal);

// The open device behind a handle; HPU_ERROR_INVALID_HANDLE otherwise.
Device &device_from_handle(hpuDevice_t dev);

Registry<Stream> &stream_registry();
Registry<Event> &event_registry();

// A stream handle, or the default stream of `fallback` when stream is NULL.
std::shared_ptr<Stream> stream_from_handle(hpuStream_t stream, Device *fallback);

}  // namespace hpu
