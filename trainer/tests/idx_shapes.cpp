// Data from files beyond Fashion-MNIST: IDX files of any rank and element
// type, .npy feature and label files (FileData), and the job's data section
// that names them; each refused input is an error naming the file or key.
#include <hpu/trainer.hpp>

#include "fit_util.hpp"
#include "job_util.hpp"
#include "npy.hpp"
#include "test_util.hpp"

#include <sys/wait.h>

#include <cmath>
#include <cstring>

using namespace trainer_test;

namespace {

// An IDX array of `type` and `shape` holding values[i % values.size()].
template <class T>
hpu::IdxArray idx_of(hpu::IdxType type, std::vector<uint32_t> shape, const std::vector<T> &values) {
  hpu::IdxArray a;
  a.type = type;
  a.shape = std::move(shape);
  a.data.resize(a.count() * sizeof(T));
  for (size_t i = 0; i < a.count(); ++i) std::memcpy(&a.data[i * sizeof(T)], &values[i % values.size()], sizeof(T));
  return a;
}

// Labels 0, 1, 2, 0, 1, 2, ... as IDX u8 [n].
void write_idx_labels(const std::string &path, uint32_t n) {
  hpu::write_idx(path, idx_of<uint8_t>(hpu::IdxType::u8, {n}, {0, 1, 2}), false);
}

const char *kModel = R"("model": {"layers": [{"type": "linear", "in_features": 16, "out_features": 4}]})";

std::string npy_job(const std::string &data) {
  return std::string("{") + kModel + ",\n\"data\": {\"name\": \"npy\",\n" + data + "}}";
}

}  // namespace

// Every element type IDX defines, in features of rank 1 to 4; the values
// come through as numbers, normalised as asked, flattened when asked.
TEST(IdxShapes, FeaturesOfAnyTypeAndRankLoad) {
  TempDir dir;
  write_idx_labels(dir / "y", 6);
  struct Case {
    hpu::IdxArray a;
    std::vector<double> expect;  // the first values, as numbers
  } cases[] = {
      {idx_of<uint8_t>(hpu::IdxType::u8, {6, 2, 3}, {0, 255, 7}), {0, 255, 7}},
      {idx_of<int8_t>(hpu::IdxType::i8, {6, 5}, {-128, 127, -1}), {-128, 127, -1}},
      {idx_of<int16_t>(hpu::IdxType::i16, {6, 2, 2, 2}, {-300, 30000, 5}), {-300, 30000, 5}},
      {idx_of<int32_t>(hpu::IdxType::i32, {6}, {-70000, 1 << 20, 3}), {-70000, 1 << 20, 3}},
      {idx_of<float>(hpu::IdxType::f32, {6, 3}, {0.5f, -2.25f, 1e-3f}), {0.5, -2.25, 1e-3}},
      {idx_of<double>(hpu::IdxType::f64, {6, 1, 4}, {0.125, -8, 3.5}), {0.125, -8, 3.5}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(int(c.a.type));
    hpu::write_idx(dir / "x.gz", c.a, true);
    const hpu::TensorDataset d = hpu::load_feature_files("idx", dir / "x.gz", dir / "y", {}, false);
    ASSERT_EQ(d.size(), 6u);
    std::vector<int64_t> sample(c.a.shape.begin() + 1, c.a.shape.end());
    if (sample.empty()) sample = {1};
    EXPECT_EQ(d.sample_shape(), sample);
    for (size_t i = 0; i < c.expect.size(); ++i) EXPECT_FLOAT_EQ(d.features()[i], float(c.expect[i]));
    EXPECT_EQ(d.labels(), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
    // (x * scale - mean) / std, and [N, prod] with flatten.
    const hpu::TensorDataset n = hpu::load_feature_files("idx", dir / "x.gz", dir / "y", {0.5, 1.0, 4.0}, true);
    EXPECT_EQ(n.sample_shape(), std::vector<int64_t>{int64_t(d.sample_numel())});
    for (size_t i = 0; i < c.expect.size(); ++i) EXPECT_FLOAT_EQ(n.features()[i], float((c.expect[i] * 0.5 - 1) / 4));
  }
}

TEST(IdxShapes, LabelsAndFeaturesThatDoNotFitAreErrorsNamingTheFiles) {
  TempDir dir;
  hpu::write_idx(dir / "x", idx_of<float>(hpu::IdxType::f32, {4, 3}, {1.0f}), false);
  write_idx_labels(dir / "y5", 5);
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x", dir / "y5", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   dir / "x" + " has 4 samples (shape [4, 3]) but " + dir / "y5" + " has 5 labels");
  hpu::write_idx(dir / "yf", idx_of<float>(hpu::IdxType::f32, {4}, {1.0f}), false);
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x", dir / "yf", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   dir / "yf" + ": labels must be integers of shape [N]; found f32 of shape [4]");
  hpu::write_idx(dir / "y2d", idx_of<uint8_t>(hpu::IdxType::u8, {4, 1}, {1}), false);
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x", dir / "y2d", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   "found u8 of shape [4, 1]");
  hpu::write_idx(dir / "yneg", idx_of<int16_t>(hpu::IdxType::i16, {4}, {0, 1, -3}), false);
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x", dir / "yneg", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   dir / "yneg" + ": label -3 at index 2 is not a class index");
  hpu::write_idx(dir / "x0", idx_of<float>(hpu::IdxType::f32, {4, 0}, {1.0f}), false);
  write_idx_labels(dir / "y4", 4);
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x0", dir / "y4", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   dir / "x0" + ": samples of shape [0] hold no values");
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "missing", dir / "y4", {}, false), HPU_ERROR_NOT_FOUND,
                   dir / "missing");
  // An .npy file where IDX is expected, and the other way round.
  hpu::write_npy(dir / "x.npy", {4, 3}, std::vector<float>(12, 1.0f));
  EXPECT_HPU_ERROR(hpu::load_feature_files("idx", dir / "x.npy", dir / "y4", {}, false), HPU_ERROR_IO,
                   dir / "x.npy" + ": not an IDX file");
  EXPECT_HPU_ERROR(hpu::load_feature_files("npy", dir / "x", dir / "y4", {}, false), HPU_ERROR_IO,
                   dir / "x" + ": not a .npy file");
  EXPECT_HPU_ERROR(hpu::load_feature_files("csv", dir / "x", dir / "y4", {}, false), HPU_ERROR_INVALID_ARGUMENT,
                   "format is \"csv\"; expected \"idx\" or \"npy\"");
}

