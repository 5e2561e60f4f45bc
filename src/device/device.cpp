#include "device/device.hpp"

#include "core/log.hpp"
#include "core/profiler.hpp"
#include "core/runtime.hpp"
#include "device/compute_budget.hpp"

namespace hpu {

namespace {

std::vector<std::unique_ptr<Device>> *g_devices = nullptr;  // made at init, never destroyed

void init_devices(const Config &c) {
  int threads = c.num_threads > 0 ? c.num_threads : available_cpus();
  ComputeBudget::instance().configure(threads);
  std::vector<int> modules = c.visible_devices;
  if (modules.empty())
    for (int i = 0; i < c.num_devices; ++i) modules.push_back(i);
  uint64_t capacity = c.capacity();
  auto limit = static_cast<uint64_t>(static_cast<long double>(capacity) * c.memory_fraction);
  limit -= limit % Allocator::kGranularity;
  auto *devs = new std::vector<std::unique_ptr<Device>>();
  for (size_t i = 0; i < modules.size(); ++i)
    devs->push_back(std::make_unique<Device>(static_cast<int>(i), modules[i], c.profile, capacity, limit));
  g_devices = devs;
}

void shutdown_devices() {
  for (auto &s : Stream::all()) s->shutdown();
}

const bool registered = (on_init(10, init_devices), on_shutdown(10, shutdown_devices), true);

}  // namespace

Device::Device(int ordinal, int module_id, const std::string &profile, uint64_t capacity, uint64_t limit)
    : ordinal_(ordinal), module_id_(module_id), profile_(profile), capacity_(capacity), allocator_(this, limit) {}

int device_count() { return g_devices ? static_cast<int>(g_devices->size()) : 0; }

Device &device_at(int ordinal) { return *(*g_devices)[ordinal]; }

Registry<Stream> &stream_registry() {
  static auto *r = new Registry<Stream>(HandleKind::stream, "stream");
  return *r;
}

Registry<Event> &event_registry() {
  static auto *r = new Registry<Event>(HandleKind::event, "event");
  return *r;
}

// A device handle: kind tag (8 bits) | generation (48 bits) | ordinal (8
// bits; at most 256 devices). The top byte keeps user-space pointers from
// decoding as a device, as registry handles do. The generation goes up by 2
// per open/close cycle, each of which starts and joins a stream thread (tens
// of microseconds), so a closed device's handle could only come back after
// 2^47 cycles: decades.
constexpr uint64_t kDeviceGenerationMask = (uint64_t(1) << 48) - 1;

hpuDevice_t Device::handle() const {
  return reinterpret_cast<hpuDevice_t>((static_cast<uint64_t>(HandleKind::device) << 56) |
                                       ((generation_.load() & kDeviceGenerationMask) << 8) |
                                       static_cast<uint64_t>(ordinal_));
}

bool Device::handle_matches(uint64_t h) const {
  return open_count_.load(std::memory_order_acquire) > 0 &&
         ((h >> 8) & kDeviceGenerationMask) == (generation_.load(std::memory_order_acquire) & kDeviceGenerationMask);
}

Device &device_from_handle(hpuDevice_t dev) {
  uint64_t h = reinterpret_cast<uintptr_t>(dev);
  if (h == 0) fail(HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  uint64_t slot = h & 0xFF;
  if ((h >> 56) != static_cast<uint64_t>(HandleKind::device) || slot >= static_cast<uint64_t>(device_count()) ||
      !device_at(static_cast<int>(slot)).handle_matches(h))
    fail(HPU_ERROR_INVALID_HANDLE, "dev %p is not an open device handle (closed, foreign or of another kind)",
         static_cast<void *>(dev));
  return device_at(static_cast<int>(slot));
}

hpuDevice_t Device::open() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_count_.load() == 0) {
    generation_.fetch_add(1);
    default_stream_ = std::make_shared<Stream>(this, true);
    default_handle_ = reinterpret_cast<hpuStream_t>(stream_registry().add(default_stream_));
    allocator_.open(reinterpret_cast<uintptr_t>(handle()));
    HPU_LOG(debug, "device", "opened device %d (module %d)", ordinal_, module_id_);
  }
  open_count_.fetch_add(1, std::memory_order_release);
  return handle();
}

