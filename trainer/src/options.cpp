#include <hpu/trainer/options.hpp>

#include "error.hpp"
#include "option_fields.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

namespace hpu {

using detail::fail;

namespace {

int parse_devices(const Devices &d, int visible) {
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

// NODE_RANK as Lightning reads it, or a launcher's equivalent.
int node_rank_from_env() {
  for (const char *name : {"NODE_RANK", "GROUP_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_NODEID"}) {
    if (const char *v = std::getenv(name)) {
      char *end = nullptr;
      long r = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || r < 0)
        fail(HPU_ERROR_INVALID_ARGUMENT, "%s is \"%s\"; expected a number >= 0", name, v);
      return int(r);
    }
  }
  return 0;
}

// The number of processes a launcher started (HPU_WORLD_SIZE, torchrun's
// WORLD_SIZE, Open MPI's, Slurm's), else 0: the collectives read the same.
int processes_from_env() {
  for (const char *name : {"HPU_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}) {
    if (const char *v = std::getenv(name)) {
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || n < 1)
        fail(HPU_ERROR_INVALID_ARGUMENT, "%s is \"%s\"; expected a number >= 1", name, v);
      return int(n);
    }
  }
  return 0;
}

}  // namespace

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
  c.devices = parse_devices(o.devices, visible);
  c.num_nodes = o.num_nodes;
  c.node_rank = node_rank_from_env();
  // Under a launcher each process is a node of `devices` ranks (its exact rank
  // comes from the collectives when hpu_ddp starts).
  const int processes = processes_from_env();
  if (processes == 0 && c.node_rank >= c.num_nodes)
    fail(HPU_ERROR_INVALID_ARGUMENT, "NODE_RANK is %d, but num_nodes is %d", c.node_rank, c.num_nodes);
  c.world_size = std::max(processes, c.num_nodes) * c.devices;

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