TEST(FileData, SplitsChecksAndCountsClasses) {
  TempDir dir;
  const hpu::TensorDataset train = blobs(40, 1), other = blobs(12, 2);
  hpu::write_npy(dir / "tx.npy", {40, 16}, train.features());
  hpu::write_npy(dir / "ty.npy", {40}, train.labels());
  hpu::write_npy(dir / "vx.npy", {12, 4, 4}, other.features());  // the same values, another sample shape
  hpu::write_npy(dir / "vy.npy", {12}, std::vector<uint8_t>(other.labels().begin(), other.labels().end()));
  hpu::write_npy(dir / "ox.npy", {12, 16}, other.features());

  hpu::FileDataOptions o;
  o.train_features = dir / "tx.npy", o.train_labels = dir / "ty.npy";
  o.val_size = 8;
  hpu::FileData d(o, 4);
  d.setup();
  EXPECT_EQ(d.train_data().size(), 32u);
  EXPECT_EQ(d.val_data().size(), 8u);
  EXPECT_EQ(d.test_data().size(), 0u);
  EXPECT_EQ(d.num_classes(), 4);
  EXPECT_EQ(d.val_data().labels(), std::vector<int32_t>(train.labels().begin() + 32, train.labels().end()));
  EXPECT_EQ(d.train_data().sample_shape(), std::vector<int64_t>{16});

  // No val_size and no val files: no validation set.
  o.val_size = 0;
  hpu::FileData no_val(o, 4);
  no_val.setup();
  EXPECT_EQ(no_val.train_data().size(), 40u);
  EXPECT_EQ(no_val.val_data().size(), 0u);

  // Val and test files; num_classes given.
  o.val_size = 0;
  o.val_features = dir / "ox.npy", o.val_labels = dir / "vy.npy";
  o.test_features = dir / "ox.npy", o.test_labels = dir / "vy.npy";
  o.num_classes = 6;
  hpu::FileData e(o, 4);
  e.setup();
  EXPECT_EQ(e.train_data().size(), 40u);
  EXPECT_EQ(e.val_data().size(), 12u);
  EXPECT_EQ(e.test_data().size(), 12u);
  EXPECT_EQ(e.num_classes(), 6);

  auto error = [&](hpu::FileDataOptions bad, const std::string &needle) {
    hpu::FileData f(bad, 4);
    EXPECT_HPU_ERROR(f.setup(), HPU_ERROR_INVALID_ARGUMENT, needle);
  };
  hpu::FileDataOptions bad = o;
  bad.val_features = dir / "vx.npy";
  error(bad, dir / "vx.npy" + " has samples of shape [4, 4], but " + dir / "tx.npy" + " has [16]");
  bad = o, bad.num_classes = 3;
  error(bad, dir / "ty.npy" + ": label 3 at index ");
  bad = o, bad.val_size = 5;
  error(bad, "val_size is 5 beside val_features " + dir / "ox.npy" + "; give one or the other");
  bad = o, bad.val_labels.clear();
  error(bad, "val_features and val_labels go together; only val_features is set (" + dir / "ox.npy" + ")");
  bad = o, bad.val_features.clear(), bad.val_labels.clear(), bad.val_size = 40;
  error(bad, "val_size is 40; " + dir / "tx.npy" + " has only 40 samples");
  bad = o, bad.train_labels.clear();
  error(bad, "train_features and train_labels are required");
  bad = o, bad.normalize.std = 0;
  error(bad, "normalize std is 0; expected > 0");
}

