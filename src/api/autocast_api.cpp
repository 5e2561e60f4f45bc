// Autocast at the C boundary: checks the arguments, then autocast/ does the work.
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/api.hpp"
#include "autocast/autocast.hpp"

using namespace hpu;

namespace {

hpuAutocastList_t checked_list(hpuAutocastList_t which) {
  HPU_CHECK_ARG(which == HPU_AUTOCAST_LOWER_PRECISION || which == HPU_AUTOCAST_FP32 || which == HPU_AUTOCAST_PROMOTE,
                "which %d is not an hpuAutocastList_t (HPU_AUTOCAST_LOWER_PRECISION, HPU_AUTOCAST_FP32 or "
                "HPU_AUTOCAST_PROMOTE)",
                static_cast<int>(which));
  return which;
}

}  // namespace

extern "C" {

HPU_API hpuStatus_t hpuAutocastPush(int enabled, hpuDataType_t dtype) {
  HPU_API_BEGIN
    HPU_CHECK_ARG(dtype == HPU_BFLOAT16 || dtype == HPU_FLOAT16,
                  "dtype %d is not a lower-precision type (HPU_BFLOAT16 = %d or HPU_FLOAT16 = %d)",
                  static_cast<int>(dtype), HPU_BFLOAT16, HPU_FLOAT16);
    autocast::push(enabled != 0, dtype);
  HPU_API_END
}

HPU_API hpuStatus_t hpuAutocastPop(void) {
  HPU_API_BEGIN
    autocast::pop();
  HPU_API_END
}

HPU_API hpuStatus_t hpuAutocastGetState(int *enabled, hpuDataType_t *dtype) {
  HPU_API_BEGIN
    autocast::State s = autocast::current();
    if (enabled) *enabled = s.enabled ? 1 : 0;
    if (dtype) *dtype = s.dtype;
  HPU_API_END
}

HPU_API hpuStatus_t hpuAutocastSetOpList(hpuAutocastList_t which, const char *const *names, size_t count) {
  HPU_API_BEGIN
    checked_list(which);
    HPU_CHECK_ARG(names != nullptr || count == 0, "names is NULL and count is %zu", count);
    HPU_CHECK_ARG(count <= (size_t(1) << 20), "count %zu is more than 1048576 op names", count);
    std::vector<std::string> list;
    list.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      HPU_CHECK_ARG(names[i] != nullptr, "names[%zu] is NULL", i);
      HPU_CHECK_ARG(names[i][0] != '\0', "names[%zu] is an empty string", i);
      list.emplace_back(names[i]);
    }
    autocast::set_list(which, std::move(list), "hpuAutocastSetOpList");
  HPU_API_END
}

HPU_API hpuStatus_t hpuAutocastGetOpList(hpuAutocastList_t which, char **names) {
  HPU_API_BEGIN
    checked_list(which);
    HPU_CHECK_ARG(names != nullptr, "names is NULL");
    std::string text;
    for (const std::string &n : autocast::get_list(which)) text += n + "\n";
    *names = api::c_string(text);
  HPU_API_END
}

HPU_API hpuStatus_t hpuAutocastGetOpDtype(const char *op, const hpuDataType_t *inputs, size_t count,
                                          hpuDataType_t *dtype) {
  HPU_API_BEGIN
    HPU_CHECK_ARG(op != nullptr, "op is NULL");
    HPU_CHECK_ARG(op[0] != '\0', "op is an empty string");
    HPU_CHECK_ARG(inputs != nullptr, "inputs is NULL");
    HPU_CHECK_ARG(count >= 1 && count <= 16, "count %zu is not in 1..16", count);
    HPU_CHECK_ARG(dtype != nullptr, "dtype is NULL");
    for (size_t i = 0; i < count; ++i)
      HPU_CHECK_ARG(static_cast<unsigned>(inputs[i]) < HPU_NUM_DATA_TYPES, "inputs[%zu] %d is not an hpuDataType_t",
                    i, static_cast<int>(inputs[i]));
    autocast::Decision d = autocast::decide(op, inputs, count);
    *dtype = d.apply(inputs[0]);
  HPU_API_END
}

}  // extern "C"
