// Tensor geometry that does not fit: shapes, strides, slices, reshapes and
// windows whose arithmetic would overflow int64 or reach outside the memory.
// Each call fails with HPU_ERROR_INVALID_ARGUMENT naming the argument and its
// value, and nothing is written outside the tensor's memory.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "expect.hpp"

namespace {

constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;

// A 256-byte allocation of known bytes (0xAB) with a window in the middle
// that the tests wrap: any write outside [window, window + 64) shows.
class Misuse : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
    ASSERT_HPU_OK(hpuMemAlloc(&mem, dev, kBytes));
    std::vector<uint8_t> pattern(kBytes, 0xAB);
    ASSERT_HPU_OK(hpuMemcpy(mem, pattern.data(), kBytes, HPU_MEMCPY_HOST_TO_DEVICE));
  }
  void TearDown() override {
    EXPECT_HPU_OK(hpuMemFree(mem));
    EXPECT_HPU_OK(hpuDeviceClose(dev));
  }

  void *window() { return static_cast<char *>(mem) + 96; }

  // The allocation's bytes outside the window still hold the pattern.
  void expect_outside_untouched() {
    ASSERT_HPU_OK(hpuDeviceSynchronize(dev));
    std::vector<uint8_t> got(kBytes);
    ASSERT_HPU_OK(hpuMemcpy(got.data(), mem, kBytes, HPU_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < kBytes; ++i) {
      if (i >= 96 && i < 160) continue;
      ASSERT_EQ(got[i], 0xAB) << "byte " << i << " of the allocation was written";
    }
  }

  // When a wrap wrongly succeeds, fill the tensor (as a user would) so that a
  // write outside the window shows, then release it.
  void fill_and_release(hpuTensor_t t) {
    if (!t) return;
    hpuTensorFill(nullptr, t, 7);
    hpuDeviceSynchronize(dev);
    EXPECT_HPU_OK(hpuTensorRelease(t));
  }

  static constexpr size_t kBytes = 256;
  hpuDevice_t dev = nullptr;
  void *mem = nullptr;
};

}  // namespace

TEST_F(Misuse, WrapStrideTimesSizePastTheAddressSpace) {
  // (3 - 1) x 2^61 elements x 4 bytes is 2^64: it wrapped to 0 and was accepted.
  const int64_t shape[1] = {3}, strides[1] = {int64_t(1) << 61};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 1, shape, strides), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[0] 2305843009213693952", "element 2 of dim 0");
  EXPECT_EQ(t, nullptr);
  fill_and_release(t);
  expect_outside_untouched();
}

TEST_F(Misuse, WrapInt64MaxStride) {
  // Element [1, 0] at INT64_MAX x 4 bytes wrapped to 4 bytes before data.
  const int64_t shape[2] = {2, 2}, strides[2] = {kMax, 1};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, shape, strides), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[0] 9223372036854775807");
  EXPECT_EQ(t, nullptr);
  fill_and_release(t);
  expect_outside_untouched();
}

TEST_F(Misuse, WrapStridesWhoseSumOverflowsNameTheDimThatPassesIt) {
  // Each dim alone reaches 2^62 bytes; together they pass INT64_MAX.
  const int64_t shape[3] = {2, 1, 2}, strides[3] = {int64_t(1) << 62, kMax, int64_t(1) << 62};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_UINT8, 3, shape, strides), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[2] 4611686018427387904", "dim 2");
  fill_and_release(t);
  expect_outside_untouched();
}

TEST_F(Misuse, WrapNegativeStridesAndSizes) {
  const int64_t shape[2] = {2, 2}, min_stride[2] = {kMin, 1}, neg_stride[2] = {2, -1}, min_shape[2] = {2, kMin};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, shape, min_stride), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[0] is -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, shape, neg_stride), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[1] is -1");
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, min_shape, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "shape[1] is -9223372036854775808");
  EXPECT_EQ(t, nullptr);
  expect_outside_untouched();
}

TEST_F(Misuse, WrapOfAnEmptyShapeStillChecksItsStrides) {
  // No element is touched, but slicing dim 1 would step by 3 x INT64_MAX.
  const int64_t shape[2] = {0, 4}, strides[2] = {1, kMax};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, shape, strides), HPU_ERROR_INVALID_ARGUMENT,
                  "strides[1] 9223372036854775807");
  EXPECT_EQ(t, nullptr);
}

