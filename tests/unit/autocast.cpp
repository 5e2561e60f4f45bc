// Autocast: regions per thread, the default lists, the decision each list
// gives, replacement from code and from list files named by the environment.
#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child.hpp"
#include "expect.hpp"

namespace {

std::vector<std::string> op_list(hpuAutocastList_t which) {
  char *text = nullptr;
  EXPECT_HPU_OK(hpuAutocastGetOpList(which, &text));
  std::vector<std::string> out;
  std::istringstream in(text ? text : "");
  for (std::string line; std::getline(in, line);) out.push_back(line);
  hpuFree(text);
  return out;
}

hpuDataType_t run_dtype(const char *op, std::initializer_list<hpuDataType_t> inputs) {
  hpuDataType_t t = static_cast<hpuDataType_t>(-1);
  EXPECT_HPU_OK(hpuAutocastGetOpDtype(op, inputs.begin(), inputs.size(), &t));
  return t;
}

// A temporary file with the given text, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string &text) {
    char name[] = "/tmp/hpu-autocast-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    path = name;
  }
  ~TempFile() { unlink(path.c_str()); }
};

// Habana bridge 1.19.0 defaults, written out independently of the library.
const char *kLower[] = {"addmm", "addbmm", "batch_norm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d",
                        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dot", "dropout",
                        "feature_dropout", "group_norm", "instance_norm", "layer_norm", "leaky_relu", "linear",
                        "matmul", "mean", "mm", "mul", "mv", "softmax", "log_softmax",
                        "scaled_dot_product_attention"};
const char *kFp32[] = {"acos", "addcdiv", "asin", "atan2", "bilinear", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits", "cdist", "cosh", "cosine_embedding_loss",
                       "cosine_similarity", "cross_entropy_loss", "dist", "div", "divide", "embedding",
                       "embedding_bag", "erfinv", "exp", "expm1", "hinge_embedding_loss", "huber_loss", "kl_div",
                       "l1_loss", "log", "log10", "log1p", "log2", "logsumexp", "margin_ranking_loss", "mse_loss",
                       "multi_margin_loss", "multilabel_margin_loss", "nll_loss", "pdist", "poisson_nll_loss", "pow",
                       "reciprocal", "renorm", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss", "softplus",
                       "tan", "topk", "triplet_margin_loss", "truediv", "true_divide"};
const char *kPromote[] = {"add", "addcmul", "addcdiv", "cat", "div", "exp", "mul", "pow", "sub", "iadd", "truediv",
                          "stack"};

template <size_t N>
std::vector<std::string> sorted(const char *(&names)[N]) {
  std::set<std::string> s(names, names + N);
  return std::vector<std::string>(s.begin(), s.end());
}

}  // namespace

TEST(Autocast, OutsideAnyRegionIsDisabledBf16) {
  int enabled = 7;
  hpuDataType_t dtype = HPU_INT8;
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 0);
  EXPECT_EQ(dtype, HPU_BFLOAT16);
  EXPECT_HPU_OK(hpuAutocastGetState(nullptr, nullptr));
}

TEST(Autocast, RegionsNestAndADisabledRegionSitsInsideAnEnabledOne) {
  int enabled;
  hpuDataType_t dtype;
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT32, HPU_FLOAT32}), HPU_BFLOAT16);
  ASSERT_HPU_OK(hpuAutocastPush(0, HPU_BFLOAT16));
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 0);
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT32, HPU_FLOAT32}), HPU_FLOAT32);
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_FLOAT16));
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 1);
  EXPECT_EQ(dtype, HPU_FLOAT16);
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT32, HPU_FLOAT32}), HPU_FLOAT16);
  ASSERT_HPU_OK(hpuAutocastPop());
  ASSERT_HPU_OK(hpuAutocastPop());
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 1);
  EXPECT_EQ(dtype, HPU_BFLOAT16);
  ASSERT_HPU_OK(hpuAutocastPop());
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 0);
  EXPECT_HPU_FAIL(hpuAutocastPop(), HPU_ERROR_INVALID_USAGE, "no autocast region");
}

