// DLPack exchange (include/hpu/dlpack.h): exports that share a tensor's
// memory and keep it alive until the consumer's deleter, imports of host
// memory that call the producer's deleter once, the versioned struct and its
// read-only flag, and what cannot be shared.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "expect.hpp"
#include "tensor_fixture.hpp"
#include "tensor/dlpack.hpp"  // DLPack 1.0's versioned struct (Debian's dlpack.h is 0.6)

namespace {

// Host memory offered to libhpu as another library would: a DLManagedTensor
// (M) over `data`, whose deleter counts its calls.
template <class M>
struct Producer {
  std::vector<float> data;
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  M managed{};
  std::atomic<int> deletes{0};

  explicit Producer(std::vector<float> values = {1, 2, 3, 4, 5, 6}) : data(std::move(values)) {
    DLTensor &dl = managed.dl_tensor;
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = 2;
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape;
    dl.strides = strides;
    dl.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](M *m) { static_cast<Producer *>(m->manager_ctx)->deletes++; };
    if constexpr (std::is_same_v<M, DLManagedTensorVersioned>) managed.version = {1, 0};
  }
};

class DLPack : public hpu_test::TensorFixture {};

// ---- exports ----------------------------------------------------------------------------

TEST_F(DLPack, ExportSharesTheTensorsMemory) {
  hpuTensor_t t = from({1, 2, 3, 4, 5, 6}, {2, 3});
  DLManagedTensor *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPack(nullptr, t, &m));
  const DLTensor &dl = m->dl_tensor;
  void *data = nullptr;
  ASSERT_HPU_OK(hpuTensorGetData(t, &data));
  EXPECT_EQ(dl.data, data);
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  ASSERT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.shape[0], 2);
  EXPECT_EQ(dl.shape[1], 3);
  ASSERT_NE(dl.strides, nullptr);
  EXPECT_EQ(dl.strides[0], 3);
  EXPECT_EQ(dl.strides[1], 1);
  // A write through the export shows in the tensor, and the other way round.
  static_cast<float *>(dl.data)[4] = 50;
  EXPECT_EQ(host(t), (std::vector<float>{1, 2, 3, 4, 50, 6}));
  const float ten[6] = {10, 20, 30, 40, 50, 60};
  ASSERT_HPU_OK(hpuTensorCopyFromHost(nullptr, t, ten, sizeof ten));
  EXPECT_EQ(static_cast<float *>(dl.data)[5], 60);
  m->deleter(m);
  EXPECT_HPU_OK(hpuTensorRelease(t));
}

TEST_F(DLPack, ExportKeepsTheMemoryAfterTheTensorIsReleased) {
  const uint64_t before = in_use();
  hpuTensor_t t = from({1, 2, 3, 4}, {4});
  DLManagedTensor *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPack(nullptr, t, &m));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_GT(in_use(), before);
  // Still allocated (ASan would report a read of freed memory).
  EXPECT_EQ(static_cast<float *>(m->dl_tensor.data)[3], 4);
  // The device may not close under the consumer.
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY, "still has 1 allocation");
  m->deleter(m);
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(in_use(), before);
}

TEST_F(DLPack, ExportPinsWrappedMemoryAgainstMemFree) {
  void *p = nullptr;
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, 64));
  const int64_t shape[1] = {16};
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&t, p, HPU_FLOAT32, 1, shape, nullptr));
  DLManagedTensorVersioned *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPackVersioned(nullptr, t, &m));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_BUSY);
  m->deleter(m);
  EXPECT_HPU_OK(hpuMemFree(p));
}

TEST_F(DLPack, ExportWaitsForTheWorkQueuedOnTheStream) {
  const int64_t shape[1] = {1 << 16};
  hpuTensor_t t = nullptr;
  hpuStream_t s = nullptr;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_FLOAT32, 1, shape));
  ASSERT_HPU_OK(hpuTensorFill(s, t, 7));
  DLManagedTensor *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPack(s, t, &m));
  EXPECT_EQ(hpuStreamQuery(s), HPU_SUCCESS);
  const float *f = static_cast<const float *>(m->dl_tensor.data);
  EXPECT_EQ(f[0], 7);
  EXPECT_EQ(f[shape[0] - 1], 7);
  m->deleter(m);
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_OK(hpuStreamDestroy(s));
}

