#include "json.hpp"

#include "error.hpp"

#include <cstdlib>

namespace hpu::detail {

Json parse_object(const std::string &text, const char *what, hpuStatus_t status) {
  json_error_t err;
  Json j(json_loadb(text.data(), text.size(), 0, &err));
  if (!j) fail(status, "%s: line %d: %s", what, err.line, err.text);
  if (!json_is_object(j.get())) fail(status, "%s: expected a JSON object", what);
  return j;
}

std::string dump(const json_t *j, size_t flags) {
  char *s = json_dumps(j, flags);
  if (!s) fail(HPU_ERROR_OUT_OF_MEMORY, "cannot encode JSON");
  std::string out(s);
  std::free(s);
  return out;
}

}  // namespace hpu::detail