TEST(Autocast, EachThreadHasItsOwnStack) {
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  int other_enabled = -1;
  hpuDataType_t other_dtype = HPU_INT8, other_mm = HPU_INT8;
  hpuStatus_t other_pop = HPU_SUCCESS;
  std::thread t([&] {
    hpuAutocastGetState(&other_enabled, nullptr);
    other_pop = hpuAutocastPop();  // this thread has no region of its own
    hpuAutocastPush(1, HPU_FLOAT16);
    hpuAutocastGetState(nullptr, &other_dtype);
    hpuDataType_t in = HPU_FLOAT32;
    hpuAutocastGetOpDtype("mm", &in, 1, &other_mm);
  });
  t.join();
  EXPECT_EQ(other_enabled, 0);
  EXPECT_EQ(other_pop, HPU_ERROR_INVALID_USAGE);
  EXPECT_EQ(other_dtype, HPU_FLOAT16);
  EXPECT_EQ(other_mm, HPU_FLOAT16);
  int enabled;
  hpuDataType_t dtype;
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, &dtype));
  EXPECT_EQ(enabled, 1);
  EXPECT_EQ(dtype, HPU_BFLOAT16);  // the other thread's push did not reach here
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT32}), HPU_BFLOAT16);
  ASSERT_HPU_OK(hpuAutocastPop());
}

TEST(Autocast, DefaultListsAreHabanas) {
  EXPECT_EQ(op_list(HPU_AUTOCAST_LOWER_PRECISION), sorted(kLower));
  EXPECT_EQ(op_list(HPU_AUTOCAST_FP32), sorted(kFp32));
  EXPECT_EQ(op_list(HPU_AUTOCAST_PROMOTE), sorted(kPromote));
  EXPECT_EQ(op_list(HPU_AUTOCAST_LOWER_PRECISION).size(), 27u);
  EXPECT_EQ(op_list(HPU_AUTOCAST_FP32).size(), 49u);
  EXPECT_EQ(op_list(HPU_AUTOCAST_PROMOTE).size(), 12u);
}

TEST(Autocast, EachListGivesItsDtype) {
  // Disabled: everything runs as given.
  for (const char *op : {"mm", "tan", "add", "relu"})
    EXPECT_EQ(run_dtype(op, {HPU_FLOAT32, HPU_BFLOAT16}), HPU_FLOAT32) << op;
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  for (const char *op : kLower) EXPECT_EQ(run_dtype(op, {HPU_FLOAT32, HPU_FLOAT32}), HPU_BFLOAT16) << op;
  for (const char *op : kFp32) {
    if (std::string(op) == "addcdiv") continue;  // lower > fp32 > promote: checked below
    EXPECT_EQ(run_dtype(op, {HPU_BFLOAT16, HPU_BFLOAT16}), HPU_FLOAT32) << op;
  }
  // Promote-only ops run in the widest input type.
  for (const char *op : {"add", "sub", "addcmul", "cat", "iadd", "stack"}) {
    EXPECT_EQ(run_dtype(op, {HPU_BFLOAT16, HPU_FLOAT32}), HPU_FLOAT32) << op;
    EXPECT_EQ(run_dtype(op, {HPU_BFLOAT16, HPU_BFLOAT16}), HPU_BFLOAT16) << op;
    EXPECT_EQ(run_dtype(op, {HPU_BFLOAT16, HPU_FLOAT16}), HPU_FLOAT32) << op;
    EXPECT_EQ(run_dtype(op, {HPU_BFLOAT16, HPU_INT64}), HPU_BFLOAT16) << op;  // integers do not promote
  }
  // In no list: as given.
  EXPECT_EQ(run_dtype("relu", {HPU_FLOAT32}), HPU_FLOAT32);
  EXPECT_EQ(run_dtype("gelu", {HPU_BFLOAT16}), HPU_BFLOAT16);
  EXPECT_EQ(run_dtype("no_such_op", {HPU_FLOAT16}), HPU_FLOAT16);
  // Only f16/bf16/f32 are cast.
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT64, HPU_FLOAT64}), HPU_FLOAT64);
  EXPECT_EQ(run_dtype("embedding", {HPU_INT64, HPU_BFLOAT16}), HPU_INT64);
  EXPECT_EQ(run_dtype("tan", {HPU_FLOAT64}), HPU_FLOAT64);
  ASSERT_HPU_OK(hpuAutocastPop());
}

TEST(Autocast, PrecedenceIsLowerThenFp32ThenPromote) {
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  EXPECT_EQ(run_dtype("mul", {HPU_FLOAT32, HPU_FLOAT32}), HPU_BFLOAT16);  // lower beats promote
  EXPECT_EQ(run_dtype("div", {HPU_BFLOAT16, HPU_BFLOAT16}), HPU_FLOAT32);  // fp32 beats promote
  const char *both[] = {"tan", "div"};
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_LOWER_PRECISION, both, 2));
  EXPECT_EQ(run_dtype("tan", {HPU_FLOAT32}), HPU_BFLOAT16);  // lower beats fp32
  EXPECT_EQ(run_dtype("mm", {HPU_FLOAT32}), HPU_FLOAT32);    // no longer listed
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_LOWER_PRECISION, nullptr, 0));
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_FP32, nullptr, 0));
  EXPECT_EQ(run_dtype("div", {HPU_BFLOAT16, HPU_BFLOAT16}), HPU_BFLOAT16);  // now promote
  EXPECT_EQ(run_dtype("div", {HPU_BFLOAT16, HPU_FLOAT32}), HPU_FLOAT32);
  EXPECT_EQ(run_dtype("mul", {HPU_BFLOAT16, HPU_FLOAT32}), HPU_FLOAT32);
  ASSERT_HPU_OK(hpuAutocastPop());
}

