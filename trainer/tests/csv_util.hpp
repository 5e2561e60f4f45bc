// Reads the CSV logger's metrics.csv back, for tests that check what was
// logged under which step.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace trainer_test {

// The fields of one CSV line ("a,\"b,c\",d"; quotes doubled inside quotes).
inline std::vector<std::string> csv_fields(const std::string &line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// Parses a number as the loggers write it; fails the test unless the whole
// field is one.
inline double csv_number(const std::string &field) {
  char *end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  EXPECT_TRUE(!field.empty() && *end == '\0') << "not a number: \"" << field << "\"";
  return v;
}

// metrics.csv's rows by step: column -> value, the empty cells left out. Fails
// the test when a row's width differs from the header's or a step repeats.
inline std::map<int64_t, std::map<std::string, double>> csv_rows(const std::string &text) {
  std::map<int64_t, std::map<std::string, double>> rows;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) {
    ADD_FAILURE() << "empty metrics.csv";
    return rows;
  }
  const std::vector<std::string> header = csv_fields(line);
  EXPECT_EQ(header.at(0), "step");
  while (std::getline(in, line)) {
    const std::vector<std::string> f = csv_fields(line);
    EXPECT_EQ(f.size(), header.size()) << "row \"" << line << "\"";
    const int64_t step = std::strtoll(f.at(0).c_str(), nullptr, 10);
    EXPECT_EQ(rows.count(step), 0u) << "step " << step << " has two rows";
    auto &row = rows[step];
    for (size_t i = 1; i < f.size() && i < header.size(); ++i)
      if (!f[i].empty()) row[header[i]] = csv_number(f[i]);
  }
  return rows;
}

}  // namespace trainer_test