TEST(DataSection, NamesFilesParsesAndServesBack) {
  const hpu::Job j = hpu::parse_job(npy_job(R"("train_features": "x.npy", "train_labels": "y.npy",
    "test_features": "tx.npy", "test_labels": "ty.npy",
    "normalize": {"scale": 0.5, "mean": 0.25, "std": 2}, "flatten": true, "num_classes": 4)"),
                                    "job.json");
  EXPECT_EQ(j.data.name, "npy");
  EXPECT_EQ(j.data.root, "");     // relative names from the current folder
  EXPECT_EQ(j.data.val_size, 0);  // no validation set unless asked
  EXPECT_EQ(j.data.files.train_features, "x.npy");
  EXPECT_EQ(j.data.files.test_labels, "ty.npy");
  EXPECT_TRUE(j.data.files.val_features.empty());
  EXPECT_DOUBLE_EQ(j.data.files.normalize.scale, 0.5);
  EXPECT_DOUBLE_EQ(j.data.files.normalize.mean, 0.25);
  EXPECT_DOUBLE_EQ(j.data.files.normalize.std, 2);
  EXPECT_TRUE(j.data.files.flatten);
  EXPECT_EQ(j.data.files.num_classes, 4);
  const std::string json = hpu::job_to_json(j);
  const hpu::Job again = hpu::parse_job(json, "again");
  EXPECT_EQ(hpu::job_to_json(again), json);
  EXPECT_EQ(again.data.files.test_features, "tx.npy");
  EXPECT_DOUBLE_EQ(again.data.files.normalize.mean, 0.25);
  EXPECT_NE(json.find("\"flatten\": true"), std::string::npos) << json;
  // Fashion-MNIST's section is written as before, without the files' keys.
  const std::string fashion = hpu::job_to_json(hpu::parse_job(std::string("{") + R"("model": {"layers": [
    {"type": "flatten"}, {"type": "linear", "in_features": 784, "out_features": 10}]}})", "f.json"));
  EXPECT_EQ(fashion.find("normalize"), std::string::npos) << fashion;
  EXPECT_NE(fashion.find("\"val_size\": 5000"), std::string::npos) << fashion;
}

TEST(DataSection, BadKeysNameThePathAndValue) {
  const std::string files = R"("train_features": "x.npy", "train_labels": "y.npy")";
  EXPECT_EQ(job_error(npy_job(R"("train_features": "x.npy")")),
            "job.json:2: data: missing key \"train_labels\" (npy data)");
  EXPECT_EQ(job_error(npy_job(files + R"(, "val_features": "vx.npy")")),
            "job.json:3: data.val_features: val_features and val_labels go together; give both or neither");
  EXPECT_EQ(job_error(npy_job(files + R"(, "test_labels": "ty.npy")")),
            "job.json:3: data.test_labels: test_features and test_labels go together; give both or neither");
  EXPECT_EQ(job_error(npy_job(files + R"(, "val_features": "a", "val_labels": "b", "val_size": 10)")),
            "job.json:3: data.val_size: 10 beside val_features; the validation set comes from one or the other");
  EXPECT_EQ(job_error(npy_job(files + R"(, "normalize": {"std": 0})")),
            "job.json:3: data.normalize.std: 0 is out of range [1e-30, 1e+30]");
  EXPECT_EQ(job_error(npy_job(files + R"(, "normalize": {"scal": 0.5})")),
            "job.json:3: data.normalize.scal: unknown key; known keys: mean, scale, std");
  EXPECT_EQ(job_error(npy_job(files + R"(, "flatten": "yes")")),
            "job.json:3: data.flatten: expected true or false, found a string");
  EXPECT_EQ(job_error(npy_job(files + R"(, "num_classes": -1)")),
            "job.json:3: data.num_classes: -1 is out of range [0, 2147483647]");
  EXPECT_EQ(job_error(std::string("{") + kModel + R"(, "data": {"name": "csv"}})"),
            "job.json:1: data.name: \"csv\" is not one of \"fashion_mnist\", \"idx\", \"npy\"");
  EXPECT_EQ(job_error(std::string("{") + kModel + ",\n" + R"("data": {"train_features": "x.npy"}})"),
            "job.json:2: data.train_features: only for \"idx\" and \"npy\" data (data.name)");
}

