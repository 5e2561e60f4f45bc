/* libhpu — emulated devices, streams and events. */
#ifndef HPU_DEVICE_H
#define HPU_DEVICE_H

#include <hpu/status.h>

/* Properties of one emulated device. Set struct_size (HPU_DEVICE_PROPERTIES_INIT)
 * before the call; fields beyond struct_size are left alone, so a program built
 * against an older header keeps working. */
typedef struct hpuDeviceProperties {
  size_t struct_size;
  char name[64];          /* "HPU 0 (gaudi2, emulated)" */
  char profile[16];       /* "gaudi", "gaudi2" or "gaudi3" */
  uint64_t total_memory;  /* capacity in bytes (profile or HPU_DEVICE_MEMORY) */
  uint64_t memory_limit;  /* usable bytes: total_memory x HPU_MEMORY_FRACTION */
  int ordinal;            /* index among visible devices, as hpuDeviceOpen takes */
  int module_id;          /* index among all emulated devices (HPU_VISIBLE_DEVICES) */
  char kernel_isa[16];    /* the instruction set the kernels use: "amx", "avx512",
                             "avx2" or "scalar" (the CPU's best, or HPU_KERNEL_ISA) */
} hpuDeviceProperties_t;

#define HPU_DEVICE_PROPERTIES_INIT {sizeof(hpuDeviceProperties_t), {0}, {0}, 0, 0, 0, 0, {0}}

HPU_EXTERN_C_BEGIN

/* Number of visible emulated devices. */
HPU_API hpuStatus_t hpuDeviceCount(int *count);

/* Opens visible device `ordinal`. Opens are counted: every open needs a close;
 * repeated opens return the same handle. */
HPU_API hpuStatus_t hpuDeviceOpen(hpuDevice_t *dev, int ordinal);

/* Closes one open. The last close waits for the device's streams and fails
 * with HPU_ERROR_BUSY while memory or created streams are still alive.
 * NULL is accepted. */
HPU_API hpuStatus_t hpuDeviceClose(hpuDevice_t dev);

HPU_API hpuStatus_t hpuDeviceGetProperties(hpuDevice_t dev, hpuDeviceProperties_t *props);

/* Waits for all work queued on every stream of the device; returns the first
 * sticky stream error among them. */
HPU_API hpuStatus_t hpuDeviceSynchronize(hpuDevice_t dev);

/* The device's default stream, valid while the device is open. */
HPU_API hpuStatus_t hpuDeviceGetDefaultStream(hpuDevice_t dev, hpuStream_t *stream);

/* Streams: in-order queues run asynchronously by the device's workers. */
HPU_API hpuStatus_t hpuStreamCreate(hpuStream_t *stream, hpuDevice_t dev);
HPU_API hpuStatus_t hpuStreamDestroy(hpuStream_t stream);
HPU_API hpuStatus_t hpuStreamSynchronize(hpuStream_t stream);
/* HPU_SUCCESS when all queued work is done, HPU_ERROR_NOT_READY while some is
 * pending, or the stream's sticky error. */
HPU_API hpuStatus_t hpuStreamQuery(hpuStream_t stream);
/* Work queued on `stream` after this call waits until `event`'s latest record
 * has completed. */
HPU_API hpuStatus_t hpuStreamWaitEvent(hpuStream_t stream, hpuEvent_t event);

/* Events: markers recorded on a stream, for ordering and timing. */
HPU_API hpuStatus_t hpuEventCreate(hpuEvent_t *event);
HPU_API hpuStatus_t hpuEventDestroy(hpuEvent_t event);
HPU_API hpuStatus_t hpuEventRecord(hpuStream_t stream, hpuEvent_t event);
HPU_API hpuStatus_t hpuEventSynchronize(hpuEvent_t event);
HPU_API hpuStatus_t hpuEventQuery(hpuEvent_t event);
/* Milliseconds between the completion of two recorded events. */
HPU_API hpuStatus_t hpuEventElapsedTime(hpuEvent_t start, hpuEvent_t end, float *ms);

HPU_EXTERN_C_END

#endif /* HPU_DEVICE_H */
