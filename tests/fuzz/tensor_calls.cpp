// Fuzz target: sequences of calls through libhpu's public C API on tensors.
// The input is read as calls: create, wrap, view (reshape, slice, transpose,
// window), retain and release tensors with fuzzed shapes, strides, offsets,
// dims and dtypes; fill, copy and run a few ops on whatever handles exist,
// released ones included. Every call must return a status (failing is fine);
// a crash, an ASan or UBSan report, or a hang is a bug.
//
// The harness keeps its side of the contract: host buffers it passes are as
// long as the byte counts it passes, arrays as long as their counts, and it
// never frees device memory that a tensor it holds may use. It skips the
// data calls on tensors of more than kMaxWork elements (valid, but slow: a
// wrapped tensor of stride 0 may describe 2^59 elements over 4 bytes).
#include <hpu/hpu.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSlots = 8;
constexpr int64_t kMaxWork = int64_t(1) << 16;
constexpr size_t kHostBytes = size_t(1) << 19;  // kMaxWork elements of 8 bytes

hpuDevice_t devices[2];
void *buffers[3];            // device memory the wraps point into
unsigned char *host;         // kHostBytes of host memory for host copies

void check(hpuStatus_t s) {
  // A status outside the list, or a failure without a message, is a bug.
  if (s != HPU_SUCCESS && (hpuGetErrorName(s) == nullptr || hpuGetLastErrorMessage()[0] == '\0')) abort();
}

// The input, byte by byte; past its end every read gives 0.
struct Input {
  const uint8_t *p, *end;
  uint8_t byte() { return p < end ? *p++ : 0; }
  bool done() const { return p >= end; }
  uint64_t raw() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
  // A size, stride, offset or index: mostly small, sometimes at the edges of
  // int64 or a power of two.
  int64_t value() {
    uint8_t b = byte();
    if (b < 128) return b & 15;
    if (b < 160) return -static_cast<int64_t>(b & 3);
    if (b < 192) return int64_t(1) << (byte() & 62);
    if (b < 224) {
      static const int64_t edges[8] = {INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1,
                                       int64_t(1) << 61, (int64_t(1) << 60) + 1, int64_t(1) << 32, 65536};
      return edges[b & 7];
    }
    return static_cast<int64_t>(raw());
  }
  // A dim or a count of dims: mostly small (negative ones count from the end).
  int dim() {
    uint8_t b = byte();
    if (b < 240) return static_cast<int>(b % 12) - 3;
    return b & 1 ? INT_MAX : INT_MIN;
  }
  hpuDataType_t dtype() {
    uint8_t b = byte();
    // Mostly f32; the others, and now and then one outside the enum.
    if (b < 128) return HPU_FLOAT32;
    if (b < 250) return static_cast<hpuDataType_t>(b % HPU_NUM_DATA_TYPES);
    return static_cast<hpuDataType_t>(b == 255 ? -1 : HPU_NUM_DATA_TYPES + b);
  }
  double number() {
    uint8_t b = byte();
    static const double values[8] = {0, 1, -1.5, 0.5, 1e300, -0.0, 255, 1e-30};
    return values[b & 7];
  }
};

// Handles the harness got, each with the references it holds on it (0 once
// released: the stale handle stays, to be passed again).
struct Slots {
  hpuTensor_t t[kSlots] = {};
  int refs[kSlots] = {};

  hpuTensor_t get(Input &in) {
    uint8_t b = in.byte();
    if (b == 255) return nullptr;
    return t[b % kSlots];
  }
  // Where a new handle goes: the slot's references are given back first.
  hpuTensor_t *out(Input &in) {
    int i = in.byte() % kSlots;
    drop(i);
    t[i] = nullptr;
    return &t[i];
  }
  void took(hpuTensor_t *where, hpuStatus_t s) {
    if (s == HPU_SUCCESS && *where) refs[where - t] = 1;
  }
  void drop(int i) {
    for (; refs[i] > 0; --refs[i])
      if (hpuTensorRelease(t[i]) != HPU_SUCCESS) abort();
  }
  int index(hpuTensor_t h) const {
    for (int i = 0; i < kSlots; ++i)
      if (h && t[i] == h && refs[i] > 0) return i;
    return -1;
  }
};

