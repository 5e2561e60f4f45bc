#include "option_fields.hpp"

#include "error.hpp"

#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

namespace hpu::detail {

namespace {

using O = TrainerOptions;
using F = OptionField;

constexpr long double kInt = INT32_MAX, kInt64 = INT64_MAX, kUint64 = UINT64_MAX, kFinite = DBL_MAX;

const std::vector<OptionField> kFields = {
    F{"accelerator", &O::accelerator, "--accelerator", "A", "hpu | auto", 0, 0, {"hpu", "auto"}},
    F{"devices", &O::devices, "--devices", "N", "devices per process: N | auto"},
    F{"strategy", &O::strategy, "--strategy", "S", "auto | hpu_single | hpu_ddp", 0, 0,
      {"auto", "hpu_single", "hpu_ddp"}},
    F{"precision", &O::precision, "--precision", "P", "32-true | bf16-mixed", 0, 0, {"32-true", "bf16-mixed"}},
    F{"profiler", &O::profiler, "--profiler", "hpu", "hpu: a trace per fit and its summary", 0, 0, {"", "hpu"}},
    F{"num_nodes", &O::num_nodes, "--num-nodes", "N", "number of nodes", 1, kInt},
    F{"max_epochs", &O::max_epochs, "--max-epochs", "E", "epochs (-1: no limit)", -1, kInt64},
    F{"max_steps", &O::max_steps, "--max-steps", "S", "steps (-1: no limit)", -1, kInt64},
    F{"min_epochs", &O::min_epochs, "--min-epochs", "E", "epochs to train before a stop", 0, kInt64},
    F{"max_time", &O::max_time, "--max-time", "T", "stop after T: DD:HH:MM:SS or seconds"},
    F{"fast_dev_run", &O::fast_dev_run, "--fast-dev-run", "N", "true or N: N batches per loop, nothing saved"},
    F{"num_sanity_val_steps", &O::num_sanity_val_steps, "--num-sanity-val-steps", "N",
      "validation batches before training (-1: all)", -1, kInt},
    F{"limit_train_batches", &O::limit_train_batches, "--limit-train-batches", "L", "N batches or a fraction"},
    F{"limit_val_batches", &O::limit_val_batches, "--limit-val-batches", "L", "N batches or a fraction"},
    F{"limit_test_batches", &O::limit_test_batches, "--limit-test-batches", "L", "N batches or a fraction"},
    F{"limit_predict_batches", &O::limit_predict_batches, "--limit-predict-batches", "L", "N batches or a fraction"},
    F{"val_check_interval", &O::val_check_interval, "--val-check-interval", "V",
      "N batches or a fraction of an epoch"},
    F{"check_val_every_n_epoch", &O::check_val_every_n_epoch, nullptr, nullptr, "validate every N epochs", 1, kInt},
    F{"log_every_n_steps", &O::log_every_n_steps, "--log-every-n-steps", "N", "log every N steps", 1, kInt},
    F{"accumulate_grad_batches", &O::accumulate_grad_batches, "--accumulate-grad-batches", "N",
      "batches per optimizer step", 1, kInt},
    F{"gradient_clip_val", &O::gradient_clip_val, "--gradient-clip-val", "C", "max gradient norm (0: off)", 0,
      kFinite},
    F{"seed", &O::seed, "--seed", "S", "random seed (null: a random one, logged)", 0, kUint64},
    F{"default_root_dir", &O::default_root_dir, "--default-root-dir", "DIR", "DIR for logs and checkpoints"},
    F{"callbacks", std::monostate{}, nullptr, nullptr, "callbacks by type and options"},
    F{"logger", std::monostate{}, nullptr, nullptr, "true, false, \"csv\", \"jsonl\" or an array of them"},
    F{"enable_progress_bar", &O::enable_progress_bar, nullptr, nullptr, "show the progress bar"},
    F{"enable_checkpointing", &O::enable_checkpointing, nullptr, nullptr, "save checkpoints"},
    F{"enable_model_summary", &O::enable_model_summary, nullptr, nullptr, "print the model summary"},
};

std::string range_text(const OptionField &f, bool integer) {
  if (!integer) return f.hi == kFinite ? format("a finite value >= %g", double(f.lo))
                                       : format("a value in [%g, %g]", double(f.lo), double(f.hi));
  if (f.hi == kInt || f.hi == kInt64 || f.hi == kUint64) return format(">= %.0Lf", f.lo);
  return format("%.0Lf to %.0Lf", f.lo, f.hi);
}

void check_integer(const OptionField &f, long double v) {
  if (v < f.lo || v > f.hi)
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %.0Lf; expected %s", f.key, v, range_text(f, true).c_str());
}

void check_count(const char *name, const BatchCount &c) {
  if (c.fraction) {
    double f = *c.fraction;
    if (!(f >= 0.0 && f <= 1.0))
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %g; a fraction must be in [0, 1] (or give a number of batches)", name, f);
  } else if (c.batches < 0) {
    fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %lld; expected >= 0 batches", name, (long long)c.batches);
  }
}

}  // namespace

const std::vector<OptionField> &trainer_option_fields() { return kFields; }

void check_option(const OptionField &f, const TrainerOptions &o) {
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, std::string O::*>) {
          if (f.choices.empty()) return;
          std::string list;
          for (const char *c : f.choices) {
            if (o.*m == c) return;
            list += std::string(list.empty() ? "" : ", ") + "\"" + c + "\"";
          }
          fail(HPU_ERROR_INVALID_ARGUMENT, "%s is \"%s\"; accepted values: %s", f.key, (o.*m).c_str(), list.c_str());
        } else if constexpr (std::is_same_v<M, int O::*> || std::is_same_v<M, int64_t O::*>) {
          check_integer(f, o.*m);
        } else if constexpr (std::is_same_v<M, std::optional<int64_t> O::*> ||
                             std::is_same_v<M, std::optional<uint64_t> O::*>) {
          if (o.*m) check_integer(f, *(o.*m));
        } else if constexpr (std::is_same_v<M, double O::*>) {
          double v = o.*m;
          if (!(v >= f.lo && v <= f.hi))
            fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %g; expected %s", f.key, v, range_text(f, false).c_str());
        } else if constexpr (std::is_same_v<M, BatchCount O::*>) {
          check_count(f.key, o.*m);
        } else if constexpr (std::is_same_v<M, MaxTime O::*>) {
          max_time_seconds(o.*m);
        } else if constexpr (std::is_same_v<M, FastDevRun O::*>) {
          if ((o.*m).batches < 0)
            fail(HPU_ERROR_INVALID_ARGUMENT, "%s is %lld; expected true, false or a number of batches >= 0", f.key,
                 (long long)(o.*m).batches);
        }
      },
      f.member);
}

}  // namespace hpu::detail

namespace hpu {

std::optional<double> max_time_seconds(const MaxTime &t) {
  if (t.text.empty()) {
    if (t.seconds && !(*t.seconds >= 0 && std::isfinite(*t.seconds)))
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "max_time is %g seconds; expected a finite duration >= 0", *t.seconds);
    return t.seconds;
  }
  // Lightning's "DD:HH:MM:SS": four fields, the last may have a fraction.
  double parts[4];
  const char *p = t.text.c_str();
  for (int i = 0; i < 4; ++i) {
    char *end = nullptr;
    parts[i] = std::strtod(p, &end);
    const bool whole = i == 3 || std::floor(parts[i]) == parts[i];
    const bool sep = i < 3 ? *end == ':' : *end == '\0';
    if (end == p || !sep || !(parts[i] >= 0) || !std::isfinite(parts[i]) || !whole || !std::isdigit((unsigned char)*p))
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "max_time is \"%s\"; expected \"DD:HH:MM:SS\" (days, hours, minutes, "
                   "seconds) or a number of seconds", t.text.c_str());
    p = end + 1;
  }
  return ((parts[0] * 24 + parts[1]) * 60 + parts[2]) * 60 + parts[3];
}

}  // namespace hpu
