// Throwing hpu::Error with a printf-style message.
#pragma once

#include <hpu/hpu.hpp>

#include <cstdarg>
#include <cstdint>
#include <string>
#include <vector>

namespace hpu::detail {

std::string vformat(const char *fmt, va_list ap);
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// "[2, 3]": a shape for messages.
std::string shape_text(const std::vector<int64_t> &shape);
// `v` as text that parses back to it: "nan", "inf", integers in full digits,
// other values in the shortest form that reads back as the same double, or,
// with `as_float` and a value a float holds exactly, as the same float.
std::string number_text(double v, bool as_float = false);
// A CSV field: `s` itself, or quoted (quotes doubled) when it holds a comma,
// a quote or a line break.
std::string csv_field(const std::string &s);
[[noreturn]] void fail(hpuStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hpu::detail
