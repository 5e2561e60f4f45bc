// The tensor C API: life, host copies, views that keep their base alive,
// memory statistics, conversion, fill, the random generator, and bad input.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "expect.hpp"
#include "tensor_fixture.hpp"

namespace {

class Tensor : public hpu_test::TensorFixture {};

}  // namespace

TEST_F(Tensor, CreateAndIntrospect) {
  const int64_t shape[3] = {2, 3, 5};
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_BFLOAT16, 3, shape));
  hpuDataType_t dt;
  int ndim = 0;
  int64_t got[HPU_TENSOR_MAX_DIMS], strides[HPU_TENSOR_MAX_DIMS], numel = 0;
  size_t es = 0;
  hpuDevice_t d = nullptr;
  void *data = nullptr;
  int contiguous = 0;
  EXPECT_HPU_OK(hpuTensorGetDtype(t, &dt));
  EXPECT_EQ(dt, HPU_BFLOAT16);
  EXPECT_HPU_OK(hpuTensorGetShape(t, &ndim, got));
  EXPECT_EQ(ndim, 3);
  EXPECT_EQ(got[0], 2);
  EXPECT_EQ(got[2], 5);
  EXPECT_HPU_OK(hpuTensorGetShape(t, &ndim, nullptr));
  EXPECT_HPU_OK(hpuTensorGetStrides(t, strides));
  EXPECT_EQ(strides[0], 15);
  EXPECT_EQ(strides[1], 5);
  EXPECT_EQ(strides[2], 1);
  EXPECT_HPU_OK(hpuTensorGetNumel(t, &numel));
  EXPECT_EQ(numel, 30);
  EXPECT_HPU_OK(hpuTensorGetElementSize(t, &es));
  EXPECT_EQ(es, 2u);
  EXPECT_HPU_OK(hpuTensorGetDevice(t, &d));
  EXPECT_EQ(d, dev);
  EXPECT_HPU_OK(hpuTensorGetData(t, &data));
  EXPECT_NE(data, nullptr);
  EXPECT_HPU_OK(hpuTensorIsContiguous(t, &contiguous));
  EXPECT_EQ(contiguous, 1);
  EXPECT_HPU_OK(hpuTensorRelease(t));
  // A 0-dim tensor holds one element; an empty one has no data.
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_FLOAT64, 0, nullptr));
  EXPECT_HPU_OK(hpuTensorGetNumel(t, &numel));
  EXPECT_EQ(numel, 1);
  EXPECT_HPU_OK(hpuTensorRelease(t));
  const int64_t empty[2] = {4, 0};
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, empty));
  EXPECT_HPU_OK(hpuTensorGetData(t, &data));
  EXPECT_EQ(data, nullptr);
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_OK(hpuTensorRelease(nullptr));
}

TEST_F(Tensor, MemoryShowsInStatsAndComesBack) {
  uint64_t before = in_use();
  const int64_t shape[2] = {1000, 1024};
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, shape));
  EXPECT_EQ(in_use(), before + 4096000);  // a multiple of the 512-byte granularity
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(in_use(), before);
}

TEST_F(Tensor, HostRoundTripAndDtypeConversion) {
  hpuTensor_t t = from({1.5f, -2.0f, 3.25f, 1e6f, 0.1f, -0.0f}, {2, 3});
  EXPECT_EQ(host(t), (std::vector<float>{1.5f, -2.0f, 3.25f, 1e6f, 0.1f, -0.0f}));
  const int64_t shape[2] = {2, 3};
  hpuTensor_t b = nullptr, i = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&b, dev, HPU_BFLOAT16, 2, shape));
  ASSERT_HPU_OK(hpuTensorCreate(&i, dev, HPU_INT32, 2, shape));
  EXPECT_HPU_OK(hpuTensorCopy(nullptr, b, t));
  EXPECT_HPU_OK(hpuTensorCopy(nullptr, i, t));
  uint16_t bits[6];
  int32_t ints[6];
  EXPECT_HPU_OK(hpuTensorCopyToHost(nullptr, b, bits, sizeof bits));
  EXPECT_HPU_OK(hpuTensorCopyToHost(nullptr, i, ints, sizeof ints));
  EXPECT_EQ(bits[0], 0x3FC0);  // 1.5
  EXPECT_EQ(bits[4], 0x3DCD);  // 0.1 rounded to nearest even
  EXPECT_EQ(ints[2], 3);
  EXPECT_EQ(ints[3], 1000000);
  for (hpuTensor_t x : {t, b, i}) EXPECT_HPU_OK(hpuTensorRelease(x));
}