TEST_F(DLPack, ExportOfAViewGivesItsStridesAndFirstElement) {
  hpuTensor_t t = from({1, 2, 3, 4, 5, 6}, {2, 3});
  hpuTensor_t v = nullptr, col = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&v, t, 0, 1));
  ASSERT_HPU_OK(hpuTensorSlice(&col, v, 0, 1, 3, 1));  // rows 1..2 of the transpose: [[2, 5], [3, 6]]
  DLManagedTensor *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPack(nullptr, col, &m));
  const DLTensor &dl = m->dl_tensor;
  EXPECT_EQ(dl.shape[0], 2);
  EXPECT_EQ(dl.shape[1], 2);
  EXPECT_EQ(dl.strides[0], 1);
  EXPECT_EQ(dl.strides[1], 3);
  const float *f = static_cast<const float *>(dl.data);
  EXPECT_EQ(f[0], 2);
  EXPECT_EQ(f[1 * dl.strides[0] + 1 * dl.strides[1]], 6);
  m->deleter(m);
  for (hpuTensor_t x : {col, v, t}) EXPECT_HPU_OK(hpuTensorRelease(x));
}

TEST_F(DLPack, VersionedExportIsVersion1AndWritable) {
  hpuTensor_t t = from({1}, {1});
  DLManagedTensorVersioned *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPackVersioned(nullptr, t, &m));
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->version.minor, 0u);
  EXPECT_EQ(m->flags, 0u);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  m->deleter(m);
  EXPECT_HPU_OK(hpuTensorRelease(t));
}

TEST_F(DLPack, EveryDataTypeHasItsDLPackTypeBothWays) {
  struct Case {
    hpuDataType_t dtype;
    uint8_t code, bits;
  };
  const Case cases[] = {{HPU_BOOL, 6, 8},         {HPU_UINT8, kDLUInt, 8},    {HPU_INT8, kDLInt, 8},
                        {HPU_INT32, kDLInt, 32},   {HPU_UINT32, kDLUInt, 32},  {HPU_INT64, kDLInt, 64},
                        {HPU_UINT64, kDLUInt, 64}, {HPU_FLOAT16, kDLFloat, 16}, {HPU_BFLOAT16, kDLBfloat, 16},
                        {HPU_FLOAT32, kDLFloat, 32}, {HPU_FLOAT64, kDLFloat, 64}};
  ASSERT_EQ(sizeof cases / sizeof cases[0], size_t(HPU_NUM_DATA_TYPES));
  for (const Case &c : cases) {
    SCOPED_TRACE(c.dtype);
    const int64_t shape[1] = {2};
    hpuTensor_t t = nullptr, back = nullptr;
    ASSERT_HPU_OK(hpuTensorCreate(&t, dev, c.dtype, 1, shape));
    DLManagedTensor *m = nullptr;
    ASSERT_HPU_OK(hpuTensorToDLPack(nullptr, t, &m));
    EXPECT_EQ(m->dl_tensor.dtype.code, c.code);
    EXPECT_EQ(m->dl_tensor.dtype.bits, c.bits);
    ASSERT_HPU_OK(hpuTensorFromDLPack(&back, dev, m));
    hpuDataType_t dt;
    ASSERT_HPU_OK(hpuTensorGetDtype(back, &dt));
    EXPECT_EQ(dt, c.dtype);
    EXPECT_HPU_OK(hpuTensorRelease(back));
    EXPECT_HPU_OK(hpuTensorRelease(t));
  }
}

TEST_F(DLPack, ExportBadInput) {
  hpuTensor_t t = from({1}, {1});
  DLManagedTensor *m = nullptr;
  EXPECT_HPU_FAIL(hpuTensorToDLPack(nullptr, t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "managed is NULL");
  EXPECT_HPU_FAIL(hpuTensorToDLPack(nullptr, nullptr, &m), HPU_ERROR_INVALID_HANDLE, "tensor is NULL");
  EXPECT_HPU_OK(hpuTensorRelease(t));
  // A released tensor (a freed one) is refused; *managed is left alone.
  EXPECT_HPU_FAIL(hpuTensorToDLPack(nullptr, t, &m), HPU_ERROR_INVALID_HANDLE, "tensor", "not a live tensor handle");
  EXPECT_EQ(m, nullptr);
}

TEST_F(DLPack, ExportReturnsTheStreamsStickyErrorAndOnlyTakesItsDevicesStreams) {
  hpuTensor_t t = from({1, 2}, {2});
  const float x[6] = {};
  const int64_t labels[2] = {1, 3}, xs[2] = {2, 3}, ls[1] = {2};
  hpuTensor_t input = nullptr, target = nullptr, loss = nullptr;
  ASSERT_HPU_OK(hpuTensorCreateFromHost(&input, dev, HPU_FLOAT32, 2, xs, x));
  ASSERT_HPU_OK(hpuTensorCreateFromHost(&target, dev, HPU_INT64, 1, ls, labels));
  hpuStream_t s = nullptr;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuCrossEntropyLoss(s, input, target, nullptr, nullptr, &loss));  // target[1] fails on s
  DLManagedTensor *m = nullptr;
  EXPECT_HPU_FAIL(hpuTensorToDLPack(s, t, &m), HPU_ERROR_INVALID_ARGUMENT, "target[1] is 3");
  EXPECT_EQ(m, nullptr);
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  // A stream of another device.
  hpuDevice_t other = nullptr;
  hpuStream_t os = nullptr;
  ASSERT_HPU_OK(hpuDeviceOpen(&other, 1));
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(other, &os));
  EXPECT_HPU_FAIL(hpuTensorToDLPack(os, t, &m), HPU_ERROR_INVALID_ARGUMENT, "belongs to device 1");
  EXPECT_EQ(m, nullptr);
  EXPECT_HPU_OK(hpuDeviceClose(other));
  for (hpuTensor_t x : {loss, target, input, t}) EXPECT_HPU_OK(hpuTensorRelease(x));
}

