// Autocast: the per-thread region stack, the three process-wide op lists and
// the decision an op takes on the enqueuing thread.
#pragma once

#include <hpu/autocast.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace hpu {
struct Config;
}

namespace hpu::autocast {

// ---- per-thread regions (state.cpp) ----------------------------------------
struct State {
  bool enabled = false;
  hpuDataType_t dtype = HPU_BFLOAT16;
};

void push(bool enabled, hpuDataType_t dtype);
void pop();          // HPU_ERROR_INVALID_USAGE on an empty stack
State current();     // the calling thread's innermost region

// ---- op lists (op_lists.cpp) -----------------------------------------------
enum class Policy { none, lower_precision, fp32, promote };

// Habana's defaults (bridge 1.19.0): 27 lower-precision, 49 fp32, 12 promote.
const std::vector<std::string> &default_list(hpuAutocastList_t which);

// Every op name libhpu knows: the default lists plus the ops it implements.
const std::vector<std::string> &known_ops();
// The known op nearest to `name` (prefixes first, then edit distance).
std::string nearest_known(const std::string &name);

// Replaces one list (process-wide); unknown names are logged with the nearest
// known one. `source` names where the list came from, for the log.
void set_list(hpuAutocastList_t which, std::vector<std::string> names, const char *source);
std::vector<std::string> get_list(hpuAutocastList_t which);  // sorted
void reset_lists();  // back to the defaults

// Which list an op's forward name is in, by precedence lower > fp32 > promote.
Policy policy_of(const char *op);

// Reads one list file: one name a line, whitespace trimmed, '#' starts a
// comment. Throws HPU_ERROR_CONFIG naming the variable, path and system error.
std::vector<std::string> read_list_file(const char *variable, const char *path);

// Applies the configuration's list files (PT_HPU_AUTOCAST_*_OPS_LIST, or the
// older LOWER_LIST / FP32_LIST: core/config.cpp chooses).
void load_list_overrides(const Config &c);

// ---- the decision (decide.cpp) ---------------------------------------------
// True for the types autocast casts: f16, bf16, f32 (f64 and integers never).
bool castable(hpuDataType_t t);
// The wider of two floating types (f16 with bf16 gives f32).
hpuDataType_t wider(hpuDataType_t a, hpuDataType_t b);

// Where op's floating inputs run, decided on the calling thread at enqueue.
struct Decision {
  Policy policy = Policy::none;  // the list that applied; none when disabled
  bool cast = false;             // floating inputs are cast to `dtype`
  bool first_arg_only = false;   // lower_first_arg ops: only the first input
  hpuDataType_t dtype = HPU_FLOAT32;

  // The type an input of type `t` runs in (the `index`-th tensor input).
  hpuDataType_t apply(hpuDataType_t t, int index = 0) const {
    return cast && castable(t) && (index == 0 || !first_arg_only) ? dtype : t;
  }
};

// op: the forward's ATen base name; inputs: dtypes of its tensor inputs
// (non-castable ones are ignored).
Decision decide(const char *op, const hpuDataType_t *inputs, size_t count);
inline Decision decide(const char *op, std::initializer_list<hpuDataType_t> inputs) {
  return decide(op, inputs.begin(), inputs.size());
}

}  // namespace hpu::autocast
