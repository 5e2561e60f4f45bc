// DLPack exports and imports at the C boundary (include/hpu/dlpack.h).
#include "api/api.hpp"
#include "device/device.hpp"
#include "tensor/dlpack.hpp"
#include "tensor/tensor.hpp"

using namespace hpu;

namespace {

// The tensor to export, once the work queued on `stream` has completed: the
// consumer has no stream to order against.
std::shared_ptr<Tensor> ready_tensor(hpuStream_t stream, hpuTensor_t tensor, const void *managed) {
  auto t = tensor_from_handle(tensor, "tensor");
  HPU_CHECK_ARG(managed != nullptr, "managed is NULL");
  stream_for(stream, *t)->synchronize();
  return t;
}

// Checks an import's deleter: libhpu must tell the producer when it is done.
template <class M>
void check_deleter(const M *managed) {
  HPU_CHECK_ARG(managed != nullptr, "managed is NULL");
  HPU_CHECK_ARG(managed->deleter != nullptr,
                "managed->deleter is NULL; libhpu needs it to hand the memory back to its producer");
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuTensorToDLPack(hpuStream_t stream, hpuTensor_t tensor, DLManagedTensor **managed) {
  HPU_API_BEGIN
  *managed = dlpack::export_tensor(ready_tensor(stream, tensor, managed));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorToDLPackVersioned(hpuStream_t stream, hpuTensor_t tensor,
                                               DLManagedTensorVersioned **managed) {
  HPU_API_BEGIN
  *managed = dlpack::export_tensor_versioned(ready_tensor(stream, tensor, managed));
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorFromDLPack(hpuTensor_t *tensor, hpuDevice_t dev, DLManagedTensor *managed) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(tensor != nullptr, "tensor is NULL");
  Device &d = device_from_handle(dev);
  check_deleter(managed);
  *tensor = dlpack::import_tensor(d, managed->dl_tensor, [managed] { managed->deleter(managed); },
                                  "managed->dl_tensor");
  HPU_API_END
}

HPU_API hpuStatus_t hpuTensorFromDLPackVersioned(hpuTensor_t *tensor, hpuDevice_t dev,
                                                 DLManagedTensorVersioned *managed) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(tensor != nullptr, "tensor is NULL");
  Device &d = device_from_handle(dev);
  check_deleter(managed);
  if (managed->version.major != 1)
    fail(HPU_ERROR_UNSUPPORTED, "managed->version is %u.%u; libhpu reads DLPack 1.x", managed->version.major,
         managed->version.minor);
  if (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    fail(HPU_ERROR_UNSUPPORTED,
         "managed->flags 0x%llx has DLPACK_FLAG_BITMASK_READ_ONLY; libhpu tensors are writable (copy it first)",
         static_cast<unsigned long long>(managed->flags));
  *tensor = dlpack::import_tensor(d, managed->dl_tensor, [managed] { managed->deleter(managed); },
                                  "managed->dl_tensor");
  HPU_API_END
}

}  // extern "C"
