// RAII and small helpers over jansson.
#pragma once

#include <hpu/hpu.h>
#include <jansson.h>

#include <memory>
#include <string>

namespace hpu::detail {

struct JsonDeleter {
  void operator()(json_t *j) const { json_decref(j); }
};
using Json = std::unique_ptr<json_t, JsonDeleter>;

// Parses text that must be a JSON object; hpu::Error (`status`) naming `what`.
Json parse_object(const std::string &text, const char *what, hpuStatus_t status);
std::string dump(const json_t *j, size_t flags);

}  // namespace hpu::detail
