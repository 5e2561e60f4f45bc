// The profiler: a valid Chrome trace whose events nest per track and whose
// totals match the work done; the summary; bad input.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <jansson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <map>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>


namespace {

struct Span {
  double ts, dur;
};

json_t *load(const std::string &path) {
  json_error_t err;
  json_t *root = json_load_file(path.c_str(), 0, &err);
  EXPECT_NE(root, nullptr) << path << ": line " << err.line << ": " << err.text;
  return root;
}

// Every pair of spans on one track is nested or disjoint.
void expect_nesting(json_t *events) {
  std::map<std::pair<long long, long long>, std::vector<Span>> tracks;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) != "X") continue;
    tracks[{json_integer_value(json_object_get(e, "pid")), json_integer_value(json_object_get(e, "tid"))}].push_back(
        {json_number_value(json_object_get(e, "ts")), json_number_value(json_object_get(e, "dur"))});
  }
  for (auto &kv : tracks) {
    auto &v = kv.second;
    std::sort(v.begin(), v.end(), [](const Span &a, const Span &b) { return a.ts < b.ts || (a.ts == b.ts && a.dur > b.dur); });
    std::vector<double> open_ends;  // stack of enclosing spans' ends
    for (const Span &s : v) {
      while (!open_ends.empty() && s.ts >= open_ends.back() - 1e-3) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(s.ts + s.dur, open_ends.back() + 1e-3) << "span overlaps its neighbour on track pid "
                                                         << kv.first.first << " tid " << kv.first.second;
      }
      open_ends.push_back(s.ts + s.dur);
    }
  }
}

// A trace file of this process: other test runs (of other build trees) share
// the temporary directory.
std::string trace_path(const char *name, pid_t pid = getpid()) {
  return testing::TempDir() + "hpu-profile-" + name + "-" + std::to_string(pid) + ".json";
}

}  // namespace

TEST(Profiler, TraceIsValidNestsAndCountsTheWork) {
  std::string path = trace_path("test");
  hpuDevice_t dev;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  hpuStream_t stream;
  ASSERT_EQ(hpuStreamCreate(&stream, dev), HPU_SUCCESS);
  std::vector<char> host(1 << 20, 7);
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  void *buf;
  ASSERT_EQ(hpuMemAlloc(&buf, dev, host.size()), HPU_SUCCESS);
  const int copies = 5;
  for (int i = 0; i < copies; ++i)
    ASSERT_EQ(hpuMemcpyAsync(stream, buf, host.data(), host.size(), HPU_MEMCPY_HOST_TO_DEVICE), HPU_SUCCESS);
  ASSERT_EQ(hpuStreamSynchronize(stream), HPU_SUCCESS);
  char *json;
  ASSERT_EQ(hpuMemStatsJson(dev, &json), HPU_SUCCESS);  // nests hpuMemStats inside
  hpuFree(json);
  ASSERT_EQ(hpuMemFree(buf), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);

  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  json_t *events = json_object_get(root, "traceEvents");
  ASSERT_TRUE(json_is_array(events));
  expect_nesting(events);

  int stream_copies = 0, host_copies = 0;
  long long copied = 0;
  std::vector<long long> memory;
  bool named_device = false;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    std::string name = json_string_value(json_object_get(e, "name"));
    std::string ph = json_string_value(json_object_get(e, "ph"));
    long long pid = json_integer_value(json_object_get(e, "pid"));
    json_t *args = json_object_get(e, "args");
    if (ph == "X" && name == "hpuMemcpyAsync") {
      if (pid == 1) {
        host_copies++;
      } else {
        stream_copies++;
        copied += json_integer_value(json_object_get(args, "bytes"));
      }
    }
    if (ph == "C" && name == "memory") memory.push_back(json_integer_value(json_object_get(args, "InUse")));
    if (ph == "M" && name == "process_name" &&
        std::string(json_string_value(json_object_get(args, "name"))) == "HPU 0")
      named_device = true;
  }
  EXPECT_EQ(host_copies, copies);
  EXPECT_EQ(stream_copies, copies);
  EXPECT_EQ(copied, static_cast<long long>(copies) * static_cast<long long>(host.size()));
  ASSERT_EQ(memory.size(), 2u);  // the allocation and the free
  EXPECT_EQ(memory[0], 1 << 20);
  EXPECT_EQ(memory[1], 0);
  EXPECT_TRUE(named_device);
  json_decref(root);

  char *summary;
  ASSERT_EQ(hpuProfilerGetSummary(&summary), HPU_SUCCESS);
  EXPECT_NE(std::string(summary).find("hpuMemcpyAsync"), std::string::npos) << summary;
  hpuFree(summary);
  ASSERT_EQ(hpuStreamDestroy(stream), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev), HPU_SUCCESS);
}