TEST_F(Misuse, WrapIgnoresTheStrideOfADimOfOneElement) {
  // As in PyTorch, a size-1 dim is never stepped along: any stride is fine.
  const int64_t shape[2] = {1, 16}, strides[2] = {kMax, 1};
  hpuTensor_t t = nullptr, row = nullptr, none = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&t, window(), HPU_FLOAT32, 2, shape, strides));
  ASSERT_HPU_OK(hpuTensorSlice(&row, t, 0, 0, 1, kMax));
  ASSERT_HPU_OK(hpuTensorSlice(&none, t, 0, 1, 1, 1));
  EXPECT_HPU_OK(hpuTensorFill(nullptr, row, 2));
  expect_outside_untouched();
  std::vector<float> got(16);
  ASSERT_HPU_OK(hpuMemcpy(got.data(), window(), 64, HPU_MEMCPY_DEVICE_TO_HOST));
  for (float v : got) EXPECT_EQ(v, 2.0f);
  int64_t numel = -1;
  EXPECT_HPU_OK(hpuTensorGetNumel(none, &numel));
  EXPECT_EQ(numel, 0);
  EXPECT_HPU_OK(hpuTensorRelease(none));
  EXPECT_HPU_OK(hpuTensorRelease(row));
  EXPECT_HPU_OK(hpuTensorRelease(t));
}

TEST_F(Misuse, ShapesWhoseProductOverflows) {
  const int64_t square[2] = {int64_t(1) << 32, int64_t(1) << 32};
  const int64_t empty[3] = {0, int64_t(1) << 62, int64_t(1) << 62};  // contiguous strides overflowed
  const int64_t max[1] = {kMax};
  hpuTensor_t t = nullptr;
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 2, square), HPU_ERROR_INVALID_ARGUMENT,
                  "shape [4294967296, 4294967296]", "2^60");
  EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, 3, empty), HPU_ERROR_INVALID_ARGUMENT,
                  "shape [0, 4611686018427387904, 4611686018427387904]");
  EXPECT_HPU_FAIL(hpuTensorCreateFromHost(&t, dev, HPU_FLOAT32, 1, max, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "shape [9223372036854775807]");
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, 1, max, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "shape [9223372036854775807]");
  EXPECT_EQ(t, nullptr);
  expect_outside_untouched();
}

TEST_F(Misuse, RankOutOfRange) {
  const int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  hpuTensor_t t = nullptr, base = nullptr, v = nullptr;
  for (int ndim : {9, -1, INT_MAX, INT_MIN}) {
    std::string text = "ndim " + std::to_string(ndim);
    EXPECT_HPU_FAIL(hpuTensorCreate(&t, dev, HPU_FLOAT32, ndim, shape), HPU_ERROR_INVALID_ARGUMENT, text.c_str());
    EXPECT_HPU_FAIL(hpuTensorWrap(&t, window(), HPU_FLOAT32, ndim, shape, shape), HPU_ERROR_INVALID_ARGUMENT,
                    text.c_str());
  }
  ASSERT_HPU_OK(hpuTensorWrap(&base, window(), HPU_FLOAT32, 1, shape, nullptr));
  for (int ndim : {9, -1, INT_MIN}) {
    std::string text = "ndim " + std::to_string(ndim);
    EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, ndim, shape), HPU_ERROR_INVALID_ARGUMENT, text.c_str());
    EXPECT_HPU_FAIL(hpuTensorWindow(&v, base, 0, ndim, shape), HPU_ERROR_INVALID_ARGUMENT, text.c_str());
  }
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(v, nullptr);
  EXPECT_HPU_OK(hpuTensorRelease(base));
}