// ndim and a shape (and strides) from the input; shape has room for 8 dims.
int read_shape(Input &in, int64_t *shape, int64_t *strides) {
  uint8_t b = in.byte();
  int ndim = b < 240 ? b % 10 - 1 : b & 1 ? INT_MAX : INT_MIN;  // mostly -1..8
  int n = ndim < 0 ? 0 : ndim > HPU_TENSOR_MAX_DIMS ? HPU_TENSOR_MAX_DIMS : ndim;
  for (int i = 0; i < n; ++i) shape[i] = in.value();
  if (strides)
    for (int i = 0; i < n; ++i) strides[i] = in.value();
  return ndim;
}

// The element count and bytes of a live tensor, or false.
bool bytes_of(hpuTensor_t t, int64_t *numel, size_t *bytes) {
  size_t es = 0;
  if (hpuTensorGetNumel(t, numel) != HPU_SUCCESS || hpuTensorGetElementSize(t, &es) != HPU_SUCCESS) return false;
  *bytes = static_cast<size_t>(*numel) * es;
  return true;
}

bool small(hpuTensor_t t) {
  int64_t n = 0;
  size_t bytes = 0;
  return !bytes_of(t, &n, &bytes) || n <= kMaxWork;
}

hpuStream_t stream(Input &in) {
  uint8_t b = in.byte();
  if (b < 200) return nullptr;
  hpuStream_t s = nullptr;
  hpuDeviceGetDefaultStream(devices[b & 1], &s);
  return s;
}