// HPU_PROFILE is read when the library initialises, which it has already done
// in this process when an earlier test ran: the program runs in a new process
// (the "threadsafe" death test style executes this test binary again, as a
// child of this process).
TEST(Profiler, EnvironmentVariableWritesTheTraceAtExit) {
  std::string path = trace_path("env");
  std::remove(path.c_str());
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("HPU_PROFILE", trace_path("env", getppid()).c_str(), 1);
        hpuDevice_t dev;
        if (hpuDeviceOpen(&dev, 0) != HPU_SUCCESS || hpuDeviceClose(dev) != HPU_SUCCESS) _exit(1);
        exit(0);  // exit(), not _exit(): the trace is written at exit
      },
      testing::ExitedWithCode(0), "");
  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  bool opened = false;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    if (std::string(json_string_value(json_object_get(e, "name"))) == "hpuDeviceClose") opened = true;  // the first call starts the profiler
  }
  EXPECT_TRUE(opened);
  json_decref(root);
}

TEST(Profiler, BadInput) {
  EXPECT_EQ(hpuProfilerStart(nullptr), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("path is NULL"), std::string::npos);
  EXPECT_EQ(hpuProfilerStart(""), HPU_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hpuProfilerStart("/nonexistent-dir/trace.json"), HPU_ERROR_IO);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("/nonexistent-dir/trace.json"), std::string::npos);
  EXPECT_EQ(hpuProfilerStop(), HPU_ERROR_INVALID_USAGE);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("not recording"), std::string::npos);
  std::string path = trace_path("twice");
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  EXPECT_EQ(hpuProfilerStart(path.c_str()), HPU_ERROR_INVALID_USAGE);
  EXPECT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  EXPECT_EQ(hpuProfilerGetSummary(nullptr), HPU_ERROR_INVALID_ARGUMENT);
}

TEST(Profiler, CollectivesHaveACommunicatorTrackWithBytes) {
  std::string path = trace_path("comm");
  hpuDevice_t devs[2];
  ASSERT_EQ(hpuDeviceOpen(&devs[0], 0), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceOpen(&devs[1], 1), HPU_SUCCESS);
  hpuComm_t comms[2];
  ASSERT_EQ(hpuCommInitAll(comms, 2, devs), HPU_SUCCESS);
  const size_t count = 1 << 16;
  void *buf[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(hpuMemAlloc(&buf[r], devs[r], count * sizeof(float)), HPU_SUCCESS);
    ASSERT_EQ(hpuMemset(buf[r], 0, count * sizeof(float)), HPU_SUCCESS);
  }
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(hpuAllreduce(nullptr, comms[r], buf[r], buf[r], count, HPU_FLOAT32, HPU_SUM), HPU_SUCCESS);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(hpuDeviceSynchronize(devs[r]), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);

  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  int spans = 0;
  std::map<long long, bool> ranks;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) != "X") continue;
    if (json_integer_value(json_object_get(e, "pid")) < 10000) continue;
    EXPECT_STREQ(json_string_value(json_object_get(e, "name")), "allreduce");
    EXPECT_EQ(json_integer_value(json_object_get(json_object_get(e, "args"), "bytes")),
              static_cast<long long>(count * sizeof(float)));
    ranks[json_integer_value(json_object_get(e, "tid"))] = true;
    spans++;
  }
  EXPECT_EQ(spans, 2);
  EXPECT_EQ(ranks.size(), 2u);  // one track per rank
  json_decref(root);
  char *summary;
  ASSERT_EQ(hpuProfilerGetSummary(&summary), HPU_SUCCESS);
  EXPECT_NE(std::string(summary).find("busbw"), std::string::npos) << summary;
  EXPECT_NE(std::string(summary).find("allreduce"), std::string::npos) << summary;
  hpuFree(summary);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(hpuCommDestroy(comms[r]), HPU_SUCCESS);
    ASSERT_EQ(hpuMemFree(buf[r]), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceClose(devs[r]), HPU_SUCCESS);
  }
}