TEST_F(Misuse, ReshapeWhoseSizesOverflow) {
  const int64_t shape[1] = {16};
  hpuTensor_t base = nullptr, v = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&base, window(), HPU_FLOAT32, 1, shape, nullptr));
  // The known sizes multiplied past int64 (UBSan) before the -1 was inferred.
  const int64_t inferred[3] = {-1, int64_t(1) << 62, int64_t(1) << 62};
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, 3, inferred), HPU_ERROR_INVALID_ARGUMENT, "shape (its -1 taken as 1) [",
                  "4611686018427387904, 4611686018427387904]", "2^60");
  // 2^32 x 2^32 x 2^4 wraps to 0 x ... in 64 bits; with a zero it is empty.
  const int64_t wraps[3] = {int64_t(1) << 32, int64_t(1) << 32, 16};
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, 3, wraps), HPU_ERROR_INVALID_ARGUMENT, "shape [4294967296");
  const int64_t zero[3] = {0, kMax, kMax};
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, 3, zero), HPU_ERROR_INVALID_ARGUMENT, "9223372036854775807");
  const int64_t min[2] = {kMin, 16}, max_inferred[2] = {kMax, -1};
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, 2, min), HPU_ERROR_INVALID_ARGUMENT, "shape[0] is -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorReshape(&v, base, 2, max_inferred), HPU_ERROR_INVALID_ARGUMENT,
                  "9223372036854775807");
  EXPECT_EQ(v, nullptr);
  EXPECT_HPU_OK(hpuTensorRelease(base));
}

TEST_F(Misuse, SliceWithAStepPastTheSizeKeepsOneElement) {
  // [4, 4] f32 over the window; step INT64_MAX gave shape [4, -1] (start + step overflowed).
  const int64_t shape[2] = {4, 4};
  hpuTensor_t base = nullptr, cols = nullptr, rows = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&base, window(), HPU_FLOAT32, 2, shape, nullptr));
  ASSERT_HPU_OK(hpuTensorFill(nullptr, base, 0));
  ASSERT_HPU_OK(hpuTensorSlice(&cols, base, 1, 1, 4, kMax));  // column 1
  ASSERT_HPU_OK(hpuTensorSlice(&rows, base, 0, 2, 4, kMax));  // row 2: stride 4 x INT64_MAX overflowed
  int ndim = 0;
  int64_t got[HPU_TENSOR_MAX_DIMS];
  ASSERT_HPU_OK(hpuTensorGetShape(cols, &ndim, got));
  EXPECT_EQ(ndim, 2);
  EXPECT_EQ(got[0], 4);
  EXPECT_EQ(got[1], 1);
  ASSERT_HPU_OK(hpuTensorGetShape(rows, &ndim, got));
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 4);
  // A dim left with one element keeps the base's stride.
  int64_t strides[HPU_TENSOR_MAX_DIMS];
  ASSERT_HPU_OK(hpuTensorGetStrides(cols, strides));
  EXPECT_EQ(strides[0], 4);
  EXPECT_EQ(strides[1], 1);
  ASSERT_HPU_OK(hpuTensorGetStrides(rows, strides));
  EXPECT_EQ(strides[0], 4);
  EXPECT_EQ(strides[1], 1);
  // Two or more left: the base's stride times the step.
  hpuTensor_t two = nullptr;
  ASSERT_HPU_OK(hpuTensorSlice(&two, base, 0, 0, 4, 3));  // rows 0 and 3
  ASSERT_HPU_OK(hpuTensorGetStrides(two, strides));
  EXPECT_EQ(strides[0], 12);
  EXPECT_HPU_OK(hpuTensorRelease(two));
  EXPECT_HPU_OK(hpuTensorFill(nullptr, cols, 1));
  EXPECT_HPU_OK(hpuTensorFill(nullptr, rows, 2));
  expect_outside_untouched();
  float host[16];
  ASSERT_HPU_OK(hpuMemcpy(host, window(), sizeof host, HPU_MEMCPY_DEVICE_TO_HOST));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(host[r * 4 + c], r == 2 ? 2.0f : c == 1 ? 1.0f : 0.0f) << r << "," << c;
  EXPECT_HPU_OK(hpuTensorRelease(rows));
  EXPECT_HPU_OK(hpuTensorRelease(cols));
  EXPECT_HPU_OK(hpuTensorRelease(base));
}