// hpu-train runs a job on IDX files of images [N, 4, 4] (i16, scaled and
// flattened by the data section) and on .npy files, from the command line,
// and its test set's accuracy shows it learned.
TEST(DataSection, HpuTrainTrainsOnIdxAndNpyFiles) {
  TempDir dir;
  const hpu::TensorDataset train = blobs(128, 1), val = blobs(32, 2);
  auto as_i16 = [](const hpu::TensorDataset &d) {
    std::vector<int16_t> v;
    for (float f : d.features()) v.push_back(int16_t(std::lround(f * 1000)));
    return idx_of<int16_t>(hpu::IdxType::i16, {uint32_t(d.size()), 4, 4}, v);
  };
  auto labels = [](const hpu::TensorDataset &d) {
    return idx_of<int32_t>(hpu::IdxType::i32, {uint32_t(d.size())}, d.labels());
  };
  hpu::write_idx(dir / "train-x.gz", as_i16(train), true);
  hpu::write_idx(dir / "train-y", labels(train), false);
  hpu::write_idx(dir / "val-x", as_i16(val), false);
  hpu::write_idx(dir / "val-y", labels(val), false);
  hpu::write_npy(dir / "train_x.npy", {128, 16}, train.features());
  hpu::write_npy(dir / "train_y.npy", {128}, train.labels());
  hpu::write_npy(dir / "test_x.npy", {32, 16}, val.features());
  hpu::write_npy(dir / "test_y.npy", {32}, val.labels());
  const std::string trainer = R"("optimizer": {"name": "adamw", "lr": 0.02},
    "trainer": {"devices": 1, "max_epochs": 4, "logger": false, "seed": 1,
      "enable_checkpointing": false, "enable_progress_bar": false})";
  spit(dir / "idx.json", R"({"model": {"layers": [{"type": "linear", "in_features": 16, "out_features": 16},
      {"type": "residual", "layers": [{"type": "tanh"}, {"type": "linear", "in_features": 16, "out_features": 16}]},
      {"type": "linear", "in_features": 16, "out_features": 4}]},
    "data": {"name": "idx", "root": ")" + dir.path() + R"(", "train_features": "train-x.gz",
      "train_labels": "train-y", "val_features": "val-x", "val_labels": "val-y", "test_features": "val-x",
      "test_labels": "val-y", "batch_size": 16,
      "normalize": {"scale": 0.001}, "flatten": true},
    )" + trainer + "}");
  spit(dir / "npy.json", R"({"model": {"layers": [{"type": "linear", "in_features": 16, "out_features": 4}]},
    "data": {"name": "npy", "train_features": "train_x.npy", "train_labels": "train_y.npy", "val_size": 32,
      "test_features": "test_x.npy", "test_labels": "test_y.npy", "batch_size": 16},
    )" + trainer + "}");
  for (const char *job : {"idx.json", "npy.json"}) {
    SCOPED_TRACE(job);
    // Relative names: under data.root when set, else from the current folder.
    const std::string cmd = "cd " + dir.path() + " && " + HPU_TRAIN_EXE + " " + job + " >out 2>&1";
    const int st = std::system(cmd.c_str());
    const std::string out = slurp(dir / "out");
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
    const size_t at = out.find("test_acc ");
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_GT(std::stod(out.substr(at + 9)), 0.8) << out;
  }
  // --check prints the data section with its defaults.
  const std::string cmd = "cd " + dir.path() + " && " + HPU_TRAIN_EXE + " npy.json --check >out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "out");
  const std::string out = slurp(dir / "out");
  EXPECT_NE(out.find("\"normalize\": {"), std::string::npos) << out;
  EXPECT_NE(out.find("\"num_classes\": 0"), std::string::npos) << out;
}
