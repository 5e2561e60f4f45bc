// hpu-train's command line.
#include <hpu/trainer/job.hpp>

#include "error.hpp"

#include <cstring>

namespace hpu {

namespace {

struct Flag {
  const char *name;
  const char *key;  // the job key it overrides
  const char *help;
};

constexpr Flag kFlags[] = {
    {"--accelerator", "trainer.accelerator", "hpu | auto"},
    {"--devices", "trainer.devices", "devices per process: N | auto"},
    {"--strategy", "trainer.strategy", "auto | hpu_single | hpu_ddp"},
    {"--precision", "trainer.precision", "32-true | bf16-mixed"},
    {"--profiler", "trainer.profiler", "hpu: a trace per fit and its summary"},
    {"--num-nodes", "trainer.num_nodes", "N"},
    {"--max-epochs", "trainer.max_epochs", "E (-1: no limit)"},
    {"--max-steps", "trainer.max_steps", "S (-1: no limit)"},
    {"--limit-train-batches", "trainer.limit_train_batches", "N batches or a fraction"},
    {"--limit-val-batches", "trainer.limit_val_batches", "N batches or a fraction"},
    {"--limit-test-batches", "trainer.limit_test_batches", "N batches or a fraction"},
    {"--val-check-interval", "trainer.val_check_interval", "N batches or a fraction of an epoch"},
    {"--log-every-n-steps", "trainer.log_every_n_steps", "N"},
    {"--accumulate-grad-batches", "trainer.accumulate_grad_batches", "N"},
    {"--gradient-clip-val", "trainer.gradient_clip_val", "max gradient norm (0: off)"},
    {"--seed", "trainer.seed", "S"},
    {"--default-root-dir", "trainer.default_root_dir", "DIR for logs and checkpoints"},
    {"--batch-size", "data.batch_size", "B per device"},
    {"--data-root", "data.root", "DIR holding the IDX files"},
    {"--optimizer", "optimizer.name", "sgd | adamw"},
    {"--lr", "optimizer.lr", "learning rate"},
    {"--ckpt-path", "ckpt_path", "resume from this checkpoint"},
};

}  // namespace

std::string cli_usage() {
  std::string s =
      "usage: hpu-train [JOB.json] [options]\n"
      "Trains the model a JSON job describes (default: the built-in Fashion-MNIST job).\n\n";
  for (const Flag &f : kFlags) s += detail::format("  %-26s %s (%s)\n", f.name, f.help, f.key);
  s += detail::format("  %-26s %s\n", "--no-progress-bar", "plain output, no progress bar");
  s += detail::format("  %-26s %s\n", "--no-test", "skip the test set after fitting");
  s += detail::format("  %-26s %s\n", "--check", "validate the job, print it with defaults, do not train");
  s += detail::format("  %-26s %s\n", "--version", "print the version");
  s += detail::format("  %-26s %s\n", "-h, --help", "this help");
  return s;
}

Cli parse_cli(int argc, const char *const *argv) {
  Cli cli;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i] ? argv[i] : "";
    if (arg == "-h" || arg == "--help") {
      cli.help = true;
    } else if (arg == "--version") {
      cli.version = true;
    } else if (arg == "--check") {
      cli.check = true;
    } else if (arg == "--no-progress-bar") {
      cli.overrides.push_back({"trainer.enable_progress_bar", "false", arg});
    } else if (arg == "--no-test") {
      cli.overrides.push_back({"test", "false", arg});
    } else if (arg.rfind("--", 0) == 0) {
      std::string name = arg, value;
      size_t eq = arg.find('=');
      bool inline_value = eq != std::string::npos;
      if (inline_value) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      }
      const Flag *flag = nullptr;
      for (const Flag &f : kFlags)
        if (name == f.name) flag = &f;
      if (!flag) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "unknown option %s; see hpu-train --help", name.c_str());
      if (!inline_value) {
        if (i + 1 >= argc) detail::fail(HPU_ERROR_INVALID_ARGUMENT, "option %s needs a value (%s)", name.c_str(), flag->help);
        value = argv[++i];
      }
      cli.overrides.push_back({flag->key, value, name});
    } else if (arg.size() > 1 && arg[0] == '-') {
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "unknown option %s; see hpu-train --help", arg.c_str());
    } else if (cli.config.empty()) {
      cli.config = arg;
    } else {
      detail::fail(HPU_ERROR_INVALID_ARGUMENT, "more than one job file: %s and %s", cli.config.c_str(), arg.c_str());
    }
  }
  return cli;
}

}  // namespace hpu
