// Throwing hpu::Error with a printf-style message.
#pragma once

#include <hpu/hpu.hpp>

#include <cstdarg>
#include <string>

namespace hpu::detail {

std::string vformat(const char *fmt, va_list ap);
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fail(hpuStatus_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hpu::detail