TEST(Autocast, LayerNormCastsOnlyItsFirstArgument) {
  ASSERT_HPU_OK(hpuAutocastPush(1, HPU_BFLOAT16));
  hpuDataType_t in[] = {HPU_FLOAT32, HPU_FLOAT32}, got;
  ASSERT_HPU_OK(hpuAutocastGetOpDtype("layer_norm", in, 2, &got));
  EXPECT_EQ(got, HPU_BFLOAT16);
  ASSERT_HPU_OK(hpuAutocastPop());
}

TEST(Autocast, SetOpListReplacesForTheWholeProcess) {
  const char *names[] = {"tan", "  relu", "tan"};
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_LOWER_PRECISION, names, 3));
  EXPECT_EQ(op_list(HPU_AUTOCAST_LOWER_PRECISION), (std::vector<std::string>{"  relu", "tan"}));
  // Another thread's ops see the new list.
  hpuDataType_t got = HPU_INT8;
  std::thread t([&] {
    hpuAutocastPush(1, HPU_BFLOAT16);
    hpuDataType_t in = HPU_FLOAT32;
    hpuAutocastGetOpDtype("tan", &in, 1, &got);
    hpuAutocastPop();
  });
  t.join();
  EXPECT_EQ(got, HPU_BFLOAT16);
  const char *promote[] = {"relu"};
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_PROMOTE, promote, 1));
  EXPECT_EQ(op_list(HPU_AUTOCAST_PROMOTE), (std::vector<std::string>{"relu"}));
  ASSERT_HPU_OK(hpuAutocastSetOpList(HPU_AUTOCAST_FP32, nullptr, 0));
  EXPECT_TRUE(op_list(HPU_AUTOCAST_FP32).empty());
}

TEST(Autocast, ConcurrentReplacementsOfDifferentListsAllApply) {
  const char *lower[] = {"tan"}, *fp32[] = {"mm"}, *promote[] = {"relu"};
  std::thread a([&] {
    for (int i = 0; i < 300; ++i) hpuAutocastSetOpList(HPU_AUTOCAST_LOWER_PRECISION, lower, 1);
  });
  std::thread b([&] {
    for (int i = 0; i < 300; ++i) hpuAutocastSetOpList(HPU_AUTOCAST_FP32, fp32, 1);
  });
  for (int i = 0; i < 300; ++i) hpuAutocastSetOpList(HPU_AUTOCAST_PROMOTE, promote, 1);
  a.join();
  b.join();
  EXPECT_EQ(op_list(HPU_AUTOCAST_LOWER_PRECISION), std::vector<std::string>{"tan"});
  EXPECT_EQ(op_list(HPU_AUTOCAST_FP32), std::vector<std::string>{"mm"});
  EXPECT_EQ(op_list(HPU_AUTOCAST_PROMOTE), std::vector<std::string>{"relu"});
}

TEST(Autocast, UnknownNameFromCodeIsAWarningNamingTheNearestOp) {
  auto r = hpu_test::run_child({{"HPU_LOG_LEVEL", "warn"}}, [] {
    const char *names[] = {"cross_entropy", "linear"};
    if (hpuAutocastSetOpList(HPU_AUTOCAST_FP32, names, 2) != HPU_SUCCESS) return 1;
    return op_list(HPU_AUTOCAST_FP32) == std::vector<std::string>{"cross_entropy", "linear"} ? 0 : 2;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"cross_entropy\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did you mean \"cross_entropy_loss\""), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"linear\""), std::string::npos) << r.output;  // known: no warning
}