void one_call(Input &in, Slots &s) {
  int64_t shape[HPU_TENSOR_MAX_DIMS] = {}, strides[HPU_TENSOR_MAX_DIMS] = {};
  switch (in.byte() % 24) {
    case 0: {
      hpuDataType_t dt = in.dtype();
      int ndim = read_shape(in, shape, nullptr);
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorCreate(o, devices[in.byte() & 1], dt, ndim, shape));
      break;
    }
    case 1: {  // host data only when the shape's bytes fit in the host buffer
      hpuDataType_t dt = in.dtype();
      int ndim = read_shape(in, shape, nullptr);
      uint64_t bytes = 8;
      bool fits = ndim >= 0 && ndim <= HPU_TENSOR_MAX_DIMS;
      for (int i = 0; fits && i < ndim; ++i)
        fits = shape[i] >= 0 && !__builtin_mul_overflow(bytes, static_cast<uint64_t>(shape[i]), &bytes);
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorCreateFromHost(o, devices[in.byte() & 1], dt, ndim, shape,
                                        fits && bytes <= kHostBytes ? host : nullptr));
      break;
    }
    case 2: {
      int b = in.byte() % 3;
      uintptr_t data = reinterpret_cast<uintptr_t>(buffers[b]) + static_cast<uint64_t>(in.value());
      hpuDataType_t dt = in.dtype();
      bool contiguous = in.byte() & 1;
      int ndim = read_shape(in, shape, strides);
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorWrap(o, reinterpret_cast<void *>(data), dt, ndim, shape, contiguous ? nullptr : strides));
      break;
    }
    case 3: {
      hpuTensor_t b = s.get(in);
      int ndim = read_shape(in, shape, nullptr);
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorReshape(o, b, ndim, shape));
      break;
    }
    case 4:
    case 5: {
      hpuTensor_t b = s.get(in);
      int dim = in.dim();
      int64_t start = in.value(), end = in.value(), step = in.value();
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorSlice(o, b, dim, start, end, step));
      break;
    }
    case 6: {
      hpuTensor_t b = s.get(in);
      int d0 = in.dim(), d1 = in.dim();
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorTranspose(o, b, d0, d1));
      break;
    }
    case 7: {
      hpuTensor_t b = s.get(in);
      int64_t offset = in.value();
      int ndim = read_shape(in, shape, nullptr);
      hpuTensor_t *o = s.out(in);
      s.took(o, hpuTensorWindow(o, b, offset, ndim, shape));
      break;
    }
    case 8: {
      hpuTensor_t t = s.get(in);
      int i = s.index(t);
      hpuStatus_t st = hpuTensorRelease(t);
      check(st);
      if (i >= 0 && st == HPU_SUCCESS) --s.refs[i];
      break;
    }
    case 9: {
      hpuTensor_t t = s.get(in);
      int i = s.index(t);
      hpuStatus_t st = hpuTensorRetain(t);
      check(st);
      if (i >= 0 && st == HPU_SUCCESS) ++s.refs[i];
      break;
    }
    case 10: {
      hpuTensor_t t = s.get(in);
      double v = in.number();
      if (small(t)) check(hpuTensorFill(stream(in), t, v));
      break;
    }
    case 11: {
      hpuTensor_t t = s.get(in);
      double a = in.number(), b = in.number();
      if (small(t))
        check(in.byte() & 1 ? hpuTensorFillUniform(stream(in), t, a, b) : hpuTensorFillNormal(stream(in), t, a, b));
      break;
    }
    case 12: {
      hpuTensor_t d = s.get(in), src = s.get(in);
      if (small(d) && small(src)) check(hpuTensorCopy(stream(in), d, src));
      break;
    }
    case 13: {  // host copies of the tensor's bytes, or of a wrong count
      hpuTensor_t t = s.get(in);
      int64_t n = 0;
      size_t bytes = 0;
      if (!bytes_of(t, &n, &bytes) || bytes > kHostBytes || (in.byte() & 3) == 0) bytes = in.byte();
      if (in.byte() & 1)
        check(hpuTensorCopyToHost(stream(in), t, host, bytes));
      else
        check(hpuTensorCopyFromHost(stream(in), t, host, bytes));
      break;
    }
    case 14: {  // introspection
      hpuTensor_t t = s.get(in);
      int ndim = 0, contiguous = 0;
      void *data = nullptr;
      check(hpuTensorGetShape(t, &ndim, shape));
      check(hpuTensorGetStrides(t, strides));
      check(hpuTensorIsContiguous(t, &contiguous));
      check(hpuTensorGetData(t, &data));
      break;
    }
    case 15:
    case 16: {
      hpuTensor_t a = s.get(in), b = s.get(in);
      hpuStream_t st = stream(in);
      uint8_t op = in.byte() % 6;
      hpuTensor_t *o = s.out(in);
      if (!small(a) || !small(b)) break;
      hpuStatus_t r = op == 0   ? hpuAdd(st, a, b, o)
                      : op == 1 ? hpuMul(st, a, b, o)
                      : op == 2 ? hpuMm(st, a, b, o)
                      : op == 3 ? hpuMatmul(st, a, b, o)
                      : op == 4 ? hpuLinear(st, a, b, nullptr, o)
                                : hpuDiv(st, a, b, o);
      check(r);
      s.took(o, r);
      break;
    }
    case 17: {
      hpuTensor_t x = s.get(in);
      hpuStream_t st = stream(in);
      uint8_t op = in.byte() % 5;
      int dim = in.dim();
      hpuTensor_t *o = s.out(in);
      if (!small(x)) break;
      hpuStatus_t r = op == 0   ? hpuRelu(st, x, o)
                      : op == 1 ? hpuSoftmax(st, x, dim, o)
                      : op == 2 ? hpuArgmax(st, x, dim, in.byte() & 1, o)
                      : op == 3 ? hpuCast(st, x, in.dtype(), o)
                                : hpuExp(st, x, o);
      check(r);
      s.took(o, r);
      break;
    }
    case 18: {  // sum or mean over up to 8 fuzzed dims
      hpuTensor_t x = s.get(in);
      int dims[HPU_TENSOR_MAX_DIMS];
      int n = in.byte() % (HPU_TENSOR_MAX_DIMS + 2) - 1;
      for (int i = 0; i < HPU_TENSOR_MAX_DIMS; ++i) dims[i] = in.dim();
      int keep = in.byte() & 1;
      hpuStream_t st = stream(in);
      hpuTensor_t *o = s.out(in);
      if (!small(x)) break;
      hpuStatus_t r = keep ? hpuSum(st, x, dims, n, in.byte() & 1, o) : hpuMean(st, x, dims, n, in.byte() & 1, o);
      check(r);
      s.took(o, r);
      break;
    }
    case 19: {  // in place
      hpuTensor_t a = s.get(in), b = s.get(in);
      double alpha = in.number();
      hpuStream_t st = stream(in);
      if (!small(a) || !small(b)) break;
      check(in.byte() & 1 ? hpuAddInplace(st, b, a, alpha) : hpuScaleInplace(st, a, alpha));
      break;
    }
    case 20: {  // backwards, whose gradients may be views
      hpuTensor_t g = s.get(in), a = s.get(in), b = s.get(in);
      hpuStream_t st = stream(in);
      bool relu = in.byte() & 1;
      hpuTensor_t *ga = s.out(in);
      hpuTensor_t *gb = s.out(in);
      if (ga == gb) gb = nullptr;
      if (!small(g) || !small(a) || !small(b)) break;
      hpuStatus_t r = relu ? hpuReluBackward(st, g, a, ga) : hpuAddBackward(st, g, a, b, ga, gb);
      check(r);
      s.took(ga, r);
      if (gb) s.took(gb, r);
      break;
    }
    case 21: {  // losses and lookups, whose indices come from fills
      hpuTensor_t x = s.get(in), target = s.get(in);
      hpuStream_t st = stream(in);
      bool embed = in.byte() & 1;
      int64_t index = in.value();
      hpuTensor_t *o = s.out(in);
      if (!small(x) || !small(target)) break;
      hpuLossOptions_t options = HPU_LOSS_OPTIONS_INIT;
      options.reduction = static_cast<hpuReduction_t>(in.byte() % 4), options.ignore_index = index;
      hpuStatus_t r =
          embed ? hpuEmbedding(st, x, target, index, o) : hpuCrossEntropyLoss(st, x, target, nullptr, &options, o);
      check(r);
      s.took(o, r);
      break;
    }
    case 22:
      check(hpuDeviceSynchronize(devices[in.byte() & 1]));
      break;
    default: {  // a handle from elsewhere: a device or stream handle as a tensor
      hpuStream_t st = nullptr;
      hpuDeviceGetDefaultStream(devices[0], &st);
      hpuTensor_t fake = in.byte() & 1 ? reinterpret_cast<hpuTensor_t>(devices[0]) : reinterpret_cast<hpuTensor_t>(st);
      int ndim = 0;
      check(hpuTensorGetShape(fake, &ndim, shape));
      check(hpuTensorRelease(fake));
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Small devices: an op whose output would not fit fails quickly.
  setenv("HPU_NUM_DEVICES", "2", 1);
  setenv("HPU_DEVICE_MEMORY", "256MiB", 1);
  setenv("HPU_LOG_LEVEL", "error", 1);
  host = static_cast<unsigned char *>(calloc(kHostBytes, 1));
  return host ? 0 : 1;
}