TEST(Profiler, MatrixProductsCarryTheirFlops) {
  std::string path = trace_path("mm");
  hpuDevice_t dev;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  const int64_t m = 64, k = 32, n = 16;
  const int64_t sa[2] = {m, k}, sb[2] = {k, n};
  hpuTensor_t a, b, c;
  ASSERT_EQ(hpuTensorCreate(&a, dev, HPU_FLOAT32, 2, sa), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&b, dev, HPU_FLOAT32, 2, sb), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorFill(nullptr, a, 1.0), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorFill(nullptr, b, 1.0), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  ASSERT_EQ(hpuMm(nullptr, a, b, &c), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  long long flops = -1;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) == "X" &&
        std::string(json_string_value(json_object_get(e, "name"))) == "hpuMm" &&
        json_integer_value(json_object_get(e, "pid")) >= 100)
      flops = json_integer_value(json_object_get(json_object_get(e, "args"), "flops"));
  }
  EXPECT_EQ(flops, 2 * m * n * k);
  json_decref(root);
  for (hpuTensor_t t : {a, b, c}) ASSERT_EQ(hpuTensorRelease(t), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev), HPU_SUCCESS);
}

namespace {

// Bytes and FLOPs of the stream events of a trace, per op name, summed.
struct Totals {
  long long bytes = 0, flops = 0;
  int events = 0;
};

std::map<std::string, Totals> stream_totals(const std::string &path, std::vector<std::string> *without_bytes) {
  std::map<std::string, Totals> out;
  json_t *root = load(path);
  if (!root) return out;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    long long pid = json_integer_value(json_object_get(e, "pid"));
    if (std::string(json_string_value(json_object_get(e, "ph"))) != "X" || pid < 100 || pid >= 10000) continue;
    json_t *args = json_object_get(e, "args");
    Totals &t = out[json_string_value(json_object_get(e, "name"))];
    long long bytes = json_integer_value(json_object_get(args, "bytes"));
    t.bytes += bytes;
    t.flops += json_integer_value(json_object_get(args, "flops"));
    t.events++;
    if (bytes == 0) without_bytes->push_back(json_string_value(json_object_get(e, "name")));
  }
  json_decref(root);
  return out;
}

}  // namespace