TEST_F(Tensor, ViewsShareMemoryAndKeepTheBaseAlive) {
  hpuTensor_t t = from({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  uint64_t held = in_use();
  hpuTensor_t tr = nullptr, sl = nullptr, rs = nullptr, win = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&tr, t, 0, -1));
  EXPECT_EQ(host(tr), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  int contiguous = 1;
  EXPECT_HPU_OK(hpuTensorIsContiguous(tr, &contiguous));
  EXPECT_EQ(contiguous, 0);
  ASSERT_HPU_OK(hpuTensorSlice(&sl, t, 1, 1, 4, 2));  // columns 1 and 3
  EXPECT_EQ(host(sl), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  const int64_t flat[2] = {-1, 6};
  ASSERT_HPU_OK(hpuTensorReshape(&rs, t, 2, flat));
  int ndim;
  int64_t shape[HPU_TENSOR_MAX_DIMS];
  EXPECT_HPU_OK(hpuTensorGetShape(rs, &ndim, shape));
  EXPECT_EQ(shape[0], 2);
  const int64_t wshape[1] = {3};
  ASSERT_HPU_OK(hpuTensorWindow(&win, t, 5, 1, wshape));
  EXPECT_EQ(host(win), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(in_use(), held);  // views allocate nothing
  // Writes through a view land in the base.
  EXPECT_HPU_OK(hpuTensorFill(nullptr, win, -1));
  EXPECT_HPU_OK(hpuTensorFill(nullptr, sl, 100));
  EXPECT_EQ(host(t), (std::vector<float>{0, 100, 2, 100, 4, 100, -1, 100, 8, 100, 10, 100}));
  // Released base: the views still read its memory, which is freed with the last view.
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_EQ(host(rs)[6], -1.0f);
  EXPECT_EQ(in_use(), held);
  for (hpuTensor_t v : {tr, sl, rs}) EXPECT_HPU_OK(hpuTensorRelease(v));
  EXPECT_EQ(in_use(), held);
  EXPECT_HPU_OK(hpuTensorRelease(win));
  EXPECT_HPU_OK(hpuDeviceSynchronize(dev));
  EXPECT_EQ(in_use(), held - 512);
}

TEST_F(Tensor, WrapBorrowsMemory) {
  void *p = nullptr;
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, 64 * sizeof(float)));
  const int64_t shape[2] = {4, 4}, strides[2] = {8, 2};  // every other column of an 8-wide matrix
  hpuTensor_t t = nullptr, dense = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&t, p, HPU_FLOAT32, 2, shape, strides));
  ASSERT_HPU_OK(hpuTensorWrap(&dense, p, HPU_FLOAT32, 2, shape, nullptr));
  void *data = nullptr;
  EXPECT_HPU_OK(hpuTensorGetData(t, &data));
  EXPECT_EQ(data, p);
  EXPECT_HPU_OK(hpuTensorFill(nullptr, t, 2));
  std::vector<float> all(64);
  EXPECT_HPU_OK(hpuMemcpy(all.data(), p, 64 * sizeof(float), HPU_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(all[0], 2);
  EXPECT_EQ(all[2], 2);
  EXPECT_EQ(all[30], 2);
  uint64_t held = in_use();
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_OK(hpuTensorRelease(dense));
  EXPECT_EQ(in_use(), held);  // not owned: still allocated
  EXPECT_HPU_OK(hpuMemFree(p));
}

TEST_F(Tensor, RandomIsReproducible) {
  const int64_t shape[1] = {1000};
  hpuTensor_t t = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&t, dev, HPU_FLOAT32, 1, shape));
  EXPECT_HPU_OK(hpuRandomSeed(dev, 1234));
  hpuRandomState_t st = HPU_RANDOM_STATE_INIT;
  EXPECT_HPU_OK(hpuRandomGetState(dev, &st));
  EXPECT_EQ(st.seed, 1234u);
  EXPECT_EQ(st.offset, 0u);
  EXPECT_HPU_OK(hpuTensorFillNormal(nullptr, t, 0, 1));
  std::vector<float> a = host(t);
  EXPECT_HPU_OK(hpuTensorFillUniform(nullptr, t, -1, 1));
  std::vector<float> b = host(t);
  hpuRandomState_t after = HPU_RANDOM_STATE_INIT;
  EXPECT_HPU_OK(hpuRandomGetState(dev, &after));
  EXPECT_EQ(after.offset, 2000u);
  EXPECT_HPU_OK(hpuRandomSetState(dev, &st));
  EXPECT_HPU_OK(hpuTensorFillNormal(nullptr, t, 0, 1));
  EXPECT_EQ(host(t), a);
  EXPECT_HPU_OK(hpuTensorFillUniform(nullptr, t, -1, 1));
  EXPECT_EQ(host(t), b);
  EXPECT_NE(a, b);
  for (float v : b) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_HPU_OK(hpuTensorRelease(t));
}