TEST(Autocast, BadInput) {
  EXPECT_HPU_FAIL(hpuAutocastPush(1, HPU_FLOAT32), HPU_ERROR_INVALID_ARGUMENT, "dtype 9");
  EXPECT_HPU_FAIL(hpuAutocastPush(1, static_cast<hpuDataType_t>(42)), HPU_ERROR_INVALID_ARGUMENT, "dtype 42");
  EXPECT_HPU_FAIL(hpuAutocastPush(0, HPU_INT8), HPU_ERROR_INVALID_ARGUMENT, "dtype 2");
  int enabled = 5;
  ASSERT_HPU_OK(hpuAutocastGetState(&enabled, nullptr));
  EXPECT_EQ(enabled, 0);  // failed pushes left no region
  EXPECT_HPU_FAIL(hpuAutocastPop(), HPU_ERROR_INVALID_USAGE, "no autocast region");

  const char *names[] = {"mm", nullptr, ""};
  EXPECT_HPU_FAIL(hpuAutocastSetOpList(static_cast<hpuAutocastList_t>(3), names, 1), HPU_ERROR_INVALID_ARGUMENT,
                  "which 3");
  EXPECT_HPU_FAIL(hpuAutocastSetOpList(HPU_AUTOCAST_FP32, nullptr, 2), HPU_ERROR_INVALID_ARGUMENT,
                  "names is NULL", "count is 2");
  EXPECT_HPU_FAIL(hpuAutocastSetOpList(HPU_AUTOCAST_FP32, names, 2), HPU_ERROR_INVALID_ARGUMENT,
                  "names[1] is NULL");
  const char *empty[] = {"mm", ""};
  EXPECT_HPU_FAIL(hpuAutocastSetOpList(HPU_AUTOCAST_FP32, empty, 2), HPU_ERROR_INVALID_ARGUMENT,
                  "names[1] is an empty string");
  EXPECT_EQ(op_list(HPU_AUTOCAST_FP32), sorted(kFp32));  // failed calls changed nothing

  char *text = reinterpret_cast<char *>(0x1);
  EXPECT_HPU_FAIL(hpuAutocastGetOpList(static_cast<hpuAutocastList_t>(-1), &text), HPU_ERROR_INVALID_ARGUMENT,
                  "which -1");
  EXPECT_EQ(text, reinterpret_cast<char *>(0x1));
  EXPECT_HPU_FAIL(hpuAutocastGetOpList(HPU_AUTOCAST_FP32, nullptr), HPU_ERROR_INVALID_ARGUMENT, "names is NULL");

  hpuDataType_t in[] = {HPU_FLOAT32}, bad[] = {static_cast<hpuDataType_t>(11)};
  hpuDataType_t out = HPU_INT8;
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype(nullptr, in, 1, &out), HPU_ERROR_INVALID_ARGUMENT, "op is NULL");
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype("", in, 1, &out), HPU_ERROR_INVALID_ARGUMENT, "op is an empty string");
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype("mm", nullptr, 1, &out), HPU_ERROR_INVALID_ARGUMENT, "inputs is NULL");
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype("mm", in, 0, &out), HPU_ERROR_INVALID_ARGUMENT, "count 0");
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype("mm", in, 1, nullptr), HPU_ERROR_INVALID_ARGUMENT, "dtype is NULL");
  EXPECT_HPU_FAIL(hpuAutocastGetOpDtype("mm", bad, 1, &out), HPU_ERROR_INVALID_ARGUMENT, "inputs[0] 11");
  EXPECT_EQ(out, HPU_INT8);
}

// ---- list files named by the environment (each in a fresh child process) ----

namespace {

// In the child: the lists after initialisation, as "lower|fp32".
int check_lists(const std::vector<std::string> &lower, const std::vector<std::string> &fp32) {
  if (hpuAutocastPush(1, HPU_BFLOAT16) != HPU_SUCCESS) {
    std::fprintf(stderr, "init failed: %s\n", hpuGetLastErrorMessage());
    return 1;
  }
  if (op_list(HPU_AUTOCAST_LOWER_PRECISION) != lower) return 2;
  if (op_list(HPU_AUTOCAST_FP32) != fp32) return 3;
  return 0;
}

}  // namespace