// Every op family counts its work (ops.h's counting rules in hpuProfilerStart(3)):
// the totals per op match bytes read + written and the operations done.
TEST(Profiler, EveryOpCarriesItsBytesAndFlops) {
  std::string path = trace_path("ops");
  hpuDevice_t dev;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  const long long rows = 64, cols = 32, n = rows * cols;
  const int64_t shape[2] = {rows, cols}, row[1] = {cols}, col_count[1] = {rows};
  hpuTensor_t x, x2, bias, w, b, target, emb, idx, p, g, mom, m, v;
  for (hpuTensor_t *t : {&x, &x2, &p, &g, &mom, &m, &v}) ASSERT_EQ(hpuTensorCreate(t, dev, HPU_FLOAT32, 2, shape), HPU_SUCCESS);
  for (hpuTensor_t *t : {&bias, &w, &b}) ASSERT_EQ(hpuTensorCreate(t, dev, HPU_FLOAT32, 1, row), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&target, dev, HPU_INT64, 1, col_count), HPU_SUCCESS);
  const int64_t emb_shape[2] = {10, 8}, idx_shape[1] = {5};
  ASSERT_EQ(hpuTensorCreate(&emb, dev, HPU_FLOAT32, 2, emb_shape), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&idx, dev, HPU_INT64, 1, idx_shape), HPU_SUCCESS);
  for (hpuTensor_t t : {x, x2, bias, w, b, target, emb, idx, p, g, mom, m, v})
    ASSERT_EQ(hpuTensorFill(nullptr, t, 1.0), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);

  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  std::vector<hpuTensor_t> outs(16, nullptr);
  int k = 0;
  const int dim1[1] = {1};
  ASSERT_EQ(hpuRelu(nullptr, x, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuAdd(nullptr, x, x2, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuMul(nullptr, x, bias, &outs[k++]), HPU_SUCCESS);  // broadcast
  ASSERT_EQ(hpuSum(nullptr, x, dim1, 1, 0, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuSoftmax(nullptr, x, 1, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuCrossEntropyLoss(nullptr, x, target, nullptr, nullptr, &outs[k++]), HPU_SUCCESS);
  hpuTensor_t mean = nullptr, rstd = nullptr, mask = nullptr;
  ASSERT_EQ(hpuLayerNorm(nullptr, x, w, b, nullptr, &outs[k++], &mean, &rstd), HPU_SUCCESS);
  ASSERT_EQ(hpuDropout(nullptr, x, 0.5, 1, &outs[k++], &mask), HPU_SUCCESS);
  ASSERT_EQ(hpuEmbedding(nullptr, emb, idx, -1, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuCast(nullptr, x, HPU_BFLOAT16, &outs[k++]), HPU_SUCCESS);
  ASSERT_EQ(hpuSquaredNorm(nullptr, &x, 1, &outs[k++]), HPU_SUCCESS);
  hpuSgdOptions_t sgd = HPU_SGD_OPTIONS_INIT;
  sgd.momentum = 0.9;
  ASSERT_EQ(hpuSgdStep(nullptr, p, g, mom, 1, &sgd), HPU_SUCCESS);
  hpuAdamwOptions_t adamw = HPU_ADAMW_OPTIONS_INIT;
  ASSERT_EQ(hpuAdamwStep(nullptr, p, g, m, v, 1, &adamw), HPU_SUCCESS);
  ASSERT_EQ(hpuAddInplace(nullptr, x, x2, 0.5), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);

  std::vector<std::string> without_bytes;
  auto totals = stream_totals(path, &without_bytes);
  EXPECT_TRUE(without_bytes.empty()) << without_bytes.size() << " stream events without bytes, the first "
                                     << (without_bytes.empty() ? "" : without_bytes[0]);
  struct Want {
    const char *op;
    long long bytes, flops;
  };
  const long long f = 4;  // bytes of an f32
  const Want wants[] = {
      {"hpuRelu", 2 * n * f, n},
      {"hpuAdd", 3 * n * f, n},
      {"hpuMul", (2 * n + cols) * f, n},
      {"hpuSum", (n + rows) * f, n},
      {"hpuSoftmax", 2 * n * f, 4 * n},
      {"hpuCrossEntropyLoss", n * f + rows * 8 + f, 3 * n},
      {"hpuLayerNorm", (2 * n + 2 * cols + 2 * rows) * f, 8 * n},
      {"hpuDropout", 2 * n * f + n, 2 * n},
      {"hpuEmbedding", 5 * 8 + 2 * 5 * 8 * f, 0},
      {"hpuCast", n * f + n * 2, 0},
      {"hpuSquaredNorm", n * f + f, 2 * n},
      {"hpuSgdStep", 5 * n * f, 7 * n},
      {"hpuAdamwStep", 7 * n * f, 14 * n},
      {"hpuAddInplace", 3 * n * f, 2 * n},
  };
  for (const Want &want : wants) {
    auto it = totals.find(want.op);
    ASSERT_NE(it, totals.end()) << want.op << " has no stream event";
    EXPECT_EQ(it->second.events, 1) << want.op;
    EXPECT_EQ(it->second.bytes, want.bytes) << want.op;
    EXPECT_EQ(it->second.flops, want.flops) << want.op;
  }
  for (hpuTensor_t t : outs) ASSERT_EQ(hpuTensorRelease(t), HPU_SUCCESS);
  for (hpuTensor_t t : {mean, rstd, mask, x, x2, bias, w, b, target, emb, idx, p, g, mom, m, v})
    ASSERT_EQ(hpuTensorRelease(t), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev), HPU_SUCCESS);
}

// A backward counts its work too; an op whose input is converted first shows
// the conversion and the kernel as two events of that op.
TEST(Profiler, BackwardsAndConversionsCarryTheirWork) {
  std::string path = trace_path("backward");
  hpuDevice_t dev;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  const long long n = 1000;
  const int64_t shape[1] = {n};
  hpuTensor_t x, g, xh;
  ASSERT_EQ(hpuTensorCreate(&x, dev, HPU_FLOAT32, 1, shape), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&g, dev, HPU_FLOAT32, 1, shape), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&xh, dev, HPU_BFLOAT16, 1, shape), HPU_SUCCESS);
  for (hpuTensor_t t : {x, g, xh}) ASSERT_EQ(hpuTensorFill(nullptr, t, 1.0), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  hpuTensor_t gx = nullptr, y = nullptr;
  ASSERT_EQ(hpuReluBackward(nullptr, g, x, &gx), HPU_SUCCESS);
  ASSERT_EQ(hpuAutocastPush(1, HPU_BFLOAT16), HPU_SUCCESS);
  ASSERT_EQ(hpuExp(nullptr, xh, &y), HPU_SUCCESS);  // exp runs in f32: xh is widened first
  ASSERT_EQ(hpuAutocastPop(), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  std::vector<std::string> without_bytes;
  auto totals = stream_totals(path, &without_bytes);
  EXPECT_TRUE(without_bytes.empty());
  EXPECT_EQ(totals["hpuReluBackward"].bytes, 3 * n * 4);
  EXPECT_EQ(totals["hpuReluBackward"].flops, 2 * n);
  EXPECT_EQ(totals["hpuExp"].events, 2);
  EXPECT_EQ(totals["hpuExp"].bytes, (2 + 4) * n + 2 * n * 4);  // the widening, then exp in f32
  EXPECT_EQ(totals["hpuExp"].flops, n);
  for (hpuTensor_t t : {gx, y, x, g, xh}) ASSERT_EQ(hpuTensorRelease(t), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev), HPU_SUCCESS);
}

namespace {

// The calls column of the summary's row `name` (-1 when there is none).
long long summary_calls(const std::string &summary, const std::string &name) {
  size_t at = summary.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(summary.c_str() + at + 1 + name.size());
}

}  // namespace

// hpuProfilerGetSummary(3): the calls column counts API calls. An hpuMm under
// autocast queues the casts of its two f32 inputs and the product: three
// stream events under its name, one call; two such calls are two.
TEST(Profiler, SummaryCountsAnOpAndItsCastsAsOneCall) {
  std::string path = trace_path("calls");
  hpuDevice_t dev;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  const int64_t shape[2] = {8, 8};
  hpuTensor_t a, b, c[2];
  ASSERT_EQ(hpuTensorCreate(&a, dev, HPU_FLOAT32, 2, shape), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorCreate(&b, dev, HPU_FLOAT32, 2, shape), HPU_SUCCESS);
  for (hpuTensor_t t : {a, b}) ASSERT_EQ(hpuTensorFill(nullptr, t, 1.0), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  ASSERT_EQ(hpuAutocastPush(1, HPU_BFLOAT16), HPU_SUCCESS);
  ASSERT_EQ(hpuMm(nullptr, a, b, &c[0]), HPU_SUCCESS);
  ASSERT_EQ(hpuAutocastPop(), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  std::vector<std::string> without_bytes;
  EXPECT_EQ(stream_totals(path, &without_bytes)["hpuMm"].events, 3);  // two casts and the product
  char *summary;
  ASSERT_EQ(hpuProfilerGetSummary(&summary), HPU_SUCCESS);
  EXPECT_EQ(summary_calls(summary, "hpuMm"), 1) << summary;
  hpuFree(summary);

  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  ASSERT_EQ(hpuAutocastPush(1, HPU_BFLOAT16), HPU_SUCCESS);
  ASSERT_EQ(hpuMm(nullptr, a, b, &c[1]), HPU_SUCCESS);
  ASSERT_EQ(hpuAutocastPop(), HPU_SUCCESS);
  ASSERT_EQ(hpuTensorRelease(c[1]), HPU_SUCCESS);
  ASSERT_EQ(hpuMm(nullptr, a, b, &c[1]), HPU_SUCCESS);  // f32: no casts
  ASSERT_EQ(hpuDeviceSynchronize(dev), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerGetSummary(&summary), HPU_SUCCESS);
  EXPECT_EQ(summary_calls(summary, "hpuMm"), 2) << summary;
  hpuFree(summary);
  std::remove(path.c_str());
  for (hpuTensor_t t : {a, b, c[0], c[1]}) ASSERT_EQ(hpuTensorRelease(t), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev), HPU_SUCCESS);
}

// hpuProfilerStop(3): every device has its process "HPU n", also one whose
// streams were made before the recording started and that ran nothing during
// it (its tracks are named, so Perfetto shows them: under their process's name).
TEST(Profiler, EveryNamedTrackHasANamedProcess) {
  std::string path = trace_path("names");
  hpuDevice_t dev0, dev1;
  ASSERT_EQ(hpuDeviceOpen(&dev0, 0), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceOpen(&dev1, 1), HPU_SUCCESS);
  hpuStream_t idle;
  ASSERT_EQ(hpuStreamCreate(&idle, dev1), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  void *buf;
  ASSERT_EQ(hpuMemAlloc(&buf, dev0, 4096), HPU_SUCCESS);
  ASSERT_EQ(hpuMemset(buf, 1, 4096), HPU_SUCCESS);
  ASSERT_EQ(hpuMemFree(buf), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  std::map<long long, std::string> process;
  std::vector<long long> thread_pids;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) != "M") continue;
    const std::string what = json_string_value(json_object_get(e, "name"));
    const long long pid = json_integer_value(json_object_get(e, "pid"));
    if (what == "process_name")
      process[pid] = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
    else if (what == "thread_name")
      thread_pids.push_back(pid);
  }
  json_decref(root);
  std::remove(path.c_str());
  EXPECT_TRUE(std::any_of(process.begin(), process.end(), [](auto &p) { return p.second == "HPU 1"; }));
  for (long long pid : thread_pids) EXPECT_TRUE(process.count(pid)) << "tracks of pid " << pid << " have no process name";
  ASSERT_EQ(hpuStreamDestroy(idle), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev1), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceClose(dev0), HPU_SUCCESS);
}

namespace {

// Host spans of one API function in a trace, by host thread (tid).
std::map<long long, int> host_spans(const std::string &path, const char *function) {
  std::map<long long, int> out;
  json_t *root = load(path);
  if (!root) return out;
  json_t *events = json_object_get(root, "traceEvents");
  expect_nesting(events);
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) == "X" &&
        json_integer_value(json_object_get(e, "pid")) == 1 &&
        std::string(json_string_value(json_object_get(e, "name"))) == function)
      out[json_integer_value(json_object_get(e, "tid"))]++;
  }
  json_decref(root);
  std::remove(path.c_str());
  return out;
}

}  // namespace