TEST_F(Tensor, BadInput) {
  const int64_t shape[2] = {2, 3}, negative[2] = {2, -3};
  float data[6] = {};
  hpuTensor_t t = nullptr, v = nullptr;
  EXPECT_HPU_FAIL(hpuTensorCreate(nullptr, dev, HPU_FLOAT32, 2, shape), HPU_ERROR_INVALID_ARGUMENT, "tensor is NULL");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, nullptr, HPU_FLOAT32, 2, shape), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, static_cast<hpuDataType_t>(42), 2, shape), HPU_ERROR_INVALID_ARGUMENT,
                  "dtype 42");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 9, shape), HPU_ERROR_INVALID_ARGUMENT, "ndim 9");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, nullptr), HPU_ERROR_INVALID_ARGUMENT, "shape is NULL");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, negative), HPU_ERROR_INVALID_ARGUMENT, "shape[1] is -3");
  const int64_t huge[2] = {int64_t(1) << 40, int64_t(1) << 10};
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, huge), HPU_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(t, nullptr);  // untouched on failure
  EXPECT_HPU_FAIL(hpuTensorCreateFromHost(&t, dev, HPU_FLOAT32, 2, shape, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "data is NULL");
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, data, HPU_FLOAT32, 2, shape, nullptr), HPU_ERROR_INVALID_HANDLE,
                  "is not device memory");
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, nullptr, HPU_FLOAT32, 2, shape, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "data is NULL");
  void *p = nullptr;
  ASSERT_HPU_OK(hpuMemAlloc(&p, dev, 24));
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, static_cast<char *>(p) + 1, HPU_FLOAT32, 2, shape, nullptr),
                  HPU_ERROR_INVALID_ARGUMENT, "not aligned");
  const int64_t far[2] = {1 << 30, 1};
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, p, HPU_FLOAT32, 2, shape, far), HPU_ERROR_INVALID_ARGUMENT,
                  "past the end of its 24-byte allocation");
  EXPECT_HPU_OK(hpuMemFree(p));

  t = from({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_HPU_FAIL(hpuTensorCopyToHost(nullptr, t, data, 20), HPU_ERROR_INVALID_ARGUMENT, "bytes 20", "24 bytes");
  EXPECT_HPU_FAIL(hpuTensorCopyToHost(nullptr, t, nullptr, 24), HPU_ERROR_INVALID_ARGUMENT, "dst is NULL");
  EXPECT_HPU_FAIL(hpuTensorCopyFromHost(nullptr, t, nullptr, 24), HPU_ERROR_INVALID_ARGUMENT, "src is NULL");
  hpuTensor_t other = from({1, 2, 3}, {3});
  EXPECT_HPU_FAIL(hpuTensorCopy(nullptr, other, t), HPU_ERROR_INVALID_ARGUMENT, "f32[3]", "f32[2, 3]");
  EXPECT_HPU_FAIL(hpuTensorCopy(nullptr, nullptr, t), HPU_ERROR_INVALID_HANDLE, "dst is NULL");
  hpuTensor_t i32 = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&i32, dev, HPU_INT8, 2, shape));
  EXPECT_HPU_FAIL(hpuTensorFill(nullptr, i32, 1000), HPU_ERROR_INVALID_ARGUMENT, "value 1000", "i8");
  EXPECT_HPU_FAIL(hpuTensorFill(nullptr, i32, 0.5), HPU_ERROR_INVALID_ARGUMENT, "value 0.5");
  EXPECT_HPU_FAIL(hpuTensorFillUniform(nullptr, i32, 0, 1), HPU_ERROR_UNSUPPORTED, "i8[2, 3]");
  EXPECT_HPU_FAIL(hpuTensorFillUniform(nullptr, t, 1, 1), HPU_ERROR_INVALID_ARGUMENT, "[1, 1)");
  EXPECT_HPU_FAIL(hpuTensorFillNormal(nullptr, t, 0, -1), HPU_ERROR_INVALID_ARGUMENT, "std -1");
  // Views.
  const int64_t seven[1] = {7}, two_inferred[2] = {-1, -1};
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, t, 1, seven), HPU_ERROR_INVALID_ARGUMENT, "[7]", "f32[2, 3]");
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, t, 2, two_inferred), HPU_ERROR_INVALID_ARGUMENT, "both -1");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, t, 2, 0, 1, 1), HPU_ERROR_INVALID_ARGUMENT, "dim 2");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, t, 1, 2, 1, 1), HPU_ERROR_INVALID_ARGUMENT, "end 1");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, t, 1, 0, 4, 1), HPU_ERROR_INVALID_ARGUMENT, "end 4");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, t, 1, 0, 3, 0), HPU_ERROR_INVALID_ARGUMENT, "step 0");
  EXPECT_HPU_FAIL(hpuTensorTranspose(&v, t, 0, -3), HPU_ERROR_INVALID_ARGUMENT, "dim1 -3");
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, t, 4, 1, seven), HPU_ERROR_INVALID_ARGUMENT, "offset 4", "runs past");
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, t, -1, 1, seven), HPU_ERROR_INVALID_ARGUMENT, "offset -1");
  hpuTensor_t tr = nullptr;
  ASSERT_HPU_OK(hpuTensorTranspose(&tr, t, 0, 1));
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, tr, 1, seven), HPU_ERROR_INVALID_ARGUMENT, "not contiguous");
  EXPECT_HPU_FAIL(hpuTensorTranspose(nullptr, t, 0, 1), HPU_ERROR_INVALID_ARGUMENT, "view is NULL");
  EXPECT_EQ(v, nullptr);
  // Introspection.
  int ndim;
  EXPECT_HPU_FAIL(hpuTensorGetShape(t, nullptr, nullptr), HPU_ERROR_INVALID_ARGUMENT, "ndim is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetDtype(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "dtype is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetStrides(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "strides is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetNumel(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "numel is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetElementSize(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "size is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetDevice(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "dev is NULL");
  EXPECT_HPU_FAIL(hpuTensorGetData(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "data is NULL");
  EXPECT_HPU_FAIL(hpuTensorIsContiguous(t, nullptr), HPU_ERROR_INVALID_ARGUMENT, "contiguous is NULL");
  // Random state.
  EXPECT_HPU_FAIL(hpuRandomGetState(dev, nullptr), HPU_ERROR_INVALID_ARGUMENT, "state is NULL");
  hpuRandomState_t bad = HPU_RANDOM_STATE_INIT;
  bad.struct_size = 3;
  EXPECT_HPU_FAIL(hpuRandomSetState(dev, &bad), HPU_ERROR_INVALID_ARGUMENT, "struct_size is 3");
  EXPECT_HPU_FAIL(hpuRandomSeed(nullptr, 1), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  // Released, foreign and wrong-kind handles.
  EXPECT_HPU_OK(hpuTensorRelease(tr));
  EXPECT_HPU_FAIL(hpuTensorGetShape(tr, &ndim, nullptr), HPU_ERROR_INVALID_HANDLE, "tensor", "not a live tensor");
  EXPECT_HPU_FAIL(hpuTensorRelease(tr), HPU_ERROR_INVALID_HANDLE, "not a live tensor");
  EXPECT_HPU_FAIL(hpuTensorGetShape(reinterpret_cast<hpuTensor_t>(dev), &ndim, nullptr), HPU_ERROR_INVALID_HANDLE,
                  "not a live tensor");
  EXPECT_HPU_FAIL(hpuTensorGetShape(reinterpret_cast<hpuTensor_t>(data), &ndim, nullptr), HPU_ERROR_INVALID_HANDLE);
  hpuStream_t s = nullptr;
  hpuDevice_t dev1 = nullptr;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev1, 1));
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev1, &s));
  EXPECT_HPU_FAIL(hpuTensorFill(s, t, 1), HPU_ERROR_INVALID_ARGUMENT, "device 1", "device 0");
  EXPECT_HPU_OK(hpuDeviceClose(dev1));
  for (hpuTensor_t x : {t, other, i32}) EXPECT_HPU_OK(hpuTensorRelease(x));
}

TEST_F(Tensor, DeviceCloseIsBusyWhileTensorsLive) {
  hpuTensor_t t = from({1, 2}, {2});
  hpuDevice_t again = nullptr;
  ASSERT_HPU_OK(hpuDeviceOpen(&again, 0));  // a second open, so the close below is the last
  EXPECT_HPU_OK(hpuDeviceClose(again));
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY);
  EXPECT_HPU_OK(hpuTensorRelease(t));
}