// ---- imports ----------------------------------------------------------------------------

TEST_F(DLPack, ImportSharesTheProducersMemoryAndCallsItsDeleterOnce) {
  Producer<DLManagedTensor> p;
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  void *data = nullptr;
  ASSERT_HPU_OK(hpuTensorGetData(t, &data));
  EXPECT_EQ(data, p.data.data());
  EXPECT_EQ(host(t), p.data);
  // Written by libhpu, read by the producer.
  ASSERT_HPU_OK(hpuTensorFill(nullptr, t, 9));
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(p.data, std::vector<float>(6, 9));
  // A view keeps the memory: the deleter waits for the last of them.
  hpuTensor_t row = nullptr;
  ASSERT_HPU_OK(hpuTensorSlice(&row, t, 0, 1, 2, 1));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(p.deletes, 0);
  ASSERT_HPU_OK(hpuTensorRelease(row));
  EXPECT_EQ(p.deletes, 1);
}

TEST_F(DLPack, ImportedMemoryOutlivesQueuedWork) {
  Producer<DLManagedTensor> p;
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  ASSERT_HPU_OK(hpuTensorFill(nullptr, t, 3));
  ASSERT_HPU_OK(hpuTensorRelease(t));  // the fill may still be queued: it holds the memory
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(p.deletes, 1);
  EXPECT_EQ(p.data, std::vector<float>(6, 3));
}

TEST_F(DLPack, ImportTakesStridesByteOffsetAndNullStrides) {
  // Column-major [2, 3] over 1..6: element [i][j] at i + 2j.
  Producer<DLManagedTensor> p;
  p.strides[0] = 1;
  p.strides[1] = 2;
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  EXPECT_EQ(host(t), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  // NULL strides are row-major; byte_offset moves element 0.
  Producer<DLManagedTensor> q({0, 0, 1, 2, 3, 4, 5, 6});
  q.managed.dl_tensor.strides = nullptr;
  q.managed.dl_tensor.byte_offset = 2 * sizeof(float);
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &q.managed));
  EXPECT_EQ(host(t), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(p.deletes + q.deletes, 2);
}

TEST_F(DLPack, RoundTripKeepsTheMemoryUntilBothSidesLetGo) {
  const uint64_t before = in_use();
  hpuTensor_t t = from({1, 2, 3}, {3});
  DLManagedTensorVersioned *m = nullptr;
  ASSERT_HPU_OK(hpuTensorToDLPackVersioned(nullptr, t, &m));
  hpuTensor_t back = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPackVersioned(&back, dev, m));
  void *a = nullptr, *b = nullptr;
  ASSERT_HPU_OK(hpuTensorGetData(t, &a));
  ASSERT_HPU_OK(hpuTensorGetData(back, &b));
  EXPECT_EQ(a, b);
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(host(back), (std::vector<float>{1, 2, 3}));
  EXPECT_GT(in_use(), before);
  ASSERT_HPU_OK(hpuTensorRelease(back));  // calls the export's deleter
  ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(in_use(), before);
}

TEST_F(DLPack, ImportedMemoryIsNotDeviceMemory) {
  const uint64_t before = in_use();
  Producer<DLManagedTensor> p;
  p.managed.dl_tensor.device = {kDLROCMHost, 0};  // CPU-addressable too
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  EXPECT_EQ(in_use(), before);  // the producer's memory does not count
  void *data = nullptr;
  ASSERT_HPU_OK(hpuTensorGetData(t, &data));
  float copy[6];
  EXPECT_HPU_FAIL(hpuMemcpy(copy, data, sizeof copy, HPU_MEMCPY_DEVICE_TO_HOST), HPU_ERROR_INVALID_HANDLE, "src");
  // Tensor functions and ops take it.
  hpuTensor_t sum = nullptr;
  ASSERT_HPU_OK(hpuSum(nullptr, t, nullptr, 0, 0, &sum));
  EXPECT_EQ(host(sum), std::vector<float>{21});
  for (hpuTensor_t x : {sum, t}) EXPECT_HPU_OK(hpuTensorRelease(x));
}