TEST_F(Misuse, SliceWithHugeOrNegativeStartsEndsStepsAndDims) {
  const int64_t shape[2] = {4, 4};
  hpuTensor_t base = nullptr, v = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&base, window(), HPU_FLOAT32, 2, shape, nullptr));
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, kMax, kMax, 1), HPU_ERROR_INVALID_ARGUMENT,
                  "start 9223372036854775807");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, kMin, 2, 1), HPU_ERROR_INVALID_ARGUMENT,
                  "start -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, -1, 2, 1), HPU_ERROR_INVALID_ARGUMENT, "start -1");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, 0, kMax, 1), HPU_ERROR_INVALID_ARGUMENT, "end 9223372036854775807");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, 0, kMin, 1), HPU_ERROR_INVALID_ARGUMENT, "end -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, 0, 4, kMin), HPU_ERROR_INVALID_ARGUMENT, "step -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, 0, 0, 4, -1), HPU_ERROR_INVALID_ARGUMENT, "step -1");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, INT_MIN, 0, 4, 1), HPU_ERROR_INVALID_ARGUMENT, "dim -2147483648");
  EXPECT_HPU_FAIL(hpuTensorSlice(&v, base, INT_MAX, 0, 4, 1), HPU_ERROR_INVALID_ARGUMENT, "dim 2147483647");
  EXPECT_HPU_FAIL(hpuTensorTranspose(&v, base, INT_MIN, 0), HPU_ERROR_INVALID_ARGUMENT, "dim0 -2147483648");
  EXPECT_HPU_FAIL(hpuTensorTranspose(&v, base, 0, INT_MAX), HPU_ERROR_INVALID_ARGUMENT, "dim1 2147483647");
  EXPECT_EQ(v, nullptr);
  // An empty slice at the end, sliced again with the largest step.
  hpuTensor_t none = nullptr, again = nullptr;
  ASSERT_HPU_OK(hpuTensorSlice(&none, base, 0, 4, 4, kMax));
  ASSERT_HPU_OK(hpuTensorSlice(&again, none, 1, 0, 4, kMax));
  EXPECT_HPU_OK(hpuTensorFill(nullptr, again, 3));
  EXPECT_HPU_OK(hpuTensorRelease(again));
  EXPECT_HPU_OK(hpuTensorRelease(none));
  EXPECT_HPU_OK(hpuTensorRelease(base));
  expect_outside_untouched();
}

TEST_F(Misuse, WindowWithHugeOrNegativeOffsets) {
  const int64_t shape[1] = {16}, four[1] = {4};
  hpuTensor_t base = nullptr, v = nullptr;
  ASSERT_HPU_OK(hpuTensorWrap(&base, window(), HPU_FLOAT32, 1, shape, nullptr));
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, base, kMax, 1, four), HPU_ERROR_INVALID_ARGUMENT, "offset 9223372036854775807");
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, base, kMin, 1, four), HPU_ERROR_INVALID_ARGUMENT,
                  "offset -9223372036854775808");
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, base, 13, 1, four), HPU_ERROR_INVALID_ARGUMENT, "offset 13", "runs past");
  const int64_t max[1] = {kMax};
  EXPECT_HPU_FAIL(hpuTensorWindow(&v, base, 0, 1, max), HPU_ERROR_INVALID_ARGUMENT, "shape [9223372036854775807]");
  EXPECT_EQ(v, nullptr);
  EXPECT_HPU_OK(hpuTensorRelease(base));
  expect_outside_untouched();
}

TEST_F(Misuse, OpResultsWhoseShapeOverflows) {
  // 8 GiB inputs (reserved, never touched) whose broadcast or product has
  // 2^62 elements: 2^64 bytes wrapped to 0, and the op wrote through a NULL
  // result.
  const int64_t col[2] = {int64_t(1) << 31, 1}, row[2] = {1, int64_t(1) << 31};
  hpuTensor_t a = nullptr, b = nullptr, out = nullptr;
  ASSERT_HPU_OK(hpuTensorCreate(&a, dev, HPU_FLOAT32, 2, col));
  ASSERT_HPU_OK(hpuTensorCreate(&b, dev, HPU_FLOAT32, 2, row));
  EXPECT_HPU_FAIL(hpuAdd(nullptr, a, b, &out), HPU_ERROR_INVALID_ARGUMENT, "[2147483648, 2147483648]", "2^60");
  EXPECT_HPU_FAIL(hpuMm(nullptr, a, b, &out), HPU_ERROR_INVALID_ARGUMENT, "[2147483648, 2147483648]", "2^60");
  EXPECT_EQ(out, nullptr);
  EXPECT_HPU_OK(hpuTensorRelease(b));
  EXPECT_HPU_OK(hpuTensorRelease(a));
}
