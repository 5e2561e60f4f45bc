// The file loggers write numbers that read back as the values logged:
// integers (memory figures, counts) in full digits, other values exactly.
#include <hpu/trainer.hpp>

#include "csv_util.hpp"
#include "test_util.hpp"

#include <jansson.h>

#include <cmath>
#include <sstream>

using namespace trainer_test;

namespace {

// Values a run logs: a 96 GiB Limit (103079215104, once written 1.03079215e+11),
// byte counts, a float32 loss widened to double, rates, extremes.
const std::map<std::string, double> kValues = {
    {"Limit", 103079215104.0},
    {"InUse", 5120.0},
    {"big_count", 9007199254740993.0 - 1},  // 2^53
    {"negative", -7.0},
    {"loss", double(0.2345678f)},
    {"third", 1.0 / 3.0},
    {"lr", 1e-5},
    {"tiny", 4.9406564584124654e-324},
    {"huge", 1.7976931348623157e308},
    {"tenth", 0.1},
};

bool integral(double v) { return v == std::trunc(v) && std::fabs(v) < 0x1p63; }

}  // namespace

TEST(LoggerNumbers, CsvReadsBackExactlyWithIntegersInFull) {
  TempDir dir;
  std::string csv_path;
  {
    hpu::CSVLogger log(dir.path(), "n");
    log.log_metrics(kValues, 3);
    log.log_metrics({{"nan", NAN}, {"inf", INFINITY}}, 4);
    log.finalize();
    csv_path = log.metrics_path();
  }
  const std::string text = slurp(csv_path);
  const auto rows = csv_rows(text);
  ASSERT_EQ(rows.count(3), 1u) << text;
  for (const auto &[k, v] : kValues) {
    ASSERT_EQ(rows.at(3).count(k), 1u) << k;
    EXPECT_EQ(rows.at(3).at(k), v) << k << " in\n" << text;
  }
  EXPECT_TRUE(std::isnan(rows.at(4).at("nan")));
  EXPECT_EQ(rows.at(4).at("inf"), INFINITY);
  // Integers are written as integers.
  std::istringstream in(text);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const auto names = csv_fields(header), fields = csv_fields(row);
  for (size_t i = 1; i < names.size(); ++i) {
    auto it = kValues.find(names[i]);
    if (it != kValues.end() && integral(it->second)) {
      EXPECT_EQ(fields[i], std::to_string(static_cast<long long>(it->second))) << names[i];
    }
  }
}

TEST(LoggerNumbers, JsonLinesReadBackExactlyWithIntegersAsJsonIntegers) {
  TempDir dir;
  hpu::JsonLinesLogger log(dir.path(), "n");
  log.log_metrics(kValues, 3);
  log.log_metrics({{"nan", NAN}, {"quote\"d", 1.5}}, 4);
  std::istringstream in(slurp(log.metrics_path()));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  json_error_t err;
  json_t *o = json_loads(line.c_str(), JSON_REJECT_DUPLICATES, &err);
  ASSERT_NE(o, nullptr) << err.text << " in " << line;
  EXPECT_EQ(json_integer_value(json_object_get(o, "step")), 3);
  for (const auto &[k, v] : kValues) {
    json_t *j = json_object_get(o, k.c_str());
    ASSERT_NE(j, nullptr) << k;
    EXPECT_EQ(json_number_value(j), v) << k << " in " << line;
    if (integral(v)) {
      EXPECT_TRUE(json_is_integer(j)) << k << " in " << line;
    }
  }
  json_decref(o);
  ASSERT_TRUE(std::getline(in, line));
  o = json_loads(line.c_str(), 0, &err);
  ASSERT_NE(o, nullptr) << err.text << " in " << line;
  EXPECT_TRUE(json_is_null(json_object_get(o, "nan")));
  EXPECT_EQ(json_number_value(json_object_get(o, "quote\"d")), 1.5);
  json_decref(o);
}