// Each thread records into its own buffer: the events of threads that have
// exited before the profile stops are all in the trace, one track each.
TEST(Profiler, EventsOfExitedThreadsAreKept) {
  std::string path = trace_path("threads");
  const int threads = 4, calls = 500;
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([] {
      int n;
      for (int i = 0; i < calls; ++i) hpuDeviceCount(&n);
    });
  for (auto &t : pool) t.join();
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  auto spans = host_spans(path, "hpuDeviceCount");
  ASSERT_EQ(spans.size(), static_cast<size_t>(threads));
  for (auto &kv : spans) EXPECT_EQ(kv.second, calls) << "thread track " << kv.first;
}

// Threads keep recording while the profile is stopped and started again:
// every trace is valid and nests, and no call is counted twice. The threads
// call until the last profile has stopped, and each profile lasts until they
// have made more calls, so every stop and start falls among their calls however
// the threads are scheduled.
TEST(Profiler, StopAndStartWhileThreadsRecord) {
  const int threads = 3, profiles = 5, calls_per_profile = 200;
  std::atomic<long long> calls{0};
  struct Pool {  // joined however the test ends
    std::atomic<bool> done{false};
    std::vector<std::thread> threads;
    void join() {
      done = true;
      for (auto &t : threads)
        if (t.joinable()) t.join();
    }
    ~Pool() { join(); }
  } pool;
  long long recorded = 0;
  for (int p = 0; p < profiles; ++p) {
    std::string path = trace_path("restart");
    ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
    if (p == 0)
      for (int t = 0; t < threads; ++t)
        pool.threads.emplace_back([&] {
          int n;
          while (!pool.done.load()) {
            hpuDeviceCount(&n);
            calls.fetch_add(1);
          }
        });
    const long long until = calls.load() + calls_per_profile;
    while (calls.load() < until) std::this_thread::yield();
    ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
    for (auto &kv : host_spans(path, "hpuDeviceCount")) recorded += kv.second;
  }
  pool.join();
  EXPECT_GT(recorded, 0);
  EXPECT_LE(recorded, calls.load());
}