TEST_F(DLPack, DeviceCloseIsRefusedWhileAnImportLives) {
  Producer<DLManagedTensor> p;
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY, "device 0", "1 tensor over imported DLPack memory");
  EXPECT_EQ(host(t), p.data);  // still open and usable
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(p.deletes, 1);
}

TEST_F(DLPack, VersionedImportRefusesReadOnlyAndOtherMajorVersions) {
  Producer<DLManagedTensorVersioned> p;
  hpuTensor_t t = nullptr;
  p.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  EXPECT_HPU_FAIL(hpuTensorFromDLPackVersioned(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "managed->flags 0x1",
                  "READ_ONLY");
  p.managed.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  p.managed.version = {2, 0};
  EXPECT_HPU_FAIL(hpuTensorFromDLPackVersioned(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED,
                  "managed->version is 2.0");
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(p.deletes, 0);  // a refused import leaves the tensor the caller's
  p.managed.version = {1, 3};
  ASSERT_HPU_OK(hpuTensorFromDLPackVersioned(&t, dev, &p.managed));
  EXPECT_EQ(host(t), p.data);
  ASSERT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(p.deletes, 1);
}

TEST_F(DLPack, ImportBadInputNamesTheFieldAndValue) {
  Producer<DLManagedTensor> p;
  DLTensor &dl = p.managed.dl_tensor;
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, nullptr), HPU_ERROR_INVALID_ARGUMENT, "managed is NULL");
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(nullptr, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "tensor is NULL");
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, nullptr, &p.managed), HPU_ERROR_INVALID_HANDLE, "dev");
  hpuDevice_t closed = nullptr;
  ASSERT_HPU_OK(hpuDeviceOpen(&closed, 2));
  ASSERT_HPU_OK(hpuDeviceClose(closed));
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, closed, &p.managed), HPU_ERROR_INVALID_HANDLE);

  dl.device = {kDLCUDA, 1};
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "managed->dl_tensor.device is (2 kDLCUDA, 1)", "kDLCPU");
  dl.device = {kDLCUDAHost, 0};  // pinned host memory is CPU-addressable
  ASSERT_HPU_OK(hpuTensorFromDLPack(&t, dev, &p.managed));
  ASSERT_HPU_OK(hpuTensorRelease(t));
  t = nullptr;
  dl.device = {kDLCPU, 0};

  dl.dtype = {kDLComplex, 64, 1};
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "managed->dl_tensor.dtype (code 5 kDLComplex, 64 bits, 1 lanes)");
  dl.dtype = {kDLInt, 16, 1};
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "code 0 kDLInt, 16 bits");
  dl.dtype = {kDLFloat, 32, 4};
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "4 lanes");
  dl.dtype = {kDLFloat, 32, 1};

  p.strides[1] = -1;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_UNSUPPORTED, "managed->dl_tensor.strides[1] is -1");
  p.strides[1] = 1;
  p.strides[0] = int64_t(1) << 62;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "managed->dl_tensor.strides[0] 4611686018427387904");
  p.strides[0] = 3;
  p.shape[0] = -2;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "managed->dl_tensor.shape[0] is -2");
  p.shape[0] = int64_t(1) << 40;
  p.shape[1] = int64_t(1) << 40;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT,
                  "managed->dl_tensor.shape [1099511627776, 1099511627776] is too large");
  p.shape[0] = 2;
  p.shape[1] = 3;
  dl.ndim = 9;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "managed->dl_tensor.ndim 9");
  dl.ndim = 2;

  dl.byte_offset = 2;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "byte_offset 2 is not aligned to the 4-byte");
  dl.byte_offset = UINT64_MAX;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "byte_offset 18446744073709551615");
  dl.byte_offset = 0;
  dl.data = nullptr;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "managed->dl_tensor.data is NULL with 6 elements");
  dl.data = p.data.data();

  p.managed.deleter = nullptr;
  EXPECT_HPU_FAIL(hpuTensorFromDLPack(&t, dev, &p.managed), HPU_ERROR_INVALID_ARGUMENT, "managed->deleter is NULL");
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(p.deletes, 1);  // the one accepted import above
}

}  // namespace
