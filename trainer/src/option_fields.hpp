// The Trainer's options, one row each: the job key (trainer.<key>, Lightning's
// name), the TrainerOptions member, the hpu-train flag, the range and the help.
// This table drives the job reader and writer (job.cpp), the checks of
// resolve_options (options.cpp), hpu-train's flags and --help (cli.cpp); and
// trainer/tests/option_fields.cpp checks hpu-train(1) against it.
#pragma once

#include <hpu/trainer/options.hpp>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hpu::detail {

struct OptionField {
  // Which member, and so which kind of value. monostate: read and written by
  // job.cpp itself (callbacks, logger).
  using Member = std::variant<std::monostate, std::string TrainerOptions::*, Devices TrainerOptions::*,
                              int TrainerOptions::*, int64_t TrainerOptions::*, std::optional<int64_t> TrainerOptions::*,
                              std::optional<uint64_t> TrainerOptions::*, BatchCount TrainerOptions::*,
                              double TrainerOptions::*, bool TrainerOptions::*, MaxTime TrainerOptions::*,
                              FastDevRun TrainerOptions::*>;
  OptionField(const char *key, Member member, const char *flag, const char *metavar, const char *help,
              long double lo = 0, long double hi = 0, std::vector<const char *> choices = {})
      : key(key), member(member), flag(flag), metavar(metavar), help(help), lo(lo), hi(hi), choices(std::move(choices)) {}
  const char *key;
  Member member;
  const char *flag;      // "--gradient-clip-val"; nullptr: none
  const char *metavar;   // the flag's value in --help and hpu-train(1): "C"
  const char *help;      // one line
  long double lo, hi;                 // integers and numbers (a number must also be finite)
  std::vector<const char *> choices;  // strings; empty: any
};

// Every option, in the order a job is written.
const std::vector<OptionField> &trainer_option_fields();

// Throws hpu::Error (HPU_ERROR_INVALID_ARGUMENT) "<key> is <value>; expected
// <range>" (or "; accepted values: ...") when o's value is outside the field's
// range or choices.
void check_option(const OptionField &f, const TrainerOptions &o);

}  // namespace hpu::detail