// A stream operation already running when the profile starts is in the trace
// from the profile's start on: no event lies before the start or past the stop.
TEST(Profiler, AnOperationRunningAtStartCountsFromTheStart) {
  std::string path = trace_path("straddle");
  hpuDevice_t dev;
  hpuStream_t stream;
  void *buf;
  const size_t bytes = size_t(256) << 20;
  ASSERT_EQ(hpuDeviceOpen(&dev, 0), HPU_SUCCESS);
  ASSERT_EQ(hpuStreamCreate(&stream, dev), HPU_SUCCESS);
  ASSERT_EQ(hpuMemAlloc(&buf, dev, bytes), HPU_SUCCESS);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(hpuMemsetAsync(stream, buf, i, bytes), HPU_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the first memset is under way
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS);
  ASSERT_EQ(hpuStreamSynchronize(stream), HPU_SUCCESS);
  ASSERT_EQ(hpuProfilerStop(), HPU_SUCCESS);
  const double profiled_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  json_t *root = load(path);
  ASSERT_NE(root, nullptr);
  size_t i, memsets = 0;
  json_t *e;
  json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
    if (std::string(json_string_value(json_object_get(e, "ph"))) != "X") continue;
    const double ts = json_number_value(json_object_get(e, "ts"));
    const double dur = json_number_value(json_object_get(e, "dur"));
    EXPECT_GE(ts, 0.0) << json_string_value(json_object_get(e, "name"));
    EXPECT_LE(ts + dur, profiled_us + 1.0) << json_string_value(json_object_get(e, "name"));
    if (std::string(json_string_value(json_object_get(e, "name"))) == "hpuMemsetAsync") ++memsets;
  }
  EXPECT_GE(memsets, 3u);  // the ones queued behind the first, at least
  json_decref(root);
  hpuMemFree(buf);
  hpuStreamDestroy(stream);
  hpuDeviceClose(dev);
}

