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
[[noreturn]] void fail(hpuStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hpu::detail