void Device::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_count_.load() > 1) {
    open_count_.fetch_sub(1);
    return;
  }
  try {
    synchronize();
  } catch (const Error &) {
    // A sticky error on the default stream is cleared by this close.
  }
  {
    // A free may also wait for work on other devices' streams: let that work
    // finish too, so that memory freed before the close never counts as live.
    std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> waits;
    {
      std::lock_guard<std::mutex> deferred_lock(deferred_mu_);
      for (const Deferred &d : deferred_) waits.insert(waits.end(), d.waits.begin(), d.waits.end());
    }
    for (auto &w : waits) w.first->wait_completed(w.second);
  }
  collect_deferred();
  if (int n = user_streams_.load())
    fail(HPU_ERROR_BUSY, "device %d still has %d stream%s; destroy them first", ordinal_, n, n == 1 ? "" : "s");
  if (int n = imports_.load())
    fail(HPU_ERROR_BUSY, "device %d still has %d tensor%s over imported DLPack memory; release them first", ordinal_, n,
         n == 1 ? "" : "s");
  // The last check: an allocation racing this close either comes first (and
  // the close fails) or finds the allocator closed.
  allocator_.close();
  open_count_.store(0, std::memory_order_release);
  generation_.fetch_add(1);
  stream_registry().remove(default_handle_);
  default_stream_->shutdown();
  default_stream_.reset();
  default_handle_ = nullptr;
  HPU_LOG(debug, "device", "closed device %d", ordinal_);
}

std::shared_ptr<Stream> Device::default_stream() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!default_stream_) fail(HPU_ERROR_INVALID_HANDLE, "device %d is not open", ordinal_);
  return default_stream_;
}

std::shared_ptr<Stream> stream_from_handle(hpuStream_t stream, Device *fallback) {
  if (stream == nullptr && fallback) return fallback->default_stream();
  return stream_registry().get(stream);
}

void *Device::allocate(size_t bytes, hpuDevice_t handle) {
  if (has_deferred_.load(std::memory_order_relaxed)) collect_deferred();
  void *p = allocator_.allocate(bytes, reinterpret_cast<uintptr_t>(handle));
  if (prof::on()) prof::memory_counter(ordinal_, allocator_.stats().in_use);
  return p;
}

void Device::free(void *ptr) {
  if (has_deferred_.load(std::memory_order_relaxed)) collect_deferred();
  Deferred d{ptr, {}};
  if (Stream::pending_anywhere() > 0) {  // else no queued work can use the memory
    for (auto &s : Stream::all()) {
      uint64_t queued = s->enqueued();
      if (s->completed() < queued && Stream::current() != s.get()) d.waits.emplace_back(s, queued);
    }
  }
  if (d.waits.empty()) {
    allocator_.free(ptr);
    if (prof::on()) prof::memory_counter(ordinal_, allocator_.stats().in_use);
    return;
  }
  std::lock_guard<std::mutex> lock(deferred_mu_);
  deferred_.reserve(deferred_.size() + 1);  // nothing throws once ptr is released
  allocator_.release(ptr);
  deferred_.push_back(std::move(d));
  has_deferred_.store(true, std::memory_order_relaxed);
}

void Device::collect_deferred() {
  std::lock_guard<std::mutex> lock(deferred_mu_);
  auto done = [](const Deferred &d) {
    for (auto &w : d.waits)
      if (w.first->completed() < w.second) return false;
    return true;
  };
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (done(*it)) {
      allocator_.free_released(it->ptr);
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
  has_deferred_.store(!deferred_.empty(), std::memory_order_relaxed);
}

MemStats Device::stats() {
  if (has_deferred_.load(std::memory_order_relaxed)) collect_deferred();
  return allocator_.stats();
}

void Device::synchronize() {
  Error first(HPU_SUCCESS, "");
  for (auto &s : Stream::all()) {
    if (&s->device() != this) continue;
    try {
      s->synchronize();
    } catch (const Error &e) {
      if (first.status() == HPU_SUCCESS) first = e;
    }
  }
  collect_deferred();
  if (first.status() != HPU_SUCCESS) throw first;
}

}  // namespace hpu