// The copy of libhpu that hpu-bench builds with the profiler's hooks compiled
// out (HPU_NO_PROFILER, bench/deps.cmake) refuses to record and says why; on
// libhpu itself the same call records. tests/unit/profiler.cmake runs this test
// a second time on that copy (LD_LIBRARY_PATH and HPU_TEST_NOPROF_DIR), and
// the test first makes sure the copy is the library it loaded.
TEST(Profiler, StartSaysWhenTheProfilerIsCompiledOut) {
  const std::string path = trace_path("compiled-out");
  const char *noprof = std::getenv("HPU_TEST_NOPROF_DIR");
  if (!noprof) {
    ASSERT_EQ(hpuProfilerStart(path.c_str()), HPU_SUCCESS) << hpuGetLastErrorMessage();
    EXPECT_EQ(hpuProfilerStop(), HPU_SUCCESS) << hpuGetLastErrorMessage();
    std::remove(path.c_str());
    return;
  }
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void *>(&hpuProfilerStart), &info), 0);
  char loaded[PATH_MAX], want[PATH_MAX];
  ASSERT_NE(realpath(info.dli_fname, loaded), nullptr) << info.dli_fname;
  ASSERT_NE(realpath(noprof, want), nullptr) << noprof;
  ASSERT_EQ(std::string(loaded).rfind(std::string(want) + "/", 0), 0u) << "loaded " << loaded << ", not the copy in "
                                                                        << want;
  EXPECT_EQ(hpuProfilerStart(path.c_str()), HPU_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("built without its profiler"), std::string::npos)
      << hpuGetLastErrorMessage();
  EXPECT_EQ(hpuProfilerStop(), HPU_ERROR_INVALID_USAGE);
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "the compiled-out copy created " << path;
}
