// The settings in use, at the C boundary.
#include "api/api.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"

#include <cstring>

using namespace hpu;

extern "C" {

HPU_API hpuStatus_t hpuConfigGet(const char *name, char **value, char **source) {
  HPU_API_BEGIN
  HPU_CHECK_ARG(name != nullptr, "name is NULL");
  HPU_CHECK_ARG(value != nullptr, "value is NULL");
  const Setting *s = find_setting(name);
  if (!s) fail(HPU_ERROR_NOT_FOUND, "name \"%s\" is not a libhpu setting (hpu(7), ENVIRONMENT, lists them)", name);
  if (std::strcmp(s->type, "removed") == 0) fail(HPU_ERROR_INVALID_ARGUMENT, "name \"%s\": %s", name, s->range);
  // Settings read at each use are read again now, as their next use will.
  const Config c = s->read_at == ReadAt::use ? config_now() : config();
  auto it = c.given.find(s->variable);
  const bool given = it != c.given.end();
  char *text = api::c_string(given ? it->second.first : s->fallback);
  if (source) {
    try {
      *source = api::c_string(given ? it->second.second : "default");
    } catch (...) {
      std::free(text);
      throw;
    }
  }
  *value = text;
  HPU_API_END
}

}  // extern "C"
