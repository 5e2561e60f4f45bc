// Devices, streams and events at the C boundary.
#include <cstdio>

#include "api/api.hpp"
#include "device/device.hpp"
#include "kernels/cpu.hpp"

using namespace hpu;

extern "C" {

HPU_API hpuStatus_t hpuDeviceCount(int *count) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(count != nullptr, "count is NULL");
  *count = device_count();
  HPU_API_END
}

HPU_API hpuStatus_t hpuDeviceOpen(hpuDevice_t *dev, int ordinal) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(dev != nullptr, "dev is NULL");
  if (ordinal < 0 || ordinal >= device_count())
    fail(HPU_ERROR_NOT_FOUND, "ordinal %d is out of range: %d devices are visible (0..%d)", ordinal, device_count(),
         device_count() - 1);
  *dev = device_at(ordinal).open();
  HPU_API_END
}

HPU_API hpuStatus_t hpuDeviceClose(hpuDevice_t dev) {
  HPU_API_BEGIN
  if (dev == nullptr) return HPU_SUCCESS;
  device_from_handle(dev).close();
  HPU_API_END
}

HPU_API hpuStatus_t hpuDeviceGetProperties(hpuDevice_t dev, hpuDeviceProperties_t *props) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  hpuDeviceProperties_t p = HPU_DEVICE_PROPERTIES_INIT;
  snprintf(p.name, sizeof p.name, "HPU %d (%s, emulated)", d.ordinal(), d.profile().c_str());
  snprintf(p.profile, sizeof p.profile, "%s", d.profile().c_str());
  p.total_memory = d.capacity();
  p.memory_limit = d.allocator().stats().limit;
  p.ordinal = d.ordinal();
  p.module_id = d.module_id();
  snprintf(p.kernel_isa, sizeof p.kernel_isa, "%s", kernels::isa_name(kernels::best_isa()));
  api::copy_sized(props, p, "props");
  HPU_API_END
}

HPU_API hpuStatus_t hpuDeviceSynchronize(hpuDevice_t dev) {
  HPU_API_BEGIN
  device_from_handle(dev).synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuDeviceGetDefaultStream(hpuDevice_t dev, hpuStream_t *stream) {
  HPU_API_BEGIN
  Device &d = device_from_handle(dev);
  HPU_CHECK_ARG(stream != nullptr, "stream is NULL");
  *stream = d.default_stream_handle();
  HPU_API_END
}

HPU_API hpuStatus_t hpuStreamCreate(hpuStream_t *stream, hpuDevice_t dev) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(stream != nullptr, "stream is NULL");
  Device &d = device_from_handle(dev);
  auto s = std::make_shared<Stream>(&d, false);
  *stream = reinterpret_cast<hpuStream_t>(stream_registry().add(s));
  d.stream_created();
  HPU_API_END
}

HPU_API hpuStatus_t hpuStreamDestroy(hpuStream_t stream) {
  HPU_API_BEGIN
  if (stream == nullptr) return HPU_SUCCESS;
  auto s = stream_registry().get(stream);
  if (s->is_default())
    fail(HPU_ERROR_INVALID_USAGE, "stream %p is a device's default stream; it lives until the device is closed",
         static_cast<void *>(stream));
  stream_registry().remove(stream);
  try {
    s->synchronize();  // queued work finishes; its error dies with the stream
  } catch (const Error &) {
  }
  s->shutdown();
  s->device().stream_destroyed();
  HPU_API_END
}

HPU_API hpuStatus_t hpuStreamSynchronize(hpuStream_t stream) {
  HPU_API_BEGIN
  stream_registry().get(stream)->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuStreamQuery(hpuStream_t stream) {
  HPU_API_BEGIN
  if (!stream_registry().get(stream)->query()) return HPU_ERROR_NOT_READY;
  HPU_API_END
}

HPU_API hpuStatus_t hpuStreamWaitEvent(hpuStream_t stream, hpuEvent_t event) {
  HPU_API_BEGIN
  auto s = stream_registry().get(stream);
  auto e = event_registry().get(event);
  s->enqueue(e->waiter(), OpKind::wait);
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventCreate(hpuEvent_t *event) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(event != nullptr, "event is NULL");
  *event = reinterpret_cast<hpuEvent_t>(event_registry().add(std::make_shared<Event>()));
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventDestroy(hpuEvent_t event) {
  HPU_API_BEGIN
  if (event == nullptr) return HPU_SUCCESS;
  event_registry().remove(event);  // queued records and waits keep the object alive
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventRecord(hpuStream_t stream, hpuEvent_t event) {
  HPU_API_BEGIN
  auto e = event_registry().get(event);
  e->record(*stream_registry().get(stream));
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventSynchronize(hpuEvent_t event) {
  HPU_API_BEGIN
  event_registry().get(event)->synchronize();
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventQuery(hpuEvent_t event) {
  HPU_API_BEGIN
  if (!event_registry().get(event)->query()) return HPU_ERROR_NOT_READY;
  HPU_API_END
}

HPU_API hpuStatus_t hpuEventElapsedTime(hpuEvent_t start, hpuEvent_t end, float *ms) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(ms != nullptr, "ms is NULL");
  auto a = event_registry().get(start, "start");
  auto b = event_registry().get(end, "end");
  *ms = Event::elapsed_ms(*a, *b);
  HPU_API_END
}

}  // extern "C"
