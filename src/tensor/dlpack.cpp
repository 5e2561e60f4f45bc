#include "tensor/dlpack.hpp"

#include <limits>

#include "core/error.hpp"
#include "core/log.hpp"

namespace hpu::dlpack {

namespace {

// hpuDataType_t -> (DLPack code, bits), in enum order.
struct DlType {
  hpuDataType_t dtype;
  uint8_t code, bits;
};
constexpr DlType kTypes[] = {
    {HPU_BOOL, kBoolCode, 8},  {HPU_UINT8, kDLUInt, 8},      {HPU_INT8, kDLInt, 8},
    {HPU_INT32, kDLInt, 32},   {HPU_UINT32, kDLUInt, 32},    {HPU_INT64, kDLInt, 64},
    {HPU_UINT64, kDLUInt, 64}, {HPU_FLOAT16, kDLFloat, 16},  {HPU_BFLOAT16, kDLBfloat, 16},
    {HPU_FLOAT32, kDLFloat, 32}, {HPU_FLOAT64, kDLFloat, 64},
};
static_assert(sizeof kTypes / sizeof kTypes[0] == HPU_NUM_DATA_TYPES, "a DLPack type for every hpuDataType_t");

const char *code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "kDLInt";
    case kDLUInt: return "kDLUInt";
    case kDLFloat: return "kDLFloat";
    case kDLOpaqueHandle: return "kDLOpaqueHandle";
    case kDLBfloat: return "kDLBfloat";
    case kDLComplex: return "kDLComplex";
    case kBoolCode: return "kDLBool";
    default: return "an unknown code";
  }
}

const char *device_name(int type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return "an unknown device type";
  }
}

hpuDataType_t hpu_dtype(DLDataType t, const char *arg) {
  if (t.lanes == 1)
    for (const DlType &k : kTypes)
      if (k.code == t.code && k.bits == t.bits) return k.dtype;
  fail(HPU_ERROR_UNSUPPORTED,
       "%s.dtype (code %u %s, %u bits, %u lanes) has no hpuDataType_t; libhpu takes bool, (u)int8, int32, uint32, "
       "(u)int64, float16, bfloat16, float32 and float64, one lane",
       arg, t.code, code_name(t.code), t.bits, t.lanes);
}

// What an export owns: a tensor handle, and the shape and strides its
// DLTensor points at. M is DLManagedTensor or DLManagedTensorVersioned.
template <class M>
struct Export {
  M managed{};
  hpuTensor_t handle;
  int64_t shape[kMaxDims], strides[kMaxDims];

  static void deleter(M *m) {
    auto *e = static_cast<Export *>(m->manager_ctx);
    try {
      release_tensor_handle(e->handle);
    } catch (const Error &err) {
      HPU_LOG(error, "tensor", "releasing a DLPack export: %s", err.what());
    }
    delete e;
  }
};

template <class M>
M *make_export(const std::shared_ptr<Tensor> &t) {
  auto e = std::make_unique<Export<M>>();
  DLTensor &dl = e->managed.dl_tensor;
  const DlType &k = kTypes[t->dtype()];
  dl.data = t->data();
  dl.device = {kDLCPU, 0};
  dl.ndim = t->ndim();
  dl.dtype = {k.code, k.bits, 1};
  for (int i = 0; i < t->ndim(); ++i) {
    e->shape[i] = t->size(i);
    e->strides[i] = t->strides()[i];
  }
  dl.shape = e->shape;
  dl.strides = e->strides;
  dl.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &Export<M>::deleter;
  e->handle = tensor_handle(t);  // last: nothing fails after it
  return &e.release()->managed;
}

}  // namespace

DLManagedTensor *export_tensor(const std::shared_ptr<Tensor> &t) { return make_export<DLManagedTensor>(t); }

DLManagedTensorVersioned *export_tensor_versioned(const std::shared_ptr<Tensor> &t) {
  DLManagedTensorVersioned *m = make_export<DLManagedTensorVersioned>(t);
  m->version = {1, 0};
  m->flags = 0;
  return m;
}

hpuTensor_t import_tensor(Device &dev, const DLTensor &dl, std::function<void()> done, const char *arg) {
  const int type = dl.device.device_type;
  if (type != kDLCPU && type != kDLCUDAHost && type != kDLROCMHost)
    fail(HPU_ERROR_UNSUPPORTED,
         "%s.device is (%d %s, %d); libhpu shares CPU-addressable memory only (kDLCPU, kDLCUDAHost, kDLROCMHost)", arg,
         type, device_name(type), dl.device.device_id);
  const hpuDataType_t dtype = hpu_dtype(dl.dtype, arg);
  HPU_CHECK_ARG(dl.ndim >= 0 && dl.ndim <= kMaxDims, "%s.ndim %d is out of range (0..%d)", arg, dl.ndim, kMaxDims);
  const std::string shape_arg = std::string(arg) + ".shape";
  Dims sh = Dims::shape(dl.ndim, dl.shape, shape_arg.c_str());
  Dims st = sh.contiguous_strides();
  if (dl.strides) {
    for (int i = 0; i < dl.ndim; ++i) {
      if (dl.strides[i] < 0)
        fail(HPU_ERROR_UNSUPPORTED, "%s.strides[%d] is %lld; libhpu tensors take strides >= 0 (copy it first)", arg,
             i, static_cast<long long>(dl.strides[i]));
      st[i] = dl.strides[i];
    }
  }
  const size_t es = dtype_size(dtype);
  int64_t last = 0;
  int bad = furthest_element(sh, st, std::numeric_limits<int64_t>::max() / static_cast<int64_t>(es) - 1, &last);
  if (bad >= 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s.strides[%d] %lld puts element %lld of dim %d (shape %s, strides %s) more "
         "than 8 EiB past data", arg, bad, static_cast<long long>(st[bad]), static_cast<long long>(sh[bad] - 1), bad,
         sh.str().c_str(), st.str().c_str());
  const size_t extent = sh.numel() == 0 ? 0 : (static_cast<size_t>(last) + 1) * es;
  char *data = static_cast<char *>(dl.data);
  HPU_CHECK_ARG(data != nullptr || extent == 0, "%s.data is NULL with %lld elements", arg,
                static_cast<long long>(sh.numel()));
  uintptr_t start = 0;
  HPU_CHECK_ARG(!__builtin_add_overflow(reinterpret_cast<uintptr_t>(data), dl.byte_offset, &start) &&
                    start <= std::numeric_limits<uintptr_t>::max() - extent,
                "%s.byte_offset %llu past data %p runs past the end of the address space", arg,
                static_cast<unsigned long long>(dl.byte_offset), dl.data);
  HPU_CHECK_ARG(start % es == 0, "%s.data %p + byte_offset %llu is not aligned to the %zu-byte %s elements", arg,
                dl.data, static_cast<unsigned long long>(dl.byte_offset), es, dtype_name(dtype));
  void *first = extent ? reinterpret_cast<void *>(start) : nullptr;
  auto storage = std::make_shared<Storage>(dev, first, extent, false);
  hpuTensor_t h = tensor_handle(std::make_shared<Tensor>(storage, dtype, sh, st, 0));
  storage->adopt(std::move(done));
  return h;
}

}  // namespace hpu::dlpack