// Each input opens the devices afresh (a failed queued operation leaves its
// stream's sticky error for good) and must leave them closable: every handle
// it got is released, so a close that fails is memory the library kept.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const size_t sizes[3] = {64, 4096, 65536};
  for (int d = 0; d < 2; ++d)
    if (hpuDeviceOpen(&devices[d], d) != HPU_SUCCESS) abort();
  for (int b = 0; b < 3; ++b)
    if (hpuMemAlloc(&buffers[b], devices[b == 2], sizes[b]) != HPU_SUCCESS) abort();
  std::memset(host, 0, kHostBytes);  // what an input copies in is its own
  Input in{data, data + size};
  Slots s;
  for (int calls = 0; calls < 64 && !in.done(); ++calls) one_call(in, s);
  for (int i = 0; i < kSlots; ++i) s.drop(i);
  for (hpuDevice_t d : devices) hpuDeviceSynchronize(d);
  for (int b = 0; b < 3; ++b)
    if (hpuMemFree(buffers[b]) != HPU_SUCCESS) abort();
  for (hpuDevice_t d : devices) {
    if (hpuDeviceClose(d) != HPU_SUCCESS) {
      fprintf(stderr, "%s\n", hpuGetLastErrorMessage());
      abort();
    }
  }
  return 0;
}
