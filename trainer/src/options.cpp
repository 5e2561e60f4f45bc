#include <hpu/trainer/options.hpp>

#include "error.hpp"
#include "option_fields.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

namespace hpu {

using detail::fail;

namespace {

// The ranks a launcher started, by the first of its variables that is set:
// WORLD_SIZE counts ranks (as Lightning and torchrun mean it, and the
// collectives read it); Open MPI and Slurm count processes, each of `devices`
// ranks. HPU_WORLD_SIZE is the collectives' own (from the environment or the
// configuration file): the trainer checks the group they make instead.
struct LaunchedRanks {
  const char *name = nullptr;  // nullptr: no launcher variable
  int value = 0;
  int ranks = 0;
};

LaunchedRanks launched_ranks(int devices) {
  for (const char *name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}) {
    const char *v = std::getenv(name);
    if (!v || *v == '\0') continue;
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > (1 << 20))
      fail(HPU_ERROR_INVALID_ARGUMENT, "%s is \"%s\"; expected a number >= 1", name, v);
    const bool counts_ranks = std::string(name) == "WORLD_SIZE";
    return {name, int(n), counts_ranks ? int(n) : int(n) * devices};
  }
  return {};
}

}  // namespace

int resolve_devices(const Devices &d, int visible) {
  int n = d.count;
  if (!d.text.empty()) {
    if (d.text == "auto") return visible;
    char *end = nullptr;
    long v = std::strtol(d.text.c_str(), &end, 10);
    if (*end != '\0' || end == d.text.c_str())
      fail(HPU_ERROR_INVALID_ARGUMENT, "devices is \"%s\"; expected a number or \"auto\"", d.text.c_str());
    n = int(v);
  }
  if (n == -1) return visible;
  if (n < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "devices is %d; expected >= 1, -1 or \"auto\"", n);
  if (n > visible)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "devices is %d, but only %d HPUs are visible (see HPU_NUM_DEVICES and HPU_VISIBLE_DEVICES)", n, visible);
  return n;
}

int64_t limit_batches(const BatchCount &limit, int64_t total) {
  if (!limit.fraction) return std::min(limit.batches, total);
  double f = *limit.fraction;
  int64_t n = int64_t(std::floor(double(total) * f));
  if (n == 0 && f > 0.0 && total > 0) n = 1;
  return n;
}

TrainerConfig resolve_options(const TrainerOptions &o, int visible) {
  TrainerConfig c;
  // Each option's range and accepted values (option_fields.cpp), in the
  // table's order; then the rules between options and the "auto" choices.
  for (const detail::OptionField &f : detail::trainer_option_fields()) detail::check_option(f, o);
  c.accelerator = "hpu";
  if (visible < 1) fail(HPU_ERROR_INVALID_ARGUMENT, "no HPUs are visible (HPU_NUM_DEVICES, HPU_VISIBLE_DEVICES)");
  c.devices = resolve_devices(o.devices, visible);
  c.num_nodes = o.num_nodes;
  // (Clamped: the job reader checks the options against INT_MAX / 2 devices.)
  c.world_size = int(std::min<int64_t>(int64_t(c.num_nodes) * c.devices, INT_MAX));
  // Each process is a node of `devices` ranks: a launcher starts num_nodes of
  // them. Its count must agree before the processes wait for each other.
  const LaunchedRanks l = launched_ranks(c.devices);
  if (l.name && l.ranks != c.world_size) {
    const std::string counted =
        l.ranks == l.value ? "" : detail::format(" processes of %d devices, %d ranks", c.devices, l.ranks);
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "%s is %d%s, but num_nodes x devices is %d x %d = %d; start num_nodes processes of `devices` devices each "
         "(WORLD_SIZE counts ranks, as in Lightning: num_nodes x devices)",
         l.name, l.value, counted.c_str(), c.num_nodes, c.devices, c.world_size);
  }

  if (o.strategy == "hpu_single" && c.world_size > 1)
    fail(HPU_ERROR_INVALID_ARGUMENT,
         "strategy is \"hpu_single\", but devices x num_nodes is %d; use \"hpu_ddp\" or \"auto\"", c.world_size);
  if (o.strategy == "auto") c.strategy = c.world_size > 1 ? "hpu_ddp" : "hpu_single";
  else c.strategy = o.strategy;
  c.precision = o.precision;
  c.max_steps = o.max_steps;
  c.max_epochs = o.max_epochs ? *o.max_epochs : o.max_steps == -1 ? 1000 : -1;
  c.max_time = max_time_seconds(o.max_time);
  if (!o.val_check_interval.fraction && o.val_check_interval.batches == 0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "val_check_interval is 0; expected a fraction in (0, 1] or >= 1 batches");
  if (o.val_check_interval.fraction && *o.val_check_interval.fraction == 0.0)
    fail(HPU_ERROR_INVALID_ARGUMENT, "val_check_interval is 0.0; expected a fraction in (0, 1] or >= 1 batches");
  if (o.seed) {
    c.seed = *o.seed;
  } else {
    std::random_device rd;
    c.seed = (uint64_t(rd()) << 32) ^ rd();
  }
  c.default_root_dir = o.default_root_dir.empty() ? "." : o.default_root_dir;
  c.profiler = o.profiler;
  return c;
}

}  // namespace hpu
