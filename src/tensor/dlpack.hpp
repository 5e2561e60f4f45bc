// DLPack at the tensor layer: libhpu's data types as DLPack's, exports of a
// tensor (a DLManagedTensor that keeps it alive) and imports (a tensor over
// another library's memory). The C boundary (api/dlpack_api.cpp) checks the
// handles and orders the export after a stream.
#pragma once

#include <dlpack/dlpack.h>

#include "tensor/tensor.hpp"

// DLPack 1.0's versioned struct and its flags, which Debian 12's
// libdlpack-dev (DLPack 0.6) lacks; the layout is DLPack 1.0's.
#ifndef DLPACK_MAJOR_VERSION
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#endif

namespace hpu::dlpack {

// DLPack >= 0.8's type code for bool (kDLBool), which the 0.6 header lacks.
constexpr uint8_t kBoolCode = 6;

// A new export of t, holding a tensor handle of its own (so its memory, even
// memory wrapped from hpuMemAlloc, stays allocated) until its deleter runs.
DLManagedTensor *export_tensor(const std::shared_ptr<Tensor> &t);
// The same as DLPack 1.0's struct: version 1.0, flags 0.
DLManagedTensorVersioned *export_tensor_versioned(const std::shared_ptr<Tensor> &t);

// A new handle of a tensor on `dev` over the memory `dl` describes; `done`
// runs when the tensor's storage goes (never when this throws). `arg` names
// the DLTensor in messages ("managed->dl_tensor").
hpuTensor_t import_tensor(Device &dev, const DLTensor &dl, std::function<void()> done, const char *arg);

}  // namespace hpu::dlpack