TEST(AutocastEnv, ListFilesReplaceTheDefaultsTrimmedWithComments) {
  TempFile lower("# ops in bf16\n  linear  \nrelu\t\r\n\nmm # the matmul\n   # nothing\n");
  TempFile fp32("tan\n");
  auto r = hpu_test::run_child({{"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST", lower.path},
                                {"PT_HPU_AUTOCAST_FP32_OPS_LIST", fp32.path}},
                               [] { return check_lists({"linear", "mm", "relu"}, {"tan"}); });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(AutocastEnv, OlderNamesWork) {
  TempFile lower("add\nmm\n");
  TempFile fp32("matmul\n");
  auto r = hpu_test::run_child({{"LOWER_LIST", lower.path}, {"FP32_LIST", fp32.path}},
                               [] { return check_lists({"add", "mm"}, {"matmul"}); });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(AutocastEnv, NewerNameWinsWithAWarning) {
  TempFile newer("mm\n");
  TempFile older("bmm\n");
  auto r = hpu_test::run_child({{"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST", newer.path},
                                {"LOWER_LIST", older.path},
                                {"HPU_LOG_LEVEL", "warn"}},
                               [] { return check_lists({"mm"}, sorted(kFp32)); });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("LOWER_LIST"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("using PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST"), std::string::npos) << r.output;
}

TEST(AutocastEnv, SwappedDefaultListsRunMmInFp32AndTanInBf16) {
  // lightning-habana's CI: the bf16 file given as the fp32 list and vice versa.
  TempFile ops_bf16("linear\nrelu\nmm\n");
  TempFile ops_fp32("cross_entropy\ntan\n");
  auto r = hpu_test::run_child({{"LOWER_LIST", ops_fp32.path}, {"FP32_LIST", ops_bf16.path}}, [] {
    if (hpuAutocastPush(1, HPU_BFLOAT16) != HPU_SUCCESS) return 1;
    if (run_dtype("mm", {HPU_FLOAT32, HPU_FLOAT32}) != HPU_FLOAT32) return 2;
    if (run_dtype("mm", {HPU_BFLOAT16, HPU_BFLOAT16}) != HPU_FLOAT32) return 3;
    if (run_dtype("tan", {HPU_FLOAT32}) != HPU_BFLOAT16) return 4;
    if (run_dtype("linear", {HPU_BFLOAT16}) != HPU_FLOAT32) return 5;
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(AutocastEnv, UnknownNameInAFileIsAWarningNamingTheNearestOp) {
  TempFile fp32("cross_entropy\ntan\n");
  auto r = hpu_test::run_child({{"FP32_LIST", fp32.path}, {"HPU_LOG_LEVEL", "warn"}},
                               [] { return check_lists(sorted(kLower), {"cross_entropy", "tan"}); });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("did you mean \"cross_entropy_loss\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(fp32.path), std::string::npos) << r.output;
}

TEST(AutocastEnv, MissingFileFailsInitialisationNamingPathAndError) {
  auto r = hpu_test::run_child({{"PT_HPU_AUTOCAST_FP32_OPS_LIST", "/nonexistent/fp32.txt"}}, [] {
    int n = 0;
    hpuStatus_t s = hpuDeviceCount(&n);
    std::fprintf(stderr, "MSG[%s]\n", hpuGetLastErrorMessage());
    if (s != HPU_ERROR_CONFIG) return 1;
    // A later call retries initialisation and fails the same way.
    return hpuAutocastPush(1, HPU_BFLOAT16) == HPU_ERROR_CONFIG ? 0 : 2;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("MSG[hpuDeviceCount: PT_HPU_AUTOCAST_FP32_OPS_LIST=\"/nonexistent/fp32.txt\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No such file or directory"), std::string::npos) << r.output;
}

TEST(AutocastEnv, DirectoryOrUnreadableFileFailsInitialisation) {
  auto r = hpu_test::run_child({{"LOWER_LIST", "/tmp"}}, [] {
    hpuStatus_t s = hpuAutocastPush(1, HPU_BFLOAT16);
    std::fprintf(stderr, "MSG[%s]\n", hpuGetLastErrorMessage());
    return s == HPU_ERROR_CONFIG ? 0 : 1;
  });
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("LOWER_LIST=\"/tmp\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Is a directory"), std::string::npos) << r.output;

  if (geteuid() != 0) {  // root reads any file
    TempFile locked("mm\n");
    chmod(locked.path.c_str(), 0);
    auto r2 = hpu_test::run_child({{"FP32_LIST", locked.path}}, [] {
      hpuStatus_t s = hpuAutocastPush(1, HPU_BFLOAT16);
      std::fprintf(stderr, "MSG[%s]\n", hpuGetLastErrorMessage());
      return s == HPU_ERROR_CONFIG ? 0 : 1;
    });
    EXPECT_EQ(r2.exit_code, 0) << r2.output;
    EXPECT_NE(r2.output.find("Permission denied"), std::string::npos) << r2.output;
  }
}

TEST(AutocastEnv, EmptyFileEmptiesTheListAndEmptyVariableIsUnset) {
  TempFile empty("# nothing\n\n");
  auto r = hpu_test::run_child({{"PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST", empty.path}, {"FP32_LIST", ""}},
                               [] { return check_lists({}, sorted(kFp32)); });
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
