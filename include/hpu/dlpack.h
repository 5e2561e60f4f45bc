/* libhpu — zero-copy exchange of tensors with other libraries (DLPack). */
#ifndef HPU_DLPACK_H
#define HPU_DLPACK_H

#include <hpu/tensor.h>

/* DLPack's structs, declared by whichever dlpack.h the caller includes:
 * DLManagedTensor (every DLPack version; Debian's libdlpack-dev has 0.6) and
 * DLManagedTensorVersioned (DLPack >= 1.0, with its version and read-only
 * flag). libhpu takes pointers only, so this header needs neither.
 *
 * The emulated devices' memory is host memory: an exported tensor presents
 * device (kDLCPU, 0), so NumPy and PyTorch read it as CPU memory. A consumer
 * has no stream to order against: an export first waits for the work queued
 * on a stream, and work queued after it may change the memory under the
 * consumer. Imports take CPU-addressable memory only (kDLCPU, kDLCUDAHost,
 * kDLROCMHost) and attach it to an open device of this process. */
struct DLManagedTensor;
struct DLManagedTensorVersioned;

HPU_EXTERN_C_BEGIN

/* A DLPack view of `tensor`'s memory, without a copy: waits for the work
 * queued on `stream` (NULL: the default stream of the tensor's device), then
 * stores in *managed a DLManagedTensor whose dl_tensor has the tensor's
 * dtype, shape and strides (in elements, always set) and device (kDLCPU, 0).
 * The export holds a reference to the tensor: its memory stays allocated, and
 * the last hpuDeviceClose of its device fails with HPU_ERROR_BUSY, until the
 * consumer calls (*managed)->deleter once, whatever the caller releases
 * meanwhile. bool is exported as DLPack's kDLBool (code 6, 8 bits). */
HPU_API hpuStatus_t hpuTensorToDLPack(hpuStream_t stream, hpuTensor_t tensor, struct DLManagedTensor **managed);

/* As hpuTensorToDLPack, as a DLManagedTensorVersioned: version 1.0, flags 0
 * (writable, not a copy). */
HPU_API hpuStatus_t hpuTensorToDLPackVersioned(hpuStream_t stream, hpuTensor_t tensor,
                                               struct DLManagedTensorVersioned **managed);

/* A tensor on the open device `dev` over the memory `managed` describes,
 * without a copy. On success libhpu owns `managed`: it calls its deleter
 * once, when the tensor, every view of it and the work queued on them are
 * gone (on whichever thread lets go last); until then the last hpuDeviceClose
 * of `dev` fails with HPU_ERROR_BUSY. On failure `managed` stays the
 * caller's and its deleter is not called. strides NULL means row-major; the
 * strides must be >= 0 (HPU_ERROR_UNSUPPORTED otherwise), data + byte_offset
 * aligned to the element size. The memory is not device memory: it does not
 * count in hpuMemStats, and functions that take device addresses
 * (hpuMemcpy, the collectives) refuse its address; tensor ops accept it. */
HPU_API hpuStatus_t hpuTensorFromDLPack(hpuTensor_t *tensor, hpuDevice_t dev, struct DLManagedTensor *managed);

/* As hpuTensorFromDLPack, for DLPack >= 1.0's struct: a major version other
 * than 1 and the read-only flag are refused with HPU_ERROR_UNSUPPORTED
 * (libhpu tensors are always writable; copy a read-only tensor first). */
HPU_API hpuStatus_t hpuTensorFromDLPackVersioned(hpuTensor_t *tensor, hpuDevice_t dev,
                                                 struct DLManagedTensorVersioned *managed);

HPU_EXTERN_C_END

#endif /* HPU_DLPACK_H */
