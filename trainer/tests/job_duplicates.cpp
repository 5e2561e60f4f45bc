// A job document that gives a key twice in one object is refused, naming the
// key's path and both lines (jansson alone would keep the last value silently).
#include <hpu/trainer.hpp>
#include <hpu/trainer.h>

#include "job_util.hpp"
#include "test_util.hpp"

#include <sys/wait.h>

#include <algorithm>

using namespace trainer_test;

namespace {

const char *kJob = R"({
  "model": {"layers": [
    {"type": "flatten"},
    {"type": "linear", "in_features": 784, "out_features": 10}
  ]},
  "trainer": {
    "devices": 1,
    "max_epochs": 2
  }
})";

std::string replace(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// The line (from 1) of the n-th (from 1) appearance of `needle` in `text`.
int line_of(const std::string &text, const std::string &needle, int n) {
  size_t at = std::string::npos;
  for (int i = 0; i < n; ++i) at = text.find(needle, at == std::string::npos ? 0 : at + 1);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + int(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n'));
}

std::string error_of(const std::string &text) { return trainer_test::job_error(text); }

}  // namespace

TEST(JobDuplicates, AKeyGivenTwiceIsRefusedWithItsPathAndLines) {
  ASSERT_EQ(error_of(kJob), "");
  // In a nested object.
  std::string twice = replace(kJob, "\"max_epochs\": 2", "\"max_epochs\": 2,\n    \"devices\": 8");
  EXPECT_EQ(error_of(twice), "job.json:" + std::to_string(line_of(twice, "\"devices\"", 2)) +
                                 ": trainer.devices: duplicate key, first given at line " +
                                 std::to_string(line_of(twice, "\"devices\"", 1)) + "; give each key once");
  // In an array element.
  twice = replace(kJob, "\"out_features\": 10", "\"out_features\": 10, \"in_features\": 7");
  EXPECT_NE(error_of(twice).find("job.json:" + std::to_string(line_of(twice, "\"in_features\": 7", 1)) +
                                 ": model.layers[1].in_features: duplicate key"),
            std::string::npos)
      << error_of(twice);
  // At the top.
  twice = replace(kJob, "\"trainer\": {", "\"model\": {}, \"trainer\": {");
  EXPECT_NE(error_of(twice).find(": model: duplicate key, first given at line " +
                                 std::to_string(line_of(twice, "\"model\"", 1))),
            std::string::npos)
      << error_of(twice);
  // The same name in two objects is no duplicate.
  EXPECT_EQ(error_of(replace(kJob, "\"max_epochs\": 2", "\"max_epochs\": 2, \"callbacks\": [{\"type\": "
                                                           "\"EarlyStopping\", \"monitor\": \"val_loss\"}]")),
            "");
  // Spelled with an escape, still the same key: refused, with jansson's words.
  twice = replace(kJob, "\"max_epochs\": 2", "\"max_epochs\": 2, \"max_\\u0065pochs\": 3");
  EXPECT_NE(error_of(twice).find("job.json:" + std::to_string(line_of(twice, "max_\\u0065", 1)) + ": duplicate key"),
            std::string::npos)
      << error_of(twice);
}

TEST(JobDuplicates, TheCApiAndHpuTrainRefuseThemToo) {
  const std::string twice = replace(kJob, "\"max_epochs\": 2", "\"max_epochs\": 2, \"max_epochs\": 3");
  char *result = nullptr;
  EXPECT_EQ(hpuTrainerRunJob(twice.c_str(), "dup.json", &result), HPU_ERROR_CONFIG);
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("dup.json:" + std::to_string(line_of(twice, "max_epochs", 2)) +
                                                         ": trainer.max_epochs: duplicate key"),
            std::string::npos)
      << hpuGetLastErrorMessage();
  EXPECT_EQ(result, nullptr);
  TempDir dir;
  spit(dir / "dup.json", twice);
  const std::string cmd = std::string(HPU_TRAIN_EXE) + " " + (dir / "dup.json") + " --check >" + (dir / "out") + " 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
  EXPECT_NE(slurp(dir / "out").find("trainer.max_epochs: duplicate key"), std::string::npos) << slurp(dir / "out");
}

// A duplicate key makes jansson stop; the scanner that finds its line then
// reads the rest, which may be malformed. It must end on any text: a stray
// closing bracket inside an array once made it loop forever (the fuzz input
// tests/fuzz/corpus/train_job/timeout-duplicate-key-then-stray-brace.json).
TEST(JobDuplicates, MalformedTextAfterADuplicateKeyStillEnds) {
  const std::string dup = R"({"a": 1, "a": 2, )";
  for (const std::string &rest : {std::string("\"b\": [1}"), std::string("\"b\": [[}]"), std::string("\"b\": {]"),
                                   std::string("\"b\": [") + std::string(3000, '['), std::string("\"b\": [\0}", 8)}) {
    SCOPED_TRACE(rest.substr(0, 20));
    EXPECT_NE(error_of(dup + rest).find("duplicate key"), std::string::npos);
  }
  const std::string fuzz = slurp(HPU_SOURCE_DIR "/tests/fuzz/corpus/train_job/timeout-duplicate-key-then-stray-brace.json");
  EXPECT_NE(error_of(fuzz).find("duplicate key"), std::string::npos) << error_of(fuzz);
}
